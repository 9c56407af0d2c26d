package integration

import (
	"testing"

	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/idemgate/idemgate/interceptor"
)

// RunIDChildParent starts GrandchildWF with a WorkflowID made from its own run ID.
func RunIDChildParent(ctx workflow.Context) ([]string, error) {
	var s string
	err := workflow.ExecuteChildWorkflow(childCtx(ctx, workflow.GetInfo(ctx).WorkflowExecution.RunID+"-charge"), GrandchildWF).Get(ctx, &s)
	return []string{s}, err
}

// RunIDGrandchildParent starts RunIDFromOwnID with an SDK-generated workflow ID
// (made from this run's ID).
func RunIDGrandchildParent(ctx workflow.Context) ([]string, error) {
	var out []string
	err := workflow.ExecuteChildWorkflow(ctx, RunIDFromOwnID).Get(ctx, &out)
	return out, err
}

// RunIDFromOwnID starts GrandchildWF with a WorkflowID made from its own workflow ID
// (which its parent's run ID made) and its parent's run ID.
func RunIDFromOwnID(ctx workflow.Context) ([]string, error) {
	info := workflow.GetInfo(ctx)
	var a, b string
	if err := workflow.ExecuteChildWorkflow(childCtx(ctx, info.WorkflowExecution.ID+"-charge"), GrandchildWF).Get(ctx, &a); err != nil {
		return nil, err
	}
	err := workflow.ExecuteChildWorkflow(childCtx(ctx, "of-"+info.ParentWorkflowExecution.RunID), GrandchildWF).Get(ctx, &b)
	return []string{a, b}, err
}

// FINDINGS-atk-gate F12: a child keyed by its explicit WorkflowID, made from the
// parent's run ID (a common pattern), is started again after a parent reset under
// the new run's ID. The run IDs a workflow sees (its own, its parent's, its root's)
// are left out of the key, so its writes return the stored results.
func TestParentResetChildIDFromRunID(t *testing.T) {
	r := newFeatureRig(t, interceptor.Options{}, worker.Options{}, func(w worker.Worker) { w.RegisterWorkflow(RunIDChildParent) })
	first, runID := r.runParent("parent-runid-child", RunIDChildParent)
	if len(first) != 1 || r.v.total() != 1 {
		t.Fatalf("the child charged %q, vendor %d", first, r.v.total())
	}
	var again []string
	r.resetToStart("parent-runid-child", runID, &again)
	if r.v.total() != 1 || len(again) != 1 || again[0] != first[0] {
		t.Fatalf("after the parent's reset: %q (first %q), vendor %d calls (keys %q): the child's charge was sent again",
			again, first, r.v.total(), r.v.keys())
	}
}

// The same one level down: a grandchild's explicit ID made from its parent's
// SDK-generated ID (which holds the grandparent's run ID), or from its parent's
// parent run ID.
func TestParentResetGrandchildIDFromRunID(t *testing.T) {
	r := newFeatureRig(t, interceptor.Options{}, worker.Options{}, func(w worker.Worker) {
		w.RegisterWorkflow(RunIDGrandchildParent)
		w.RegisterWorkflow(RunIDFromOwnID)
	})
	first, runID := r.runParent("parent-runid-grandchild", RunIDGrandchildParent)
	if len(first) != 2 || r.v.total() != 2 {
		t.Fatalf("the grandchildren charged %q, vendor %d", first, r.v.total())
	}
	var again []string
	r.resetToStart("parent-runid-grandchild", runID, &again)
	if r.v.total() != 2 || len(again) != 2 || again[0] != first[0] || again[1] != first[1] {
		t.Fatalf("after the parent's reset: %q (first %q), vendor %d calls (keys %q): the grandchildren's charges were sent again",
			again, first, r.v.total(), r.v.keys())
	}
}
