package idemgatetest_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
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

func localNoteWorkflow(ctx workflow.Context) (string, error) {
	ctx = workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: time.Minute,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 1, MaximumAttempts: 3}})
	var a string
	err := workflow.ExecuteLocalActivity(ctx, "SendNote", "ada").Get(ctx, &a)
	return a, err
}

// A crash injected into a local activity (real or mocked with a value): its
// retry is refused, and the body ran once.
func TestLocalActivityCrashIsRefused(t *testing.T) {
	for _, mocked := range []bool{false, true} {
		r := newRecorder(t)
		k := idemgatetest.New(r)
		k.CrashAfterVendor("SendNote")
		env := k.NewWorkflowEnvironment()
		env.RegisterWorkflow(localNoteWorkflow)
		env.RegisterActivity(&lookup{})
		if mocked {
			env.OnActivity("SendNote", mock.Anything, "ada").Return("mock ada", nil)
		}
		env.ExecuteWorkflow(localNoteWorkflow)
		var got []string
		for _, d := range k.Decisions("SendNote") {
			got = append(got, d.Decision)
		}
		if want := []string{string(store.DecisionUnknown), string(store.DecisionRefusedInFlight)}; !equal(got, want) || k.BodyRuns("SendNote") != 1 {
			t.Fatalf("mocked %v: decisions %v, want %v; body runs %d (want 1)", mocked, got, want, k.BodyRuns("SendNote"))
		}
		if errs := r.finish(); len(errs) != 0 {
			t.Fatalf("mocked %v: failures %q", mocked, errs)
		}
	}
}
