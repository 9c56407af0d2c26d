package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/store"
)

var d0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

func openInternal(t *testing.T, o Options) *Store {
	t.Helper()
	s, err := OpenWith(context.Background(), filepath.Join(t.TempDir(), "idemgate.db"), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func dClaim(key, owner string) store.Claim {
	return store.Claim{Key: key, Activity: "ChargeCard", Effect: "destructive", ArgsHash: "h1", Owner: owner,
		Lease: d0.Add(time.Minute), Window: time.Hour, WorkflowID: "wf", RunID: "run", Attempt: 1, Now: d0}
}

func dTransition(key, owner string, d store.Decision) store.Transition {
	return store.Transition{Key: key, Owner: owner, Now: d0.Add(time.Second), Window: time.Hour,
		Receipt: store.Receipt{Key: key, Activity: "ChargeCard", Effect: "destructive", Decision: d, ArgsHash: "h1"}}
}

// events records, in order, each batch's commit ("commit N": PRAGMA synchronous
// as SQLite reports it inside the transaction, just before the commit) and each
// sync of the WAL ("sync", with the number of commits made when it began).
type events struct {
	mu  sync.Mutex
	got []string
}

func (e *events) add(ev string) {
	e.mu.Lock()
	e.got = append(e.got, ev)
	e.mu.Unlock()
}

func (e *events) take() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := e.got
	e.got = nil
	return out
}

// watch hooks e into s's commits and syncs; sync is the sync s runs after.
func (e *events) watch(t *testing.T, s *Store, sync func() error) {
	s.beforeCommit = func(tx *sql.Tx, _ int) {
		var v int
		if err := tx.QueryRow("PRAGMA synchronous").Scan(&v); err != nil {
			t.Errorf("PRAGMA synchronous: %v", err)
		}
		e.add(fmt.Sprintf("commit %d", v))
	}
	s.syncWAL = func() error {
		c, _, _, _ := s.counters()
		e.add(fmt.Sprintf("sync after %d", c))
		return sync()
	}
}

// The write connection never leaves synchronous=NORMAL (1): a write that must be
// on disk before it returns (a claim, a claim's second evidence, a pause or resume;
// every write under strict durability) commits, then syncs the WAL file, and only then returns; the other
// steps commit and return without a sync.
func TestSyncedWritesSyncTheWALAfterTheirCommit(t *testing.T) {
	ctx := context.Background()
	pause := store.Pause{Activity: "ChargeCard", Actor: "ops", Reason: "test", Time: d0}
	steps := []struct {
		name string
		do   func(s *Store) error
		// synced under DurabilityClaim (under DurabilityStrict every step is).
		synced bool
	}{
		{"claim", func(s *Store) error { _, _, err := s.Begin(ctx, dClaim("k1", "a")); return err }, true},
		{"complete", func(s *Store) error { return s.Complete(ctx, dTransition("k1", "a", store.DecisionRan)) }, false},
		{"claim k2", func(s *Store) error { _, _, err := s.Begin(ctx, dClaim("k2", "a")); return err }, true},
		{"release", func(s *Store) error { return s.Release(ctx, dTransition("k2", "a", store.DecisionReleased)) }, false},
		{"claim k3", func(s *Store) error { _, _, err := s.Begin(ctx, dClaim("k3", "a")); return err }, true},
		{"unknown", func(s *Store) error { return s.Abandon(ctx, dTransition("k3", "a", store.DecisionUnknown)) }, false},
		// A claim's first evidence need not be on disk (lost, a re-send is refused
		// for want of it); its second must (store.SentMustSync).
		{"claim k4", func(s *Store) error { _, _, err := s.Begin(ctx, dClaim("k4", "a")); return err }, true},
		{"first evidence", func(s *Store) error {
			return s.RecordSent(ctx, "k4", "a", store.Sent{Via: "idemhttp:stripe", Host: "api.stripe.com", Window: time.Hour})
		}, false},
		{"second evidence", func(s *Store) error {
			return s.RecordSent(ctx, "k4", "a", store.Sent{Via: "idemhttp:mail", Host: "mail.example"})
		}, true},
		{"read receipt", func(s *Store) error {
			return s.Append(ctx, store.Receipt{Time: d0, Key: "r1", Activity: "Search", Effect: "read", Decision: store.DecisionRan})
		}, false},
		{"pause", func(s *Store) error { return s.Pause(ctx, pause) }, true},
		{"resume", func(s *Store) error { return s.Resume(ctx, pause) }, true},
	}
	for _, d := range []store.Durability{store.DurabilityClaim, store.DurabilityStrict} {
		t.Run(d.String(), func(t *testing.T) {
			// A long flush interval: no sync of the flusher's comes between.
			s := openInternal(t, Options{Durability: d, FlushInterval: time.Hour})
			var e events
			e.watch(t, s, s.syncWAL)
			for i, st := range steps {
				if err := st.do(s); err != nil {
					t.Fatalf("%s: %v", st.name, err)
				}
				want := []string{"commit 1"}
				if st.synced || d == store.DurabilityStrict {
					want = append(want, fmt.Sprintf("sync after %d", i+1))
				}
				if got := e.take(); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("%s under %s: %q before it returned; want %q", st.name, d, got, want)
				}
				if c, sy, _, _ := s.counters(); (st.synced || d == store.DurabilityStrict) && sy != c {
					t.Errorf("%s under %s: returned with %d of %d commits synced", st.name, d, sy, c)
				}
			}
		})
	}
}

func (s *Store) counters() (commits, synced, flushes int64, failed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.commits, s.synced, s.flushes, s.syncFailed
}

func TestUnsyncedCommitIsFlushed(t *testing.T) {
	ctx := context.Background()
	s := openInternal(t, Options{FlushInterval: 20 * time.Millisecond})
	var (
		mu    sync.Mutex
		syncs []time.Time
	)
	inner := s.syncWAL
	s.syncWAL = func() error {
		mu.Lock()
		syncs = append(syncs, time.Now())
		mu.Unlock()
		return inner()
	}
	if _, _, err := s.Begin(ctx, dClaim("k1", "a")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if c, sy, _, _ := s.counters(); sy != c {
		t.Fatalf("after a synced claim: %d commits, %d synced; want all synced", c, sy)
	}
	mu.Lock()
	n := len(syncs)
	syncs = nil
	mu.Unlock()
	if n != 1 {
		t.Fatalf("%d syncs after a synced commit alone; want 1, the claim's own (none by the flusher)", n)
	}

	committed := time.Now()
	if err := s.Complete(ctx, dTransition("k1", "a", store.DecisionRan)); err != nil {
		t.Fatal(err)
	}
	if c, sy, _, _ := s.counters(); sy >= c {
		t.Fatalf("right after an unsynced completion: %d commits, %d synced; want it unsynced", c, sy)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, sy, fl, _ := s.counters()
		if sy == c && fl == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("10 s after an unsynced completion: %d commits, %d synced, %d flushes; want the flusher to sync it", c, sy, fl)
		}
		time.Sleep(5 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(syncs) != 1 || syncs[0].Sub(committed) < 20*time.Millisecond {
		t.Fatalf("syncs %v after the commit at %v; want one, FlushInterval after it", syncs, committed)
	}
}

func TestFailedSyncMakesEveryCommitSynchronous(t *testing.T) {
	ctx := context.Background()
	s := openInternal(t, Options{FlushInterval: 10 * time.Millisecond})
	var e events
	failing := errors.New("EIO")
	real := s.syncWAL
	t.Cleanup(func() { s.syncWAL = real }) // before Close, which syncs
	e.watch(t, s, func() error { return failing })
	// The claim's own sync fails: it is committed but may not be on disk, so Begin
	// fails (closed) rather than let the body run.
	if _, _, err := s.Begin(ctx, dClaim("k1", "a")); !errors.Is(err, failing) || !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Begin whose sync failed: %v; want the sync's error, marked unavailable", err)
	}
	if _, _, _, failed := s.counters(); !failed {
		t.Fatal("a failed sync of a claim left later commits unsynced")
	}
	if got := e.take(); fmt.Sprint(got) != "[commit 1 sync after 1]" {
		t.Fatalf("the claim: %q; want its commit, then its sync", got)
	}
	// Every later commit is synced before it returns, the receipt's too.
	if err := s.Append(ctx, store.Receipt{Time: d0, Key: "r1", Activity: "Search", Effect: "read", Decision: store.DecisionRan}); !errors.Is(err, failing) {
		t.Fatalf("Append after a failed sync: %v; want the sync's error", err)
	}
	if got := e.take(); fmt.Sprint(got) != "[commit 1 sync after 2]" {
		t.Fatalf("a receipt after a failed sync: %q; want its commit, then its sync", got)
	}
}

// The flusher's failed sync makes every later commit synced too.
func TestFailedFlushMakesEveryCommitSynced(t *testing.T) {
	ctx := context.Background()
	s := openInternal(t, Options{FlushInterval: 10 * time.Millisecond})
	var e events
	if _, _, err := s.Begin(ctx, dClaim("k1", "a")); err != nil {
		t.Fatal(err)
	}
	real := s.syncWAL
	t.Cleanup(func() { s.syncWAL = real }) // before Close, which syncs
	e.watch(t, s, func() error { return errors.New("EIO") })
	if err := s.Complete(ctx, dTransition("k1", "a", store.DecisionRan)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, _, _, failed := s.counters(); !failed; _, _, _, failed = s.counters() {
		if time.Now().After(deadline) {
			t.Fatal("the flusher never tried the failing sync")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := s.Append(ctx, store.Receipt{Time: d0, Key: "r1", Activity: "Search", Effect: "read", Decision: store.DecisionRan}); err == nil {
		t.Fatal("a receipt after a failed flush returned without its failing sync")
	}
	if got := e.take(); fmt.Sprint(got) != "[commit 1 sync after 2 commit 1 sync after 3]" {
		t.Fatalf("completion, flush, then a receipt after the failed flush: %q; want the receipt synced after its commit", got)
	}
}

// Concurrent claims share one sync per batch; a batch's statements may run while
// the batch before it waits for its sync.
// holdFirstBatch makes the first batch wait, before its commit, until want more
// writes are queued, so that they all form the next batch. It records the size
// of each batch.
func holdFirstBatch(t *testing.T, s *Store, want int) *[]int {
	var (
		sizes []int
		first = true
	)
	s.beforeCommit = func(_ *sql.Tx, n int) {
		sizes = append(sizes, n) // only the batch leader runs this, one at a time
		if !first {
			return
		}
		first = false
		if n > want {
			// On a loaded machine every writer may queue before the leader takes the
			// first batch: then they all share it, which is the point.
			return
		}
		deadline := time.Now().Add(20 * time.Second)
		for {
			s.mu.Lock()
			q := len(s.queue)
			s.mu.Unlock()
			if q >= want {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("only %d writes queued behind the first batch; want %d", q, want)
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
	return &sizes
}

func TestConcurrentClaimsShareOneCommit(t *testing.T) {
	ctx := context.Background()
	s := openInternal(t, Options{})
	const claims, keys = 30, 10
	sizes := holdFirstBatch(t, s, claims-1)
	outcomes := make([]store.Outcome, claims)
	var wg sync.WaitGroup
	claim := func(i int) {
		wg.Go(func() {
			o, _, err := s.Begin(ctx, dClaim(fmt.Sprintf("k%d", i%keys), fmt.Sprintf("owner-%d", i)))
			if err != nil {
				t.Errorf("Begin %d: %v", i, err)
			}
			outcomes[i] = o
		})
	}
	// The first claim alone, taken by its leader (and held before its commit), then
	// the rest: however the machine schedules them, they queue behind it.
	claim(0)
	waitTaken(s)
	for i := 1; i < claims; i++ {
		claim(i)
	}
	wg.Wait()
	// The writers queue behind the first batch and share the second commit.
	if fmt.Sprint(*sizes) != fmt.Sprint([]int{1, claims - 1}) {
		t.Errorf("%d claims committed in batches %v; want [1 %d]: the ones that queued behind the first share one commit", claims, *sizes, claims-1)
	}
	for k := range keys {
		var won, inFlight int
		for i := k; i < claims; i += keys {
			switch outcomes[i] {
			case store.OutcomeClaimed:
				won++
			case store.OutcomeInFlight:
				inFlight++
			}
		}
		rec, err := s.Get(ctx, fmt.Sprintf("k%d", k))
		if won != 1 || inFlight != claims/keys-1 || err != nil || rec.State != store.StateClaimed {
			t.Errorf("key k%d: %d winners, %d in flight, record %+v, %v; want one winner, the rest in flight", k, won, inFlight, rec, err)
		}
	}
	// Every claim in the batch was synced with it.
	if c, sy, _, _ := s.counters(); sy != c {
		t.Errorf("%d commits, %d synced; want every claim batch synced", c, sy)
	}
	// Losing a race for a key is an outcome, not a failed write: no batch ran twice.
	if r := s.retriedBatches(); r != 0 {
		t.Errorf("%d batches ran again with savepoints; want 0 (no write failed)", r)
	}
}

func (s *Store) retriedBatches() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.retried
}

// One write of a batch fails after it has written; its neighbours, before and
// after it, commit, and its own partial write does not.
func TestBatchKeepsEachOutcome(t *testing.T) {
	ctx := context.Background()
	s := openInternal(t, Options{})
	sizes := holdFirstBatch(t, s, 3)
	boom := errors.New("boom")
	receipt := func(key string) store.Receipt {
		return store.Receipt{Time: d0, Key: key, Activity: "Search", Effect: "read", Decision: store.DecisionRan}
	}
	var wg sync.WaitGroup
	wg.Go(func() { // the first batch, held until the three below are queued
		if err := s.Append(ctx, receipt("first")); err != nil {
			t.Errorf("Append(first): %v", err)
		}
	})
	waitTaken(s)
	errs := make([]error, 3)
	wg.Go(func() { _, _, errs[0] = s.Begin(ctx, dClaim("before", "a")) })
	waitQueued(s, 1)
	wg.Go(func() {
		errs[1] = s.write(ctx, "test", false, func(ctx context.Context, tx *sql.Tx) error {
			if err := s.appendTx(ctx, tx, receipt("failing")); err != nil {
				return err
			}
			return boom
		})
	})
	waitQueued(s, 2)
	wg.Go(func() { errs[2] = s.Append(ctx, receipt("after")) })
	wg.Wait()
	if fmt.Sprint(*sizes) != "[1 3]" {
		t.Fatalf("batches %v; want [1 3]", *sizes)
	}
	if errs[0] != nil || !errors.Is(errs[1], boom) || errs[2] != nil {
		t.Fatalf("outcomes %v; want nil, boom, nil", errs)
	}
	if r := s.retriedBatches(); r != 1 {
		t.Errorf("%d batches ran again with savepoints; want 1 (the one with the failing write)", r)
	}
	if rec, err := s.Get(ctx, "before"); err != nil || rec.State != store.StateClaimed {
		t.Errorf("the claim before the failure: %+v, %v; want it committed", rec, err)
	}
	for key, want := range map[string]int{"first": 1, "failing": 0, "after": 1} {
		rs, err := s.Receipts(ctx, store.ReceiptFilter{Key: key})
		if err != nil || len(rs) != want {
			t.Errorf("receipts of %s: %d, %v; want %d", key, len(rs), err, want)
		}
	}
}

func (s *Store) queueLen() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

func (s *Store) isCommitting() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.committing
}

// waitTaken waits until a batch's leader has taken every queued write (the queue
// is empty while a batch is committing).
func waitTaken(s *Store) {
	for !s.isCommitting() || s.queueLen() != 0 {
		time.Sleep(time.Millisecond)
	}
}

func waitQueued(s *Store, n int) {
	for s.queueLen() < n {
		time.Sleep(time.Millisecond)
	}
}
