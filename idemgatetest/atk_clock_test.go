package idemgatetest_test

import (
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/idemgate/idemgate/idemgatetest"
	"github.com/idemgate/idemgate/store"
)

func longNoteWorkflow(ctx workflow.Context) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 48 * time.Hour,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 1, MaximumAttempts: 3}})
	var a string
	err := workflow.ExecuteActivity(ctx, "SendNote", "ada").Get(ctx, &a)
	return a, err
}

// A crash of a write with a long start-to-close timeout: the kit's clock jumps past
// the dead attempt's lease, which is longer than the store's window. The retry must
// still be refused, not run as a new write.
func TestCrashWithALongTimeoutIsRefused(t *testing.T) {
	r := newRecorder(t)
	k := idemgatetest.New(r)
	k.CrashAfterVendor("SendNote")
	env := k.NewWorkflowEnvironment()
	env.RegisterWorkflow(longNoteWorkflow)
	env.RegisterActivity(&lookup{})
	env.ExecuteWorkflow(longNoteWorkflow)
	var got []string
	for _, d := range k.Decisions("SendNote") {
		got = append(got, d.Decision)
	}
	if want := []string{string(store.DecisionUnknown), string(store.DecisionRefusedInFlight)}; !equal(got, want) || k.BodyRuns("SendNote") != 1 {
		t.Fatalf("decisions %v, want %v; body runs %d (want 1)", got, want, k.BodyRuns("SendNote"))
	}
	if errs := r.finish(); len(errs) != 0 {
		t.Fatalf("failures %q", errs)
	}
}
