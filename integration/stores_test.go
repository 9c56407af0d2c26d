package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memory"
)

// ChargeUntilDone charges once, retrying without limit: which worker takes which
// attempt is up to the server.
func ChargeUntilDone(ctx workflow.Context) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 50 * time.Millisecond, BackoffCoefficient: 1}})
	var r string
	err := workflow.ExecuteActivity(ctx, "ChargeCard", 0).Get(ctx, &r)
	return r, err
}

// decisions collects a gate's decisions through Options.Observer.
type decisions struct {
	mu  sync.Mutex
	all []interceptor.Decision
	ch  chan interceptor.Decision
}

func newDecisions() *decisions { return &decisions{ch: make(chan interceptor.Decision, 100)} }

func (d *decisions) observe(_ context.Context, x interceptor.Decision) {
	d.mu.Lock()
	d.all = append(d.all, x)
	d.mu.Unlock()
	select {
	case d.ch <- x:
	default:
	}
}

// noIdentity is a store whose workflow worker says nothing of its identity, as a
// worker of an idemgate before it does.
type noIdentity struct{ store.Store }

func (noIdentity) Identity() string { return "" }

// Issue 18 item 13: two fleets on different stores gate one task queue (a leftover
// worker with another store). The workflow worker on store A puts A's identity
// beside the key; the leftover activity worker on store B refuses the write
// (retryable, nothing claimed or run there), naming both stores, and a worker on
// store A runs it: one charge, claimed in A only. Before, B claimed the key in its
// own store and charged, unseen by A. A header without an identity (an older
// workflow worker) is accepted as before.
func TestRealServerTwoFleetsOnDifferentStores(t *testing.T) {
	for _, tc := range []struct {
		name        string
		wfStore     func(a *memory.Store) store.Gate
		wantRefusal bool
	}{
		{"the identity travels with the key", func(a *memory.Store) store.Gate { return a }, true},
		{"a header without an identity is accepted", func(a *memory.Store) store.Gate { return noIdentity{a} }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := server.GetDefaultClient()
			queue := fmt.Sprintf("q-fleets-%d", time.Now().UnixNano())
			storeA, storeB := memory.New(), memory.New()
			start := func(opts interceptor.Options, workflows bool, tl *tools) worker.Worker {
				gate, err := interceptor.New(opts)
				if err != nil {
					t.Fatal(err)
				}
				// The workflow worker polls no activities (it has none), the others no workflows.
				w := worker.New(c, queue, worker.Options{Interceptors: []sdkinterceptor.WorkerInterceptor{gate},
					DisableWorkflowWorker: !workflows, LocalActivityWorkerOnly: workflows})
				if workflows {
					w.RegisterWorkflow(ChargeUntilDone)
				} else {
					w.RegisterActivity(tl)
				}
				if err := w.Start(); err != nil {
					t.Fatal(err)
				}
				return w
			}
			wfWorker := start(interceptor.Options{Store: tc.wfStore(storeA)}, true, nil)
			defer wfWorker.Stop()
			vB, seenB := newVendor(), newDecisions()
			leftover := start(interceptor.Options{Store: storeB, Observer: seenB.observe}, false, &tools{v: vB})
			stopped := false
			defer func() {
				if !stopped {
					leftover.Stop()
				}
			}()

			run, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: queue, TaskQueue: queue,
				WorkflowExecutionTimeout: 2 * time.Minute}, ChargeUntilDone)
			if err != nil {
				t.Fatal(err)
			}
			// Only the leftover worker polls for activities: it takes attempt 1.
			var first interceptor.Decision
			select {
			case first = <-seenB.ch:
			case <-time.After(time.Minute):
				t.Fatal("the leftover worker never took the activity")
			}
			if !tc.wantRefusal {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				var out string
				if err := run.Get(ctx, &out); err != nil || first.Decision != string(store.DecisionRan) || vB.total() != 1 {
					t.Fatalf("header without an identity: %v, decision %q, vendor %d; want it run as before", err, first.Decision, vB.total())
				}
				return
			}
			if first.Decision != "refused-wrong-store" || first.ErrorType != interceptor.ErrTypeWrongStore || !first.Refused() {
				t.Fatalf("the leftover worker's decision: %+v; want refused-wrong-store (%s)", first, interceptor.ErrTypeWrongStore)
			}
			for _, want := range []string{storeA.Identity(), storeB.Identity(), "ChargeCard", "Next step"} {
				if !strings.Contains(first.Err.Error(), want) {
					t.Errorf("the refusal does not name %q: %v", want, first.Err)
				}
			}
			leftover.Stop()
			stopped = true
			// A worker on the right store takes a later attempt.
			vA := newVendor()
			right := start(interceptor.Options{Store: storeA}, false, &tools{v: vA})
			defer right.Stop()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var out string
			if err := run.Get(ctx, &out); err != nil {
				t.Fatalf("workflow: %v", err)
			}
			if vB.total() != 0 || vA.total() != 1 {
				t.Fatalf("charges on the leftover fleet %d, on the right one %d; want 0 and 1", vB.total(), vA.total())
			}
			key := strings.TrimPrefix(out, "done:")
			if r, err := storeA.Get(context.Background(), key); err != nil || r.State != store.StateCompleted {
				t.Fatalf("store A: %+v, %v; want the key completed", r, err)
			}
			if _, err := storeB.Get(context.Background(), key); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("store B holds the key: %v; want nothing claimed there", err)
			}
		})
	}
}
