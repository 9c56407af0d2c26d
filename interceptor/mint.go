package interceptor

import (
	"cmp"
	"encoding/json"
	"strconv"

	commonpb "go.temporal.io/api/common/v1"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// headerParent carries a child workflow's parent token in the child's start header
// (and over the child's continue-as-new): the child's key scope derives from it.
const headerParent = "idemgate-parent"

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

// childToken is the parent token of the n-th child (from 1) of childType that an
// execution with the given scope starts; workflowID is the ChildWorkflowOptions
// WorkflowID ("" when the SDK generates one from the parent's run ID, which a reset
// changes).
func childToken(scope, childType, workflowID string, n int) string {
	return mint("child", scope, childType, workflowID, strconv.Itoa(n))
}

// stampChild writes the parent token of the child about to be started into its
// start header.
func (o *workflowOutbound) stampChild(ctx workflow.Context, childType string) {
	w := o.wf
	scope := w.keyScope(ctx)
	w.children[childType]++
	token := childToken(scope, childType, workflow.GetChildWorkflowOptions(ctx).WorkflowID, w.children[childType])
	setToken(sdkinterceptor.WorkflowHeader(ctx), token)
}

// setToken writes a parent token to a workflow start header (nil: nothing to do).
func setToken(fields map[string]*commonpb.Payload, token string) {
	if fields == nil || token == "" {
		return
	}
	data, _ := json.Marshal(token) // a string always marshals
	fields[headerParent] = &commonpb.Payload{Metadata: jsonPlain, Data: data}
}

// readToken reads the parent token from a workflow start header ("" when none).
func readToken(fields map[string]*commonpb.Payload) string {
	var token string
	if p := fields[headerParent]; p != nil {
		_ = json.Unmarshal(p.Data, &token)
	}
	return token
}
