package interceptor_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/witness"
)

// askLog records the queries a test witness was asked.
type askLog struct {
	mu sync.Mutex
	qs []witness.Query
}

func (l *askLog) add(q witness.Query) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.qs = append(l.qs, q)
}

func (l *askLog) n() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.qs)
}

// lostAnswer makes attempt 1 of every write reach the vendor (or not) and then end
// without proof either way, so the record is left unknown.
func lostAnswer(h *harness, reached bool) {
	h.tools.fail = func(ctx context.Context) (error, bool) {
		if ctxAttempt(ctx) == 1 {
			return errors.New("connection reset after the request was written"), reached
		}
		return nil, false
	}
}

// A witness that knows the write happened settles the key as sent: the retry gets
// the witness's result, the vendor acted once, and the receipt names the witness.
func TestWitnessSettlesSent(t *testing.T) {
	h := newHarness(t)
	lostAnswer(h, true)
	var asked askLog
	h.opts.Witnesses = map[string][]witness.Witness{"ChargeCard": {witness.Func("ledger", func(_ context.Context, q witness.Query) (witness.Answer, error) {
		asked.add(q)
		return witness.Answer{Verdict: witness.Sent, Result: "charge found in the ledger", Evidence: "ledger entry 17"}, nil
	})}}
	out, err := h.run("wf-witness-sent", call{Activity: "ChargeCard", Charge: charge, MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	if out[0] != "charge found in the ledger" || h.v.count() != 1 {
		t.Fatalf("result %q, vendor %d; want the witness's result and one effect", out, h.v.count())
	}
	if asked.n() != 1 || asked.qs[0].Record.Key != h.v.seen()[0] || asked.qs[0].Namespace != testNamespace {
		t.Fatalf("witness asked %d times (%+v)", asked.n(), asked.qs)
	}
	rs := h.receipts(store.ReceiptFilter{Decision: store.DecisionResolved})
	if len(rs) != 1 || rs[0].Actor != "witness:ledger" || rs[0].Reason != "ledger entry 17" || rs[0].Resolution != store.ResolvedSent {
		t.Fatalf("settlement receipts = %+v", rs)
	}
	if d := decisionsOf(h.receipts(store.ReceiptFilter{Key: h.v.seen()[0]})); d != "claimed unknown resolved replayed" {
		t.Fatalf("receipts = %s", d)
	}
}

// A witness's "not sent" counts only when asked at or after the earlier attempt's
// lease plus store.LeaseMargin (until then the attempt may still reach the vendor):
// asked before, the write is refused (held) and the answer quoted; asked after, the
// key is released and the write runs once.
func TestWitnessNotSentCountsAfterTheLease(t *testing.T) {
	h := newHarness(t)
	lostAnswer(h, false)
	h.opts.HoldUnknown = time.Minute
	var asked askLog
	h.opts.Witnesses = map[string][]witness.Witness{"": {witness.Func("ledger", func(_ context.Context, q witness.Query) (witness.Answer, error) {
		asked.add(q)
		return witness.Answer{Verdict: witness.NotSent, Evidence: "no entry"}, nil
	})}}
	var env *testsuite.TestWorkflowEnvironment
	h.opts.Now = func() time.Time { return env.Now() }
	env = h.env("wf-witness-not-sent")
	env.ExecuteWorkflow("calls", []call{{Activity: "ChargeCard", Charge: charge, MaxAttempts: 100}})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var out []string
	if err := env.GetWorkflowResult(&out); err != nil || !strings.HasPrefix(out[0], "charge done (attempt ") {
		t.Fatalf("result %q (%v); want a later attempt to run", out, err)
	}
	if h.v.count() != 1 {
		t.Fatalf("vendor %d, want 1", h.v.count())
	}
	refused := h.receipts(store.ReceiptFilter{Decision: store.DecisionRefusedInFlight})
	if len(refused) != 1 || !strings.Contains(refused[0].Error, "ledger: not sent, but asked before ") ||
		heldDelay(t, refused[0].Error) < store.LeaseMargin {
		t.Fatalf("refusals = %+v; want one, quoting the early answer, retried when it counts (lease+margin)", refused)
	}
	rs := h.receipts(store.ReceiptFilter{Decision: store.DecisionResolved})
	if len(rs) != 1 || rs[0].Resolution != store.ResolvedNotSent || rs[0].Actor != "witness:ledger" || asked.n() != len(refused)+1 {
		t.Fatalf("settlements %+v, asked %d times, %d refusals", rs, asked.n(), len(refused))
	}
	first := asked.qs[0].Record
	last := asked.qs[len(asked.qs)-1]
	if from := store.NotSentFrom(first); last.Now.Before(from) || asked.qs[len(asked.qs)-2].Now.After(from) {
		t.Fatalf("settled by the answer asked at %s; lease+margin %s", last.Now, from)
	}
}

// A witness that errs, panics, times out or cannot tell settles nothing: the write
// is refused as before, and the refusal says what each witness said.
func TestWitnessThatCannotTellSettlesNothing(t *testing.T) {
	h := newHarness(t)
	lostAnswer(h, true)
	h.opts.WitnessTimeout = 50 * time.Millisecond
	h.opts.Witnesses = map[string][]witness.Witness{
		"ChargeCard": {
			witness.Func("down", func(context.Context, witness.Query) (witness.Answer, error) {
				return witness.Answer{}, errors.New("ledger unreachable")
			}),
			witness.Func("crashy", func(context.Context, witness.Query) (witness.Answer, error) { panic("boom") }),
			witness.Func("slow", func(ctx context.Context, _ witness.Query) (witness.Answer, error) {
				<-ctx.Done()
				return witness.Answer{Verdict: witness.NotSent}, nil // a late answer must not count
			}),
			witness.Func("unsure", func(context.Context, witness.Query) (witness.Answer, error) {
				return witness.Answer{Verdict: witness.CannotTell, Evidence: "no lookup for this vendor"}, nil
			}),
		},
		// Registered for another activity: never asked about ChargeCard.
		"RefundCard": {witness.Func("other", func(context.Context, witness.Query) (witness.Answer, error) {
			return witness.Answer{Verdict: witness.NotSent}, nil
		})},
	}
	_, err := h.run("wf-witness-unsure", call{Activity: "ChargeCard", Charge: charge, MaxAttempts: 3})
	app := appErr(t, err)
	if app.Type() != interceptor.ErrTypeInFlight || !app.NonRetryable() {
		t.Fatalf("%s non-retryable=%v, want the refusal for good", app.Type(), app.NonRetryable())
	}
	for _, want := range []string{"down: error: ledger unreachable", "crashy: error: the witness panicked: boom",
		"slow: error: no answer within 50ms", "unsure: cannot tell (no lookup for this vendor)"} {
		if !strings.Contains(app.Error(), want) {
			t.Errorf("refusal does not say %q: %s", want, app.Error())
		}
	}
	if strings.Contains(app.Error(), "other") || h.v.count() != 1 {
		t.Fatalf("vendor %d; refusal %s", h.v.count(), app.Error())
	}
	if rs := h.receipts(store.ReceiptFilter{Decision: store.DecisionResolved}); len(rs) != 0 {
		t.Fatalf("settled by %+v", rs)
	}
}

func TestWitnessOptionsValidated(t *testing.T) {
	_, err := interceptor.New(interceptor.Options{Store: newHarness(t).store, WitnessTimeout: -time.Second,
		Witnesses: map[string][]witness.Witness{"ChargeCard": {nil}}})
	if err == nil || !strings.Contains(err.Error(), `Options.Witnesses["ChargeCard"][0] is nil`) ||
		!strings.Contains(err.Error(), "Options.WitnessTimeout = -1s is negative") {
		t.Fatalf("New = %v", err)
	}
}

// atk-core finding 6: the common unknown outcome — an attempt that ends with an
// unmarked error (a connection reset) long before its lease — meets a witness that
// can tell ("not sent"), but only from the lease plus store.LeaseMargin. Without
// Options.HoldUnknown the retry used to be refused for good: the witness never got
// to settle the key. Now the refusal is retried (benign) when the answer counts,
// and the workflow goes on by itself.
func TestEarlyNotSentIsNotRefusedForGood(t *testing.T) {
	h := newHarness(t)
	lostAnswer(h, false)
	h.opts.Witnesses = map[string][]witness.Witness{"ChargeCard": {witness.Func("ledger", func(context.Context, witness.Query) (witness.Answer, error) {
		return witness.Answer{Verdict: witness.NotSent, Evidence: "no entry for the key"}, nil
	})}}
	var env *testsuite.TestWorkflowEnvironment
	h.opts.Now = func() time.Time { return env.Now() }
	env = h.env("wf-atk-early")
	env.ExecuteWorkflow("calls", []call{{Activity: "ChargeCard", Charge: charge, MaxAttempts: 10}})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("refused although the witness can settle the key: %v", err)
	}
	if h.v.count() != 1 {
		t.Fatalf("vendor %d; want one charge", h.v.count())
	}
	refused := h.receipts(store.ReceiptFilter{Decision: store.DecisionRefusedInFlight})
	if len(refused) != 1 || !strings.Contains(refused[0].Error, "A witness said not sent; its answer counts from") {
		t.Fatalf("refusals %+v; want one, retried when the answer counts", refused)
	}
}

// A held refusal says, in its withheld call, whether a witness's early "not sent" is
// waiting to count (WithheldCall.NotSentCountsFrom = store.NotSentFrom of the
// record), so a caller — the fault harness, an operator's tool — can tell a write the
// witness will settle from one that waits for a person. Without such an answer
// (no witness, or one that cannot tell) the field stays empty.
func TestHeldRefusalCarriesTheEarlyNotSent(t *testing.T) {
	for _, c := range []struct {
		name    string
		verdict witness.Verdict
		hold    time.Duration
		early   bool
	}{
		{"not sent, held", witness.NotSent, time.Second, true},
		{"not sent, no hold", witness.NotSent, 0, true},
		{"cannot tell, held", witness.CannotTell, time.Second, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			lostAnswer(h, false)
			h.opts.HoldUnknown = c.hold
			h.opts.Witnesses = map[string][]witness.Witness{"ChargeCard": {witness.Func("ledger", func(context.Context, witness.Query) (witness.Answer, error) {
				return witness.Answer{Verdict: c.verdict, Evidence: "no entry for the key"}, nil
			})}}
			var env *testsuite.TestWorkflowEnvironment
			h.opts.Now = func() time.Time { return env.Now() }
			env = h.env("wf-held-early")
			// Attempt 2 is refused (retryable) and is the last: the workflow sees its error.
			env.ExecuteWorkflow("calls", []call{{Activity: "ChargeCard", Charge: charge, MaxAttempts: 2}})
			app := appErr(t, env.GetWorkflowError())
			var wc interceptor.WithheldCall
			if app.Type() != interceptor.ErrTypeInFlight || !app.HasDetails() || app.Details(&wc) != nil || wc.Activity != "ChargeCard" {
				t.Fatalf("%s (%v): want an IdempotencyInFlight refusal with its withheld call", app.Type(), app)
			}
			if !c.early {
				if wc.NotSentCountsFrom != nil {
					t.Fatalf("NotSentCountsFrom = %v; no witness said not sent", wc.NotSentCountsFrom)
				}
				return
			}
			rec, err := h.store.Get(context.Background(), wc.Key)
			if err != nil {
				t.Fatal(err)
			}
			if wc.NotSentCountsFrom == nil || !wc.NotSentCountsFrom.Equal(store.NotSentFrom(rec)) {
				t.Fatalf("NotSentCountsFrom = %v; want store.NotSentFrom = %s", wc.NotSentCountsFrom, store.NotSentFrom(rec))
			}
		})
	}
}
