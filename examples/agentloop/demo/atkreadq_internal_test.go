package demo

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memory"
)

// downStore is a store under store.DurabilityClaim (the gate queues read receipts)
// whose batches never go in: the disk is full, the file locked by another process.
type downStore struct{ *memory.Store }

func (downStore) Durability() store.Durability { return store.DurabilityClaim }

func (downStore) AppendReceipts(context.Context, []store.Receipt) error {
	return fmt.Errorf("down store: %w: database is locked (injected)", store.ErrUnavailable)
}

type stoppedWorker struct{ worker.Worker }

func (stoppedWorker) Stop() {}

// The demo's stop stores the queued read receipts, bounded: a store that never
// takes them must not hang StopWorker (and so Close) for ever.
func TestAtkReadqDemoStopDoesNotHangOnAStoreThatFails(t *testing.T) {
	gate, err := interceptor.New(interceptor.Options{Store: downStore{memory.New()}})
	if err != nil {
		t.Fatal(err)
	}
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := suite.NewTestActivityEnvironment()
	env.SetWorkerOptions(worker.Options{Interceptors: []sdkinterceptor.WorkerInterceptor{gate}})
	env.RegisterActivityWithOptions(func(context.Context) (string, error) { return "42", nil },
		activity.RegisterOptions{Name: "GetBalance"})
	if _, err := env.ExecuteActivity("GetBalance"); err != nil {
		t.Fatal(err)
	}
	saved := readFlushTimeout
	readFlushTimeout = time.Second
	defer func() { readFlushTimeout = saved }()
	d := &Demo{w: stoppedWorker{}, gate: gate}
	done := make(chan struct{})
	go func() {
		d.StopWorker()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("StopWorker still waits, 2 minutes on, for read receipts a failing store never takes")
	}
}
