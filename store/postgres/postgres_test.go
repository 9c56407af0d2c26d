package postgres_test

import (
	"bufio"
	"bytes"
	"context"
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

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/idemgate/idemgate/internal/testutil/pgtest"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/postgres"
	"github.com/idemgate/idemgate/store/storetest"
)

// dsn returns the test server's DSN; without one the tests skip (fail under CI=true).
func dsn(t testing.TB) string { return pgtest.DSN(t, "./store/postgres/") }

func open(t testing.TB, dsn string, o postgres.Options) *postgres.Store {
	t.Helper()
	s, err := postgres.OpenWith(context.Background(), dsn, o)
	if err != nil {
		t.Fatalf("OpenWith: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Each conformance run has a schema of its own: Sweep and Prune act on the whole
// store, so two runs in one schema would sweep and prune each other's records.
func TestConformance(t *testing.T) {
	d := withSchema(t, dsn(t))
	storetest.Run(t, func(t *testing.T) store.Store { return open(t, d, postgres.Options{}) })
}

func TestConformanceStrict(t *testing.T) {
	d := withSchema(t, dsn(t))
	storetest.Run(t, func(t *testing.T) store.Store {
		return open(t, d, postgres.Options{Durability: store.DurabilityStrict})
	})
}

// withSchema returns a DSN whose search_path is a new, empty schema, dropped at
// the end of the test: a database as a new deployment finds it.
func withSchema(t *testing.T, d string) string { return pgtest.Schema(t, d, "idemgate_test") }

func TestManyWorkersOpenAtOnce(t *testing.T) {
	d := withSchema(t, dsn(t))
	const openers = 8
	var wg sync.WaitGroup
	errs := make([]error, openers)
	start := make(chan struct{})
	for i := range openers {
		wg.Go(func() {
			<-start
			s, err := postgres.Open(context.Background(), d)
			if err == nil {
				s.Close()
			}
			errs[i] = err
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("opener %d: %v", i, err)
		}
	}
	conn, err := pgx.Connect(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var versions, maxV int
	if err := conn.QueryRow(context.Background(), "SELECT count(*), max(version) FROM idemgate_schema_version").Scan(&versions, &maxV); err != nil {
		t.Fatal(err)
	}
	if versions != postgres.SchemaVersion || maxV != postgres.SchemaVersion {
		t.Fatalf("schema versions: %d rows, max %d; want each of 1..%d applied once", versions, maxV, postgres.SchemaVersion)
	}
	// The schema works in the new schema too.
	storetest.Run(t, func(t *testing.T) store.Store { return open(t, d, postgres.Options{}) })
}

func TestNewerSchemaRefused(t *testing.T) {
	d := withSchema(t, dsn(t))
	open(t, d, postgres.Options{})
	conn, err := pgx.Connect(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), "INSERT INTO idemgate_schema_version (version) VALUES ($1)", postgres.SchemaVersion+1); err != nil {
		t.Fatal(err)
	}
	_, err = postgres.Open(context.Background(), d)
	if err == nil || !strings.Contains(err.Error(), "upgrade idemgate") {
		t.Fatalf("Open of a newer schema = %v; want a refusal that says to upgrade", err)
	}
}

func TestOpenErrors(t *testing.T) {
	if _, err := postgres.Open(context.Background(), "postgres://u:secret@[::1"); err == nil || strings.Contains(err.Error(), "secret") {
		t.Errorf("bad DSN: %v; want an error that does not print the password", err)
	}
	// Nothing listens on port 1: unavailable, and the message says what to do.
	_, err := postgres.OpenWith(context.Background(), "postgres://u@127.0.0.1:1/db?sslmode=disable", postgres.Options{ConnectTimeout: time.Second})
	if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "check that the server is up") {
		t.Errorf("unreachable server: %v; want ErrUnavailable with a next step", err)
	}
}

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func claim(key, owner string) store.Claim {
	return store.Claim{Key: key, Activity: "ChargeCard", Effect: "destructive", ArgsHash: "h1",
		Args: []byte(`{"amount":1}`), Owner: owner, Lease: t0.Add(time.Minute), Window: 24 * time.Hour,
		WorkflowID: "wf", RunID: "run", Attempt: 1, Now: t0}
}

func TestReceiptsAppendOnlyInFact(t *testing.T) {
	d := dsn(t)
	ctx := context.Background()
	s := open(t, d, postgres.Options{})
	key := "append-only/" + uuid.NewString()
	if o, _, err := s.Begin(ctx, claim(key, "a")); err != nil || o != store.OutcomeClaimed {
		t.Fatalf("Begin = %q, %v", o, err)
	}
	conn, err := pgx.Connect(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, q := range []string{
		"UPDATE idemgate_receipts SET decision = 'ran' WHERE key = $1",
		"DELETE FROM idemgate_receipts WHERE key = $1",
		"TRUNCATE idemgate_receipts",
	} {
		var args []any
		if strings.Contains(q, "$1") {
			args = []any{key}
		}
		_, err := conn.Exec(ctx, q, args...)
		if err == nil || !strings.Contains(err.Error(), "append-only") {
			t.Errorf("%s: err = %v; want the append-only trigger to reject it", q, err)
		}
	}
	rs, err := s.Receipts(ctx, store.ReceiptFilter{Key: key})
	if err != nil || len(rs) != 1 || rs[0].Decision != store.DecisionClaimed {
		t.Fatalf("receipts after the rejected statements = %+v, %v", rs, err)
	}
}

// Sweep skips rows that a claim holds instead of waiting for them.
func TestSweepDoesNotBlockClaims(t *testing.T) {
	d := dsn(t)
	ctx := context.Background()
	s := open(t, d, postgres.Options{})
	prefix := "sweep-lock/" + uuid.NewString()
	c := claim(prefix+"/held", "a")
	c.Window = time.Hour
	if _, _, err := s.Begin(ctx, c); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SELECT 1 FROM idemgate_records WHERE key = $1 FOR UPDATE", prefix+"/held"); err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := s.Sweep(sctx, t0.Add(2*time.Hour), 0); err != nil {
		t.Fatalf("Sweep while a row is locked: %v (it must skip the row, not wait)", err)
	}
	if _, err := s.Get(ctx, prefix+"/held"); err != nil {
		t.Fatalf("the locked row was swept: %v", err)
	}
}

const childDSNEnv = "IDEMGATE_PG_CHILD_PREFIX"

// TestHelperProcess is the child of TestMultiProcessOneWinner.
func TestHelperProcess(t *testing.T) {
	prefix := os.Getenv(childDSNEnv)
	if prefix == "" {
		t.Skip("child process of TestMultiProcessOneWinner")
	}
	ctx := context.Background()
	s, err := postgres.OpenWith(ctx, dsn(t), postgres.Options{MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	owner := os.Getenv("IDEMGATE_CHILD_OWNER")
	fmt.Println("ready")
	if _, err := io.Copy(io.Discard, os.Stdin); err != nil {
		t.Fatal(err)
	}
	// Four goroutines per process, each child walking the keys in its own order.
	order := rand.New(rand.NewPCG(uint64(len(owner)), uint64(owner[len(owner)-1]))).Perm(1000)
	var (
		mu  sync.Mutex
		out bytes.Buffer
		wg  sync.WaitGroup
	)
	for g := range 4 {
		wg.Go(func() {
			for j := g; j < len(order); j += 4 {
				key := fmt.Sprintf("%s/key-%04d", prefix, order[j])
				o, _, err := s.Begin(ctx, claim(key, owner))
				if err != nil {
					t.Errorf("Begin(%s): %v", key, err)
					return
				}
				mu.Lock()
				fmt.Fprintf(&out, "%s %s\n", key, o)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	w := bufio.NewWriter(os.Stdout)
	w.Write(out.Bytes())
	w.Flush()
}

func TestMultiProcessOneWinner(t *testing.T) {
	d := dsn(t)
	if testing.Short() {
		t.Skip("starts two processes that claim 1,000 keys each")
	}
	s := open(t, d, postgres.Options{})
	prefix := "multi/" + uuid.NewString()
	children := []string{"p1", "p2"}
	outs := make([]bytes.Buffer, len(children))
	cmds := make([]*exec.Cmd, len(children))
	starts := make([]io.WriteCloser, len(children))
	for i, owner := range children {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), childDSNEnv+"="+prefix, "IDEMGATE_CHILD_OWNER="+owner)
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
			if len(f) != 2 || !strings.HasPrefix(f[0], prefix) {
				continue
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
	t.Logf("wins per process: %v", perOwner)
}

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

// TestOutage stops PostgreSQL mid-test and starts it again. It runs in a child
// process on a private server (scripts/with-postgres.sh once more), so the shared
// server other tests use never goes down.
func TestOutage(t *testing.T) {
	dsn(t)
	pgtest.RunOnPrivateServer(t, filepath.Join("..", ".."), "TestOutageChild")
}

func TestOutageChild(t *testing.T) {
	pgctl := pgtest.PrivateServer(t, "TestOutage")
	ctx := context.Background()
	s := open(t, dsn(t), postgres.Options{ConnectTimeout: 2 * time.Second})
	if o, _, err := s.Begin(ctx, claim("before", "a")); err != nil || o != store.OutcomeClaimed {
		t.Fatalf("Begin before the outage = %q, %v", o, err)
	}
	ctl := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(pgctl, args...).CombinedOutput(); err != nil {
			t.Fatalf("pg_ctl %v: %v\n%s", args, err, out)
		}
	}
	ctl("stop", "-m", "fast")
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			exec.Command(pgctl, "start").Run()
		}
	})

	_, _, err := s.Begin(ctx, claim("during", "a"))
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Begin with the server stopped = %v; want ErrUnavailable", err)
	}
	t.Logf("Begin during the outage: %v", err)
	if err := s.Complete(ctx, store.Transition{Key: "before", Owner: "a", Now: t0}); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Complete with the server stopped = %v; want ErrUnavailable", err)
	}
	if _, err := s.Get(ctx, "before"); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Get with the server stopped = %v; want ErrUnavailable", err)
	}
	if err := s.Append(ctx, store.Receipt{Key: "x", Time: t0}); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Append with the server stopped = %v; want ErrUnavailable", err)
	}

	ctl("start")
	restarted = true
	// The pool reconnects by itself: poll until a claim goes through.
	deadline := time.Now().Add(30 * time.Second)
	for {
		o, _, err := s.Begin(ctx, claim("during", "a"))
		if err == nil {
			if o != store.OutcomeClaimed {
				t.Fatalf("first claim after the restart = %q; want claimed", o)
			}
			break
		}
		if !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("Begin while recovering = %v; want ErrUnavailable or success", err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("still failing 30s after the restart: %v", err)
		}
		time.Sleep(50 * time.Millisecond) // poll interval, not a wait for an outcome
	}
	if rec, err := s.Get(ctx, "before"); err != nil || rec.Owner != "a" || rec.State != store.StateClaimed {
		t.Fatalf("claim made before the outage: %+v, %v", rec, err)
	}
	if o, _, err := s.Begin(ctx, claim("before", "b")); err != nil || o != store.OutcomeInFlight {
		t.Fatalf("second claim of a key claimed before the outage = %q, %v; want in-flight", o, err)
	}
	if err := s.Complete(ctx, store.Transition{Key: "before", Owner: "a", Now: t0}); err != nil {
		t.Fatalf("Complete after the restart: %v", err)
	}
}
