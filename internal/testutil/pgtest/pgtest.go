// Package pgtest gives tests the PostgreSQL server that scripts/with-postgres.sh
// starts: its DSN (skipping without one, but failing under CI=true, where a skip
// would hide that nothing was tested) and a fresh schema per test.
package pgtest

import (
	"bytes"
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
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

// privateEnv marks the child process RunOnPrivateServer starts.
const privateEnv = "IDEMGATE_PGTEST_PRIVATE_CHILD"

// RunOnPrivateServer runs the test named child in a new process of this test
// binary under its own scripts/with-postgres.sh cluster, so a test may stop and
// start that server without taking down the one other tests share. root is the
// repository root relative to the test's package directory ("../.."). It fails
// unless the child ran and passed; the child's output is logged.
func RunOnPrivateServer(t *testing.T, root, child string) {
	t.Helper()
	script, err := filepath.Abs(filepath.Join(root, "scripts", "with-postgres.sh"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(script, os.Args[0], "-test.run=^"+child+"$", "-test.count=1", "-test.v")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "IDEMGATE_POSTGRES_DSN=") && !strings.HasPrefix(kv, "IDEMGATE_PG_CTL=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, privateEnv+"=1")
	out, err := cmd.CombinedOutput()
	t.Logf("child on a private server:\n%s", out)
	if err != nil {
		t.Fatalf("%s on a private server: %v", child, err)
	}
	if !bytes.Contains(out, []byte("--- PASS: "+child)) {
		t.Fatalf("%s did not run on the private server", child)
	}
}

// PrivateServer returns the pg_ctl wrapper of the private server when the test runs
// as the child of RunOnPrivateServer, and skips it otherwise (parent names the test
// that starts it).
func PrivateServer(t *testing.T, parent string) (pgCtl string) {
	t.Helper()
	if os.Getenv(privateEnv) == "" {
		t.Skip("child process of " + parent)
	}
	pgCtl = os.Getenv("IDEMGATE_PG_CTL")
	if pgCtl == "" {
		t.Fatal("IDEMGATE_PG_CTL is not set: run under scripts/with-postgres.sh")
	}
	return pgCtl
}
