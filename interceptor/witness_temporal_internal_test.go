package interceptor

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memory"
	"github.com/idemgate/idemgate/witness"
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

type quietLog struct{}

func (quietLog) Info(string, ...any) {}
func (quietLog) Warn(string, ...any) {}

// A key no witness can tell is asked again only after a backoff that doubles, and
// meanwhile the round reaches the keys behind it instead of asking the same page.
func TestReconcilerBacksOffKeysNobodyCanTell(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	now := t0
	st := memory.New()
	asked := map[string]int{}
	r := newRoot(mustDefaults(t, Options{Store: st, Now: func() time.Time { return now },
		Witnesses: map[string][]witness.Witness{"": {witness.Func("nobody", func(_ context.Context, q witness.Query) (witness.Answer, error) {
			asked[q.Record.Key]++
			return witness.Answer{Verdict: witness.CannotTell}, nil
		})}}}))
	ctx := context.Background()
	for i, key := range []string{"k1", "k2", "k3"} {
		at := t0.Add(-time.Hour + time.Duration(i)*time.Minute)
		cl := store.Claim{Key: key, Activity: "ChargeCard", Effect: "destructive", ArgsHash: "h", Args: []byte("[1]"),
			Owner: "o-" + key, Lease: at.Add(time.Second), Window: time.Hour, Now: at}
		if o, _, err := st.Begin(ctx, cl); err != nil || o != store.OutcomeClaimed {
			t.Fatalf("claim %s: %v %v", key, o, err)
		}
		if err := st.Abandon(ctx, store.Transition{Key: key, Owner: cl.Owner, Now: at.Add(2 * time.Second),
			Receipt: store.Receipt{Key: key, Activity: cl.Activity, Effect: cl.Effect, Decision: store.DecisionUnknown}}); err != nil {
			t.Fatal(err)
		}
	}
	state := &reconcileState{page: 2, every: time.Minute}
	round := func(at time.Duration, want string) {
		t.Helper()
		now = t0.Add(at)
		r.reconcile(ctx, state, quietLog{})
		if got := fmt.Sprintf("k1=%d k2=%d k3=%d", asked["k1"], asked["k2"], asked["k3"]); got != want {
			t.Fatalf("after the round at +%v: %s, want %s", at, got, want)
		}
	}
	round(0, "k1=1 k2=1 k3=0")           // a page of two
	round(0, "k1=1 k2=1 k3=1")           // k1, k2 wait: the round reaches k3
	round(time.Minute, "k1=2 k2=2 k3=1") // due again; k3 is due too, past the page
	round(2*time.Minute, "k1=2 k2=2 k3=2")
	round(3*time.Minute, "k1=3 k2=3 k3=2") // k1, k2 waited twice as long
}

func mustDefaults(t *testing.T, o Options) Options {
	t.Helper()
	o, err := o.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	return o
}
