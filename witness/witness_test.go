package witness_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memory"
	"github.com/idemgate/idemgate/witness"
)

var t0 = time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)

// unknown leaves key with a claim whose owner ended without proof, its lease at t0+1m.
func unknown(t *testing.T, st *memory.Store, key string) store.Record {
	t.Helper()
	ctx := context.Background()
	c := store.Claim{Key: key, Activity: "ChargeCard", Effect: store.EffectDestructive, ArgsHash: "h", Owner: "o1",
		Lease: t0.Add(time.Minute), Window: time.Hour, WorkflowID: "wf", RunID: "run", Attempt: 1, Now: t0}
	if o, _, err := st.Begin(ctx, c); err != nil || o != store.OutcomeClaimed {
		t.Fatalf("Begin = %s, %v", o, err)
	}
	if err := st.Abandon(ctx, store.Transition{Key: key, Owner: "o1", Now: t0.Add(time.Second),
		Receipt: store.Receipt{Decision: store.DecisionUnknown}}); err != nil {
		t.Fatal(err)
	}
	rec, err := st.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func answer(a witness.Answer) witness.Witness {
	return witness.Func("w", func(context.Context, witness.Query) (witness.Answer, error) { return a, nil })
}

func TestDryRunSettlesNothing(t *testing.T) {
	st := memory.New()
	rec := unknown(t, st, "k-dry")
	a := witness.Asker{Store: st, Now: func() time.Time { return t0.Add(time.Minute + store.LeaseMargin) }}
	rep, err := a.Ask(context.Background(), rec, []witness.Witness{answer(witness.Answer{Verdict: witness.NotSent})}, true)
	if err != nil || !rep.Settled || rep.By != "w" || rep.Verdict != witness.NotSent {
		t.Fatalf("dry run = %+v, %v", rep, err)
	}
	if got, _ := st.Get(context.Background(), "k-dry"); got.State != store.StateUnknown {
		t.Fatalf("a dry run moved the record to %s", got.State)
	}
}

func TestMovedRecordIsNotSettled(t *testing.T) {
	st := memory.New()
	rec := unknown(t, st, "k-moved")
	stale := rec
	stale.Owner = "someone-before"
	a := witness.Asker{Store: st, Now: func() time.Time { return t0.Add(time.Minute + store.LeaseMargin) }}
	rep, err := a.Ask(context.Background(), stale, []witness.Witness{answer(witness.Answer{Verdict: witness.NotSent})}, false)
	if err != nil || rep.Settled || !rep.Moved || !strings.Contains(rep.Summary(), "changed") {
		t.Fatalf("report for a record that moved = %+v (%s), %v", rep, rep.Summary(), err)
	}
	if got, _ := st.Get(context.Background(), "k-moved"); got.State != store.StateUnknown {
		t.Fatalf("record moved to %s", got.State)
	}
}

func TestSentWithoutResult(t *testing.T) {
	st := memory.New()
	rec := unknown(t, st, "k-nores")
	a := witness.Asker{Store: st, Window: time.Hour, Now: func() time.Time { return t0.Add(2 * time.Second) }}
	// A Result with no encoder is an error, and settles nothing.
	if _, err := a.Ask(context.Background(), rec, []witness.Witness{answer(witness.Answer{Verdict: witness.Sent, Result: 1})}, false); err == nil {
		t.Fatal("a result without an encoder settled")
	}
	rep, err := a.Ask(context.Background(), rec, []witness.Witness{answer(witness.Answer{Verdict: witness.Sent, NoResult: true})}, false)
	if err != nil || !rep.Settled {
		t.Fatalf("NoResult = %+v, %v", rep, err)
	}
	got, _ := st.Get(context.Background(), "k-nores")
	if got.State != store.StateCompleted || !got.ResultOmitted {
		t.Fatalf("record = %s omitted=%v; want completed without its result", got.State, got.ResultOmitted)
	}
}
