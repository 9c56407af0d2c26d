package idemhttp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/idemgate/idemgate/idemhttp"
	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/internal/testutil/patient"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memory"
	"github.com/idemgate/idemgate/vendorsim"
	"github.com/idemgate/idemgate/witness"
)

// fault is what the network does to one attempt's charge.
type fault int

const (
	deliver    fault = iota
	loseAnswer       // the vendor charged; its answer never comes back (connection dropped)
	neverSent        // the connection breaks before the vendor reads the request, the error does not prove it
)

// faultyNet is the base RoundTripper under idemhttp: per attempt, it delivers the
// request, drops the vendor's answer after the vendor acted, or fails in a way that
// does not prove the request stayed here.
type faultyNet struct {
	base  *http.Transport
	plan  func(attempt int32) fault
	mu    sync.Mutex
	tries int32
}

func (f *faultyNet) RoundTrip(req *http.Request) (*http.Response, error) {
	f.mu.Lock()
	f.tries++
	n := f.tries
	f.mu.Unlock()
	switch f.plan(n) {
	case loseAnswer:
		resp, err := f.base.RoundTrip(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		return nil, errors.New("read tcp: connection reset by peer")
	case neverSent:
		return nil, errors.New("write tcp: broken pipe")
	}
	return f.base.RoundTrip(req)
}

// simPayments is a ChargeCard activity that charges the simulated card processor
// through idemhttp (profile), over net.
type simPayments struct {
	url     string
	profile idemhttp.Profile
	net     *faultyNet
}

func (p *simPayments) ChargeCard(ctx context.Context, amount float64) (simCharge, error) {
	c := &http.Client{Transport: idemhttp.NewTransport(p.net, p.profile)}
	body, _ := json.Marshal(map[string]any{"customer": "cus_1", "amount": amount, "currency": "usd"})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.url+"/v1/charges", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return simCharge{}, err
	}
	defer resp.Body.Close()
	var out simCharge
	if resp.StatusCode != 200 {
		return out, fmt.Errorf("charge answered %d", resp.StatusCode)
	}
	return out, json.NewDecoder(resp.Body).Decode(&out)
}

func simChargeWorkflow(ctx workflow.Context, amount float64) (simCharge, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 1, MaximumAttempts: 5},
	})
	var c simCharge
	err := workflow.ExecuteActivity(ctx, "ChargeCard", amount).Get(ctx, &c)
	return c, err
}

// clock is the gate's clock: the wall clock plus an offset a test moves.
type clock struct{ offset atomic.Int64 }

func (c *clock) Now() time.Time            { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *clock) jump(d time.Duration)      { c.offset.Add(int64(d)) }
func (c *clock) after(d time.Duration) int { return int(c.offset.Load() / int64(d)) }

// lookupRun is one workflow charging the simulated card processor through the gate.
type lookupRun struct {
	w     *vendorsim.World
	st    *memory.Store
	clk   *clock
	refus []interceptor.Decision // refusals the gate signalled, in order
}

func (r *lookupRun) run(t *testing.T, opts interceptor.Options, p any) (simCharge, error) {
	t.Helper()
	opts.Store, opts.Now = r.st, r.clk.Now
	observe := opts.Observer
	opts.Observer = func(ctx context.Context, d interceptor.Decision) {
		if d.Decision == string(store.DecisionRefusedInFlight) {
			r.refus = append(r.refus, d)
		}
		if observe != nil {
			observe(ctx, d)
		}
	}
	gate, err := interceptor.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := patient.Env(suite.NewTestWorkflowEnvironment())
	env.SetWorkerOptions(patient.WorkerOptions(gate))
	env.RegisterWorkflowWithOptions(simChargeWorkflow, workflow.RegisterOptions{Name: "charge"})
	env.RegisterActivity(p)
	env.ExecuteWorkflow("charge", float64(2000))
	if !env.IsWorkflowCompleted() {
		t.Fatal("workflow did not complete")
	}
	if err := env.GetWorkflowError(); err != nil {
		return simCharge{}, err
	}
	var c simCharge
	if err := env.GetWorkflowResult(&c); err != nil {
		t.Fatal(err)
	}
	return c, nil
}

func newLookupRun(t *testing.T) *lookupRun {
	return &lookupRun{w: startWorld(t), st: memory.New(), clk: &clock{}}
}

// onlyKey returns the one key the store holds receipts for, and its receipts.
func (r *lookupRun) onlyKey(t *testing.T) (string, []store.Receipt) {
	t.Helper()
	rs, err := r.st.Receipts(context.Background(), store.ReceiptFilter{Activity: "ChargeCard"})
	if err != nil || len(rs) == 0 {
		t.Fatalf("receipts: %v, %v", rs, err)
	}
	for _, x := range rs {
		if x.Key != rs[0].Key {
			t.Fatalf("receipts of two keys: %q and %q", rs[0].Key, x.Key)
		}
	}
	return rs[0].Key, rs
}

func decisionsOf(rs []store.Receipt) []string {
	out := make([]string, len(rs))
	for i, x := range rs {
		out[i] = string(x.Decision)
	}
	return out
}

func resolvedBy(rs []store.Receipt) []store.Receipt {
	var out []store.Receipt
	for _, x := range rs {
		if x.Decision == store.DecisionResolved {
			out = append(out, x)
		}
	}
	return out
}

func lookupWitnesses(t *testing.T, w *vendorsim.World) map[string][]witness.Witness {
	return map[string][]witness.Witness{"ChargeCard": {mustLookup(t, idemhttp.Stripe, chargeLookup(w.Payments.URL))}}
}

// TestLookupWitnessSettlesALostAnswer: the vendor charged, its answer was lost
// (the connection dropped after the vendor acted): the next attempt asks the
// vendor's lookup, which finds the charge — settled sent, the vendor's record is
// the activity's result, one charge, no person.
func TestLookupWitnessSettlesALostAnswer(t *testing.T) {
	r := newLookupRun(t)
	p := &simPayments{url: r.w.Payments.URL, profile: idemhttp.Stripe, net: &faultyNet{base: &http.Transport{},
		plan: func(n int32) fault {
			if n == 1 {
				return loseAnswer
			}
			return deliver
		}}}
	got, err := r.run(t, interceptor.Options{Witnesses: lookupWitnesses(t, r.w)}, p)
	if err != nil {
		t.Fatalf("workflow: %v (the lookup witness should have settled the lost answer)", err)
	}
	if r.w.Payments.Total() != 1 || len(r.w.Payments.Duplicates()) != 0 || r.w.Payments.Lookups() != 1 {
		t.Fatalf("vendor: %d charges, duplicates %v, %d lookups; want 1 charge and 1 lookup", r.w.Payments.Total(),
			r.w.Payments.Duplicates(), r.w.Payments.Lookups())
	}
	rec, _ := r.w.Payments.Record(got.ID)
	if got.ID != "ch_000001" || got.Amount != 2000 || rec["amount"] != got.Amount || rec["status"] != got.Status {
		t.Fatalf("workflow result %+v, vendor's record %v: want the vendor's record", got, rec)
	}
	key, rs := r.onlyKey(t)
	if fmt.Sprint(decisionsOf(rs)) != "[claimed unknown resolved replayed]" {
		t.Fatalf("receipts %v, want claimed unknown resolved replayed", decisionsOf(rs))
	}
	res := rs[2]
	if res.Actor != "witness:idemhttp:stripe" || res.Resolution != store.ResolvedSent || !strings.Contains(res.Reason, "ch_000001") ||
		res.ResultRef == "" {
		t.Fatalf("resolution receipt %+v, want witness:idemhttp:stripe, sent, evidence naming ch_000001, a result", res)
	}
	if stored, err := r.st.Get(context.Background(), key); err != nil || stored.State != store.StateCompleted {
		t.Fatalf("record %+v, %v; want completed", stored, err)
	}
}

// TestLookupWitnessNotSentOnlyAfterTheLease: the charge never reached the vendor,
// but the error cannot prove it. The vendor's authoritative lookup says "nothing
// under the key" at once; asked before the attempt's lease passed, that does not
// count (the attempt could still reach the vendor until its lease plus
// store.LeaseMargin), and the held write is refused and retried. Asked after that,
// it settles the key not sent, and the charge runs once.
func TestLookupWitnessNotSentOnlyAfterTheLease(t *testing.T) {
	r := newLookupRun(t)
	p := &simPayments{url: r.w.Payments.URL, profile: idemhttp.Stripe, net: &faultyNet{base: &http.Transport{},
		plan: func(n int32) fault {
			if n == 1 {
				return neverSent
			}
			return deliver
		}}}
	opts := interceptor.Options{Witnesses: lookupWitnesses(t, r.w), HoldUnknown: time.Second,
		Observer: func(_ context.Context, d interceptor.Decision) {
			// The refused attempt was asked before the lease; time passes until its
			// held retry, which comes after the lease.
			if d.Decision == string(store.DecisionRefusedInFlight) && r.clk.after(time.Hour) == 0 {
				r.clk.jump(time.Hour)
			}
		}}
	got, err := r.run(t, opts, p)
	if err != nil {
		t.Fatalf("workflow: %v", err)
	}
	if r.w.Payments.Total() != 1 || r.w.Payments.Lookups() != 2 || got.ID != "ch_000001" {
		t.Fatalf("vendor: %d charges, %d lookups, result %+v; want one charge after two lookups", r.w.Payments.Total(),
			r.w.Payments.Lookups(), got)
	}
	if len(r.refus) != 1 || r.refus[0].Attempt != 2 {
		t.Fatalf("refusals %+v, want attempt 2's only (the early not-sent)", r.refus)
	}
	if msg := r.refus[0].Err.Error(); !strings.Contains(msg, "idemhttp:stripe: not sent, but asked before ") {
		t.Errorf("the refusal does not quote the early answer: %s", msg)
	}
	_, rs := r.onlyKey(t)
	if fmt.Sprint(decisionsOf(rs)) != "[claimed unknown refused-in-flight resolved claimed ran]" {
		t.Fatalf("receipts %v", decisionsOf(rs))
	}
	res := resolvedBy(rs)[0]
	if res.Actor != "witness:idemhttp:stripe" || res.Resolution != store.ResolvedNotSent || res.Attempt != 1 ||
		!strings.Contains(res.Reason, "nothing under vendor key") {
		t.Fatalf("resolution receipt %+v, want witness:idemhttp:stripe, not sent", res)
	}
}

// TestLookupWitnessThatErrsSettlesNothing: the vendor charged and its answer was
// lost, and its lookup answers 503: nothing is settled, the write is refused with
// what the witness said, and there is still one charge.
func TestLookupWitnessThatErrsSettlesNothing(t *testing.T) {
	r := newLookupRun(t)
	r.w.Payments.SetBeforeLookup(func(w http.ResponseWriter, _ *http.Request) bool {
		w.WriteHeader(http.StatusServiceUnavailable)
		return false
	})
	p := &simPayments{url: r.w.Payments.URL, profile: idemhttp.Stripe, net: &faultyNet{base: &http.Transport{},
		plan: func(int32) fault { return loseAnswer }}}
	_, err := r.run(t, interceptor.Options{Witnesses: lookupWitnesses(t, r.w)}, p)
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != interceptor.ErrTypeInFlight || !app.NonRetryable() {
		t.Fatalf("workflow error %v, want a non-retryable %s", err, interceptor.ErrTypeInFlight)
	}
	if !strings.Contains(app.Error(), "idemhttp:stripe: error:") || !strings.Contains(app.Error(), "503") {
		t.Errorf("the refusal does not say what the witness said: %v", app)
	}
	if r.w.Payments.Total() != 1 || r.w.Payments.Lookups() != 1 {
		t.Fatalf("vendor: %d charges, %d lookups; want 1 and 1", r.w.Payments.Total(), r.w.Payments.Lookups())
	}
	key, rs := r.onlyKey(t)
	if len(resolvedBy(rs)) != 0 {
		t.Fatalf("receipts %v: a witness that erred settled the key", decisionsOf(rs))
	}
	if rec, _ := r.st.Get(context.Background(), key); rec.State != store.StateUnknown {
		t.Fatalf("record state %s, want unknown", rec.State)
	}
}

// TestLookupWitnessOfAnotherProfileCannotTell: the charge went out through a
// profile named "payments-eu"; the witness asks through "stripe", whose evidence it
// is not: it cannot tell, asks nothing of the vendor, and the write is refused.
func TestLookupWitnessOfAnotherProfileCannotTell(t *testing.T) {
	r := newLookupRun(t)
	eu := idemhttp.Stripe
	eu.Name = "payments-eu"
	p := &simPayments{url: r.w.Payments.URL, profile: eu, net: &faultyNet{base: &http.Transport{},
		plan: func(int32) fault { return neverSent }}}
	_, err := r.run(t, interceptor.Options{Witnesses: lookupWitnesses(t, r.w)}, p)
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != interceptor.ErrTypeInFlight {
		t.Fatalf("workflow error %v, want %s", err, interceptor.ErrTypeInFlight)
	}
	if !strings.Contains(app.Error(), "idemhttp:stripe: cannot tell (the key left through idemhttp:payments-eu") {
		t.Errorf("the refusal does not say why the witness cannot tell: %v", app)
	}
	if r.w.Payments.Lookups() != 0 || r.w.Payments.Total() != 0 {
		t.Fatalf("vendor: %d lookups, %d charges; want none", r.w.Payments.Lookups(), r.w.Payments.Total())
	}
}
