package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/internal/storeopen"
	"github.com/idemgate/idemgate/store"
)

// losingStore loses every Complete, as an operating-system crash loses a
// completion committed without its own sync: Temporal has the result, the store
// still holds the claim.
type losingStore struct{ storeopen.Store }

func (losingStore) Complete(context.Context, store.Transition) error { return nil }

// reconVendor charges; a workflow whose ID contains "fails" reaches the vendor and
// then loses the connection.
type reconVendor struct {
	mu    sync.Mutex
	calls int
}

func (v *reconVendor) ChargeCard(ctx context.Context, amount int) (ChargeResult, error) {
	v.mu.Lock()
	v.calls++
	n := v.calls
	v.mu.Unlock()
	if strings.Contains(activity.GetInfo(ctx).WorkflowExecution.ID, "fails") {
		return ChargeResult{}, errors.New("connection reset after the request was written")
	}
	return ChargeResult{ID: fmt.Sprintf("ch_%d", n), Amount: amount}, nil
}

// ChargeOnce charges once, without retries, inside a short timeout (the claim's
// lease passes soon after).
func ChargeOnce(ctx workflow.Context, amount int) (ChargeResult, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 2 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}})
	var r ChargeResult
	err := workflow.ExecuteActivity(ctx, "ChargeCard", amount).Get(ctx, &r)
	return r, err
}

// reconcile --dry-run prints what Temporal's history says of each pending key and
// settles nothing; reconcile settles the key whose activity completed in history
// (the store lost the completion) as sent with that result, by witness:temporal;
// the key whose history shows a failure stays pending and says it cannot tell.
func TestReconcileSettlesFromTemporalHistory(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		st := openStore(t, b)
		gate, err := interceptor.New(interceptor.Options{Store: losingStore{st}, ClockSkew: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		c := server.GetDefaultClient()
		queue := fmt.Sprintf("recon-%s-%d", t.Name(), time.Now().UnixNano())
		w := worker.New(c, queue, worker.Options{Interceptors: []sdkinterceptor.WorkerInterceptor{gate}})
		w.RegisterWorkflow(ChargeOnce)
		v := &reconVendor{}
		w.RegisterActivity(v)
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Stop)
		ids := map[string]string{}
		for _, name := range []string{"done", "fails"} {
			id := fmt.Sprintf("recon-%s-%s", name, b.name)
			run, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: id, TaskQueue: queue, WorkflowExecutionTimeout: time.Minute}, ChargeOnce, 4200)
			if err != nil {
				t.Fatal(err)
			}
			out, err := outcome(t, run)
			if (err == nil) != (name == "done") {
				t.Fatalf("workflow %s: %+v, %v", id, out, err)
			}
			ids[id] = name
		}
		temporalFlags := []string{"--store", b.spec, "--temporal-address", server.GetFrontendHostPort(),
			"--namespace", server.GetDefaultNamespace()}
		keys := map[string]string{} // "done"/"fails" -> key
		var dry []reconciledJSON
		waitFor(t, "both keys in `idemgate reconcile --dry-run` once their leases passed", func() bool {
			dry = decodeJSON[struct {
				Keys []reconciledJSON `json:"keys"`
			}](t, ok(t, append([]string{"reconcile", "--dry-run", "--json"}, temporalFlags...)...)).Keys
			for _, j := range dry {
				if name, mine := ids[j.WorkflowID]; mine {
					keys[name] = j.Key
				}
			}
			return len(keys) == 2
		})
		before := snap(t, st, keys["done"], keys["fails"])
		for _, j := range dry {
			switch ids[j.WorkflowID] {
			case "done":
				if !j.Settled || j.By != "temporal" || j.Verdict != "sent" || len(j.Said) != 1 ||
					!strings.Contains(j.Said[0].Evidence, "ActivityTaskCompleted") {
					t.Fatalf("dry run of the completed charge: %+v", j)
				}
			case "fails":
				if j.Settled || len(j.Said) != 1 || j.Said[0].Verdict != "cannot tell" ||
					!strings.Contains(j.Said[0].Evidence, "ActivityTaskFailed") {
					t.Fatalf("dry run of the failed charge: %+v", j)
				}
			}
		}
		text := ok(t, append([]string{"reconcile", "--dry-run"}, temporalFlags...)...)
		if !strings.Contains(text.stdout, "would settle: sent by witness temporal") || !strings.Contains(text.stdout, "cannot tell") {
			t.Fatalf("dry run text:\n%s", text)
		}
		unchanged(t, before, st, keys["done"], keys["fails"])

		out := ok(t, append([]string{"reconcile"}, temporalFlags...)...)
		if !strings.Contains(out.stdout, "settled: sent by witness temporal") ||
			!strings.Contains(out.stdout, "not settled: cannot tell; it stays pending") {
			t.Fatalf("reconcile:\n%s", out)
		}
		rec, err := st.Get(context.Background(), keys["done"])
		if err != nil || rec.State != store.StateCompleted {
			t.Fatalf("the completed charge after reconcile: %+v, %v", rec, err)
		}
		rs := decodeJSON[[]receiptJSON](t, ok(t, "receipts", "--store", b.spec, "--json", "--key", keys["done"], "--decision", "resolved"))
		if len(rs) != 1 || rs[0].Actor != "witness:temporal" || rs[0].Resolution != "sent" || !strings.Contains(rs[0].Reason, "ActivityTaskCompleted") {
			t.Fatalf("resolution receipts: %+v", rs)
		}
		if rec, err := st.Get(context.Background(), keys["fails"]); err != nil || rec.State == store.StateCompleted || rec.State == store.StateReleased {
			t.Fatalf("the failed charge after reconcile: %+v, %v", rec, err)
		}
		if fails := decodeJSON[[]receiptJSON](t, ok(t, "receipts", "--store", b.spec, "--json", "--key", keys["fails"], "--decision", "resolved")); len(fails) != 0 {
			t.Fatalf("the failed charge was settled: %+v", fails)
		}
		if v.calls != 2 {
			t.Fatalf("vendor calls %d, want 2", v.calls)
		}
	})
}

// A key whose history Temporal cannot be asked about (here a run ID Temporal
// rejects) is reported, settles nothing, and makes reconcile exit 1; a key whose
// workflow Temporal does not have cannot tell (never "not sent") and stays pending.
func TestReconcileExitsNonZeroWhenAKeyCannotBeAsked(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		st := openStore(t, b)
		at := time.Now().Add(-time.Hour)
		seedRun(t, st, "key-bad-run", "wf-bad-run-"+b.name, "not-a-run-id", at, at.Add(time.Minute), "abandon")
		seedRun(t, st, "key-gone", "wf-gone-"+b.name, "6a1c1e5e-0000-4000-8000-000000000000", at, at.Add(time.Minute), "abandon")
		before := snap(t, st, "key-bad-run", "key-gone")
		r := idem(t, "reconcile", "--store", b.spec, "--temporal-address", server.GetFrontendHostPort(),
			"--namespace", server.GetDefaultNamespace())
		if r.code != exitFail || !strings.Contains(r.stderr, "could not be asked") ||
			!strings.Contains(r.stdout, "key-bad-run") || !strings.Contains(r.stdout, "witness temporal: error:") {
			t.Fatalf("reconcile with a key Temporal cannot be asked about:\n%s", r)
		}
		if !strings.Contains(r.stdout, "not settled: cannot tell; it stays pending") {
			t.Fatalf("the workflow Temporal does not have:\n%s", r)
		}
		unchanged(t, before, st, "key-bad-run", "key-gone")
	})
}
