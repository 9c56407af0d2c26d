package integration

// Feature-matrix tests for what the server starts on its own: children re-started by
// a parent reset or retry, cron runs, Schedules, sessions and async completion.

import (
	"context"
	"fmt"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memory"
)

// newFeatureRig is newRig with the feature workflows registered, and worker options.
func newFeatureRig(t *testing.T, opts interceptor.Options, wopts worker.Options, register ...func(worker.Worker)) *rig {
	t.Helper()
	st := rigStore(t, &opts)
	gate, err := interceptor.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	v := newVendor()
	r := &rig{t: t, c: server.GetDefaultClient(), st: st, v: v, tools: &tools{v: v}, gate: gate,
		queue: fmt.Sprintf("q-%s-%d", t.Name(), time.Now().UnixNano())}
	wopts.Interceptors = []sdkinterceptor.WorkerInterceptor{gate}
	w := worker.New(r.c, r.queue, wopts)
	for _, wf := range []any{Steps, Chain, ChargeThenFail, ParentWF, ChildWF, GrandchildWF, ChainChild, RetriedChild} {
		w.RegisterWorkflow(wf)
	}
	w.RegisterActivity(r.tools)
	for _, reg := range register {
		reg(w)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	r.w = w
	t.Cleanup(w.Stop)
	return r
}

// resetToStart resets a finished run to the end of its first workflow task (before
// anything was scheduled) and returns the new run's result.
func (r *rig) resetToStart(id, runID string, out any) {
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
		Reason:                    "feature test reset",
		WorkflowTaskFinishEventId: resetTo,
		RequestId:                 fmt.Sprint(time.Now().UnixNano()),
	})
	if err != nil {
		r.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := r.c.GetWorkflow(ctx, id, resp.GetRunId()).Get(ctx, out); err != nil {
		r.t.Fatalf("reset run of %s: %v", id, err)
	}
}

// charge runs ChargeCard once.
func chargeOnce(ctx workflow.Context) (string, error) {
	var s string
	err := workflow.ExecuteActivity(actx(ctx), "ChargeCard", 0).Get(ctx, &s)
	return s, err
}

func childCtx(ctx workflow.Context, id string) workflow.Context {
	return workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{WorkflowID: id})
}

// ParentWF starts ChildWF with a fixed workflow ID (the child then starts GrandchildWF
// with an SDK-generated ID) and returns what they charged.
func ParentWF(ctx workflow.Context, child string) ([]string, error) {
	var out []string
	err := workflow.ExecuteChildWorkflow(childCtx(ctx, workflow.GetInfo(ctx).WorkflowExecution.ID+"-child"), child).Get(ctx, &out)
	return out, err
}

// ChildWF charges, then starts GrandchildWF.
func ChildWF(ctx workflow.Context) ([]string, error) {
	s, err := chargeOnce(ctx)
	if err != nil {
		return nil, err
	}
	var g string
	if err := workflow.ExecuteChildWorkflow(ctx, GrandchildWF).Get(ctx, &g); err != nil {
		return nil, err
	}
	return []string{s, g}, nil
}

// GrandchildWF charges.
func GrandchildWF(ctx workflow.Context) (string, error) { return chargeOnce(ctx) }

// ChainChild runs Chain(3) as a child: three continue-as-new runs, one charge each.
func ChainChild(ctx workflow.Context) ([]string, error) {
	var s string
	err := workflow.ExecuteChildWorkflow(ctx, Chain, 3).Get(ctx, &s)
	return []string{s}, err
}

// RetriedChild runs ChargeThenFail as a child with a retry policy: it charges and
// fails its first attempt, charges and succeeds its second.
func RetriedChild(ctx workflow.Context) ([]string, error) {
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 50 * time.Millisecond, MaximumAttempts: 2}})
	var s string
	err := workflow.ExecuteChildWorkflow(cctx, ChargeThenFail).Get(ctx, &s)
	return []string{s}, err
}

func (r *rig) runParent(id string, wf any, args ...any) ([]string, string) {
	r.t.Helper()
	run := r.start(id, wf, args...)
	out, err := r.result(run)
	if err != nil {
		r.t.Fatalf("%s: %v", id, err)
	}
	return out, run.GetRunID()
}

// A reset of the parent starts its child again (same workflow ID, new run ID) and
// the child its grandchild (a new, generated workflow ID): their charges return the
// stored results, the vendor is not called again.
func TestFeatureParentResetChild(t *testing.T) {
	r := newFeatureRig(t, interceptor.Options{}, worker.Options{})
	first, runID := r.runParent("parent-reset", ParentWF, "ChildWF")
	if len(first) != 2 || r.v.total() != 2 {
		t.Fatalf("child and grandchild charged %q, vendor %d", first, r.v.total())
	}
	var again []string
	r.resetToStart("parent-reset", runID, &again)
	if fmt.Sprint(again) != fmt.Sprint(first) || r.v.total() != 2 {
		t.Fatalf("after the parent's reset: results %q (first %q), vendor %d calls (keys %q): the child's "+
			"charges must return the stored results", again, first, r.v.total(), r.v.keys())
	}
	rs, _ := r.st.Receipts(context.Background(), store.ReceiptFilter{Decision: store.DecisionReplayed})
	if len(rs) != 2 {
		t.Fatalf("replayed receipts after reset: %d, want 2 (child and grandchild)", len(rs))
	}
}

// A child's continue-as-new runs keep the parent's token: distinct keys per run, and
// after a parent reset every run's charge returns its stored result.
func TestFeatureChildContinueAsNew(t *testing.T) {
	r := newFeatureRig(t, interceptor.Options{}, worker.Options{})
	first, runID := r.runParent("parent-chain", ChainChild)
	k := r.v.keys()
	if len(k) != 3 || k[0] == k[1] || k[1] == k[2] || k[0] == k[2] {
		t.Fatalf("three continue-as-new runs of the child charged with keys %q: want three distinct keys", k)
	}
	var again []string
	r.resetToStart("parent-chain", runID, &again)
	if fmt.Sprint(again) != fmt.Sprint(first) || r.v.total() != 3 {
		t.Fatalf("after the parent's reset: %q (first %q), vendor keys %q", again, first, r.v.keys())
	}
}

// A child retried by its retry policy: under ScopeExecution each attempt is a new
// execution (two charges), under ScopeWorkflowID one write; either way a parent
// reset re-running the child and its retry charges nothing more.
func TestFeatureChildRetry(t *testing.T) {
	for _, c := range []struct {
		scope   interceptor.Scope
		charges int
	}{{interceptor.ScopeExecution, 2}, {interceptor.ScopeWorkflowID, 1}} {
		t.Run(c.scope.String(), func(t *testing.T) {
			r := newFeatureRig(t, interceptor.Options{Scope: c.scope}, worker.Options{})
			id := "parent-retry-" + c.scope.String()
			first, runID := r.runParent(id, RetriedChild)
			if r.v.total() != c.charges {
				t.Fatalf("child retry charged %d times (keys %q), want %d", r.v.total(), r.v.keys(), c.charges)
			}
			var again []string
			r.resetToStart(id, runID, &again)
			if fmt.Sprint(again) != fmt.Sprint(first) || r.v.total() != c.charges {
				t.Fatalf("after the parent's reset: %q (first %q), vendor keys %q", again, first, r.v.keys())
			}
		})
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitForCond(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Cron runs are distinct executions: the server copies the start header from run to
// run, and under ScopeWorkflowID the workflow ID is the same too; each run charges
// once with its own key.
func TestFeatureCron(t *testing.T) {
	for _, scope := range []interceptor.Scope{interceptor.ScopeExecution, interceptor.ScopeWorkflowID} {
		t.Run(scope.String(), func(t *testing.T) {
			r := newFeatureRig(t, interceptor.Options{Scope: scope}, worker.Options{})
			id := "cron-" + scope.String()
			_, err := r.c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: id, TaskQueue: r.queue,
				CronSchedule: "@every 1s", WorkflowExecutionTimeout: time.Minute}, Steps, []string{"ChargeCard"})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = r.c.TerminateWorkflow(context.Background(), id, "", "test done") }()
			// Two runs finished: the second run's ChargeCard was scheduled and returned.
			waitForCond(t, "two cron runs", 30*time.Second, func() bool {
				rs, _ := r.st.Receipts(context.Background(), store.ReceiptFilter{WorkflowID: id, Activity: "ChargeCard"})
				runs := map[string]bool{}
				for _, rc := range rs {
					if rc.Decision == store.DecisionRan || rc.Decision == store.DecisionReplayed {
						runs[rc.RunID] = true
					}
				}
				return len(runs) >= 2
			})
			k := r.v.keys()
			if len(k) < 2 || k[0] == k[1] {
				t.Fatalf("cron runs charged with keys %q: want a charge with its own key per run", k)
			}
		})
	}
}

// Runs a Schedule starts are distinct executions, even when two triggers land in one
// second and so share a workflow ID (the scheduler appends the nominal time to the
// second).
func TestFeatureSchedule(t *testing.T) {
	for _, scope := range []interceptor.Scope{interceptor.ScopeExecution, interceptor.ScopeWorkflowID} {
		t.Run(scope.String(), func(t *testing.T) {
			r := newFeatureRig(t, interceptor.Options{Scope: scope}, worker.Options{})
			// The two triggers must land in one second; on a loaded machine they may
			// not, and then the pair is tried again with a new schedule.
			for try := 1; ; try++ {
				before := r.v.total()
				ids := r.triggerTwice(fmt.Sprintf("sched-%s-%d", scope, try))
				if ids[0] != ids[1] {
					if try < 4 {
						t.Logf("try %d: the triggers started %s and %s, in two seconds; again", try, ids[0], ids[1])
						continue
					}
					t.Fatalf("the triggers never landed in one second (%s, %s): the test needs one workflow ID for "+
						"both runs", ids[0], ids[1])
				}
				if k := r.v.keys()[before:]; len(k) != 2 || k[0] == k[1] {
					t.Fatalf("two scheduled runs of %s charged with keys %q: want one charge each, with distinct keys", ids[0], k)
				}
				return
			}
		})
	}
}

// triggerTwice creates a schedule id that runs Steps(ChargeCard), triggers it twice,
// waits until both runs finished, and returns their workflow IDs.
func (r *rig) triggerTwice(id string) [2]string {
	t := r.t
	t.Helper()
	ctx := context.Background()
	h, err := r.c.ScheduleClient().Create(ctx, client.ScheduleOptions{
		ID: id, Spec: client.ScheduleSpec{}, Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_BUFFER_ALL,
		Action: &client.ScheduleWorkflowAction{ID: id + "-wf", Workflow: Steps, Args: []any{[]string{"ChargeCard"}},
			TaskQueue: r.queue, WorkflowExecutionTimeout: time.Minute},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = h.Delete(ctx) }()
	var actions []client.ScheduleActionResult
	// finished reports whether n runs started and all of them completed.
	finished := func(n int) bool {
		d, err := h.Describe(ctx)
		if err != nil {
			return false
		}
		actions = d.Info.RecentActions
		for _, a := range actions {
			st, err := r.c.DescribeWorkflowExecution(ctx, a.StartWorkflowResult.WorkflowID, a.StartWorkflowResult.FirstExecutionRunID)
			if err != nil || st.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
				return false
			}
		}
		if len(actions) == n-1 {
			// A buffered start waits until the scheduler sees the run before it
			// finished, through a long-poll watcher that is slow on a loaded machine;
			// its refresh signal (what the server sends it) makes it look now.
			_ = r.c.SignalWorkflow(ctx, "temporal-sys-scheduler:"+id, "", "refresh", nil)
		}
		return len(actions) >= n
	}
	trigger := func() {
		if err := h.Trigger(ctx, client.ScheduleTriggerOptions{Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_BUFFER_ALL}); err != nil {
			t.Fatal(err)
		}
	}
	// Just after a second begins. The second trigger goes once the first is seen:
	// the scheduler keeps one pending trigger, so two at once may merge into one.
	for time.Now().Nanosecond() > 100e6 {
		time.Sleep(5 * time.Millisecond)
	}
	trigger()
	waitForCond(t, "the first scheduled run to start", 30*time.Second, func() bool {
		d, err := h.Describe(ctx)
		return err == nil && d.Info.NumActions >= 1
	})
	trigger()
	waitForCond(t, "two scheduled runs to finish", 45*time.Second, func() bool { return finished(2) })
	return [2]string{actions[0].StartWorkflowResult.WorkflowID, actions[1].StartWorkflowResult.WorkflowID}
}

// Session is a workflow that keeps a worker session open for three seconds (heartbeat
// timeout one second), then charges inside it.
func Session(ctx workflow.Context) (string, error) {
	sctx, err := workflow.CreateSession(ctx, &workflow.SessionOptions{CreationTimeout: 20 * time.Second,
		ExecutionTimeout: time.Minute, HeartbeatTimeout: time.Second})
	if err != nil {
		return "", err
	}
	defer workflow.CompleteSession(sctx)
	if err := workflow.Sleep(ctx, 3*time.Second); err != nil {
		return "", err
	}
	if workflow.GetSessionInfo(sctx).SessionState != workflow.SessionStateOpen {
		return "", fmt.Errorf("session state %v", workflow.GetSessionInfo(sctx).SessionState)
	}
	return chargeOnce(sctx)
}

// The SDK's session activities are not gated: a session outlives its heartbeat
// timeout, and leaves no record.
func TestFeatureSessions(t *testing.T) {
	r := newFeatureRig(t, interceptor.Options{}, worker.Options{EnableSessionWorker: true},
		func(w worker.Worker) { w.RegisterWorkflow(Session) })
	run := r.start("session", Session)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out string
	if err := run.Get(ctx, &out); err != nil {
		t.Fatalf("session workflow: %v", err)
	}
	if r.v.total() != 1 {
		t.Fatalf("vendor %d calls, want 1", r.v.total())
	}
	rs, _ := r.st.Receipts(ctx, store.ReceiptFilter{WorkflowID: "session"})
	for _, rc := range rs {
		if rc.Activity != "ChargeCard" {
			t.Errorf("receipt for %s %s: the SDK's own activities must not be gated", rc.Activity, rc.Decision)
		}
	}
	if p, _ := r.st.Pending(ctx, time.Now().Add(time.Hour), 0); len(p) != 0 {
		t.Fatalf("pending after the session: %+v", p)
	}
}

// expense completes asynchronously, like Temporal's expense sample: the body files
// the expense with the vendor and hands its token to an approver.
type expense struct {
	v        *vendor
	approver chan interceptor.HandOff
}

func (e *expense) PayExpense(ctx context.Context, n int) (string, error) {
	e.v.hit(ctx)
	h, err := interceptor.AsyncToken(ctx)
	if err != nil {
		return "", err
	}
	e.approver <- h
	return "", activity.ErrResultPending
}

// An activity completed later through CompleteAsync stores its result under its key:
// nothing stays pending, and a reset that re-runs it returns the stored result
// without a second vendor call.
func TestFeatureAsyncCompletion(t *testing.T) {
	opts := interceptor.Options{Store: memory.New()}
	ex := &expense{approver: make(chan interceptor.HandOff, 4)}
	r := newFeatureRig(t, opts, worker.Options{}, func(w worker.Worker) { w.RegisterActivity(ex) })
	ex.v = r.v
	go func() {
		for h := range ex.approver {
			if err := interceptor.CompleteAsync(context.Background(), r.c, opts, h, "approved:"+h.Key, nil); err != nil {
				t.Errorf("CompleteAsync: %v", err)
			}
		}
	}()
	t.Cleanup(func() { close(ex.approver) })
	first, runID := r.runParent("expense", Steps, []string{"PayExpense"})
	ctx := context.Background()
	if p, _ := r.st.Pending(ctx, time.Now().Add(time.Hour), 0); len(p) != 0 {
		t.Fatalf("pending after async completion: %+v", p)
	}
	hand, _ := r.st.Receipts(ctx, store.ReceiptFilter{WorkflowID: "expense", Decision: store.DecisionHandedOff})
	if len(hand) != 1 {
		t.Fatalf("handed-off receipts: %d, want 1", len(hand))
	}
	var again []string
	r.resetToStart("expense", runID, &again)
	if fmt.Sprint(again) != fmt.Sprint(first) || r.v.total() != 1 {
		t.Fatalf("after reset: %q (first %q), vendor %d calls", again, first, r.v.total())
	}
}
