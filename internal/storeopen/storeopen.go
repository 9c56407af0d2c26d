// Package storeopen opens the store a worker, the demo or the CLI is pointed at: a
// PostgreSQL DSN (a postgres:// or postgresql:// URL, or libpq's key=value pairs
// such as "host=db user=app dbname=idemgate") or a SQLite file path.
//
// A store spec may carry a password. Nothing here returns or prints it: Redact
// hides it for messages and every error of Open is redacted.
package storeopen

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/idemgate/idemgate/internal/secrets"
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

// IsPostgres reports whether spec names a PostgreSQL server: a postgres:// or
// postgresql:// URL, or key=value pairs (libpq's form) of which at least one is a
// PostgreSQL connection setting (host, dbname, user, …).
func IsPostgres(spec string) bool {
	if isPostgresURL(spec) {
		return true
	}
	pairs, ok := secrets.KeyValues(spec)
	if !ok {
		return false
	}
	for _, p := range pairs {
		if settings[strings.ToLower(p.Key)] {
			return true
		}
	}
	return false
}

func isPostgresURL(spec string) bool {
	s := strings.ToLower(strings.TrimSpace(spec))
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// Check refuses a spec that is neither a PostgreSQL DSN nor a plain SQLite path:
// something that looks like a DSN (a "scheme://" URL of another kind, key=value
// pairs with a typo, a password) would otherwise become the name of a new SQLite
// file, and every worker would silently get a store of its own.
func Check(spec string) error {
	if IsPostgres(spec) {
		return nil
	}
	if why := dsnLike(spec); why != "" {
		return fmt.Errorf("idemgate/internal/storeopen: the store %q is not a SQLite file path: it looks like a DSN (%s). "+
			"For PostgreSQL give postgres://user:password@host:port/database or key=value pairs "+
			"(host=... port=... user=... password=... dbname=...); for SQLite give a plain file path", Redact(spec), why)
	}
	return nil
}

// dsnLike says why spec looks like a DSN rather than a file path, or "".
func dsnLike(spec string) string {
	if i := strings.Index(spec, "://"); i >= 0 {
		return fmt.Sprintf("it starts with %q, and only postgres:// and postgresql:// are DSNs", Redact(spec[:i+3]))
	}
	if Redact(spec) != spec {
		return "it carries a password"
	}
	for _, f := range strings.Fields(spec) {
		if k, _, ok := strings.Cut(f, "="); ok && settings[strings.ToLower(strings.TrimSpace(k))] {
			return fmt.Sprintf("it has the PostgreSQL setting %q but is not a list of key=value pairs", k+"=")
		}
	}
	return ""
}

// Open opens spec: a PostgreSQL DSN or a SQLite path ("" means DefaultPath). A new
// SQLite file is created readable and writable by its owner only. The error never
// carries a password.
func Open(ctx context.Context, spec string) (Store, error) {
	return OpenWith(ctx, spec, Options{})
}

// Options are what a worker, the demo or the CLI may set on either store.
type Options struct {
	// Durability: which commits are synced before they return (store.Durability).
	Durability store.Durability
}

// OpenWith opens spec, as Open does, with o.
func OpenWith(ctx context.Context, spec string, o Options) (Store, error) {
	if err := Check(spec); err != nil {
		return nil, err
	}
	if IsPostgres(spec) {
		st, err := postgres.OpenWith(ctx, spec, postgres.Options{Durability: o.Durability})
		if err != nil {
			return nil, redactedError{fmt.Errorf("idemgate/internal/storeopen: open the PostgreSQL store %s: %w (check the DSN and that the server is up)", Redact(spec), err), spec}
		}
		return st, nil
	}
	if spec == "" {
		spec = DefaultPath
	}
	st, err := sqlite.OpenWith(ctx, spec, sqlite.Options{Durability: o.Durability})
	if err != nil {
		return nil, fmt.Errorf("idemgate/internal/storeopen: open the SQLite store %s: %w (pick a writable path with --store)", spec, err)
	}
	return st, nil
}

// PermissionWarning returns a warning when spec is a SQLite store whose file, or
// its -wal or -shm file, other users may read or write, and "" otherwise. The
// store holds every write's arguments and results; Open creates new files 0600
// but leaves the mode of an existing file alone.
func PermissionWarning(spec string) string {
	if IsPostgres(spec) {
		return ""
	}
	if spec == "" {
		spec = DefaultPath
	}
	var loose []string
	for _, p := range []string{spec, spec + "-wal", spec + "-shm"} {
		if fi, err := os.Stat(p); err == nil && fi.Mode().Perm()&0o077 != 0 {
			loose = append(loose, fmt.Sprintf("%s (mode %04o)", p, fi.Mode().Perm()))
		}
	}
	if len(loose) == 0 {
		return ""
	}
	return fmt.Sprintf("warning: other users can access the SQLite store %s, which holds every write's arguments "+
		"and results; make it owner-only: chmod 600 %s*", strings.Join(loose, ", "), spec)
}

// Redact returns spec with every password replaced by xxxxx, for messages: it is
// secrets.Redact, the module's one redaction (the password of a URL's user info,
// secret query parameters such as password=, and secret pairs of the key=value
// form, quoted or not).
func Redact(spec string) string { return secrets.Redact(spec) }

// redactedError is err with the spec and its passwords redacted from its text; it
// unwraps to err, so errors.Is still finds store.ErrUnavailable.
type redactedError struct {
	err  error
	spec string
}

func (e redactedError) Error() string {
	s := e.err.Error()
	if e.spec != "" {
		s = strings.ReplaceAll(s, e.spec, Redact(e.spec))
	}
	return secrets.Scrub(s, e.spec)
}

func (e redactedError) Unwrap() error { return e.err }

// settings are the connection settings of libpq and pgx: a key=value spec naming
// one of them is a PostgreSQL DSN.
var settings = map[string]bool{}

func init() {
	for _, k := range strings.Fields(`host hostaddr port dbname user password passfile channel_binding
		connect_timeout client_encoding options application_name fallback_application_name keepalives
		keepalives_idle keepalives_interval keepalives_count tcp_user_timeout replication gssencmode sslmode
		requiressl sslcompression sslcert sslkey sslpassword sslrootcert sslcrl sslcrldir sslsni sslnegotiation
		requirepeer require_auth ssl_min_protocol_version ssl_max_protocol_version krbsrvname gsslib gssdelegation
		service servicefile target_session_attrs load_balance_hosts min_read_buffer_size search_path
		pool_max_conns pool_min_conns pool_min_idle_conns pool_max_conn_lifetime pool_max_conn_lifetime_jitter
		pool_max_conn_idle_time pool_health_check_period statement_cache_capacity description_cache_capacity
		default_query_exec_mode`) {
		settings[k] = true
	}
}
