package integration

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/worker"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/store"
)

// F1 of the gate attack on issue 18: a reset of the parent two days after the
// charges (window 24 h) re-creates the grandchild under a new, SDK-generated
// workflow ID with the same keys. Its finished charge is kept for a claim of the
// same root (the parent): the re-created grandchild gets the stored result, and the
// vendor is not called again. (Before, the store took the new ID for another
// workflow's business key past the window and sent the key again.) The records keep
// the activity's own workflow ID beside the root's.
func TestFeatureParentResetAfterTheWindowGrandchild(t *testing.T) {
	var mu sync.Mutex
	clock := time.Now()
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	r := newFeatureRig(t, interceptor.Options{Now: now}, worker.Options{})
	id := "parent-reset-window"
	first, runID := r.runParent(id, ParentWF, "ChildWF")
	if len(first) != 2 || r.v.total() != 2 {
		t.Fatalf("child and grandchild charged %q, vendor %d", first, r.v.total())
	}
	mu.Lock()
	clock = clock.Add(48 * time.Hour)
	mu.Unlock()
	if _, err := r.st.Sweep(context.Background(), now(), 0); err != nil {
		t.Fatal(err)
	}
	held, err := r.st.(store.HeldSweeper).Held(context.Background(), now(), 0)
	if err != nil || len(held) != 2 {
		t.Fatalf("held records: %d, %v", len(held), err)
	}
	for _, rec := range held {
		if rec.RootWorkflowID != id || rec.WorkflowID == id || rec.WorkflowID == "" {
			t.Fatalf("record of %s: root %q; want the parent %q beside the child's own workflow", rec.WorkflowID, rec.RootWorkflowID, id)
		}
	}
	var again []string
	r.resetToStart(id, runID, &again)
	if r.v.total() != 2 || fmt.Sprint(again) != fmt.Sprint(first) {
		t.Fatalf("after the parent's reset two days later: results %q (first %q), vendor %d calls (keys %q): "+
			"the grandchild's charge was sent again", again, first, r.v.total(), r.v.keys())
	}
}

// F2 of the gate attack on issue 18: a child's record names the child's workflow,
// but the workflow that can re-create it is its root. Once the children are gone
// from Temporal (closed and past retention — here deleted, which Temporal answers
// the same way) while the parent can still be reset, a sweep that asks Temporal
// about the workflows that can reset a record (store.ResetBy, as idemgate sweep
// --temporal-address asks) keeps the children's charges, and the parent's reset
// gets their stored results. (Before, the sweep asked about the child only, forgot
// both charges, and the reset sent them again.)
func TestSweepKeepsAChildWhoseParentCanBeReset(t *testing.T) {
	var mu sync.Mutex
	clock := time.Now()
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	r := newFeatureRig(t, interceptor.Options{Now: now}, worker.Options{})
	id := "parent-sweep-child"
	first, runID := r.runParent(id, ParentWF, "ChildWF")
	if len(first) != 2 || r.v.total() != 2 {
		t.Fatalf("child and grandchild charged %q, vendor %d", first, r.v.total())
	}
	mu.Lock()
	clock = clock.Add(48 * time.Hour)
	mu.Unlock()
	hs := r.st.(store.HeldSweeper)
	ctx := context.Background()
	held, err := hs.Held(ctx, now(), 0)
	if err != nil || len(held) != 2 {
		t.Fatalf("held records: %d, %v", len(held), err)
	}
	for _, rec := range held { // the children pass retention; the parent is still known
		if _, err := r.c.WorkflowService().DeleteWorkflowExecution(ctx, &workflowservice.DeleteWorkflowExecutionRequest{
			Namespace: server.GetDefaultNamespace(), WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: rec.WorkflowID}}); err != nil {
			t.Fatal(err)
		}
	}
	known := func(wf string) bool {
		_, err := r.c.DescribeWorkflowExecution(ctx, wf, "")
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return false
		}
		if err != nil {
			t.Fatalf("describe %s: %v", wf, err)
		}
		return true
	}
	deadline := time.Now().Add(2 * time.Minute)
	for _, rec := range held { // the deletion is asynchronous: wait until Temporal no longer has the child
		for known(rec.WorkflowID) {
			if time.Now().After(deadline) {
				t.Fatalf("workflow %s still known after its deletion", rec.WorkflowID)
			}
			time.Sleep(50 * time.Millisecond) // polling a condition, not synchronising on time
		}
	}
	// The sweep's rule (cmd/idemgate sweepHeld): forget when Temporal knows none of
	// the workflows that can reset the record.
	for _, rec := range held {
		if slices.ContainsFunc(store.ResetBy(rec), known) {
			continue
		}
		if _, err := hs.Forget(ctx, rec, now()); err != nil {
			t.Fatal(err)
		}
	}
	if !known(id) {
		t.Fatalf("the parent %s must still be known to Temporal (resettable)", id)
	}
	var again []string
	r.resetToStart(id, runID, &again)
	if r.v.total() != 2 || fmt.Sprint(again) != fmt.Sprint(first) {
		t.Fatalf("after the sweep and the parent's reset: results %q (first %q), vendor %d calls (keys %q): the children's charges were sent again",
			again, first, r.v.total(), r.v.keys())
	}
}
