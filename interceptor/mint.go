package interceptor

import (
	"cmp"
	"strconv"
	"strings"

	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/idemgate/idemgate/interceptor/internal/canon"
)

// stamp mints the key of this call from deterministic inputs only (namespace,
// workflow ID, original run ID or generation, activity type — the tool's name for a
// generic tool-calling activity (Options.ToolNames) — occurrence) and writes
// it to the activity header. Never from ActivityID: a reset shifts event IDs, and
// local-activity IDs change on every retry.
//
// A write whose arguments have no canonical form fails here, before it is
// scheduled, with an error that names the activity and the argument.
func (o *workflowOutbound) stamp(ctx workflow.Context, activityType string, args []any) error {
	w := o.wf
	if sdkInternal(activityType) {
		return nil // the SDK's own activities (sessions) are never keyed or gated
	}
	activityType, err := w.root.opts.effectiveName(activityType, args)
	if err != nil {
		return appError(err.Error(), ErrTypeArgsInvalid, true, 0)
	}
	h := callHeader{}
	info := workflow.GetInfo(ctx)
	if e := w.root.classify(activityType).Effect; e != Read {
		if _, err := canon.Encode(nil, args); err != nil {
			return argsInvalid(activityType, e, err, "scheduled")
		}
		// The key is claimed in this worker's store; one store per key space. A pure
		// getter (the identity is read when the store opens): no I/O in the workflow.
		h.Store = w.root.opts.Store.Identity()
		// The workflow whose reset can re-create this call: the store keeps the
		// finished write for its claims, the sweep asks Temporal about it.
		h.Root = rootWorkflowID(info)
	}
	h.Scope = w.keyScope(ctx)
	if b, ok := ctx.Value(businessKeyCtx{}).(string); ok {
		h.Business, h.HasBusiness = b, true
	}
	h.Key = w.occurrence(ctx, info.Namespace, activityType, h.HasBusiness)
	if p, ok := ctx.Value(rerunPolicyCtx{}).(RerunPolicy); ok {
		h.Rerun = &p
	}
	fields := sdkinterceptor.WorkflowHeader(ctx)
	if fields == nil {
		// Not reachable through workflow.ExecuteActivity, which always gives a header.
		return nil
	}
	p, err := h.payload()
	if err != nil {
		return err
	}
	fields[headerKey] = p
	return nil
}

// occurrence returns the occurrence key of this call, or "" for a WithKey call:
// such a call takes no number, so adding, removing or moving one (a signal
// delivered at another point after a reset, a call added in a workflow.GetVersion
// branch) does not shift the keys of the other calls of its activity type.
//
// Calls made inside an update handler are numbered per update ID: the update's
// place among the main code's calls moves when a reset re-applies it, its ID does not.
func (w *workflowInbound) occurrence(ctx workflow.Context, namespace, activityType string, business bool) string {
	if business {
		return ""
	}
	if id, ok := ctx.Value(updateIDCtx{}).(string); ok {
		name := "update\x00" + id + "\x00" + activityType
		w.counts[name]++
		return mint("update-occurrence", namespace, w.scope, id, activityType, strconv.Itoa(w.counts[name]))
	}
	w.counts[activityType]++
	return occurrenceKey(namespace, w.scope, activityType, w.counts[activityType])
}

type updateIDCtx struct{}

// ExecuteUpdate marks the handler's context with the update ID, so the calls it
// makes are numbered per update (see occurrence).
func (w *workflowInbound) ExecuteUpdate(ctx workflow.Context, in *sdkinterceptor.UpdateInput) (any, error) {
	if u := workflow.GetCurrentUpdateInfo(ctx); u != nil {
		ctx = workflow.WithValue(ctx, updateIDCtx{}, u.ID)
	}
	return w.Next.ExecuteUpdate(ctx, in)
}

// scheduledByID is the search attribute the server's scheduler sets on every run a
// Schedule starts: the schedule's ID.
var scheduledByID = temporal.NewSearchAttributeKeyKeyword("TemporalScheduledById")

// keyScope returns this execution's key scope, computing it on first use. Every key
// minted in the execution (and every child's parent token) derives from it.
func (w *workflowInbound) keyScope(ctx workflow.Context) string {
	if w.scope == "" {
		w.scope = executionScope(workflow.GetInfo(ctx), w.root.opts.Scope, w.parent, w.generation,
			scheduleID(ctx))
		w.counts = map[string]int{}
		w.children = map[string]int{}
	}
	return w.scope
}

// executionScope is the key scope of one run, from what the workflow sees
// deterministically (its start event, the idemgate start headers):
//
//   - a child started by a parent that runs idemgate: the parent's token (parent
//     scope, child type, WorkflowID option, occurrence), so a parent reset or retry
//     that starts the child again under a new run ID mints the same keys; under
//     ScopeExecution also the child's own workflow attempt, so a retry of the child
//     is a new execution as it is for a top-level workflow;
//   - ScopeWorkflowID: the workflow ID; a run a Schedule started adds the schedule ID
//     and its first run ID (kept over the run's retries and continue-as-new);
//   - ScopeExecution: the workflow ID and original run ID (kept by reset);
//   - always the continue-as-new generation, and for a cron run its original run
//     ID: the server copies a cron run's start header from the run before, so the
//     generation alone would give every cron run the first run's keys.
func executionScope(info *workflow.Info, scope Scope, parent string, generation int, scheduleID string) string {
	gen := strconv.Itoa(generation)
	original := cmp.Or(info.OriginalRunID, info.WorkflowExecution.RunID)
	var s string
	switch {
	case parent != "":
		s = "child\x00" + parent + "\x00" + gen
		if scope == ScopeExecution {
			s += "\x00attempt\x00" + strconv.Itoa(int(info.Attempt))
		}
	case scope == ScopeWorkflowID:
		s = "workflow-id\x00" + info.WorkflowExecution.ID + "\x00" + gen
		if scheduleID != "" {
			s += "\x00schedule\x00" + scheduleID + "\x00" + info.FirstRunID
		}
	default:
		// Includes the original run ID already: distinct per cron run and per scheduled run.
		return "execution\x00" + info.WorkflowExecution.ID + "\x00" + original + "\x00" + gen
	}
	if info.CronSchedule != "" {
		s += "\x00cron\x00" + original
	}
	return s
}

// scheduleID returns the ID of the Schedule that started this run, or "".
func scheduleID(ctx workflow.Context) string {
	id, _ := workflow.GetTypedSearchAttributes(ctx).GetKeyword(scheduledByID)
	return id
}

func (o *workflowOutbound) ExecuteChildWorkflow(ctx workflow.Context, childType string, args ...any) workflow.ChildWorkflowFuture {
	o.stampChild(ctx, childType)
	return o.Next.ExecuteChildWorkflow(ctx, childType, args...)
}

// childToken is the parent token of the n-th child (from 1) of childType that an
// execution with the given scope starts; workflowID is the ChildWorkflowOptions
// WorkflowID ("" when the SDK generates one from the parent's run ID, which a reset
// changes). n counts the children of childType with that workflowID.
func childToken(scope, childType, workflowID string, n int) string {
	return mint("child", scope, childType, workflowID, strconv.Itoa(n))
}

// updateChildToken is the parent token of the n-th child (from 1) of childType with
// an SDK-generated workflow ID that the handler of update updateID starts.
func updateChildToken(scope, updateID, childType string, n int) string {
	return mint("update-child", scope, updateID, childType, strconv.Itoa(n))
}

// stampChild writes the parent token of the child about to be started into its
// start header. The token must not move when a reset re-orders what the parent
// does (a reset re-applies the signals and updates received after its point, so
// their handlers may now run before main-code steps they followed):
//
//   - a child with an explicit WorkflowID is keyed by that ID: numbered among the
//     children of its type with that ID only, wherever it is started. The run IDs
//     the parent sees are left out of the ID first (withoutRunIDs): an ID made from
//     the run ID is a common pattern, and a reset changes it;
//   - a child with an SDK-generated ID started in an update handler is numbered
//     per update ID, as the handler's activities are (see occurrence);
//   - any other child is numbered among the children of its type. Started from
//     code that a signal drives, give it an explicit WorkflowID.
func (o *workflowOutbound) stampChild(ctx workflow.Context, childType string) {
	w := o.wf
	scope := w.keyScope(ctx)
	var token string
	id := workflow.GetChildWorkflowOptions(ctx).WorkflowID
	update, inUpdate := ctx.Value(updateIDCtx{}).(string)
	switch {
	case id != "":
		id = withoutRunIDs(id, workflow.GetInfo(ctx))
		name := "id\x00" + childType + "\x00" + id
		w.children[name]++
		token = childToken(scope, childType, id, w.children[name])
	case inUpdate:
		name := "update\x00" + update + "\x00" + childType
		w.children[name]++
		token = updateChildToken(scope, update, childType, w.children[name])
	default:
		w.children[childType]++
		token = childToken(scope, childType, "", w.children[childType])
	}
	setToken(sdkinterceptor.WorkflowHeader(ctx), token)
}

// runIDMark stands for a run ID in a child's explicit WorkflowID (see withoutRunIDs).
// NUL is in no workflow ID, so no ID written out collides with it.
const runIDMark = "\x00run-id\x00"

// sdkIDMark stands for a workflow's own SDK-generated workflow ID (see withoutRunIDs).
const sdkIDMark = "\x00sdk-workflow-id\x00"

// sdkGeneratedID reports whether id is a child workflow ID the SDK generated in a
// parent run parentRun: the run ID, "_" and a sequence number.
func sdkGeneratedID(id, parentRun string) bool {
	n, ok := strings.CutPrefix(id, parentRun+"_")
	if parentRun == "" || !ok || n == "" {
		return false
	}
	for _, r := range n {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// withoutRunIDs replaces in a child's explicit WorkflowID every run ID the parent
// sees by one mark before the ID goes into the child's key: the parent's own run ID
// and original and first run IDs, the run it continued, and its parent's and root's
// run IDs. A reset makes a new run ID (and re-creates children, whose run IDs and
// SDK-generated workflow IDs hold it), so an ID made from one of them would give the
// reset run's child new keys and its writes would be sent again. Deterministic: all
// of them come from the run's start event. The key scope already tells one run
// apart from another where the scope should (ScopeExecution: the original run ID).
//
// A child whose own workflow ID the SDK generated (its parent's run ID, "_", a
// sequence number that a reset moves as well) has that ID replaced too: its key
// scope, the parent's token, already tells it from its siblings.
func withoutRunIDs(id string, info *workflow.Info) string {
	if p := info.ParentWorkflowExecution; p != nil && sdkGeneratedID(info.WorkflowExecution.ID, p.RunID) {
		id = strings.ReplaceAll(id, info.WorkflowExecution.ID, sdkIDMark)
	}
	runs := []string{info.WorkflowExecution.RunID, info.OriginalRunID, info.FirstRunID, info.ContinuedExecutionRunID}
	if p := info.ParentWorkflowExecution; p != nil {
		runs = append(runs, p.RunID)
	}
	if r := info.RootWorkflowExecution; r != nil {
		runs = append(runs, r.RunID)
	}
	for _, run := range runs {
		if run != "" {
			id = strings.ReplaceAll(id, run, runIDMark)
		}
	}
	return id
}

// rootWorkflowID is the workflow ID of the root of the workflow's chain: the first
// workflow of its parent-child chain, or its own when it is the root. A reset of the
// root re-creates its children (under new SDK-generated IDs when they have no
// explicit one), which mint the same keys: the store keeps a finished write for a
// claim of the same root (store.PastWindowForOther), and a sweep asks Temporal about
// the root (idemgate sweep --temporal-address).
//
// A server that does not send the root (older Temporal servers) leaves
// RootWorkflowExecution nil: a child then names its parent, the nearest ancestor its
// start event names (the root itself for a child of a root), never itself — its own
// ID is the one a reset of its parent replaces.
func rootWorkflowID(info *workflow.Info) string {
	if r := info.RootWorkflowExecution; r != nil && r.ID != "" {
		return r.ID
	}
	if p := info.ParentWorkflowExecution; p != nil && p.ID != "" {
		return p.ID
	}
	return info.WorkflowExecution.ID
}
