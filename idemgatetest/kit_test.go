package idemgatetest_test

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/idemgate/idemgate/activities"
	"github.com/idemgate/idemgate/idemgatetest"
	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memory"
	"github.com/idemgate/idemgate/vendorsim"
)

func world(t *testing.T) (*vendorsim.World, *activities.Tools) {
	t.Helper()
	w, err := vendorsim.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	tools, err := activities.New(activities.Endpoints{Docs: w.Docs.URL, CRM: w.CRM.URL, Tickets: w.Tickets.URL,
		Payments: w.Payments.URL, Email: w.Email.URL, Chat: w.Chat.URL})
	if err != nil {
		t.Fatal(err)
	}
	return w, tools
}

var mail = activities.SendEmailInput{To: "ada@example.com", Subject: "Welcome back", Body: "Hi Ada"}

// A user's workflow test: the charge's first attempt reached the processor, the
// worker died, and the processor's window is not configured, so the gate refuses
// the retry with IdempotencyInFlight. The agent loop must stop there and never
// send the e-mail that says the card was charged.
func TestAgentLoopStopsOnRefusedCharge(t *testing.T) {
	w, _ := world(t)
	opts := activities.GateOptions(nil)
	opts.VendorWindows = nil
	k := idemgatetest.New(t, idemgatetest.WithOptions(opts))
	k.CrashAfterVendor("ChargeCard")

	res, err := runAgent(k, w, charge, email)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Steps) != 1 || res.Steps[0].ErrorType != interceptor.ErrTypeInFlight ||
		!strings.HasPrefix(res.Stopped, interceptor.ErrTypeInFlight+": ") {
		t.Fatalf("the loop went on or stopped otherwise: %+v", res)
	}
	if !strings.Contains(res.Steps[0].Error, "Withheld call") {
		t.Errorf("the refusal the workflow saw does not carry the withheld call: %s", res.Steps[0].Error)
	}
	if n := w.Payments.Total(); n != 1 {
		t.Errorf("charges = %d, want 1", n)
	}
	if k.BodyRuns("ChargeCard") != 1 || k.VendorCalls("ChargeCard") != 1 || k.BodyRuns("SendEmail") != 0 || w.Email.Total() != 0 {
		t.Errorf("charge runs %d calls %d, e-mail runs %d sent %d; want 1 1 0 0",
			k.BodyRuns("ChargeCard"), k.VendorCalls("ChargeCard"), k.BodyRuns("SendEmail"), w.Email.Total())
	}
	ds := k.Decisions("ChargeCard")
	if len(ds) != 2 || ds[0].Decision != string(store.DecisionUnknown) || ds[1].Decision != string(store.DecisionRefusedInFlight) ||
		ds[1].ErrorType != interceptor.ErrTypeInFlight || !ds[1].Refused() || ds[1].Attempt != 2 || ds[0].Key != ds[1].Key {
		t.Fatalf("decisions: %+v", ds)
	}
	// The crashed attempt left only its claim, as a dead worker does; the refusal is on record.
	var got []store.Decision
	for _, r := range k.Receipts("ChargeCard") {
		got = append(got, r.Decision)
		if r.Key != ds[0].Key {
			t.Errorf("receipt for key %s, want %s", r.Key, ds[0].Key)
		}
	}
	if want := []store.Decision{store.DecisionClaimed, store.DecisionRefusedInFlight}; !equal(got, want) {
		t.Errorf("receipts %v, want %v", got, want)
	}
}

// Injections apply to one call: the next job runs as usual.
func TestInjectionAppliesOnce(t *testing.T) {
	w, _ := world(t)
	k := idemgatetest.New(t, idemgatetest.WithOptions(activities.GateOptions(nil)))
	k.StoreDown("SendEmail")
	for range 2 {
		if res, err := runAgent(k, w, email); err != nil || res.Stopped != "done" {
			t.Fatalf("job: %v %+v", err, res)
		}
	}
	var got []string
	for _, d := range k.Decisions("SendEmail") {
		got = append(got, d.Decision)
	}
	if want := []string{"refused-store-unavailable", "ran", "ran"}; !equal(got, want) {
		t.Fatalf("decisions %v, want %v", got, want)
	}
	if w.Email.Total() != 2 || k.BodyRuns("SendEmail") != 2 {
		t.Fatalf("e-mails %d, body runs %d; want 2, 2", w.Email.Total(), k.BodyRuns("SendEmail"))
	}
}

// Resume lifts a pause at once.
func TestPauseResume(t *testing.T) {
	w, _ := world(t)
	k := idemgatetest.New(t)
	k.Pause("SendEmail", "test")
	if res, err := runAgent(k, w, email); err != nil || !strings.HasPrefix(res.Stopped, interceptor.ErrTypeWriteGated) {
		t.Fatalf("paused job: %v %+v", err, res)
	}
	k.Resume("SendEmail")
	if res, err := runAgent(k, w, email); err != nil || res.Stopped != "done" {
		t.Fatalf("resumed job: %v %+v", err, res)
	}
	if w.Email.Total() != 1 {
		t.Fatalf("e-mails %d, want 1", w.Email.Total())
	}
}

// Under a plain TestActivityEnvironment with the gate, a write has no key and is
// refused; the kit's environment supplies one per call, derived from the
// activity ID, or the test's own.
func TestActivityEnvironmentSuppliesKey(t *testing.T) {
	w, tools := world(t)

	gate, err := interceptor.New(interceptor.Options{Store: memory.New()})
	if err != nil {
		t.Fatal(err)
	}
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	plain := suite.NewTestActivityEnvironment()
	plain.SetWorkerOptions(worker.Options{Interceptors: []sdkinterceptor.WorkerInterceptor{gate}})
	plain.RegisterActivity(tools)
	if _, err := plain.ExecuteActivity(tools.SendEmail, mail); interceptor.ErrorType(err) != interceptor.ErrTypeKeyMissing {
		t.Fatalf("without the kit: %v, want %s", err, interceptor.ErrTypeKeyMissing)
	}

	k := idemgatetest.New(t)
	env := k.NewActivityEnvironment()
	env.RegisterActivity(tools)
	for range 2 {
		if _, err := env.ExecuteActivity(tools.SendEmail, mail); err != nil {
			t.Fatalf("with the kit: %v", err)
		}
	}
	// A second environment's calls are writes of their own too.
	env2 := k.NewActivityEnvironment()
	env2.RegisterActivity(tools)
	if _, err := env2.ExecuteActivity(tools.SendEmail, mail); err != nil {
		t.Fatal(err)
	}
	ds := k.Decisions("SendEmail")
	if len(ds) != 3 || ds[0].Key == ds[1].Key || ds[1].Key == ds[2].Key || ds[0].Key == ds[2].Key {
		t.Fatalf("want three writes with three keys: %+v", ds)
	}
	if w.Email.Total() != 3 {
		t.Fatalf("e-mails %d, want 3", w.Email.Total())
	}

	// The test's own key: the same write, and a short one is refused as WithKey's would be.
	env3 := k.NewActivityEnvironment()
	env3.RegisterActivity(tools)
	env3.SetHeader(idemgatetest.KeyHeader("short"))
	_, err = env3.ExecuteActivity(tools.SendEmail, mail)
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != interceptor.ErrTypeKeyInvalid {
		t.Fatalf("short key: %v", err)
	}
}

// A refusal reaches an activity test as the ApplicationError a workflow sees.
func TestActivityEnvironmentCrash(t *testing.T) {
	w, tools := world(t)
	k := idemgatetest.New(t)
	k.CrashAfterVendor("SendEmail")
	env := k.NewActivityEnvironment()
	env.RegisterActivity(tools)
	env.SetHeader(idemgatetest.KeyHeader("welcome-mail/cus_42"))
	if _, err := env.ExecuteActivity(tools.SendEmail, mail); !errors.Is(err, idemgatetest.ErrWorkerDied) &&
		!strings.Contains(errString(err), idemgatetest.ErrWorkerDied.Error()) {
		t.Fatalf("first call: %v, want the injected crash", err)
	}
	_, err := env.ExecuteActivity(tools.SendEmail, mail)
	if interceptor.ErrorType(err) != interceptor.ErrTypeInFlight {
		t.Fatalf("second call: %v, want %s", err, interceptor.ErrTypeInFlight)
	}
	if w.Email.Total() != 1 {
		t.Fatalf("e-mails %d, want 1", w.Email.Total())
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func equal[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// tenantHeader is what a context propagator's test sets with SetHeader: a field of
// its own, no key.
func tenantHeader(t *testing.T) *commonpb.Header {
	t.Helper()
	p, err := converter.GetDefaultDataConverter().ToPayload("acme")
	if err != nil {
		t.Fatal(err)
	}
	return &commonpb.Header{Fields: map[string]*commonpb.Payload{"tenant": p}}
}

// A header set for a context propagator must not turn every later call into the
// first one: each call is a write of its own, as without a header, and the test's
// header is left as the test set it.
func TestActivityEnvironmentKeysEachCallWithAHeader(t *testing.T) {
	w, tools := world(t)
	k := idemgatetest.New(t)
	env := k.NewActivityEnvironment()
	env.RegisterActivity(tools)
	h := tenantHeader(t)
	env.SetHeader(h)
	bob := mail
	bob.To = "bob@example.com"
	for i, in := range []activities.SendEmailInput{mail, bob, mail} {
		if _, err := env.ExecuteActivity(tools.SendEmail, in); err != nil {
			t.Fatalf("call %d (%s): %v", i+1, in.To, err)
		}
	}
	ds := k.Decisions("SendEmail")
	if len(ds) != 3 || ds[0].Key == ds[1].Key || ds[1].Key == ds[2].Key || ds[0].Key == ds[2].Key {
		t.Fatalf("want three writes with three keys: %+v", ds)
	}
	for _, d := range ds {
		if d.Decision != string(store.DecisionRan) {
			t.Fatalf("decision %s, want ran: %+v", d.Decision, ds)
		}
	}
	if w.Email.Total() != 3 {
		t.Fatalf("e-mails %d, want 3", w.Email.Total())
	}
	if len(h.Fields) != 1 || h.Fields["tenant"] == nil {
		t.Fatalf("the test's header was changed: %v", h.Fields)
	}
}

// Local activities in an activity environment all share one activity ID in the
// testsuite: each call is still a write of its own, with or without a header.
func TestActivityEnvironmentKeysEachLocalCall(t *testing.T) {
	for _, header := range []bool{false, true} {
		t.Run(fmt.Sprintf("header=%v", header), func(t *testing.T) {
			w, tools := world(t)
			k := idemgatetest.New(t)
			env := k.NewActivityEnvironment()
			if header {
				env.SetHeader(tenantHeader(t))
			}
			for i := range 2 {
				if _, err := env.ExecuteLocalActivity(tools.SendEmail, mail); err != nil {
					t.Fatalf("call %d: %v", i+1, err)
				}
			}
			ds := k.Decisions("SendEmail")
			if len(ds) != 2 || ds[0].Key == ds[1].Key || ds[1].Decision != string(store.DecisionRan) {
				t.Fatalf("want two writes with two keys: %+v", ds)
			}
			if w.Email.Total() != 2 {
				t.Fatalf("e-mails %d, want 2", w.Email.Total())
			}
		})
	}
}
