package interceptor_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memory"
)

// batchStore is a memory store that says it runs under a durability (as the SQLite
// and PostgreSQL stores do), counts the receipts appended one by one, and whose
// batches (store.ReceiptBatcher) a test can hold or fail.
type batchStore struct {
	*memory.Store
	durability store.Durability
	appends    atomic.Int64 // Append calls
	batches    atomic.Int64 // AppendReceipts calls that stored their batch

	mu      sync.Mutex
	hold    chan struct{} // non-nil: AppendReceipts waits for it to close
	held    chan struct{} // closed when an AppendReceipts call is waiting on hold
	failFor int           // the next failFor AppendReceipts calls fail
	closed  bool          // every AppendReceipts fails with store.ErrClosed
}

func newBatchStore(d store.Durability) *batchStore {
	return &batchStore{Store: memory.New(), durability: d}
}

func (s *batchStore) Durability() store.Durability { return s.durability }

func (s *batchStore) Append(ctx context.Context, r store.Receipt) error {
	s.appends.Add(1)
	return s.Store.Append(ctx, r)
}

func (s *batchStore) AppendReceipts(ctx context.Context, rs []store.Receipt) error {
	s.mu.Lock()
	hold, held := s.hold, s.held
	if hold != nil && held != nil {
		close(held)
		s.held = nil
	}
	s.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return fmt.Errorf("batch store: %w: %w", store.ErrUnavailable, store.ErrClosed)
	}
	if s.failFor > 0 {
		s.failFor--
		s.mu.Unlock()
		return fmt.Errorf("batch store: %w: connection refused (injected)", store.ErrUnavailable)
	}
	s.mu.Unlock()
	if err := s.Store.AppendReceipts(ctx, rs); err != nil {
		return err
	}
	s.batches.Add(1)
	return nil
}

// holdBatches makes the next batches wait until the returned release is called;
// entered is closed once a batch waits.
func (s *batchStore) holdBatches() (entered <-chan struct{}, release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hold, s.held = make(chan struct{}), make(chan struct{})
	hold, held := s.hold, s.held
	var once sync.Once
	return held, func() {
		once.Do(func() {
			s.mu.Lock()
			s.hold = nil
			s.mu.Unlock()
			close(hold)
		})
	}
}

func (s *batchStore) reads(t *testing.T) []store.Receipt {
	t.Helper()
	rs, err := s.Receipts(context.Background(), store.ReceiptFilter{Activity: "GetBalance"})
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// readGate runs activities through the gate in Temporal's test activity
// environment, one environment per call (calls may run concurrently).
type readGate struct {
	gate    sdkinterceptor.WorkerInterceptor
	suite   testsuite.WorkflowTestSuite
	metrics *capturingMetrics
	n       atomic.Int64
}

func newReadGate(t *testing.T, opts interceptor.Options) *readGate {
	t.Helper()
	gate, err := interceptor.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	g := &readGate{gate: gate, metrics: &capturingMetrics{mu: &sync.Mutex{}, counts: map[string]int64{}}}
	g.suite.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	g.suite.SetMetricsHandler(g.metrics)
	return g
}

// run executes activity once, with a header key of its own.
func (g *readGate) run(t *testing.T, activity string) error {
	n := g.n.Add(1)
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	suite.SetMetricsHandler(g.metrics)
	suite.SetHeader(&commonpb.Header{Fields: map[string]*commonpb.Payload{"idemgate": {
		Metadata: map[string][]byte{"encoding": []byte("json/plain")},
		Data:     fmt.Appendf(nil, `{"k":"5f0c9a6e-1d2b-5c3a-8e4f-%012d","s":"readq"}`, n),
	}}})
	env := suite.NewTestActivityEnvironment()
	env.SetWorkerOptions(worker.Options{Interceptors: []sdkinterceptor.WorkerInterceptor{g.gate}})
	env.RegisterActivity(&benchTools{})
	arg := charge
	arg.Note = fmt.Sprint(n)
	_, err := env.ExecuteActivity(activity, arg)
	return err
}

func (g *readGate) counter(name string) int64 {
	g.metrics.mu.Lock()
	defer g.metrics.mu.Unlock()
	var n int64
	for k, v := range g.metrics.counts {
		if strings.HasPrefix(k, name+" ") {
			n += v
		}
	}
	return n
}

// waitFor polls cond until it holds, failing after a generous deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// received waits for ch to be closed, failing after a generous deadline.
func received(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// Issue 21: under the default durability a read writes nothing on the activity's
// path. Its receipt is appended in a batch off the path (here held): the read has
// returned while nothing of it is stored, and the batch then stores its receipt,
// stamped with the read's time.
func TestReadWritesNothingOnItsPath(t *testing.T) {
	st := newBatchStore(store.DurabilityClaim)
	entered, release := st.holdBatches()
	defer release()
	g := newReadGate(t, interceptor.Options{Store: st})
	before := time.Now()
	for range 3 {
		if err := g.run(t, "GetBalance"); err != nil {
			t.Fatal(err)
		}
	}
	if n := st.appends.Load(); n != 0 {
		t.Fatalf("the reads made %d store appends on their path; want none (their receipts are queued)", n)
	}
	if rs := st.reads(t); len(rs) != 0 {
		t.Fatalf("%d read receipts stored while the batch is held; want none yet", len(rs))
	}
	received(t, entered, "the flusher to take the batch, off the path")
	release()
	if err := interceptor.Flush(context.Background(), g.gate); err != nil {
		t.Fatal(err)
	}
	rs := st.reads(t)
	if len(rs) != 3 {
		t.Fatalf("%d read receipts after the flush; want 3", len(rs))
	}
	for _, r := range rs {
		if r.Decision != store.DecisionRan || r.Effect != "read" || r.Time.Before(before) || r.Time.After(time.Now()) {
			t.Fatalf("read receipt %+v: want ran, read, stamped at the read", r)
		}
	}
	if n := st.appends.Load(); n != 0 {
		t.Fatalf("%d single appends; want the receipts in batches only", n)
	}
}

// Flush (and so a clean stop) stores every queued read receipt at once, without
// waiting for the flusher's interval; with nothing queued it returns at once.
func TestFlushStoresEveryQueuedReadReceipt(t *testing.T) {
	st := newBatchStore(store.DurabilityClaim)
	g := newReadGate(t, interceptor.Options{Store: st})
	if err := interceptor.Flush(context.Background(), g.gate); err != nil {
		t.Fatalf("Flush with nothing queued: %v", err)
	}
	const n = 300 // more than one batch
	for range n {
		if err := g.run(t, "GetBalance"); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := interceptor.Flush(ctx, g.gate); err != nil {
		t.Fatal(err)
	}
	if rs := st.reads(t); len(rs) != n {
		t.Fatalf("%d read receipts stored after Flush; want all %d", len(rs), n)
	}
	if err := interceptor.Flush(ctx, &sdkinterceptor.WorkerInterceptorBase{}); err == nil {
		t.Fatal("Flush of a value that is not a gate: no error")
	}
}

// A crash (the process ends without Flush) loses at most the read receipts still
// queued: a write's claim and receipts are stored on its path, before it returns,
// whatever the read queue holds.
func TestCrashLosesOnlyQueuedReadReceipts(t *testing.T) {
	st := newBatchStore(store.DurabilityClaim)
	entered, release := st.holdBatches()
	defer release()
	g := newReadGate(t, interceptor.Options{Store: st, IdentifyingFields: map[string][]string{"ChargeCard": {"note"}}})
	if err := g.run(t, "GetBalance"); err != nil {
		t.Fatal(err)
	}
	received(t, entered, "the read's batch to be held") // the process "crashes" with it unstored
	if err := g.run(t, "ChargeCard"); err != nil {
		t.Fatal(err)
	}
	if err := g.run(t, "GetBalance"); err != nil {
		t.Fatal(err)
	}
	// What the store holds now is what survives a crash of the process.
	rs, err := st.Receipts(context.Background(), store.ReceiptFilter{Activity: "ChargeCard"})
	if err != nil {
		t.Fatal(err)
	}
	if got := decisionsOf(rs); got != "claimed ran" {
		t.Fatalf("the write's receipts in the store before any read batch: %s; want claimed ran", got)
	}
	if recs, _ := st.Pending(context.Background(), time.Now(), 0); len(recs) != 0 {
		t.Fatalf("pending records %+v; the write completed", recs)
	}
	if rs := st.reads(t); len(rs) != 0 {
		t.Fatalf("%d read receipts stored; want none (their batch is held): the crash loses only them", len(rs))
	}
	release()
	if err := interceptor.Flush(context.Background(), g.gate); err != nil {
		t.Fatal(err)
	}
	if rs := st.reads(t); len(rs) != 2 {
		t.Fatalf("%d read receipts after the flush; want 2", len(rs))
	}
}

// A full queue slows reads down: the read waits for room (counted in
// MetricReadReceiptsWaited) and returns once the flusher made room; nothing is
// dropped.
func TestReadQueueBackPressure(t *testing.T) {
	st := newBatchStore(store.DurabilityClaim)
	entered, release := st.holdBatches()
	defer release()
	g := newReadGate(t, interceptor.Options{Store: st, ReadReceiptQueue: 2})
	for range 2 {
		if err := g.run(t, "GetBalance"); err != nil {
			t.Fatal(err)
		}
	}
	received(t, entered, "the held batch") // both receipts are in it: the queue is full
	third := make(chan error, 1)
	go func() { third <- g.run(t, "GetBalance") }()
	waitFor(t, "the third read to wait for room", func() bool { return g.counter(interceptor.MetricReadReceiptsWaited) == 1 })
	select {
	case err := <-third:
		t.Fatalf("the third read returned (%v) while the queue was full; want it to wait for room", err)
	default:
	}
	release()
	select {
	case err := <-third:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the third read still waits after the flusher made room")
	}
	if err := interceptor.Flush(context.Background(), g.gate); err != nil {
		t.Fatal(err)
	}
	if rs := st.reads(t); len(rs) != 3 {
		t.Fatalf("%d read receipts; want all 3", len(rs))
	}
	if n := g.counter(interceptor.MetricReadReceiptsDropped); n != 0 {
		t.Fatalf("%d receipts dropped; want none", n)
	}
}

// A batch the store does not take is kept and retried (counted); the reads and
// writes meanwhile go on, and the batch is stored once the store answers.
func TestReadBatchRetriedWhileTheStoreFails(t *testing.T) {
	st := newBatchStore(store.DurabilityClaim)
	st.failFor = 3
	g := newReadGate(t, interceptor.Options{Store: st, IdentifyingFields: map[string][]string{"ChargeCard": {"note"}}})
	for range 4 {
		if err := g.run(t, "GetBalance"); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.run(t, "ChargeCard"); err != nil {
		t.Fatalf("a write while the read batches fail: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := interceptor.Flush(ctx, g.gate); err != nil {
		t.Fatal(err)
	}
	if rs := st.reads(t); len(rs) != 4 {
		t.Fatalf("%d read receipts; want all 4 once the store answered", len(rs))
	}
	if n := g.counter(interceptor.MetricReadReceiptFlushFailures); n != 3 {
		t.Fatalf("%d flush failures counted; want 3", n)
	}
	if n := g.counter(interceptor.MetricReadReceiptsDropped); n != 0 {
		t.Fatalf("%d receipts dropped; want none", n)
	}
}

// While the store does not take the batches and the queue is full, a read does not
// wait: it runs as it does when the store is down, and its receipt is dropped —
// logged and counted, not silently.
func TestFullQueueOnAFailingStoreDropsCounted(t *testing.T) {
	st := newBatchStore(store.DurabilityClaim)
	st.failFor = 1 << 30
	g := newReadGate(t, interceptor.Options{Store: st, ReadReceiptQueue: 1})
	if err := g.run(t, "GetBalance"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a failed batch", func() bool { return g.counter(interceptor.MetricReadReceiptFlushFailures) > 0 })
	if err := g.run(t, "GetBalance"); err != nil {
		t.Fatal(err)
	}
	if n := g.counter(interceptor.MetricReadReceiptsDropped); n != 1 {
		t.Fatalf("%d receipts dropped; want the second read's, counted", n)
	}
	st.mu.Lock()
	st.failFor = 0
	st.mu.Unlock()
	if err := interceptor.Flush(context.Background(), g.gate); err != nil {
		t.Fatal(err)
	}
	if rs := st.reads(t); len(rs) != 1 {
		t.Fatalf("%d read receipts; want the first read's, kept through the failures", len(rs))
	}
}

// Strict durability, and a store that does not say its durability (the memory
// store, a wrapper), keep the read's receipt on its path: stored before it returns.
func TestStrictKeepsReadReceiptsOnThePath(t *testing.T) {
	for name, st := range map[string]store.Gate{
		"strict":   newBatchStore(store.DurabilityStrict),
		"not said": memory.New(),
	} {
		t.Run(name, func(t *testing.T) {
			g := newReadGate(t, interceptor.Options{Store: st})
			if err := g.run(t, "GetBalance"); err != nil {
				t.Fatal(err)
			}
			rs, err := st.(store.Store).Receipts(context.Background(), store.ReceiptFilter{Activity: "GetBalance"})
			if err != nil || len(rs) != 1 {
				t.Fatalf("%d read receipts (%v) when the read returned; want 1", len(rs), err)
			}
		})
	}
}

// SkipReadReceipts stores no read receipt, queued or not.
func TestSkipReadReceiptsQueuesNothing(t *testing.T) {
	st := newBatchStore(store.DurabilityClaim)
	g := newReadGate(t, interceptor.Options{Store: st, SkipReadReceipts: true})
	if err := g.run(t, "GetBalance"); err != nil {
		t.Fatal(err)
	}
	if err := interceptor.Flush(context.Background(), g.gate); err != nil {
		t.Fatal(err)
	}
	if rs := st.reads(t); len(rs) != 0 || st.batches.Load() != 0 || st.appends.Load() != 0 {
		t.Fatalf("%d read receipts, %d batches, %d appends; want none", len(rs), st.batches.Load(), st.appends.Load())
	}
}

// The store's closing under a queued batch drops it counted, and the flusher ends.
func TestClosedStoreDropsQueuedReadReceiptsCounted(t *testing.T) {
	st := newBatchStore(store.DurabilityClaim)
	st.closed = true
	g := newReadGate(t, interceptor.Options{Store: st})
	if err := g.run(t, "GetBalance"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the closed store's batch to be dropped", func() bool { return g.counter(interceptor.MetricReadReceiptsDropped) == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := interceptor.Flush(ctx, g.gate); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(err)
	}
}
