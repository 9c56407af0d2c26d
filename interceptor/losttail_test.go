package interceptor_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/internal/testutil/patient"
	"github.com/idemgate/idemgate/internal/testutil/pgtest"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/postgres"
	"github.com/idemgate/idemgate/store/sqlite"
)

// Under store.DurabilityClaim only the claim is synced before the body runs; the
// step after the body (completion, release, unknown outcome) is committed but may
// be lost in an operating-system crash. These tests lose it and check that the
// retry, or a repeat with the same key (what a reset or a re-run does), never
// sends a write twice: the destructive one is refused with its withheld call, the
// idempotent one runs again with the same key, and so does the vendor-keyed one
// where the evidence that its key left through the keyed transport survived.
//
// Two ways to lose the tail: "files" copies the SQLite files right after the
// synced claim and, once the lost step has committed, closes the store, puts the
// copy back (the disk as the crash leaves it) and reopens it; "drop" is a store
// wrapper that acknowledges the lost step without writing it (on SQLite and
// PostgreSQL).

// tailStore passes every call to the current store, except the armed lost step.
type tailStore struct {
	t      *testing.T
	mu     sync.Mutex
	cur    store.Store
	lose   string // "complete", "release" or "abandon": the step lost, once
	lost   bool
	reopen func() store.Store // "files": nil for "drop"
	path   string             // "files": the SQLite file
	snap   string             // "files": the copy taken after the synced claim
}

func (s *tailStore) inner() store.Store {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

func (s *tailStore) Begin(ctx context.Context, c store.Claim) (store.Outcome, store.Record, error) {
	o, r, err := s.inner().Begin(ctx, c)
	if err == nil && s.reopen != nil && !s.lost && (o == store.OutcomeClaimed || o == store.OutcomeTakenOver) {
		s.snapshot() // the claim is synced: this is what the disk holds
	}
	return o, r, err
}

func (s *tailStore) step(ctx context.Context, op string, t store.Transition, do func(store.Store) error) error {
	if s.lost || op != s.lose {
		return do(s.inner())
	}
	s.lost = true
	if s.reopen == nil {
		return nil // dropped: acknowledged, never written
	}
	if err := do(s.inner()); err != nil {
		return err
	}
	s.crash()
	if r, err := s.inner().Get(ctx, t.Key); err != nil || r.State != store.StateClaimed || r.Owner != t.Owner {
		s.t.Fatalf("after the crash the record of %s is %+v, %v; want it claimed by the lost owner", t.Key, r, err)
	}
	return nil
}

func (s *tailStore) Complete(ctx context.Context, t store.Transition) error {
	return s.step(ctx, "complete", t, func(st store.Store) error { return st.Complete(ctx, t) })
}
func (s *tailStore) Release(ctx context.Context, t store.Transition) error {
	return s.step(ctx, "release", t, func(st store.Store) error { return st.Release(ctx, t) })
}
func (s *tailStore) Abandon(ctx context.Context, t store.Transition) error {
	return s.step(ctx, "abandon", t, func(st store.Store) error { return st.Abandon(ctx, t) })
}
func (s *tailStore) RecordSent(ctx context.Context, key, owner string, e store.Sent) error {
	return s.inner().RecordSent(ctx, key, owner, e)
}
func (s *tailStore) Identity() string { return s.inner().Identity() }
func (s *tailStore) Get(ctx context.Context, key string) (store.Record, error) {
	return s.inner().Get(ctx, key)
}
func (s *tailStore) Append(ctx context.Context, r store.Receipt) error {
	return s.inner().Append(ctx, r)
}
func (s *tailStore) Receipts(ctx context.Context, f store.ReceiptFilter) ([]store.Receipt, error) {
	return s.inner().Receipts(ctx, f)
}
func (s *tailStore) Sweep(ctx context.Context, now time.Time, limit int) (int, error) {
	return s.inner().Sweep(ctx, now, limit)
}
func (s *tailStore) Pending(ctx context.Context, now time.Time, limit int) ([]store.Record, error) {
	return s.inner().Pending(ctx, now, limit)
}
func (s *tailStore) Resolve(ctx context.Context, t store.Transition, to store.State) error {
	return s.inner().Resolve(ctx, t, to)
}
func (s *tailStore) Pause(ctx context.Context, p store.Pause) error  { return s.inner().Pause(ctx, p) }
func (s *tailStore) Resume(ctx context.Context, p store.Pause) error { return s.inner().Resume(ctx, p) }
func (s *tailStore) Pauses(ctx context.Context) ([]store.Pause, error) {
	return s.inner().Pauses(ctx)
}

// snapshot copies the database and its WAL (the shared-memory index is rebuilt
// on open).
func (s *tailStore) snapshot() {
	s.t.Helper()
	for _, suffix := range []string{"", "-wal"} {
		copyFile(s.t, s.path+suffix, s.snap+suffix)
	}
}

// crash closes the store, puts the copy taken after the claim back and reopens.
func (s *tailStore) crash() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.cur.(io.Closer); ok {
		if err := c.Close(); err != nil {
			s.t.Fatal(err)
		}
	}
	for _, suffix := range []string{"", "-wal"} {
		copyFile(s.t, s.snap+suffix, s.path+suffix)
	}
	if err := os.Remove(s.path + "-shm"); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.t.Fatal(err)
	}
	s.cur = s.reopen()
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestLostTailNeverSendsTwice(t *testing.T) {
	type backend struct {
		name string
		open func(t *testing.T, lose string) *tailStore
	}
	openSQLite := func(t *testing.T, path string) store.Store {
		st, err := sqlite.Open(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	backends := []backend{
		{"sqlite/files", func(t *testing.T, lose string) *tailStore {
			dir := t.TempDir()
			path := filepath.Join(dir, "idemgate.db")
			s := &tailStore{t: t, lose: lose, path: path, snap: filepath.Join(dir, "synced.db"),
				reopen: func() store.Store { return openSQLite(t, path) }}
			s.cur = openSQLite(t, path)
			return s
		}},
		{"sqlite/drop", func(t *testing.T, lose string) *tailStore {
			return &tailStore{t: t, lose: lose, cur: openSQLite(t, filepath.Join(t.TempDir(), "idemgate.db"))}
		}},
		{"postgres/drop", func(t *testing.T, lose string) *tailStore {
			d := pgtest.Schema(t, pgtest.DSN(t, "./interceptor/"), "idemgate_losttail")
			st, err := postgres.Open(context.Background(), d)
			if err != nil {
				t.Fatal(err)
			}
			return &tailStore{t: t, lose: lose, cur: st}
		}},
	}
	classes := []struct {
		name, activity string
		vendorKeyed    bool
	}{
		{"destructive", "ChargeCard", false},
		{"idempotent", "UpsertContact", false},
		{"vendor-keyed", "ChargeCard", true},
	}
	for _, b := range backends {
		for _, lose := range []string{"complete", "release", "abandon"} {
			for _, cl := range classes {
				t.Run(b.name+"/"+lose+"/"+cl.name, func(t *testing.T) {
					st := b.open(t, lose)
					t.Cleanup(func() {
						if c, ok := st.inner().(io.Closer); ok {
							c.Close()
						}
					})
					lostTail(t, st, lose, cl.activity, cl.vendorKeyed)
				})
			}
		}
	}
}

func lostTail(t *testing.T, st *tailStore, lose, activityName string, vendorKeyed bool) {
	var (
		clockMu sync.Mutex
		clock   = time.Now()
	)
	now := func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return clock }
	// Past every lease the first attempt took (its start-to-close timeout is a minute).
	jump := func() { clockMu.Lock(); clock = clock.Add(2 * time.Hour); clockMu.Unlock() }
	v := newVendor()
	tl := &tools{v: v}
	opts := interceptor.Options{Store: st, Now: now}
	if vendorKeyed {
		opts.VendorWindows = map[string]time.Duration{activityName: 24 * time.Hour}
	}
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	run := func(workflowID string, c call) error {
		t.Helper()
		gate, err := interceptor.New(opts)
		if err != nil {
			t.Fatal(err)
		}
		env := patient.Env(suite.NewTestWorkflowEnvironment())
		env.SetWorkerOptions(patient.WorkerOptions(gate))
		env.RegisterWorkflowWithOptions(callsWorkflow, workflow.RegisterOptions{Name: "calls"})
		env.RegisterActivity(tl)
		env.SetStartWorkflowOptions(startOptions(workflowID))
		env.ExecuteWorkflow("calls", []call{c})
		if !env.IsWorkflowCompleted() {
			t.Fatalf("workflow %s did not complete", workflowID)
		}
		return env.GetWorkflowError()
	}
	c := call{Activity: activityName, Key: "order-7/" + activityName, Charge: charge, MaxAttempts: 3}
	var (
		err   error
		sends int // vendor calls before the retry or the repeat
	)
	switch lose {
	case "complete":
		// The body ran and answered; the completion is lost. A repeat with the same key
		// comes after the first attempt's lease.
		if err := run("wf-first", c); err != nil {
			t.Fatalf("first run: %v", err)
		}
		sends = 1
		jump()
		err = run("wf-repeat", c)
	case "release":
		// The vendor refused before anything was sent; the release is lost.
		tl.fail = func(ctx context.Context) (error, bool) {
			if ctxAttempt(ctx) == 1 {
				jump()
				return interceptor.NotCommitted(errors.New("card declined before sending")), false
			}
			return nil, false
		}
		err = run("wf-release", c)
	case "abandon":
		// The vendor was reached, then the call failed without proof; the unknown
		// outcome is lost.
		tl.fail = func(ctx context.Context) (error, bool) {
			if ctxAttempt(ctx) == 1 {
				jump()
				return errors.New("connection reset by peer"), true
			}
			return nil, false
		}
		sends = 1
		err = run("wf-abandon", c)
	}
	if !st.lost {
		t.Fatalf("the %s was never lost: the test did not test anything", lose)
	}
	// A vendor-keyed re-send rests on the evidence that the key left through the
	// keyed transport, which is committed but not synced: the "files" crash, which
	// puts back the disk as it was right after the synced claim, loses it, and an
	// attempt that failed before sending never recorded any. Without it the write is
	// refused like any destructive one (fail closed), never re-sent on trust.
	evidenceKept := st.reopen == nil && lose != "release"
	if activityName == "ChargeCard" && (!vendorKeyed || !evidenceKept) {
		if v.count() != sends {
			t.Fatalf("vendor calls = %d, want %d: a destructive write was sent again after its %s was lost", v.count(), sends, lose)
		}
		app := appErr(t, err)
		if app.Type() != interceptor.ErrTypeInFlight || !app.NonRetryable() {
			t.Fatalf("refusal %s non-retryable=%v, want non-retryable %s: %v", app.Type(), app.NonRetryable(), interceptor.ErrTypeInFlight, err)
		}
		var withheld interceptor.WithheldCall
		if derr := app.Details(&withheld); derr != nil || withheld.Activity != activityName ||
			!strings.Contains(string(withheld.Args), `"amount":4200`) {
			t.Fatalf("refusal without its withheld call: %+v, %v", withheld, derr)
		}
		return
	}
	// Idempotent and vendor-keyed: run again, once, with the same key.
	if err != nil {
		t.Fatalf("the retry of a %s write after a lost %s: %v", activityName, lose, err)
	}
	keys := v.seen()
	if len(keys) != sends+1 {
		t.Fatalf("vendor calls = %d, want %d", len(keys), sends+1)
	}
	for _, k := range keys {
		if k != keys[0] || k == "" {
			t.Fatalf("vendor saw keys %q; want the same key every time", keys)
		}
	}
}
