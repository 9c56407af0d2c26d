package storeopen_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/storeopen"
	"github.com/idemgate/idemgate/internal/testutil/pgtest"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/postgres"
)

func TestRedact(t *testing.T) {
	cases := []struct{ in, want string }{
		{"postgres://app:s3cret@db:5432/idemgate?sslmode=disable", "postgres://app:xxxxx@db:5432/idemgate?sslmode=disable"},
		{"postgresql://app:p%40ss%2Fw@db/idemgate", "postgresql://app:xxxxx@db/idemgate"},
		{"postgres://app:@db/idemgate", "postgres://app:xxxxx@db/idemgate"},
		{"postgres://app@db/idemgate?password=s3cret&sslmode=require", "postgres://app@db/idemgate?password=xxxxx&sslmode=require"},
		{"postgres://db/idemgate?sslpassword=k3y&user=app", "postgres://db/idemgate?sslpassword=xxxxx&user=app"},
		{"POSTGRES://app:s3cret@db/idemgate", "postgres://app:xxxxx@db/idemgate"},
		// Not a URL Go (or pgx) can parse: everything from the user's ':' to the last '@' goes.
		{"postgres://app:pa:ss@w%zz@db/idemgate", "postgres://app:xxxxx@db/idemgate"},
		{"host=db user=app password=s3cret dbname=idemgate", "host=db user=app password=xxxxx dbname=idemgate"},
		{"host=db password = 's3 cr\\'et' dbname=idemgate", "host=db password = xxxxx dbname=idemgate"},
		{"host=db PASSWORD=s3cret", "host=db PASSWORD=xxxxx"},
		{"host=db sslpassword=k3y sslkey=/k", "host=db sslpassword=xxxxx sslkey=/k"},
		{"host=db password='unterminated secret", "host=db password=xxxxx"},
		{"host=db options='-c a://b' password=s3cret", "host=db options='-c a://b' password=xxxxx"},
		{"/var/lib/idemgate/idemgate.db", "/var/lib/idemgate/idemgate.db"},
		{"postgres://app@db/idemgate", "postgres://app@db/idemgate"},
		{"", ""},
	}
	for _, c := range cases {
		if got := storeopen.Redact(c.in); got != c.want {
			t.Errorf("Redact(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// Whatever the form, the password is not in what Redact returns.
func TestRedactNeverLeaks(t *testing.T) {
	const pw = "Zq7-secret"
	for _, spec := range []string{
		"postgres://app:" + pw + "@db/idemgate",
		"postgres://app:" + url.QueryEscape(pw+"/@:?") + "@db/idemgate",
		"postgres://app:" + pw + "/x@db/idemgate",
		"postgres://app@db/idemgate?password=" + pw,
		"postgres://app@db/idemgate?sslmode=disable&password=" + pw + "&x=1",
		"postgresql://app@h1:5432,h2:5433/idemgate?password=" + pw,
		"mysql://app:" + pw + "@db/idemgate",
		"host=db password=" + pw,
		"host=db password='" + pw + " more'",
		"host=db\tpassword=" + pw + "\tdbname=x",
		"password=" + pw,
	} {
		if got := storeopen.Redact(spec); strings.Contains(got, pw) || strings.Contains(got, url.QueryEscape(pw)) {
			t.Errorf("Redact(%q) = %q: the password is still there", spec, got)
		}
	}
}

func TestIsPostgres(t *testing.T) {
	cases := []struct {
		spec string
		want bool
	}{
		{"postgres://app@db/idemgate", true},
		{"postgresql://app@db/idemgate", true},
		{"host=db user=app password=s3cret dbname=idemgate", true},
		{"host=/run/postgresql dbname=idemgate", true},
		{"dbname=idemgate", true},
		{"service=idemgate", true},
		{"host = db  port=5433 password='a b'", true},
		{"idemgate.db", false},
		{"/var/lib/idemgate/idemgate.db", false},
		{"my store.db", false},
		{"a=b.db", false},
		{"", false},
		{"host=db user=app junk", false},
	}
	for _, c := range cases {
		if got := storeopen.IsPostgres(c.spec); got != c.want {
			t.Errorf("IsPostgres(%q) = %v, want %v", c.spec, got, c.want)
		}
	}
}

// A SQLite path that looks like a DSN is refused: no file named after it (and its
// password) is created, and the error says what to give instead, without the password.
func TestOpenRefusesDSNLikePath(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, spec := range []string{
		"postgress://app:Zq7-secret@db/idemgate",
		"mysql://app:Zq7-secret@db/idemgate",
		"host=db user=app password=Zq7-secret extra",
		"./password=Zq7-secret",
		"host=db user=app dbname=idemgate oops",
	} {
		_, err := storeopen.Open(context.Background(), spec)
		if err == nil || !strings.Contains(err.Error(), "looks like a DSN") || !strings.Contains(err.Error(), "postgres://") {
			t.Errorf("Open(%q): %v; want a refusal that it looks like a DSN", spec, err)
			continue
		}
		if strings.Contains(err.Error(), "Zq7-secret") {
			t.Errorf("Open(%q): the error carries the password: %v", spec, err)
		}
		if storeopen.Check(spec) == nil {
			t.Errorf("Check(%q) = nil", spec)
		}
	}
	if files, _ := os.ReadDir("."); len(files) != 0 {
		t.Fatalf("files were created: %v", files)
	}
	for _, spec := range []string{"idemgate.db", "my store.db", "a=b.db", ""} {
		if err := storeopen.Check(spec); err != nil {
			t.Errorf("Check(%q) = %v; want nil for a plain path", spec, err)
		}
	}
}

// An unreachable PostgreSQL: the error names the server, never the password, and
// still unwraps to store.ErrUnavailable.
func TestOpenErrorRedacted(t *testing.T) {
	for _, spec := range []string{
		"postgres://app:Zq7-secret@127.0.0.1:1/idemgate?connect_timeout=2",
		"host=127.0.0.1 port=1 user=app password=Zq7-secret dbname=idemgate connect_timeout=2",
	} {
		_, err := storeopen.Open(context.Background(), spec)
		if err == nil || strings.Contains(err.Error(), "Zq7-secret") || !strings.Contains(err.Error(), "127.0.0.1") {
			t.Errorf("Open(%q): %v; want an error naming the server without the password", spec, err)
		}
		if !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("Open(%q): %v does not unwrap to store.ErrUnavailable", spec, err)
		}
		if !hasPrefixOnce(err, "idemgate/internal/storeopen: ") {
			t.Errorf("Open(%q): %v; want the package's prefix first, once", spec, err)
		}
	}
}

// Every error of Open starts with the package's prefix, once; the store's own error
// follows with its own.
func TestOpenErrorPrefix(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-dir", "idemgate.db")
	for _, spec := range []string{"mysql://app@db/idemgate", missing} {
		_, err := storeopen.Open(context.Background(), spec)
		if !hasPrefixOnce(err, "idemgate/internal/storeopen: ") {
			t.Errorf("Open(%q): %v; want the package's prefix first, once", spec, err)
		}
	}
	if _, err := storeopen.Open(context.Background(), missing); err == nil || !strings.Contains(err.Error(), ": idemgate/store/sqlite: ") {
		t.Errorf("Open(%q): %v; want the SQLite store's error, with its prefix", missing, err)
	}
}

func hasPrefixOnce(err error, prefix string) bool {
	return err != nil && strings.HasPrefix(err.Error(), prefix) && strings.Count(err.Error(), prefix) == 1
}

// A key=value DSN opens the PostgreSQL store itself: what one open writes, another
// open of the same database by URL sees; no SQLite file is created.
func TestOpenKeyValueDSN(t *testing.T) {
	dsn := pgtest.Schema(t, pgtest.DSN(t, "./internal/storeopen/"), "idemgate_storeopen")
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	kv := fmt.Sprintf("host=%s port=%s user=%s password='pw with space' dbname=%s sslmode=disable search_path=%s",
		u.Hostname(), u.Port(), u.User.Username(), strings.TrimPrefix(u.Path, "/"), u.Query().Get("search_path"))
	t.Chdir(t.TempDir())
	ctx := context.Background()
	st, err := storeopen.Open(ctx, kv)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now()
	c := store.Claim{Key: "k-kv", Activity: "ChargeCard", Effect: "destructive", ArgsHash: "h", Owner: "o",
		Lease: now.Add(time.Minute), Window: time.Hour, Now: now, Attempt: 1}
	if o, _, err := st.Begin(ctx, c); err != nil || o != store.OutcomeClaimed {
		t.Fatalf("Begin: %v %v", o, err)
	}
	other, err := postgres.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if r, err := other.Get(ctx, "k-kv"); err != nil || r.Owner != "o" {
		t.Fatalf("the claim is not in PostgreSQL: %+v %v", r, err)
	}
	if files, _ := os.ReadDir("."); len(files) != 0 {
		t.Fatalf("a key=value DSN created files: %v", files)
	}
}

func TestPermissionWarning(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "s.db")
	st, err := storeopen.Open(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if w := storeopen.PermissionWarning(p); w != "" {
		t.Fatalf("a new store got a warning: %s", w)
	}
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	w := storeopen.PermissionWarning(p)
	if !strings.Contains(w, p+" (mode 0644)") || !strings.Contains(w, "chmod 600") {
		t.Fatalf("warning %q", w)
	}
	if w := storeopen.PermissionWarning("postgres://app:pw@db/idemgate"); w != "" {
		t.Fatalf("PostgreSQL got a warning: %s", w)
	}
}
