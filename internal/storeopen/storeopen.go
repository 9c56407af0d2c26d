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
	"net/url"
	"os"
	"regexp"
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

// IsPostgres reports whether spec names a PostgreSQL server: a postgres:// or
// postgresql:// URL, or key=value pairs (libpq's form) of which at least one is a
// PostgreSQL connection setting (host, dbname, user, …).
func IsPostgres(spec string) bool {
	if isPostgresURL(spec) {
		return true
	}
	pairs, ok := keyValues(spec)
	if !ok {
		return false
	}
	for _, p := range pairs {
		if settings[strings.ToLower(p.key)] {
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

// redacted is what a password is replaced with.
const redacted = "xxxxx"

// Redact returns spec with every password replaced by xxxxx, for messages: the
// password of a URL's user info, any query parameter named *password, and any
// *password=value pair of the key=value form (quoted or not). Anything else is
// returned as it is.
func Redact(spec string) string {
	if urlForm.MatchString(spec) {
		return redactURL(spec)
	}
	return kvPassword.ReplaceAllString(spec, "${1}"+redacted)
}

// urlForm matches a spec in URL form: a scheme, then "://".
var urlForm = regexp.MustCompile(`^\s*[A-Za-z][A-Za-z0-9+.-]*://`)

// kvPassword matches a password pair of the key=value form; the value is quoted
// ('...' with backslash escapes, possibly unterminated) or runs to the next space.
var kvPassword = regexp.MustCompile(`(?i)(\b\w*password\s*=\s*)('(?:[^'\\]|\\.)*'?|(?:[^\s\\]|\\.)*\\?)`)

func redactURL(spec string) string {
	u, err := url.Parse(spec)
	if err != nil {
		// Not a URL that pgx could use either; hide everything that may be a
		// password: from the first ':' of the user info to the last '@'.
		scheme, rest, _ := strings.Cut(spec, "://")
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			if c := strings.Index(rest[:at], ":"); c >= 0 {
				rest = rest[:c+1] + redacted + rest[at:]
			}
		}
		return scheme + "://" + redactQuery(rest)
	}
	u.RawQuery = redactQuery(u.RawQuery)
	return u.Redacted()
}

// redactQuery replaces the values of the parameters named *password.
func redactQuery(s string) string {
	head, q, found := strings.Cut(s, "?")
	if !found {
		q, head = head, ""
	}
	parts := strings.Split(q, "&")
	for i, p := range parts {
		k, _, ok := strings.Cut(p, "=")
		if uk, err := url.QueryUnescape(k); err == nil {
			k = uk
		}
		if ok && strings.Contains(strings.ToLower(k), "password") {
			parts[i] = p[:strings.Index(p, "=")+1] + redacted
		}
	}
	if !found {
		return strings.Join(parts, "&")
	}
	return head + "?" + strings.Join(parts, "&")
}

// secrets returns the passwords in spec, as written and decoded.
func secrets(spec string) []string {
	var out []string
	add := func(s ...string) {
		for _, v := range s {
			if v != "" {
				out = append(out, v)
			}
		}
	}
	if u, err := url.Parse(spec); err == nil && urlForm.MatchString(spec) {
		if p, ok := u.User.Password(); ok {
			add(p, url.QueryEscape(p), url.PathEscape(p))
		}
		for k, vs := range u.Query() {
			if strings.Contains(strings.ToLower(k), "password") {
				for _, v := range vs {
					add(v, url.QueryEscape(v))
				}
			}
		}
		return out
	}
	if pairs, ok := keyValues(spec); ok {
		for _, p := range pairs {
			if strings.Contains(strings.ToLower(p.key), "password") {
				add(p.value)
			}
		}
	}
	return out
}

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
	for _, p := range secrets(e.spec) {
		s = strings.ReplaceAll(s, p, redacted)
	}
	return s
}

func (e redactedError) Unwrap() error { return e.err }

type pair struct{ key, value string }

// keyValues parses libpq's key=value form ("host=db password='a b'"): pairs
// separated by spaces, spaces allowed around '=', values optionally single-quoted
// with backslash escapes. ok is false unless all of spec is such pairs, at least one.
func keyValues(spec string) (pairs []pair, ok bool) {
	s := strings.TrimSpace(spec)
	for len(s) > 0 {
		eq := strings.IndexByte(s, '=')
		if eq <= 0 {
			return nil, false
		}
		key := strings.TrimSpace(s[:eq])
		if key == "" || strings.ContainsAny(key, " \t\n\r\f\v'\\") {
			return nil, false
		}
		s = strings.TrimLeft(s[eq+1:], " \t\n\r\f\v")
		var val strings.Builder
		if strings.HasPrefix(s, "'") {
			i, closed := 1, false
			for ; i < len(s); i++ {
				if s[i] == '\\' && i+1 < len(s) {
					i++
					val.WriteByte(s[i])
					continue
				}
				if s[i] == '\'' {
					closed = true
					break
				}
				val.WriteByte(s[i])
			}
			if !closed {
				return nil, false
			}
			s = s[i+1:]
			if s != "" && !strings.ContainsAny(s[:1], " \t\n\r\f\v") {
				return nil, false
			}
		} else {
			i := 0
			for ; i < len(s) && !strings.ContainsAny(s[i:i+1], " \t\n\r\f\v"); i++ {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				val.WriteByte(s[i])
			}
			s = s[i:]
		}
		pairs = append(pairs, pair{key, val.String()})
		s = strings.TrimLeft(s, " \t\n\r\f\v")
	}
	return pairs, len(pairs) > 0
}

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
