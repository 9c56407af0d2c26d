package interceptor

import (
	"testing"

	"go.temporal.io/sdk/workflow"
)

// Attack atk2: a Temporal server that does not send the root workflow execution in a
// child's start event (workflow.Info.RootWorkflowExecution nil: servers from before it
// was added) must not make a child name itself its root: a reset of its parent
// re-creates it under a new SDK-generated workflow ID, and a record whose root is the
// old child's own ID takes that claim for another chain's past the window and sends
// the key again (and the sweep asks about the child only). The parent, which the
// child's start event always names, is the root of a child of a root, and for a
// deeper child the nearest ancestor known.
func TestRootWorkflowIDWithoutTheServersRoot(t *testing.T) {
	child := &workflow.Info{
		WorkflowExecution:       workflow.Execution{ID: "run-a_1", RunID: "c1"},
		ParentWorkflowExecution: &workflow.Execution{ID: "order-1", RunID: "run-a"},
	}
	if got := rootWorkflowID(child); got != "order-1" {
		t.Fatalf("root of a child without the server's root: %q; want its parent %q", got, "order-1")
	}
	child.RootWorkflowExecution = &workflow.Execution{ID: "batch-7", RunID: "b"}
	if got := rootWorkflowID(child); got != "batch-7" {
		t.Fatalf("root of a child with the server's root: %q; want %q", got, "batch-7")
	}
	top := &workflow.Info{WorkflowExecution: workflow.Execution{ID: "order-1", RunID: "run-a"}}
	if got := rootWorkflowID(top); got != "order-1" {
		t.Fatalf("root of a root: %q; want its own ID", got)
	}
}
