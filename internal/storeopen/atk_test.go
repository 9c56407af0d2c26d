package storeopen_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/storeopen"
)

// A PostgreSQL address written without its scheme (app:PW@db:5432/idemgate, the
// postgres:// forgotten) is no SQLite path: it is refused as a DSN, with the
// password hidden, and no SQLite file named after the password is made.
func TestSchemelessDSNRefusedWithoutItsPassword(t *testing.T) {
	const pw = "Zq7-secret"
	t.Chdir(t.TempDir())
	for _, spec := range []string{"app:" + pw + "@db:5432/idemgate", "app:" + pw + "@db"} {
		err := storeopen.Check(spec)
		if err == nil {
			t.Errorf("Check(%q) = nil, want it refused as a DSN", spec)
		} else if strings.Contains(err.Error(), pw) {
			t.Errorf("Check(%q) = %q: the password is printed", spec, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		st, err := storeopen.OpenWith(ctx, spec, storeopen.Options{})
		cancel()
		if err == nil {
			st.Close()
			t.Errorf("OpenWith(%q) opened a store", spec)
		} else if strings.Contains(err.Error(), pw) {
			t.Errorf("OpenWith(%q) = %q: the password is printed", spec, err)
		}
		if got := storeopen.Redact(spec); strings.Contains(got, pw) {
			t.Errorf("Redact(%q) = %q", spec, got)
		}
	}
	if es, _ := os.ReadDir("."); len(es) != 0 {
		t.Errorf("files were made: %v", es)
	}
	// A SQLite path with such characters after a directory stays a path.
	if err := storeopen.Check("./backup:2024@x.db"); err != nil {
		t.Errorf("Check(./backup:2024@x.db) = %v", err)
	}
}
