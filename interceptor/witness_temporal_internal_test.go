package interceptor

import (
	"context"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memory"
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

// The reconciler runs only over a store that can list and settle pending keys,
// only while a worker runs, and stops with the last worker; a negative
// ReconcileEvery disables it.
func TestReconcilerRunsOnlyWhereItCan(t *testing.T) {
	start := func(st store.Gate, every time.Duration) *Plugin {
		t.Helper()
		pl, err := NewPlugin(Options{Store: st}, PluginOptions{ReconcileEvery: every})
		if err != nil {
			t.Fatal(err)
		}
		pl.workers["w"] = &pluginWorker{started: true}
		pl.running = 1
		pl.startReconciler()
		return pl
	}
	if pl := start(struct{ store.Gate }{memory.New()}, time.Millisecond); pl.reconciling != nil {
		t.Fatal("a reconciler over a store that is only a store.Gate")
	}
	if pl := start(memory.New(), -1); pl.reconciling != nil {
		t.Fatal("a reconciler with ReconcileEvery < 0")
	}
	pl := start(memory.New(), 0)
	if pl.p.ReconcileEvery != DefaultReconcileEvery || pl.reconciling == nil {
		t.Fatalf("ReconcileEvery 0: every %v, running %v; want the default, running", pl.p.ReconcileEvery, pl.reconciling != nil)
	}
	run := pl.reconciling
	pl.stopped("w")
	select {
	case <-run.done:
	default:
		t.Fatal("the reconciler outlived the last worker")
	}
}
