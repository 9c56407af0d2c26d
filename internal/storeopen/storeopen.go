// Package storeopen opens the store a worker, the demo or the CLI is pointed at: a
// PostgreSQL DSN (postgres:// or postgresql://) or a SQLite file path.
package storeopen

import (
	"context"
	"fmt"
	"strings"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/postgres"
	"github.com/idemgate/idemgate/store/sqlite"
)

// DefaultPath is the SQLite file used when no store is named.
const DefaultPath = "idemgate.db"

// Store is a store that must be closed.
type Store interface {
	store.Store
	Close() error
}

// IsPostgres reports whether spec names a PostgreSQL server.
func IsPostgres(spec string) bool {
	return strings.HasPrefix(spec, "postgres://") || strings.HasPrefix(spec, "postgresql://")
}

// Options are what a worker, the demo or the CLI may set on either store.
type Options struct {
	// Durability: which commits are synced before they return (store.Durability).
	Durability store.Durability
}

// Open opens spec: a PostgreSQL DSN or a SQLite path ("" means DefaultPath).
func Open(ctx context.Context, spec string) (Store, error) {
	return OpenWith(ctx, spec, Options{})
}

// OpenWith opens spec with o.
func OpenWith(ctx context.Context, spec string, o Options) (Store, error) {
	if IsPostgres(spec) {
		st, err := postgres.OpenWith(ctx, spec, postgres.Options{Durability: o.Durability})
		if err != nil {
			return nil, fmt.Errorf("open the PostgreSQL store: %w (check the DSN and that the server is up)", err)
		}
		return st, nil
	}
	if spec == "" {
		spec = DefaultPath
	}
	st, err := sqlite.OpenWith(ctx, spec, sqlite.Options{Durability: o.Durability})
	if err != nil {
		return nil, fmt.Errorf("open the SQLite store %s: %w (pick a writable path with --store)", spec, err)
	}
	return st, nil
}
