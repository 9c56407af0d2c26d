package interceptor_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memory"
	"github.com/idemgate/idemgate/witness"
)

// An unnamed witness would reach the store as a person (store.Transition.Witness
// "") and settle by a person's rules: an abandoned claim's "not sent" at once,
// before the earlier attempt's lease. New refuses it.
func TestAtkCoreUnnamedWitnessRejected(t *testing.T) {
	notSent := func(context.Context, witness.Query) (witness.Answer, error) {
		return witness.Answer{Verdict: witness.NotSent}, nil
	}
	_, err := interceptor.New(interceptor.Options{Store: newHarness(t).store,
		Witnesses: map[string][]witness.Witness{"": {witness.Func("ledger", notSent), witness.Func(" ", notSent)}}})
	if err == nil || !strings.Contains(err.Error(), `Options.Witnesses[""][1] has no name`) {
		t.Fatalf("New = %v; want the unnamed witness refused", err)
	}
}

// A witness that ignores its ctx held the attempt for as long as it blocked:
// Options.WitnessTimeout bounded it only through ctx. The attempt is refused at the
// bound, quoting it.
func TestAtkCoreDeafWitnessDoesNotHangTheGate(t *testing.T) {
	h := newHarness(t)
	lostAnswer(h, true)
	stuck := make(chan struct{})
	defer close(stuck)
	h.opts.WitnessTimeout = 50 * time.Millisecond
	h.opts.Witnesses = map[string][]witness.Witness{"ChargeCard": {witness.Func("deaf", func(context.Context, witness.Query) (witness.Answer, error) {
		<-stuck // a vendor SDK call without a ctx
		return witness.Answer{Verdict: witness.Sent, Result: "late"}, nil
	})}}
	env := h.env("wf-atk-deaf")
	done := make(chan error, 1)
	go func() {
		env.ExecuteWorkflow("calls", []call{{Activity: "ChargeCard", Charge: charge, MaxAttempts: 3}})
		done <- env.GetWorkflowError()
	}()
	select {
	case err := <-done:
		app := appErr(t, err)
		if app.Type() != interceptor.ErrTypeInFlight || !strings.Contains(app.Error(), "deaf: error: no answer within 50ms") {
			t.Fatalf("refusal %s: %s", app.Type(), app.Error())
		}
	case <-time.After(45 * time.Second):
		t.Fatal("the gate still waits on a witness that ignores its ctx, 45s after Options.WitnessTimeout (50ms)")
	}
	if h.v.count() != 1 {
		t.Fatalf("vendor %d, want 1", h.v.count())
	}
}

// The gate stores no result over Options.MaxResultSize; a witness's result went
// into the store, and back to Temporal, whatever its size. It is bounded the same
// way: settled as sent without its result, the repeat refused.
func TestAtkCoreWitnessResultBoundedAtTheGate(t *testing.T) {
	h := newHarness(t)
	lostAnswer(h, true)
	h.opts.MaxResultSize = 4 << 10
	h.opts.Witnesses = map[string][]witness.Witness{"ChargeCard": {witness.Func("ledger", func(context.Context, witness.Query) (witness.Answer, error) {
		return witness.Answer{Verdict: witness.Sent, Result: strings.Repeat("x", 64<<10), Evidence: "ledger entry 17"}, nil
	})}}
	_, err := h.run("wf-atk-huge", call{Activity: "ChargeCard", Charge: charge, MaxAttempts: 3})
	if app := appErr(t, err); app.Type() != interceptor.ErrTypeResultNotStored {
		t.Fatalf("%s: %s; want the repeat refused as its result is not stored", app.Type(), app.Error())
	}
	rec, err := h.store.Get(context.Background(), h.v.seen()[0])
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != store.StateCompleted || !rec.ResultOmitted || len(rec.Result) > h.opts.MaxResultSize {
		t.Fatalf("record %s omitted=%v with a %d-byte result over MaxResultSize %d", rec.State, rec.ResultOmitted,
			len(rec.Result), h.opts.MaxResultSize)
	}
	if h.v.count() != 1 {
		t.Fatalf("vendor %d, want 1", h.v.count())
	}
}

// gateOnly is a store wrapped for the gate alone (metrics, tracing): no Resolve.
type gateOnly struct{ store.Gate }

// Options.Witnesses with a store that cannot settle (no Resolve) were silently
// never asked: every unknown outcome refused as if no witness existed. New says so.
func TestAtkCoreWitnessesNeedAStoreThatSettles(t *testing.T) {
	_, err := interceptor.New(interceptor.Options{Store: gateOnly{newHarness(t).store},
		Witnesses: map[string][]witness.Witness{"ChargeCard": {witness.Func("ledger", func(context.Context, witness.Query) (witness.Answer, error) {
			return witness.Answer{Verdict: witness.NotSent}, nil
		})}}})
	if err == nil || !strings.Contains(err.Error(), "Options.Witnesses") || !strings.Contains(err.Error(), "Resolve") {
		t.Fatalf("New = %v; want Witnesses refused on a store that cannot settle", err)
	}
}

// What witnesses said goes into the refusal's message (and its receipt) in full:
// an error carrying a vendor's whole response body made a refusal of megabytes,
// past what Temporal accepts for a failure. Each answer is quoted within a bound.
func TestAtkCoreHugeWitnessAnswerBoundedInRefusal(t *testing.T) {
	h := newHarness(t)
	lostAnswer(h, true)
	body := strings.Repeat("<html>", 200<<10)
	h.opts.Witnesses = map[string][]witness.Witness{"ChargeCard": {
		witness.Func("lookup", func(context.Context, witness.Query) (witness.Answer, error) {
			return witness.Answer{}, errors.New("GET /v1/charges: 502: " + body)
		}),
		witness.Func("search", func(context.Context, witness.Query) (witness.Answer, error) {
			return witness.Answer{Verdict: witness.CannotTell, Evidence: "search index stale: " + body}, nil
		}),
	}}
	_, err := h.run("wf-atk-huge-said", call{Activity: "ChargeCard", Charge: charge, MaxAttempts: 3})
	app := appErr(t, err)
	msg := app.Error()
	if app.Type() != interceptor.ErrTypeInFlight || !strings.Contains(msg, "lookup: error: GET /v1/charges: 502: <html>") ||
		!strings.Contains(msg, "search: cannot tell (search index stale: <html>") {
		t.Fatalf("refusal %s does not quote the witnesses: %.2000s", app.Type(), msg)
	}
	if len(msg) > 16<<10 {
		t.Fatalf("refusal message is %d bytes; want what the witnesses said quoted within a bound", len(msg))
	}
}

// flakyResolve is a store whose Resolve is unreachable the first n times.
type flakyResolve struct {
	*memory.Store
	mu sync.Mutex
	n  int
}

func (f *flakyResolve) Resolve(ctx context.Context, t store.Transition, to store.State) error {
	f.mu.Lock()
	down := f.n > 0
	f.n--
	f.mu.Unlock()
	if down {
		return fmt.Errorf("%w: connection refused", store.ErrUnavailable)
	}
	return f.Store.Resolve(ctx, t, to)
}

// A witness that could tell, whose settlement met a store outage, made the gate
// refuse the write for good (non-retryable, quoting "no witness could tell"),
// where every other store outage on the write path fails closed and retryable.
// The attempt fails as the store being unavailable; the retry settles.
func TestAtkCoreStoreOutageWhileSettlingIsRetried(t *testing.T) {
	h := newHarness(t)
	lostAnswer(h, true)
	h.opts.Store = &flakyResolve{Store: h.store, n: 1}
	h.opts.Witnesses = map[string][]witness.Witness{"ChargeCard": {witness.Func("ledger", func(context.Context, witness.Query) (witness.Answer, error) {
		return witness.Answer{Verdict: witness.Sent, Result: "charge found in the ledger", Evidence: "ledger entry 17"}, nil
	})}}
	out, err := h.run("wf-atk-settle-outage", call{Activity: "ChargeCard", Charge: charge, MaxAttempts: 5})
	if err != nil {
		t.Fatalf("refused after a store outage while settling: %v", err)
	}
	if len(out) != 1 || out[0] != "charge found in the ledger" || h.v.count() != 1 {
		t.Fatalf("result %q, vendor %d; want the witness's result and one charge", out, h.v.count())
	}
}
