package interceptor

import (
	"context"
	"testing"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"
)

// In the SDK's test environments an activity has no client: the gate's built-in
// witness is simply absent there (no panic, no history read).
func TestTemporalWitnessAbsentInTheTestsuite(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivityWithOptions(func(ctx context.Context) (bool, error) {
		_, ok := activityHistory(ctx)
		r := &root{}
		return ok || len(r.builtinWitnesses(ctx)) > 0, nil
	}, activity.RegisterOptions{Name: "HistoryProbe"})
	v, err := env.ExecuteActivity("HistoryProbe")
	if err != nil {
		t.Fatal(err)
	}
	var has bool
	if err := v.Get(&has); err != nil || has {
		t.Fatalf("a built-in witness in the testsuite: %v (%v)", has, err)
	}
	if _, ok := activityHistory(context.Background()); ok {
		t.Fatal("a client outside an activity")
	}
}
