package interceptor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memory"
	"github.com/idemgate/idemgate/store/sqlite"
)

var atkDiscard = log.NewStructuredLogger(slog.New(slog.DiscardHandler))

func atkRead(i int) store.Receipt {
	return store.Receipt{Time: time.Now(), Key: fmt.Sprint("k-", i), Activity: "GetBalance", Effect: "read",
		Decision: store.DecisionRan, WorkflowID: "wf-atk"}
}

// Flush promises to return once the queued receipts are stored, "or with an error".
// When the store was closed under the queue (the caller closed it before Flush, or
// a second gate's plugin closed the shared store), the flusher drops them: Flush
// must say so, not return nil as if they were stored.
func TestAtkReadqFlushAfterCloseSaysReceiptsWereLost(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	q := newReadQueue(st, 16)
	q.every = time.Hour // only Flush appends
	q.setLogger(atkDiscard)
	for i := range 3 {
		q.push(context.Background(), atkRead(i), atkDiscard, client.MetricsNopHandler)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = q.wait(ctx)
	if err == nil {
		t.Fatalf("Flush after the store closed = nil; %d receipts were dropped (not stored): want an error saying so",
			q.stats.dropped.Load())
	}
	if ctx.Err() != nil {
		t.Fatalf("Flush waited for its deadline (%v); want it to return once the receipts were dropped", err)
	}
	if !strings.Contains(err.Error(), "3 read receipts") {
		t.Fatalf("Flush = %v; want it to name the 3 read receipts not stored", err)
	}
}

// refusingStore is a store under DurabilityClaim whose batches are all or none
// and which refuses a receipt whose text holds a NUL byte, as PostgreSQL's text
// does ("invalid byte sequence for encoding UTF8: 0x00", SQLSTATE 22021: not
// store.ErrUnavailable; the store is up).
type refusingStore struct {
	*memory.Store
}

func (s *refusingStore) Durability() store.Durability { return store.DurabilityClaim }

func (s *refusingStore) refuses(r store.Receipt) bool { return strings.ContainsRune(r.Error, 0) }

func (s *refusingStore) Append(ctx context.Context, r store.Receipt) error {
	if s.refuses(r) {
		return errors.New("refusing store: invalid byte sequence for encoding \"UTF8\": 0x00 (SQLSTATE 22021)")
	}
	return s.Store.Append(ctx, r)
}

func (s *refusingStore) AppendReceipts(ctx context.Context, rs []store.Receipt) error {
	for _, r := range rs {
		if s.refuses(r) {
			return errors.New("refusing store: invalid byte sequence for encoding \"UTF8\": 0x00 (SQLSTATE 22021)")
		}
	}
	return s.Store.AppendReceipts(ctx, rs)
}

// A read's receipt carries the read's error text, which comes from a vendor and
// may hold bytes the store refuses. On the path (strict, and before the queue)
// that lost one receipt, logged. In a batch (all or none) the one receipt must
// not poison the queue: the batch was retried for ever, every later read's
// receipt queued behind it, and once the queue filled they were all dropped.
func TestAtkReadqOneRefusedReceiptDoesNotPoisonTheQueue(t *testing.T) {
	st := &refusingStore{Store: memory.New()}
	q := newReadQueue(st, 8)
	q.every = time.Hour
	q.setLogger(atkDiscard)
	bad := atkRead(0)
	bad.Error = "vendor said: \x00 binary"
	q.push(context.Background(), bad, atkDiscard, client.MetricsNopHandler)
	for i := 1; i <= 4; i++ {
		q.push(context.Background(), atkRead(i), atkDiscard, client.MetricsNopHandler)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := q.wait(ctx)
	if ctx.Err() != nil {
		t.Fatalf("Flush did not end before its deadline (%v): the one refused receipt holds every other one back", err)
	}
	rs, rerr := st.Receipts(context.Background(), store.ReceiptFilter{WorkflowID: "wf-atk"})
	if rerr != nil || len(rs) != 4 {
		t.Fatalf("%d receipts stored (%v); want the 4 the store takes", len(rs), rerr)
	}
	if got := q.stats.dropped.Load(); got != 1 {
		t.Fatalf("%d receipts dropped; want only the refused one, counted", got)
	}
	if err == nil || !strings.Contains(err.Error(), "1 read receipt") {
		t.Fatalf("Flush = %v; want an error naming the 1 read receipt not stored", err)
	}
	// The queue goes on taking reads afterwards.
	q.push(context.Background(), atkRead(9), atkDiscard, client.MetricsNopHandler)
	if err := q.wait(ctx); err != nil {
		t.Fatalf("Flush of a good receipt after the refused one = %v", err)
	}
}

// flakyStore reports DurabilityClaim but has no ReceiptBatcher (a custom store):
// store.AppendReceipts falls back to one Append at a time. Its failAt-th Append
// fails once with store.ErrUnavailable.
type flakyStore struct {
	*memory.Store
	mu     sync.Mutex
	calls  int
	failAt int
}

func (s *flakyStore) Durability() store.Durability { return store.DurabilityClaim }

func (s *flakyStore) Append(ctx context.Context, r store.Receipt) error {
	s.mu.Lock()
	s.calls++
	fail := s.calls == s.failAt
	s.mu.Unlock()
	if fail {
		return fmt.Errorf("flaky store: %w: connection reset (once)", store.ErrUnavailable)
	}
	return s.Store.Append(ctx, r)
}

// A custom store without ReceiptBatcher gets each receipt exactly once: a batch
// that failed half-way is retried from where it stopped, not from its start (which
// stored the receipts before the failure twice).
func TestAtkReadqCustomStoreRetryStoresEachReceiptOnce(t *testing.T) {
	f := &flakyStore{Store: memory.New(), failAt: 3}
	st := struct {
		store.Store
		store.DurabilityReporter
	}{f.Store, f}
	st.Store = storeWithAppend{Store: f.Store, append: f.Append}
	if _, ok := any(st).(store.ReceiptBatcher); ok {
		t.Fatal("the custom store must not be a ReceiptBatcher")
	}
	q := newReadQueue(st, 16)
	q.every = time.Hour
	q.setLogger(atkDiscard)
	for i := range 5 {
		q.push(context.Background(), atkRead(i), atkDiscard, client.MetricsNopHandler)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := q.wait(ctx); err != nil {
		t.Fatal(err)
	}
	rs, err := f.Store.Receipts(context.Background(), store.ReceiptFilter{WorkflowID: "wf-atk"})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, r := range rs {
		seen[r.Key]++
	}
	for i := range 5 {
		if n := seen[fmt.Sprint("k-", i)]; n != 1 {
			t.Errorf("receipt k-%d stored %d times; want once (all stored: %d)", i, n, len(rs))
		}
	}
}

// storeWithAppend is a store.Store whose Append is append (and nothing more: no
// ReceiptBatcher).
type storeWithAppend struct {
	store.Store
	append func(context.Context, store.Receipt) error
}

func (s storeWithAppend) Append(ctx context.Context, r store.Receipt) error { return s.append(ctx, r) }

// A store closed under a running flusher (the caller closed it without Flush):
// no panic, the flusher drops what it held (counted) and ends — no goroutine is
// left behind — and a Flush afterwards returns at once.
func TestAtkReadqStoreClosedUnderTheFlusherLeavesNoGoroutine(t *testing.T) {
	base := runtime.NumGoroutine()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	q := newReadQueue(st, 64)
	q.setLogger(atkDiscard)
	for i := range 10 {
		q.push(context.Background(), atkRead(i), atkDiscard, client.MetricsNopHandler)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		q.mu.Lock()
		running, held := q.running, q.held
		q.mu.Unlock()
		if !running && held == 0 && runtime.NumGoroutine() <= base {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a minute after Close: flusher running %v, %d receipts held, %d goroutines (were %d)", running, held,
				runtime.NumGoroutine(), base)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := q.stats.appended.Load() + q.stats.dropped.Load(); got != 10 {
		t.Fatalf("%d receipts appended or dropped; want all 10 accounted for", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := q.wait(ctx); err != nil {
		t.Fatalf("Flush with nothing held = %v", err)
	}
	// A read after the close: its receipt is queued and dropped counted, no panic.
	q.push(context.Background(), atkRead(99), atkDiscard, client.MetricsNopHandler)
	if err := q.wait(ctx); err == nil || ctx.Err() != nil {
		t.Fatalf("Flush of a receipt queued after Close = %v; want the drop reported at once", err)
	}
}

// blockingStore's batches wait until release is closed (or their context ends).
type blockingStore struct {
	*memory.Store
	release chan struct{}
}

func (s *blockingStore) Durability() store.Durability { return store.DurabilityClaim }

func (s *blockingStore) AppendReceipts(ctx context.Context, rs []store.Receipt) error {
	select {
	case <-s.release:
	case <-ctx.Done():
		return fmt.Errorf("blocking store: %w: %w", store.ErrUnavailable, ctx.Err())
	}
	return s.Store.AppendReceipts(ctx, rs)
}

// A full queue on a store that does not answer: a read whose context ends while
// it waits for room returns (its receipt dropped, counted), it does not deadlock;
// stop wakes the readers still waiting, and Flush bounded by its context returns.
func TestAtkReadqFullQueueOnABlockedStoreNeverDeadlocks(t *testing.T) {
	st := &blockingStore{Store: memory.New(), release: make(chan struct{})}
	q := newReadQueue(st, 2)
	q.every = time.Millisecond
	q.setLogger(atkDiscard)
	q.push(context.Background(), atkRead(0), atkDiscard, client.MetricsNopHandler)
	q.push(context.Background(), atkRead(1), atkDiscard, client.MetricsNopHandler)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		q.push(ctx, atkRead(2), atkDiscard, client.MetricsNopHandler)
		close(done)
	}()
	deadline := time.Now().Add(time.Minute)
	for q.stats.waited.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the third read never waited for room in the full queue")
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("a read whose context ended while it waited for room did not return")
	}
	if q.stats.dropped.Load() != 1 {
		t.Fatalf("%d dropped; want the cancelled read's receipt, counted", q.stats.dropped.Load())
	}
	fctx, fcancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer fcancel()
	if err := q.wait(fctx); err == nil {
		t.Fatal("Flush on a blocked store = nil; want its context's error")
	}
	close(st.release)
	ctx2, cancel2 := context.WithTimeout(context.Background(), time.Minute)
	defer cancel2()
	if err := q.wait(ctx2); err != nil {
		t.Fatalf("Flush once the store answers = %v", err)
	}
	rs, _ := st.Receipts(context.Background(), store.ReceiptFilter{WorkflowID: "wf-atk"})
	if len(rs) != 2 {
		t.Fatalf("%d receipts stored; want the 2 queued", len(rs))
	}
}

// A full queue smaller than a batch (Options.ReadReceiptQueue below 256) must
// make the flusher append now: a read waiting for room waited out the whole
// interval (here an hour; 100 ms by default, so such a gate did at most
// ReadReceiptQueue reads per 100 ms) or was dropped when its context ended first.
func TestAtkReadqFullSmallQueueWakesTheFlusher(t *testing.T) {
	st := &refusingStore{Store: memory.New()}
	q := newReadQueue(st, 2)
	q.every = time.Hour
	q.setLogger(atkDiscard)
	for i := range 2 {
		q.push(context.Background(), atkRead(i), atkDiscard, client.MetricsNopHandler)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	q.push(ctx, atkRead(2), atkDiscard, client.MetricsNopHandler)
	if ctx.Err() != nil || q.stats.dropped.Load() != 0 {
		t.Fatalf("the read waiting for room in a full queue of 2 waited %v for the flusher's interval and dropped %d",
			30*time.Second, q.stats.dropped.Load())
	}
	if q.stats.waited.Load() != 1 {
		t.Fatalf("waited = %d; want the third read counted as waiting", q.stats.waited.Load())
	}
}
