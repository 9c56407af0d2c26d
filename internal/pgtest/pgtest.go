// Package pgtest gives tests the PostgreSQL server that scripts/with-postgres.sh
// starts: its DSN (skipping without one, but failing under CI=true, where a skip
// would hide that nothing was tested) and a fresh schema per test.
package pgtest

import (
	"context"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// DSN returns IDEMGATE_POSTGRES_DSN. Without it the test skips with a message that
// names the script (what is the package to re-run, e.g. "./store/postgres/"), except
// under CI=true, where it fails.
func DSN(t testing.TB, what string) string {
	t.Helper()
	d := os.Getenv("IDEMGATE_POSTGRES_DSN")
	if d == "" {
		msg := "IDEMGATE_POSTGRES_DSN is not set: run the PostgreSQL tests with scripts/with-postgres.sh go test " + what
		if os.Getenv("CI") == "true" {
			t.Fatal(msg + " (CI=true: refusing to skip)")
		}
		t.Skip(msg)
	}
	return d
}

// Schema returns a DSN whose search_path is a new, empty schema named prefix_<random>,
// dropped at the end of the test: a database as a new deployment finds it.
func Schema(t testing.TB, dsn, prefix string) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	name := prefix + "_" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Errorf("drop schema %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+name+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", name, err)
		}
	})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("the tests want a postgres:// DSN: %v", err)
	}
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	return u.String()
}
