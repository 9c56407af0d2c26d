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
