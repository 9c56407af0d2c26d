package interceptor

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memory"
)

// claimStore is a memory store under store.DurabilityClaim (the gate queues its
// read receipts) that counts its closes and refuses work once closed.
type claimStore struct {
	*memory.Store
	closes atomic.Int32
}

func (s *claimStore) Durability() store.Durability { return store.DurabilityClaim }

func (s *claimStore) Close() error {
	s.closes.Add(1)
	s.FailWith(fmt.Errorf("claim store: %w: %w", store.ErrUnavailable, store.ErrClosed))
	return nil
}

// The plugin's stop is a clean end of the process: when its last worker stops it
// stores every queued read receipt — before it closes the store (CloseStore), and
// before Stop returns when the caller closes the store itself.
func TestPluginStopFlushesQueuedReadReceipts(t *testing.T) {
	for _, closeStore := range []bool{false, true} {
		t.Run(fmt.Sprintf("CloseStore=%v", closeStore), func(t *testing.T) {
			st := &claimStore{Store: memory.New()}
			pl, err := NewPlugin(Options{Store: st}, PluginOptions{CloseStore: closeStore, ReconcileEvery: -1,
				Logger: log.NewStructuredLogger(slog.New(slog.DiscardHandler))})
			if err != nil {
				t.Fatal(err)
			}
			q := pl.gate.reads
			if q == nil {
				t.Fatal("no read receipt queue under store.DurabilityClaim")
			}
			q.every = time.Hour // only the stop flushes
			const n = 5
			for i := range n {
				q.push(context.Background(), store.Receipt{Time: time.Now(), Key: fmt.Sprint("k", i), Activity: "GetBalance",
					Effect: "read", Decision: store.DecisionRan}, log.NewStructuredLogger(slog.New(slog.DiscardHandler)), client.MetricsNopHandler)
			}
			// One worker started and stopping (what StartWorker and the SDK's Stop do).
			pl.workers["w1"] = &pluginWorker{started: true}
			pl.running = 1
			stopped := false
			pl.StopWorker(context.Background(), worker.PluginStopWorkerOptions{WorkerInstanceKey: "w1"},
				func(context.Context, worker.PluginStopWorkerOptions) { stopped = true })
			if !stopped {
				t.Fatal("StopWorker did not stop the worker")
			}
			if closeStore && st.closes.Load() != 1 {
				t.Fatalf("%d closes; want the store closed once", st.closes.Load())
			}
			st.FailWith(nil)
			rs, err := st.Receipts(context.Background(), store.ReceiptFilter{Activity: "GetBalance"})
			if err != nil || len(rs) != n {
				t.Fatalf("%d read receipts stored (%v) when Stop returned; want all %d", len(rs), err, n)
			}
		})
	}
}

// oneByOneStore reports store.DurabilityClaim but cannot append a batch in one
// step (no store.ReceiptBatcher): the queue appends its receipts one by one. Its
// Append fails once, on the call failAt.
type oneByOneStore struct {
	store.Store   // not *memory.Store: its AppendReceipts must not be promoted
	calls, failAt atomic.Int64
}

func (s *oneByOneStore) Durability() store.Durability { return store.DurabilityClaim }

func (s *oneByOneStore) Append(ctx context.Context, r store.Receipt) error {
	if s.calls.Add(1) == s.failAt.Load() {
		return fmt.Errorf("one by one: %w: connection reset (injected)", store.ErrUnavailable)
	}
	return s.Store.Append(ctx, r)
}

// A store that appends one receipt at a time and fails within a batch: the retry
// appends only the receipts not yet stored, so each read has exactly one receipt.
func TestReadBatchRetryDoesNotDuplicate(t *testing.T) {
	st := &oneByOneStore{Store: memory.New()}
	st.failAt.Store(3) // the third receipt of the one batch
	o, err := Options{Store: st}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	q := newRoot(o).reads
	q.every = time.Hour // one batch, taken by the flush below
	for i := range 5 {
		q.push(context.Background(), store.Receipt{Time: time.Now(), Key: fmt.Sprint("k", i), Activity: "GetBalance",
			Effect: "read", Decision: store.DecisionRan}, log.NewStructuredLogger(slog.New(slog.DiscardHandler)), client.MetricsNopHandler)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := q.wait(ctx); err != nil {
		t.Fatal(err)
	}
	rs, err := st.Receipts(ctx, store.ReceiptFilter{Activity: "GetBalance"})
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]int{}
	for _, r := range rs {
		keys[r.Key]++
	}
	if len(rs) != 5 || len(keys) != 5 || q.stats.failures.Load() != 1 {
		t.Fatalf("%d read receipts for %d reads (%v), %d failures; want each read's receipt once after one failure",
			len(rs), len(keys), keys, q.stats.failures.Load())
	}
}
