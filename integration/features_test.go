package integration

// The Temporal feature matrix (docs/proof.md, "Temporal feature matrix"): one test per
// feature, on the in-process server, counting vendor calls and checking keys.

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/store"
)

// registerFeatures registers the workflows of this file on every rig worker.
func registerFeatures(w worker.Registry) {
	w.RegisterWorkflow(Calls)
	w.RegisterWorkflow(Tipped)
	w.RegisterWorkflow(TippedByUpdate)
	w.RegisterWorkflow(ChildTippedByUpdate)
	w.RegisterWorkflow(ChargeAmount)
}

// step is one activity call of the Calls workflow, or a wait for the signal "go".
type step struct {
	Activity string
	N        int    // the argument
	Key      string // WithKey, when set
	Local    bool
	Queue    string        // the activity's task queue; "" is the workflow's
	Timeout  time.Duration // StartToCloseTimeout; 0 is 10 s
	Wait     bool
}

// Calls runs steps in order and returns the results; it stops at the first error.
func Calls(ctx workflow.Context, steps []step) ([]string, error) {
	var out []string
	for _, s := range steps {
		if s.Wait {
			workflow.GetSignalChannel(ctx, "go").Receive(ctx, nil)
			continue
		}
		cctx := ctx
		if s.Key != "" {
			cctx = interceptor.WithKey(cctx, s.Key)
		}
		timeout := cmp.Or(s.Timeout, 10*time.Second)
		var f workflow.Future
		if s.Local {
			f = workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(cctx, workflow.LocalActivityOptions{
				StartToCloseTimeout: timeout, RetryPolicy: retry}), s.Activity, s.N)
		} else {
			f = workflow.ExecuteActivity(workflow.WithActivityOptions(cctx, workflow.ActivityOptions{
				TaskQueue: s.Queue, StartToCloseTimeout: timeout, RetryPolicy: retry}), s.Activity, s.N)
		}
		var r string
		if err := f.Get(ctx, &r); err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

// Tipped charges the order (100) once the signal "go" comes; a coroutine charges
// the tip (7) when the signal "tip" brings its ID — under WithKey("tip/ID/charge")
// when byKey. It returns the order's and the tip's results.
func Tipped(ctx workflow.Context, byKey bool) ([]string, error) {
	var tip string
	var tipErr error
	tipped := false
	workflow.Go(ctx, func(ctx workflow.Context) {
		var id string
		workflow.GetSignalChannel(ctx, "tip").Receive(ctx, &id)
		cctx := actx(ctx)
		if byKey {
			cctx = interceptor.WithKey(cctx, "tip/"+id+"/charge")
		}
		tipErr = workflow.ExecuteActivity(cctx, "ChargeCard", 7).Get(ctx, &tip)
		tipped = true
	})
	workflow.GetSignalChannel(ctx, "go").Receive(ctx, nil)
	var order string
	if err := workflow.ExecuteActivity(actx(ctx), "ChargeCard", 100).Get(ctx, &order); err != nil {
		return nil, err
	}
	if err := workflow.Await(ctx, func() bool { return tipped }); err != nil {
		return nil, err
	}
	if tipErr != nil {
		return nil, tipErr
	}
	return []string{order, tip}, nil
}

// TippedByUpdate charges the order (100) once the signal "go" comes; the update
// "tip" charges its amount. It returns the order's result, then the tips'.
func TippedByUpdate(ctx workflow.Context) ([]string, error) {
	var tips []string
	err := workflow.SetUpdateHandler(ctx, "tip", func(ctx workflow.Context, amount int) (string, error) {
		var r string
		if err := workflow.ExecuteActivity(actx(ctx), "ChargeCard", amount).Get(ctx, &r); err != nil {
			return "", err
		}
		tips = append(tips, r)
		return r, nil
	})
	if err != nil {
		return nil, err
	}
	workflow.GetSignalChannel(ctx, "go").Receive(ctx, nil)
	var order string
	if err := workflow.ExecuteActivity(actx(ctx), "ChargeCard", 100).Get(ctx, &order); err != nil {
		return nil, err
	}
	if err := workflow.Await(ctx, func() bool { return len(tips) > 0 && workflow.AllHandlersFinished(ctx) }); err != nil {
		return nil, err
	}
	return append([]string{order}, tips...), nil
}

// ChargeAmount is a child workflow that charges amount.
func ChargeAmount(ctx workflow.Context, amount int) (string, error) {
	var r string
	err := workflow.ExecuteActivity(actx(ctx), "ChargeCard", amount).Get(ctx, &r)
	return r, err
}

// ChildTippedByUpdate is TippedByUpdate with each charge in a child workflow
// (ChargeAmount): the order's child (100) once the signal "go" comes, the tip's
// child from the update "tip". With explicitIDs every child has its own WorkflowID.
func ChildTippedByUpdate(ctx workflow.Context, explicitIDs bool) ([]string, error) {
	child := func(ctx workflow.Context, id string, amount int) (string, error) {
		var o workflow.ChildWorkflowOptions
		if explicitIDs {
			o.WorkflowID = workflow.GetInfo(ctx).WorkflowExecution.ID + "-" + id
		}
		var r string
		err := workflow.ExecuteChildWorkflow(workflow.WithChildOptions(ctx, o), ChargeAmount, amount).Get(ctx, &r)
		return r, err
	}
	var tips []string
	err := workflow.SetUpdateHandler(ctx, "tip", func(ctx workflow.Context, amount int) (string, error) {
		r, err := child(ctx, "tip-"+workflow.GetCurrentUpdateInfo(ctx).ID, amount)
		if err != nil {
			return "", err
		}
		tips = append(tips, r)
		return r, nil
	})
	if err != nil {
		return nil, err
	}
	workflow.GetSignalChannel(ctx, "go").Receive(ctx, nil)
	order, err := child(ctx, "order", 100)
	if err != nil {
		return nil, err
	}
	if err := workflow.Await(ctx, func() bool { return len(tips) > 0 && workflow.AllHandlersFinished(ctx) }); err != nil {
		return nil, err
	}
	return append([]string{order}, tips...), nil
}

// waitFor polls cond until it holds, failing the test after 30 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// scheduled is an activity's idemgate header as the ActivityTaskScheduled event
// recorded it: the minted key, or the WithKey business key.
type scheduled struct {
	Activity string
	Key      string `json:"k"`
	Business string `json:"b"`
}

func scheduledCalls(t *testing.T, events []*historypb.HistoryEvent) []scheduled {
	t.Helper()
	var out []scheduled
	for _, e := range events {
		a := e.GetActivityTaskScheduledEventAttributes()
		if a == nil {
			continue
		}
		s := scheduled{Activity: a.GetActivityType().GetName()}
		if p := a.GetHeader().GetFields()["idemgate"]; p != nil {
			if err := json.Unmarshal(p.GetData(), &s); err != nil {
				t.Fatal(err)
			}
		}
		out = append(out, s)
	}
	return out
}

// resetToFirstTask resets the run to the end of its first workflow task — before
// anything it scheduled — and returns the new run's ID. Signals and updates received
// after that point are re-applied (the server's default).
func (r *rig) resetToFirstTask(id, runID string) string {
	r.t.Helper()
	var resetTo int64
	for _, e := range r.history(id, runID) {
		if e.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
			resetTo = e.GetEventId()
			break
		}
	}
	resp, err := r.c.ResetWorkflowExecution(context.Background(), &workflowservice.ResetWorkflowExecutionRequest{
		Namespace:                 server.GetDefaultNamespace(),
		WorkflowExecution:         &commonpb.WorkflowExecution{WorkflowId: id, RunId: runID},
		Reason:                    "test reset",
		WorkflowTaskFinishEventId: resetTo,
		RequestId:                 fmt.Sprint(time.Now().UnixNano()),
	})
	if err != nil {
		r.t.Fatal(err)
	}
	return resp.GetRunId()
}

// worker starts another worker with the rig's gate on queue; register adds what it runs.
func (r *rig) worker(queue string, opts worker.Options, register func(worker.Registry)) worker.Worker {
	r.t.Helper()
	opts.Interceptors = []sdkinterceptor.WorkerInterceptor{r.gate}
	w := worker.New(r.c, queue, opts)
	register(w)
	if err := w.Start(); err != nil {
		r.t.Fatal(err)
	}
	return w
}

func (r *rig) signal(id, runID, name string, arg any) {
	r.t.Helper()
	if err := r.c.SignalWorkflow(context.Background(), id, runID, name, arg); err != nil {
		r.t.Fatal(err)
	}
}

// failOn makes the listed attempts fail: after reaching the vendor, or before (with
// interceptor.NotCommitted). It records the key every attempt saw.
type failOn struct {
	mu       sync.Mutex
	attempts map[int32]bool
	reached  bool
	seen     []string
}

func (f *failOn) fail(ctx context.Context) (error, bool) {
	key, _ := interceptor.KeyFromContext(ctx)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen = append(f.seen, key)
	if !f.attempts[activity.GetInfo(ctx).Attempt] {
		return nil, false
	}
	if f.reached {
		return errors.New("connection reset after the request was written"), true
	}
	return interceptor.NotCommitted(errors.New("connection refused")), false
}

func (f *failOn) keys() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.seen...)
}

func allEqual(keys []string) bool {
	for _, k := range keys {
		if k == "" || k != keys[0] {
			return false
		}
	}
	return len(keys) > 0
}

// Activity retry: attempts 1 to 3 carry one key. An idempotent write that reached
// the vendor runs again with it; a destructive one whose attempts provably sent
// nothing (NotCommitted) runs once, on attempt 3.
func TestFeatureActivityRetry(t *testing.T) {
	for _, c := range []struct {
		activity string
		reached  bool
		vendor   int
	}{{"UpsertContact", true, 3}, {"ChargeCard", false, 1}} {
		t.Run(c.activity, func(t *testing.T) {
			r := newRig(t, interceptor.Options{})
			f := &failOn{attempts: map[int32]bool{1: true, 2: true}, reached: c.reached}
			r.tools.fail = f.fail
			id := "feature-retry-" + c.activity
			run := r.start(id, Calls, []step{{Activity: c.activity}})
			out, err := r.result(run)
			if err != nil {
				t.Fatal(err)
			}
			seen, sched := f.keys(), scheduledCalls(t, r.history(id, run.GetRunID()))
			if len(seen) != 3 || !allEqual(seen) || len(sched) != 1 || sched[0].Key != seen[0] {
				t.Fatalf("attempt keys %q, scheduled %+v: want one key on attempts 1-3, the scheduled one", seen, sched)
			}
			if r.v.total() != c.vendor || out[0] != "done:"+seen[0] {
				t.Fatalf("vendor calls %d (want %d), result %q", r.v.total(), c.vendor, out)
			}
		})
	}
}

// Worker crash: attempt 1 reaches the vendor and its worker stops (the attempt never
// answers); a new worker gets attempt 2 after the StartToCloseTimeout. The
// destructive write is refused with the withheld call; the idempotent one runs again
// with the same key.
func TestFeatureWorkerCrash(t *testing.T) {
	for _, c := range []struct {
		activity    string
		destructive bool
	}{{"ChargeCard", true}, {"UpsertContact", false}} {
		t.Run(c.activity, func(t *testing.T) {
			r := newRig(t, interceptor.Options{})
			stuck := make(chan struct{})
			t.Cleanup(func() { close(stuck) }) // runs last: the stopped worker's attempt ends after the test
			r.tools.fail = func(ctx context.Context) (error, bool) {
				if activity.GetInfo(ctx).Attempt > 1 {
					return nil, false
				}
				r.v.hit(ctx)
				<-stuck // a dead worker: no answer, no record
				return errors.New("the worker was gone"), false
			}
			acts := r.queue + "-acts"
			crashing := r.worker(acts, worker.Options{DisableWorkflowWorker: true}, func(w worker.Registry) { w.RegisterActivity(r.tools) })
			id := "feature-crash-" + c.activity
			run := r.start(id, Calls, []step{{Activity: c.activity, Queue: acts, Timeout: 2 * time.Second}})
			waitFor(t, "attempt 1 to reach the vendor", func() bool { return r.v.total() == 1 })
			crashing.Stop()
			t.Cleanup(r.worker(acts, worker.Options{DisableWorkflowWorker: true}, func(w worker.Registry) { w.RegisterActivity(r.tools) }).Stop)

			out, err := r.result(run)
			k := r.v.keys()
			if c.destructive {
				var app *temporal.ApplicationError
				var withheld interceptor.WithheldCall
				if !errors.As(err, &app) || app.Type() != interceptor.ErrTypeInFlight || !app.NonRetryable() ||
					app.Details(&withheld) != nil || withheld.Key != k[0] || withheld.Activity != c.activity {
					t.Fatalf("workflow error %v (withheld %+v): want a final IdempotencyInFlight with the withheld call", err, withheld)
				}
				if len(k) != 1 {
					t.Fatalf("vendor keys %q: the destructive write must not run again", k)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(k) != 2 || k[0] != k[1] || out[0] != "done:"+k[0] {
				t.Fatalf("vendor keys %q, result %q: want the idempotent write re-run once with the same key", k, out)
			}
		})
	}
}

// Sticky-cache eviction: the cache is purged between two ChargeCard calls, so the
// second is minted by a replayed workflow. A second run of the same workflow ID
// (ScopeWorkflowID), never evicted, mints the same two keys: both calls return the
// stored results and the vendor is not called again.
func TestFeatureStickyCacheEviction(t *testing.T) {
	r := newRig(t, interceptor.Options{Scope: interceptor.ScopeWorkflowID})
	steps := []step{{Activity: "ChargeCard", N: 1}, {Wait: true}, {Activity: "ChargeCard", N: 2}}
	run := r.start("feature-evict", Calls, steps)
	waitFor(t, "the first charge", func() bool { return r.v.total() == 1 })
	worker.PurgeStickyWorkflowCache()
	r.signal("feature-evict", run.GetRunID(), "go", nil)
	first, err := r.result(run)
	if err != nil {
		t.Fatal(err)
	}
	if k := r.v.keys(); len(k) != 2 || k[0] == k[1] {
		t.Fatalf("after the purge: vendor keys %q, want two charges with distinct keys", k)
	}
	again := r.start("feature-evict", Calls, steps)
	r.signal("feature-evict", again.GetRunID(), "go", nil)
	second, err := r.result(again)
	if err != nil {
		t.Fatal(err)
	}
	if r.v.total() != 2 || fmt.Sprint(first) != fmt.Sprint(second) {
		t.Fatalf("run without eviction: vendor %d calls, results %q vs %q: the evicted run minted other keys", r.v.total(), second, first)
	}
}

// Workflow reset past a finished ChargeCard: the code runs again, the key is the
// same, the stored result comes back and the vendor is not called again.
func TestFeatureWorkflowReset(t *testing.T) {
	r := newRig(t, interceptor.Options{})
	run := r.start("feature-reset", Steps, []string{"ChargeCard", "GetBalance"})
	first, err := r.result(run)
	if err != nil {
		t.Fatal(err)
	}
	newRun := r.resetToFirstTask("feature-reset", run.GetRunID())
	again, err := r.result(r.c.GetWorkflow(context.Background(), "feature-reset", newRun))
	if err != nil {
		t.Fatal(err)
	}
	if again[0] != first[0] {
		t.Fatalf("after reset ChargeCard returned %q, want the stored %q", again[0], first[0])
	}
	if k := r.v.keys(); len(k) != 3 || k[0] == k[1] || k[2] != k[1] {
		// ChargeCard once, GetBalance twice (reads always run) with the same key.
		t.Fatalf("vendor keys after reset %q: ChargeCard must not run again", k)
	}
	before, after := scheduledCalls(t, r.history("feature-reset", run.GetRunID())), scheduledCalls(t, r.history("feature-reset", newRun))
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Fatalf("keys before the reset %+v, after %+v", before, after)
	}
	rs, _ := r.st.Receipts(context.Background(), store.ReceiptFilter{WorkflowID: "feature-reset", Decision: store.DecisionReplayed})
	if len(rs) != 1 || rs[0].Activity != "ChargeCard" {
		t.Fatalf("replayed receipts after reset: %+v", rs)
	}
}

// Workflow reset after the gate's window: a destructive write whose attempt reached
// the vendor with its outcome unknown is refused, and the reset run two days later
// — past the window (24 h) — is refused too: an unknown outcome is never forgotten
// by time (store.Expired), only by a person's resolve.
func TestFeatureResetAfterTheWindow(t *testing.T) {
	var mu sync.Mutex
	clock := time.Now()
	r := newRig(t, interceptor.Options{Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }})
	f := &failOn{attempts: map[int32]bool{1: true}, reached: true}
	r.tools.fail = f.fail
	run := r.start("feature-reset-window", Calls, []step{{Activity: "ChargeCard"}})
	if _, err := r.result(run); !strings.Contains(fmt.Sprint(err), interceptor.ErrTypeInFlight) {
		t.Fatalf("first run: %v; want attempt 2 refused (%s)", err, interceptor.ErrTypeInFlight)
	}
	mu.Lock()
	clock = clock.Add(48 * time.Hour)
	mu.Unlock()
	newRun := r.resetToFirstTask("feature-reset-window", run.GetRunID())
	_, err := r.result(r.c.GetWorkflow(context.Background(), "feature-reset-window", newRun))
	if !strings.Contains(fmt.Sprint(err), interceptor.ErrTypeInFlight) {
		t.Fatalf("reset run two days later: %v; want the unknown outcome still refused", err)
	}
	if n := r.v.total(); n != 1 {
		t.Fatalf("vendor calls %d, want 1: the reset past the window sent the charge again", n)
	}
}

// Workflow reset two days after a finished charge, with the default 24 h window
// (issue 18, item 14): Temporal can still reset the workflow (it is closed within
// the namespace's retention), so the finished destructive write's record is kept
// past its window and the reset run gets the stored result — the card is charged
// once. (Before, the record expired with the window, the reset run claimed the key
// afresh and charged again.) A sweep without Temporal's word keeps it too.
func TestFeatureResetAfterTheWindowOfAFinishedWrite(t *testing.T) {
	var mu sync.Mutex
	clock := time.Now()
	r := newRig(t, interceptor.Options{Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }})
	id := "feature-reset-finished-window"
	run := r.start(id, Calls, []step{{Activity: "ChargeCard"}})
	first, err := r.result(run)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	clock = clock.Add(48 * time.Hour)
	later := clock
	mu.Unlock()
	if _, err := r.st.Sweep(context.Background(), later, 0); err != nil {
		t.Fatal(err)
	}
	newRun := r.resetToFirstTask(id, run.GetRunID())
	again, err := r.result(r.c.GetWorkflow(context.Background(), id, newRun))
	if n := r.v.total(); n != 1 {
		t.Fatalf("vendor calls %d, want 1: the reset two days after the charge sent it again", n)
	}
	if err != nil {
		t.Fatalf("reset run two days later: %v", err)
	}
	if fmt.Sprint(again) != fmt.Sprint(first) {
		t.Fatalf("reset run returned %q, want the stored %q", again, first)
	}
}

// Workflow retry (a new run of the workflow ID after a failed run): the default
// scope makes it a new execution with new keys, a second charge; ScopeWorkflowID
// keeps the keys and returns the stored result.
func TestFeatureWorkflowRetry(t *testing.T) {
	for _, c := range []struct {
		scope   interceptor.Scope
		charges int
	}{{interceptor.ScopeWorkflowID, 1}, {interceptor.ScopeExecution, 2}} {
		t.Run(c.scope.String(), func(t *testing.T) {
			r := newRig(t, interceptor.Options{Scope: c.scope})
			id := "feature-wf-retry-" + c.scope.String()
			run, err := r.c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: id,
				TaskQueue: r.queue, WorkflowExecutionTimeout: time.Minute,
				RetryPolicy: &temporal.RetryPolicy{InitialInterval: 50 * time.Millisecond, MaximumAttempts: 2}}, ChargeThenFail)
			if err != nil {
				t.Fatal(err)
			}
			firstRun := run.GetRunID() // Get follows the retry and moves GetRunID to it
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var out string
			if err := run.Get(ctx, &out); err != nil {
				t.Fatal(err)
			}
			first, retried := scheduledCalls(t, r.history(id, firstRun)), scheduledCalls(t, r.history(id, run.GetRunID()))
			if len(first) != 1 || len(retried) != 1 || (first[0].Key == retried[0].Key) != (c.charges == 1) {
				t.Fatalf("scope %s: keys of the first run %+v and of the retry %+v (vendor keys %q)", c.scope, first, retried, r.v.keys())
			}
			if r.v.total() != c.charges {
				t.Fatalf("scope %s: %d charges over a workflow retry, want %d", c.scope, r.v.total(), c.charges)
			}
		})
	}
}

// Continue-as-new: every run is a new execution with its own keys, in both scopes.
func TestFeatureContinueAsNew(t *testing.T) {
	for _, scope := range []interceptor.Scope{interceptor.ScopeExecution, interceptor.ScopeWorkflowID} {
		t.Run(scope.String(), func(t *testing.T) {
			r := newRig(t, interceptor.Options{Scope: scope})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			run := r.start("feature-chain-"+scope.String(), Chain, 3)
			var out string
			if err := run.Get(ctx, &out); err != nil {
				t.Fatal(err)
			}
			k := r.v.keys()
			if len(k) != 3 || k[0] == k[1] || k[1] == k[2] || k[0] == k[2] {
				t.Fatalf("three continue-as-new runs charged with keys %q: want three distinct keys, three charges", k)
			}
		})
	}
}

// Local activities: the key is minted once when the workflow schedules the call and
// is the same on every local retry; a destructive local write whose attempt reached
// the vendor is refused, not retried.
func TestFeatureLocalActivity(t *testing.T) {
	t.Run("UpsertContact", func(t *testing.T) {
		r := newRig(t, interceptor.Options{})
		f := &failOn{attempts: map[int32]bool{1: true, 2: true}, reached: true}
		r.tools.fail = f.fail
		out, err := r.result(r.start("feature-local-upsert", Calls, []step{{Activity: "UpsertContact", Local: true}}))
		if err != nil {
			t.Fatal(err)
		}
		if k := r.v.keys(); len(k) != 3 || !allEqual(k) || out[0] != "done:"+k[0] {
			t.Fatalf("vendor keys %q, result %q: want three local attempts with one key", k, out)
		}
	})
	t.Run("ChargeCard", func(t *testing.T) {
		r := newRig(t, interceptor.Options{})
		f := &failOn{attempts: map[int32]bool{1: true}, reached: true}
		r.tools.fail = f.fail
		_, err := r.result(r.start("feature-local-charge", Calls, []step{{Activity: "ChargeCard", Local: true}}))
		if interceptor.ErrorType(err) != interceptor.ErrTypeInFlight || r.v.total() != 1 || len(f.keys()) != 1 {
			t.Fatalf("workflow error %v, vendor %d, attempts %d: want one charge, then a refusal", err, r.v.total(), len(f.keys()))
		}
	})
}

// Signal handlers: a coroutine charges a tip when a signal comes. A reset re-applies
// the signals received after the reset point all at once, so the tip's charge, first
// in the original run, now comes after the order's (and the sticky cache is purged
// in between, so the order's key is minted by a replay). Its key must not move:
//   - byKey (the tip under WithKey, the remedy): a WithKey call takes no occurrence
//     number, so both charges return their stored results and nothing is charged
//     twice. (Before the fix the tip took number 1, the order was charged again.)
//   - minted keys: the two calls swap numbers; their arguments differ, so the gate
//     refuses both with IdempotencyConflict — nothing is sent twice, no result is
//     handed to the other call.
func TestFeatureSignalHandler(t *testing.T) {
	for _, byKey := range []bool{true, false} {
		t.Run(fmt.Sprintf("byKey=%v", byKey), func(t *testing.T) {
			r := newRig(t, interceptor.Options{})
			id := fmt.Sprintf("feature-signal-%v", byKey)
			run := r.start(id, Tipped, byKey)
			r.signal(id, run.GetRunID(), "tip", "tip-0001")
			waitFor(t, "the tip's charge", func() bool { return r.v.total() == 1 })
			worker.PurgeStickyWorkflowCache() // the order's key is minted by a replay
			r.signal(id, run.GetRunID(), "go", nil)
			first, err := r.result(run)
			if err != nil {
				t.Fatal(err)
			}
			if k := r.v.keys(); len(k) != 2 || k[0] == k[1] {
				t.Fatalf("vendor keys %q: want the tip and the order charged once each", k)
			}
			newRun := r.resetToFirstTask(id, run.GetRunID())
			again, err := r.result(r.c.GetWorkflow(context.Background(), id, newRun))
			if r.v.total() != 2 {
				t.Fatalf("after the reset the vendor was called %d times, want 2 (keys %q): a write was sent twice", r.v.total(), r.v.keys())
			}
			if !byKey {
				if interceptor.ErrorType(err) != interceptor.ErrTypeConflict {
					t.Fatalf("after the reset: %v, want IdempotencyConflict", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(again) != fmt.Sprint(first) {
				t.Fatalf("after the reset the results are %q, want the stored %q", again, first)
			}
		})
	}
}

// Update handlers: calls made in an update handler are numbered per update ID, so
// where a reset re-applies the update among the main code's calls does not move any
// key. The update comes before the order's charge in one run and after it in the
// other; the sticky cache is purged in between, so the keys are also minted again by
// a replay. After the reset every call returns its stored result. (Before the fix
// one of the two orders made the calls swap numbers: IdempotencyConflict.)
func TestFeatureUpdateHandler(t *testing.T) {
	for _, updateFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("updateFirst=%v", updateFirst), func(t *testing.T) {
			r := newRig(t, interceptor.Options{})
			id := fmt.Sprintf("feature-update-%v", updateFirst)
			run := r.start(id, TippedByUpdate)
			var tip string
			update := func() {
				h, err := r.c.UpdateWorkflow(context.Background(), client.UpdateWorkflowOptions{WorkflowID: id,
					RunID: run.GetRunID(), UpdateID: "tip-0001", UpdateName: "tip", Args: []any{7},
					WaitForStage: client.WorkflowUpdateStageCompleted})
				if err != nil {
					t.Fatal(err)
				}
				if err := h.Get(context.Background(), &tip); err != nil {
					t.Fatal(err)
				}
			}
			if updateFirst {
				update()
				worker.PurgeStickyWorkflowCache()
				r.signal(id, run.GetRunID(), "go", nil)
			} else {
				r.signal(id, run.GetRunID(), "go", nil)
				waitFor(t, "the order's charge", func() bool { return r.v.total() == 1 })
				worker.PurgeStickyWorkflowCache()
				update()
			}
			first, err := r.result(run)
			if err != nil {
				t.Fatal(err)
			}
			if k := r.v.keys(); len(k) != 2 || k[0] == k[1] || first[1] != tip {
				t.Fatalf("vendor keys %q, results %q, update result %q", k, first, tip)
			}
			newRun := r.resetToFirstTask(id, run.GetRunID())
			again, err := r.result(r.c.GetWorkflow(context.Background(), id, newRun))
			if err != nil {
				t.Fatalf("after the reset: %v (vendor keys %q)", err, r.v.keys())
			}
			if r.v.total() != 2 || fmt.Sprint(again) != fmt.Sprint(first) {
				t.Fatalf("after the reset: vendor %d calls, results %q, want 2 and the stored %q", r.v.total(), again, first)
			}
		})
	}
}

// Children started in update handlers (issue 18, item 8): a child is keyed per
// update ID when its ID is the SDK's, and by its WorkflowID when it has one, so the
// reset that re-applies the update before the order's child (it came after it in
// the first run) gives neither child a new key: each charge is sent once, and the
// reset run returns the stored results. (Before the fix the two children took each
// other's occurrence numbers, both got new keys and both charges were sent again —
// with or without their own WorkflowIDs.)
func TestFeatureUpdateHandlerChildren(t *testing.T) {
	for _, explicitIDs := range []bool{false, true} {
		t.Run(fmt.Sprintf("explicitIDs=%v", explicitIDs), func(t *testing.T) {
			r := newRig(t, interceptor.Options{})
			id := fmt.Sprintf("feature-update-child-%v", explicitIDs)
			run := r.start(id, ChildTippedByUpdate, explicitIDs)
			r.signal(id, run.GetRunID(), "go", nil)
			waitFor(t, "the order's charge", func() bool { return r.v.total() == 1 })
			worker.PurgeStickyWorkflowCache()
			h, err := r.c.UpdateWorkflow(context.Background(), client.UpdateWorkflowOptions{WorkflowID: id,
				RunID: run.GetRunID(), UpdateID: "tip-0001", UpdateName: "tip", Args: []any{7},
				WaitForStage: client.WorkflowUpdateStageCompleted})
			if err != nil {
				t.Fatal(err)
			}
			var tip string
			if err := h.Get(context.Background(), &tip); err != nil {
				t.Fatal(err)
			}
			first, err := r.result(run)
			if err != nil {
				t.Fatal(err)
			}
			if k := r.v.keys(); len(k) != 2 || k[0] == k[1] || first[1] != tip {
				t.Fatalf("vendor keys %q, results %q, update result %q", k, first, tip)
			}
			newRun := r.resetToFirstTask(id, run.GetRunID())
			again, err := r.result(r.c.GetWorkflow(context.Background(), id, newRun))
			if r.v.total() != 2 {
				t.Fatalf("after the reset the vendor was called %d times (keys %q), want 2: a charge was sent again", r.v.total(), r.v.keys())
			}
			if err != nil {
				t.Fatalf("after the reset: %v", err)
			}
			if fmt.Sprint(again) != fmt.Sprint(first) {
				t.Fatalf("after the reset the results are %q, want the stored %q", again, first)
			}
		})
	}
}

// versionedOld charges the fee; versionedNew is the code deployed later, which
// charges a deposit first in a workflow.GetVersion branch. deposit is the deposit's
// amount; key, when set, is its WithKey business key.
func versionedOld(ctx workflow.Context, deposit int, key string) ([]string, error) {
	var fee string
	err := workflow.ExecuteActivity(actx(ctx), "ChargeCard", 1).Get(ctx, &fee)
	return []string{fee}, err
}

func versionedNew(ctx workflow.Context, deposit int, key string) ([]string, error) {
	var out []string
	if workflow.GetVersion(ctx, "deposit", workflow.DefaultVersion, 1) == 1 {
		dctx := actx(ctx)
		if key != "" {
			dctx = interceptor.WithKey(dctx, key)
		}
		var r string
		if err := workflow.ExecuteActivity(dctx, "ChargeCard", deposit).Get(ctx, &r); err != nil {
			return out, err
		}
		out = append(out, r)
	}
	var fee string
	err := workflow.ExecuteActivity(actx(ctx), "ChargeCard", 1).Get(ctx, &fee)
	return append(out, fee), err
}

// workflow.GetVersion: a run of the old code charges the fee; it is reset, and the
// new code runs it, inserting a deposit charge of the same activity type before the
// fee. The inserted call takes the fee's occurrence number:
//   - other arguments: the deposit is refused (IdempotencyConflict), nothing is sent
//     twice;
//   - under WithKey (the remedy; also IdentifyingFields): the inserted call takes no
//     number, the deposit is charged, the fee returns its stored result;
//   - the same arguments: the gate cannot tell the two calls apart — the deposit gets
//     the fee's stored result and the fee is charged under the next number. This is
//     the documented limit; give the inserted call WithKey.
func TestFeatureGetVersion(t *testing.T) {
	for _, c := range []struct {
		name     string
		deposit  int
		key      string
		vendor   int
		errType  string
		feeAgain bool // the old fee's result comes back as the fee's (false: as the deposit's)
	}{
		{"other arguments", 5, "", 1, interceptor.ErrTypeConflict, false},
		{"WithKey", 5, "order-4217/deposit", 2, "", true},
		{"same arguments", 1, "", 2, "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, interceptor.Options{})
			queue := r.queue + "-versioned"
			old := r.worker(queue, worker.Options{}, func(w worker.Registry) {
				w.RegisterWorkflowWithOptions(versionedOld, workflow.RegisterOptions{Name: "Versioned"})
				w.RegisterActivity(r.tools)
			})
			id := "feature-version-" + c.name
			run, err := r.c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: id, TaskQueue: queue,
				WorkflowExecutionTimeout: time.Minute}, "Versioned", c.deposit, c.key)
			if err != nil {
				t.Fatal(err)
			}
			first, err := r.result(run)
			if err != nil {
				t.Fatal(err)
			}
			old.Stop()
			t.Cleanup(r.worker(queue, worker.Options{}, func(w worker.Registry) {
				w.RegisterWorkflowWithOptions(versionedNew, workflow.RegisterOptions{Name: "Versioned"})
				w.RegisterActivity(r.tools)
			}).Stop)

			again, err := r.result(r.c.GetWorkflow(context.Background(), id, r.resetToFirstTask(id, run.GetRunID())))
			if interceptor.ErrorType(err) != c.errType || (c.errType == "" && err != nil) {
				t.Fatalf("after the reset: %v, want error type %q", err, c.errType)
			}
			if r.v.total() != c.vendor {
				t.Fatalf("vendor %d calls (keys %q), want %d", r.v.total(), r.v.keys(), c.vendor)
			}
			if c.errType != "" {
				return
			}
			if len(again) != 2 || (again[1] == first[0]) != c.feeAgain || (again[0] == first[0]) == c.feeAgain {
				t.Fatalf("results after the reset %q (deposit, fee), the old run's fee %q", again, first)
			}
		})
	}
}

// A workflow ID reused after the run completed: the default scope makes it a new
// execution (new keys, a second charge); ScopeWorkflowID keeps the keys, and the
// second run gets the stored result.
func TestFeatureWorkflowIDReuse(t *testing.T) {
	for _, c := range []struct {
		scope   interceptor.Scope
		charges int
	}{{interceptor.ScopeExecution, 2}, {interceptor.ScopeWorkflowID, 1}} {
		t.Run(c.scope.String(), func(t *testing.T) {
			r := newRig(t, interceptor.Options{Scope: c.scope})
			id := "feature-order-4217-" + c.scope.String()
			first, err := r.result(r.start(id, Steps, []string{"ChargeCard"}))
			if err != nil {
				t.Fatal(err)
			}
			second, err := r.result(r.start(id, Steps, []string{"ChargeCard"}))
			if err != nil {
				t.Fatal(err)
			}
			if r.v.total() != c.charges || (first[0] == second[0]) != (c.charges == 1) {
				t.Fatalf("scope %s: re-run of %s: vendor %d calls (want %d), results %q %q", c.scope, id, r.v.total(), c.charges, first, second)
			}
		})
	}
}

// Standalone activities (client.ExecuteActivity, no workflow): the client
// interceptor stamps the caller's activity ID; the gate keys the call by it. The
// same key on every attempt; the same ID started again after it closed returns the
// stored result; another ID is another write; a client without the interceptor gets
// its write refused as keyless, nothing sent.
func TestFeatureStandaloneActivity(t *testing.T) {
	r := newRig(t, interceptor.Options{})
	c := server.NewClientWithOptions(client.Options{Logger: log.NewStructuredLogger(slog.New(slog.DiscardHandler)),
		Interceptors: []sdkinterceptor.ClientInterceptor{interceptor.NewClientInterceptor()}})
	t.Cleanup(c.Close)
	f := &failOn{attempts: map[int32]bool{1: true}, reached: true}
	r.tools.fail = f.fail
	exec := func(c client.Client, id, activity string) (string, error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		h, err := c.ExecuteActivity(ctx, client.StartActivityOptions{ID: id, TaskQueue: r.queue,
			StartToCloseTimeout: 10 * time.Second, RetryPolicy: retry,
			ActivityIDReusePolicy: enumspb.ACTIVITY_ID_REUSE_POLICY_ALLOW_DUPLICATE}, activity, 0)
		if err != nil {
			t.Fatal(err)
		}
		var out string
		err = h.Get(ctx, &out)
		return out, err
	}
	up, err := exec(c, "feature-sa-upsert", "UpsertContact")
	if err != nil {
		t.Fatal(err)
	}
	if k := r.v.keys(); len(k) != 2 || !allEqual(k) || up != "done:"+k[0] {
		t.Fatalf("standalone UpsertContact: vendor keys %q, result %q: want two attempts with one key", k, up)
	}

	r.tools.fail = nil
	charge, err := exec(c, "feature-sa-charge", "ChargeCard")
	if err != nil {
		t.Fatal(err)
	}
	again, err := exec(c, "feature-sa-charge", "ChargeCard")
	if err != nil {
		t.Fatal(err)
	}
	if r.v.total() != 3 || again != charge {
		t.Fatalf("standalone ChargeCard started twice with one ID: vendor %d calls in all (want 3), results %q %q", r.v.total(), charge, again)
	}
	other, err := exec(c, "feature-sa-charge-2", "ChargeCard")
	if err != nil {
		t.Fatal(err)
	}
	if k := r.v.keys(); len(k) != 4 || k[3] == k[2] || other == charge {
		t.Fatalf("another activity ID: vendor keys %q, want a new key", k)
	}

	_, err = exec(r.c, "feature-sa-bare", "ChargeCard")
	if interceptor.ErrorType(err) != interceptor.ErrTypeKeyMissing || r.v.total() != 4 {
		t.Fatalf("standalone ChargeCard from a client without the interceptor: %v, vendor %d calls", err, r.v.total())
	}

	// A header naming another activity ID would give this call that activity's key.
	forged := server.NewClientWithOptions(client.Options{Logger: log.NewStructuredLogger(slog.New(slog.DiscardHandler)),
		Interceptors: []sdkinterceptor.ClientInterceptor{interceptor.NewClientInterceptor(), &forgeHeader{}}})
	t.Cleanup(forged.Close)
	_, err = exec(forged, "feature-sa-forged", "ChargeCard")
	if interceptor.ErrorType(err) != interceptor.ErrTypeKeyInvalid || r.v.total() != 4 {
		t.Fatalf("standalone ChargeCard carrying another activity's key: %v, vendor %d calls", err, r.v.total())
	}
}

// forgeHeader rewrites, after NewClientInterceptor (listed after it, it runs inside
// it), the idemgate header to name the activity "feature-sa-charge".
type forgeHeader struct {
	sdkinterceptor.ClientInterceptorBase
}

func (*forgeHeader) InterceptClient(next sdkinterceptor.ClientOutboundInterceptor) sdkinterceptor.ClientOutboundInterceptor {
	return &forgeOutbound{ClientOutboundInterceptorBase: sdkinterceptor.ClientOutboundInterceptorBase{Next: next}}
}

type forgeOutbound struct {
	sdkinterceptor.ClientOutboundInterceptorBase
}

func (o *forgeOutbound) ExecuteActivity(ctx context.Context, in *sdkinterceptor.ClientExecuteActivityInput) (client.ActivityHandle, error) {
	h := sdkinterceptor.Header(ctx)
	h["idemgate"] = &commonpb.Payload{Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: []byte(`{"sa":"feature-sa-charge"}`)}
	return o.Next.ExecuteActivity(ctx, in)
}
