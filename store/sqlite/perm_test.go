package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/sqlite"
)

// withUmask runs the test under umask 022, the common default, under which files
// are created readable by everyone unless their creator says otherwise.
func withUmask(t *testing.T) {
	old := syscall.Umask(0o022)
	t.Cleanup(func() { syscall.Umask(old) })
}

// claimOne writes through s so that SQLite has its -wal and -shm files open.
func claimOne(t *testing.T, s *sqlite.Store) {
	t.Helper()
	now := time.Now()
	c := store.Claim{Key: "k", Activity: "ChargeCard", Effect: "destructive", ArgsHash: "h", Args: []byte(`["secret"]`),
		Owner: "o", Lease: now.Add(time.Minute), Window: time.Hour, Now: now, Attempt: 1}
	if o, _, err := s.Begin(context.Background(), c); err != nil || o != store.OutcomeClaimed {
		t.Fatalf("Begin: %v %v", o, err)
	}
}

func modes(t *testing.T, path string) map[string]os.FileMode {
	t.Helper()
	m := map[string]os.FileMode{}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		m[filepath.Base(p)] = fi.Mode().Perm()
	}
	return m
}

// The store and its -wal and -shm files hold every write's arguments and results:
// a new store creates all three readable and writable by their owner only.
func TestFilesOwnerOnly(t *testing.T) {
	withUmask(t)
	path := filepath.Join(t.TempDir(), "idemgate.db")
	s := open(t, path, sqlite.Options{})
	claimOne(t, s)
	for name, mode := range modes(t, path) {
		if mode != 0o600 {
			t.Errorf("%s has mode %04o, want 0600", name, mode)
		}
	}
}

// An existing file keeps the mode its owner gave it (a shared group, say), and its
// -wal and -shm files follow it.
func TestExistingFileModeKept(t *testing.T) {
	withUmask(t)
	path := filepath.Join(t.TempDir(), "idemgate.db")
	if err := os.WriteFile(path, nil, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	s := open(t, path, sqlite.Options{})
	claimOne(t, s)
	for name, mode := range modes(t, path) {
		if mode != 0o640 {
			t.Errorf("%s has mode %04o, want 0640 (the main file's)", name, mode)
		}
	}
}
