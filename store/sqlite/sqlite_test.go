package sqlite_test

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/sqlite"
	"github.com/idemgate/idemgate/store/storetest"
)

func open(t *testing.T, path string, o sqlite.Options) *sqlite.Store {
	t.Helper()
	s, err := sqlite.OpenWith(context.Background(), path, o)
	if err != nil {
		t.Fatalf("OpenWith(%s): %v", path, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return open(t, filepath.Join(t.TempDir(), "idemgate.db"), sqlite.Options{})
	})
}

// One file shared by every subtest, as workers share it.
func TestConformanceSharedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "idemgate.db")
	storetest.Run(t, func(t *testing.T) store.Store { return open(t, path, sqlite.Options{}) })
}

func TestConformanceStrict(t *testing.T) {
	path := filepath.Join(t.TempDir(), "idemgate.db")
	storetest.Run(t, func(t *testing.T) store.Store {
		return open(t, path, sqlite.Options{Durability: store.DurabilityStrict})
	})
}

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func claim(key, owner string) store.Claim {
	return store.Claim{Key: key, Activity: "ChargeCard", Effect: "destructive", ArgsHash: "h1",
		Args: []byte(`{"amount":1}`), Owner: owner, Lease: t0.Add(time.Minute), Window: 24 * time.Hour,
		WorkflowID: "wf", RunID: "run", Attempt: 1, Now: t0}
}

func mustClaim(t *testing.T, s store.Store, key string) {
	t.Helper()
	o, _, err := s.Begin(context.Background(), claim(key, "a"))
	if err != nil || o != store.OutcomeClaimed {
		t.Fatalf("Begin(%s) = %q, %v; want claimed", key, o, err)
	}
}

func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(0)")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}

func TestClaimSurvivesReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "idemgate.db")
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	mustClaim(t, s, "k1")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := open(t, path, sqlite.Options{})
	rec, err := s2.Get(ctx, "k1")
	if err != nil || rec.Owner != "a" || rec.State != store.StateClaimed || !rec.CreatedAt.Equal(t0) {
		t.Fatalf("after reopen: %+v, %v", rec, err)
	}
	if o, _, err := s2.Begin(ctx, claim("k1", "b")); err != nil || o != store.OutcomeInFlight {
		t.Fatalf("Begin after reopen = %q, %v; want in-flight", o, err)
	}
}

func TestPragmas(t *testing.T) {
	path := filepath.Join(t.TempDir(), "idemgate.db")
	open(t, path, sqlite.Options{})
	db := rawDB(t, path)
	var mode string
	var version int
	if err := db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode = %q, %v; want wal", mode, err)
	}
	if err := db.QueryRow("PRAGMA user_version").Scan(&version); err != nil || version != sqlite.SchemaVersion {
		t.Fatalf("user_version = %d, %v; want %d", version, err, sqlite.SchemaVersion)
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "idemgate.db")
	s, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := rawDB(t, path).Exec(fmt.Sprintf("PRAGMA user_version = %d", sqlite.SchemaVersion+1)); err != nil {
		t.Fatal(err)
	}
	_, err = sqlite.Open(context.Background(), path)
	if err == nil || !strings.Contains(err.Error(), "upgrade idemgate") {
		t.Fatalf("Open of a newer schema = %v; want a refusal that says to upgrade", err)
	}
}

func TestOpenBadPath(t *testing.T) {
	for _, p := range []string{"", ":memory:", "file:x.db", filepath.Join(t.TempDir(), "missing-dir", "x.db")} {
		if _, err := sqlite.Open(context.Background(), p); err == nil || !strings.Contains(err.Error(), "path") {
			t.Errorf("Open(%q) = %v; want an error naming the store path", p, err)
		}
	}
}

func TestReceiptsAppendOnlyInFact(t *testing.T) {
	path := filepath.Join(t.TempDir(), "idemgate.db")
	s := open(t, path, sqlite.Options{})
	mustClaim(t, s, "k1")
	db := rawDB(t, path)
	for _, q := range []string{
		"UPDATE idemgate_receipts SET decision = 'ran'",
		"DELETE FROM idemgate_receipts",
		"DELETE FROM idemgate_receipts WHERE key = 'k1'",
		"INSERT OR REPLACE INTO idemgate_receipts SELECT * FROM idemgate_receipts",
	} {
		_, err := db.Exec(q)
		if err == nil || !strings.Contains(err.Error(), "append-only") {
			t.Errorf("%s: err = %v; want the append-only trigger to abort it", q, err)
		}
	}
	rs, err := s.Receipts(context.Background(), store.ReceiptFilter{Key: "k1"})
	if err != nil || len(rs) != 1 || rs[0].Decision != store.DecisionClaimed {
		t.Fatalf("receipts after the refused statements = %+v, %v", rs, err)
	}
}

// Another connection holds the write lock past the busy timeout: writes fail
// closed with ErrUnavailable, reads go on, and once the lock is gone nothing is lost.
func TestLockedPastBusyTimeout(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "idemgate.db")
	s := open(t, path, sqlite.Options{BusyTimeout: 50 * time.Millisecond})
	mustClaim(t, s, "before")

	holder := rawDB(t, path)
	conn, err := holder.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN EXCLUSIVE"); err != nil {
		t.Fatal(err)
	}
	_, _, err = s.Begin(ctx, claim("during", "a"))
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Begin under a held lock = %v; want ErrUnavailable", err)
	}
	if !strings.Contains(err.Error(), "BusyTimeout") || !strings.Contains(err.Error(), path) {
		t.Errorf("error does not say what to do: %v", err)
	}
	if err := s.Complete(ctx, store.Transition{Key: "before", Owner: "a", Now: t0}); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Complete under a held lock = %v; want ErrUnavailable", err)
	}
	if err := s.Append(ctx, store.Receipt{Key: "x", Time: t0}); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Append under a held lock = %v; want ErrUnavailable", err)
	}
	if _, err := s.Get(ctx, "before"); err != nil {
		t.Fatalf("Get under a held write lock (WAL readers go on): %v", err)
	}
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	mustClaim(t, s, "during")
	if o, _, err := s.Begin(ctx, claim("before", "b")); err != nil || o != store.OutcomeInFlight {
		t.Fatalf("claim made before the outage = %q, %v; want in-flight", o, err)
	}
	if err := s.Complete(ctx, store.Transition{Key: "before", Owner: "a", Now: t0}); err != nil {
		t.Fatalf("Complete after the lock is gone: %v", err)
	}
}

// A lock held for less than the busy timeout only delays the write.
func TestLockWithinBusyTimeoutWaits(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "idemgate.db")
	s := open(t, path, sqlite.Options{BusyTimeout: 20 * time.Second})
	conn, err := rawDB(t, path).Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := s.Begin(ctx, claim("k", "a"))
		done <- err
	}()
	// The one bounded wait in this file: a negative check needs time to pass.
	select {
	case err := <-done:
		t.Fatalf("Begin returned while another connection held the lock: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Begin after the lock was released: %v", err)
	}
	if _, err := s.Get(ctx, "k"); err != nil {
		t.Fatal(err)
	}
}

// The file cannot be written: opening or writing fails with ErrUnavailable and a
// message that says what to do; once it is writable again the claims are all there.
func TestReadOnlyFile(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "idemgate.db")
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	mustClaim(t, s, "before")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	undo := makeReadOnly(t, path)

	ro, err := sqlite.Open(ctx, path)
	if err == nil {
		_, _, err = ro.Begin(ctx, claim("during", "a"))
		ro.Close()
	}
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("read-only file: err = %v; want ErrUnavailable", err)
	}
	t.Logf("read-only: %v", err)
	if !strings.Contains(err.Error(), "writable") {
		t.Errorf("error does not say what to do: %v", err)
	}

	undo()
	s2 := open(t, path, sqlite.Options{})
	if rec, err := s2.Get(ctx, "before"); err != nil || rec.Owner != "a" {
		t.Fatalf("claim made before the outage: %+v, %v", rec, err)
	}
	mustClaim(t, s2, "during")
}

// makeReadOnly makes path unwritable even for root (chattr +i), and returns undo.
func makeReadOnly(t *testing.T, path string) func() {
	t.Helper()
	if os.Geteuid() != 0 {
		if err := os.Chmod(path, 0o444); err != nil {
			t.Fatal(err)
		}
		return func() { os.Chmod(path, 0o644) }
	}
	out, err := exec.Command("chattr", "+i", path).CombinedOutput()
	if err != nil {
		t.Fatalf("running as root, the test needs chattr +i to make %s read-only: %v: %s", path, err, out)
	}
	var once sync.Once
	undo := func() {
		once.Do(func() {
			if out, err := exec.Command("chattr", "-i", path).CombinedOutput(); err != nil {
				t.Errorf("chattr -i %s: %v: %s", path, err, out)
			}
		})
	}
	t.Cleanup(undo)
	return undo
}

const childEnv = "IDEMGATE_SQLITE_CHILD"

// TestHelperProcess is the child of TestMultiProcessOneWinner: it races to claim
// every key and prints the ones it won.
func TestHelperProcess(t *testing.T) {
	path := os.Getenv(childEnv)
	if path == "" {
		t.Skip("child process of TestMultiProcessOneWinner")
	}
	ctx := context.Background()
	s, err := sqlite.OpenWith(ctx, path, sqlite.Options{BusyTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	owner := os.Getenv("IDEMGATE_CHILD_OWNER")
	// Start line: say ready, then wait for the parent to close stdin.
	fmt.Println("ready")
	if _, err := io.Copy(io.Discard, os.Stdin); err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	// Each child walks the keys in its own order, so they collide all along the way.
	order := rand.New(rand.NewPCG(uint64(len(owner)), uint64(owner[len(owner)-1]))).Perm(1000)
	for _, i := range order {
		key := fmt.Sprintf("key-%04d", i)
		o, _, err := s.Begin(ctx, claim(key, owner))
		if err != nil {
			t.Fatalf("Begin(%s): %v", key, err)
		}
		fmt.Fprintf(w, "%s %s\n", key, o)
	}
}

func TestMultiProcessOneWinner(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two processes that claim 1,000 keys each")
	}
	path := filepath.Join(t.TempDir(), "idemgate.db")
	open(t, path, sqlite.Options{}) // schema in place; this process stays a reader
	children := []string{"p1", "p2"}
	outs := make([]bytes.Buffer, len(children))
	cmds := make([]*exec.Cmd, len(children))
	starts := make([]io.WriteCloser, len(children))
	for i, owner := range children {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), childEnv+"="+path, "IDEMGATE_CHILD_OWNER="+owner)
		cmd.Stdout = &lineWaiter{buf: &outs[i], line: "ready\n", seen: make(chan struct{})}
		cmd.Stderr = os.Stderr
		var err error
		if starts[i], err = cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[i] = cmd
	}
	// Both children have opened the store before either claims a key.
	deadline := time.After(time.Minute)
	for i, cmd := range cmds {
		select {
		case <-cmd.Stdout.(*lineWaiter).seen:
		case <-deadline:
			t.Fatalf("child %s not ready within a minute", children[i])
		}
	}
	for _, st := range starts {
		st.Close()
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("child %s: %v\n%s", children[i], err, outs[i].String())
		}
	}
	won := map[string]string{}
	for i, owner := range children {
		seen := 0
		for line := range strings.Lines(outs[i].String()) {
			f := strings.Fields(line)
			if len(f) != 2 || !strings.HasPrefix(f[0], "key-") {
				continue // test framework chatter
			}
			seen++
			switch store.Outcome(f[1]) {
			case store.OutcomeClaimed:
				if prev, ok := won[f[0]]; ok {
					t.Fatalf("%s claimed by both %s and %s", f[0], prev, owner)
				}
				won[f[0]] = owner
			case store.OutcomeInFlight:
			default:
				t.Fatalf("%s: %s got %s", f[0], owner, f[1])
			}
		}
		if seen != 1000 {
			t.Fatalf("child %s reported %d keys, want 1000", owner, seen)
		}
	}
	if len(won) != 1000 {
		t.Fatalf("%d keys won, want 1000", len(won))
	}
	s := open(t, path, sqlite.Options{})
	perOwner := map[string]int{}
	for key, owner := range won {
		rec, err := s.Get(context.Background(), key)
		if err != nil || rec.Owner != owner || rec.Claims != 1 {
			t.Fatalf("%s: stored %+v (%v), want owner %s with one claim", key, rec, err, owner)
		}
		rs, err := s.Receipts(context.Background(), store.ReceiptFilter{Key: key})
		if err != nil || len(rs) != 1 {
			t.Fatalf("%s: %d receipts (%v), want exactly one claim receipt", key, len(rs), err)
		}
		perOwner[owner]++
	}
	// The split is usually lopsided: SQLite's busy handler polls, so the process
	// that holds the lock tends to win it back. Correctness does not depend on it.
	t.Logf("wins per process: %v", perOwner)
}

// lineWaiter collects a child's stdout and closes seen once line has appeared.
type lineWaiter struct {
	mu   sync.Mutex
	buf  *bytes.Buffer
	line string
	seen chan struct{}
	done bool
}

func (w *lineWaiter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.buf.Write(p)
	if !w.done && strings.Contains(w.buf.String(), w.line) {
		w.done = true
		close(w.seen)
	}
	return n, err
}
