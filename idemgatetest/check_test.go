package idemgatetest_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/idemgate/idemgate/activities"
	"github.com/idemgate/idemgate/idemgatetest"
	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/store"
)

// has reports whether one of errs contains every one of parts.
func has(errs []string, parts ...string) bool {
	for _, e := range errs {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(e, p)
		}
		if all {
			return true
		}
	}
	return false
}

// An injection that names no registered activity would do nothing, and the test
// would pass on a premise that never held: the kit fails it, naming the injection
// and the activities there are. The same for one that names an activity that never
// reaches the gate after it, and for a read-back of a name nothing has.
func TestInjectionThatDoesNothingFails(t *testing.T) {
	w, _ := world(t)
	r := newRecorder(t)
	k := idemgatetest.New(r, idemgatetest.WithOptions(activities.GateOptions(nil)))
	k.CrashAfterVendor("ChargeCards") // a typo: the activity is ChargeCard
	k.StoreDown("SendEmail")          // registered, but the job sends no e-mail
	if res, err := runAgent(k, w, charge); err != nil || res.Stopped != "done" {
		t.Fatalf("job: %v %+v", err, res)
	}
	if n := k.BodyRuns("SendMail"); n != 0 { // another typo: the activity is SendEmail
		t.Fatalf("BodyRuns(SendMail) = %d", n)
	}
	errs := r.finish()
	if !has(errs, `CrashAfterVendor("ChargeCards") did nothing`, "ChargeCard, ", "SendEmail", "Next step") {
		t.Errorf("no failure names the injection and the registered activities: %q", errs)
	}
	if !has(errs, `StoreDown("SendEmail") did nothing`, "no call of SendEmail reached the gate") {
		t.Errorf("no failure for the injection that never applied: %q", errs)
	}
	if !has(errs, `BodyRuns("SendMail")`, "neither registered nor reached the gate") {
		t.Errorf("no failure for the read-back of an unknown name: %q", errs)
	}
	if len(errs) != 3 {
		t.Errorf("want 3 failures, got %q", errs)
	}

	// A test whose injections all applied has nothing reported.
	r = newRecorder(t)
	k = idemgatetest.New(r, idemgatetest.WithOptions(activities.GateOptions(nil)))
	k.StoreDown("ChargeCard")
	if res, err := runAgent(k, w, charge); err != nil || res.Stopped != "done" {
		t.Fatalf("job: %v %+v", err, res)
	}
	k.BodyRuns("ChargeCard")
	if errs := r.finish(); len(errs) != 0 {
		t.Fatalf("failures for a sound test: %q", errs)
	}
}

// toolCall is the argument of a generic tool-calling activity.
type toolCall struct {
	Tool    string `json:"tool"`
	Contact string `json:"contact"`
}

type crm struct {
	mu   sync.Mutex
	runs map[string]int
}

func (c *crm) CallTool(_ context.Context, in toolCall) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.runs[in.Tool]++
	return in.Tool + " " + in.Contact, nil
}

func toolWorkflow(ctx workflow.Context) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 1, MaximumAttempts: 2}})
	if err := workflow.ExecuteActivity(ctx, "CallTool", toolCall{Tool: "get_contact", Contact: "c1"}).Get(ctx, nil); err != nil {
		return err
	}
	return workflow.ExecuteActivity(ctx, "CallTool", toolCall{Tool: "delete_contact", Contact: "c1"}).Get(ctx, nil)
}

// An injection can target one tool of a generic tool-calling activity
// (Options.ToolNames), by the name the gate gives it: the other tools' calls are
// untouched.
func TestInjectionTargetsOneTool(t *testing.T) {
	c := &crm{runs: map[string]int{}}
	k := idemgatetest.New(t, idemgatetest.WithOptions(interceptor.Options{
		ToolNames: map[string]interceptor.ToolName{"CallTool": {Prefix: "crm.", Fields: []string{"tool"}}}}))
	k.CrashAfterVendor("crm.delete_contact")
	env := k.NewWorkflowEnvironment()
	env.RegisterWorkflow(toolWorkflow)
	env.RegisterActivity(c)
	env.ExecuteWorkflow(toolWorkflow)
	if !env.IsWorkflowCompleted() {
		t.Fatal("the workflow did not complete")
	}
	if err := env.GetWorkflowError(); interceptor.ErrorType(err) != interceptor.ErrTypeInFlight {
		t.Fatalf("workflow error %v, want %s (the crashed delete refused)", err, interceptor.ErrTypeInFlight)
	}
	var got []string
	for _, d := range k.Decisions("crm.delete_contact") {
		got = append(got, d.Decision)
	}
	if want := []string{string(store.DecisionUnknown), string(store.DecisionRefusedInFlight)}; !equal(got, want) {
		t.Fatalf("delete decisions %v, want %v", got, want)
	}
	if ds := k.Decisions("crm.get_contact"); len(ds) != 1 || ds[0].Decision != string(store.DecisionRan) {
		t.Fatalf("get decisions %+v, want one ran", ds)
	}
	if c.runs["delete_contact"] != 1 || c.runs["get_contact"] != 1 || k.BodyRuns("crm.delete_contact") != 1 || k.BodyRuns("CallTool") != 2 {
		t.Fatalf("runs %v, BodyRuns delete %d, CallTool %d; want 1 each, CallTool 2", c.runs, k.BodyRuns("crm.delete_contact"), k.BodyRuns("CallTool"))
	}
}

// An injection naming a generic tool activity's type applies to the next call of
// any of its tools that reaches the injection's point: StoreDown to the first
// claim (reads claim nothing).
func TestStoreDownByToolActivityType(t *testing.T) {
	c := &crm{runs: map[string]int{}}
	k := idemgatetest.New(t, idemgatetest.WithOptions(interceptor.Options{
		ToolNames: map[string]interceptor.ToolName{"CallTool": {Prefix: "crm.", Fields: []string{"tool"}}}}))
	k.StoreDown("CallTool")
	env := k.NewWorkflowEnvironment()
	env.RegisterWorkflow(toolWorkflow)
	env.RegisterActivity(c)
	env.ExecuteWorkflow(toolWorkflow)
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range k.Decisions("crm.delete_contact") {
		got = append(got, d.Decision)
	}
	if want := []string{"refused-store-unavailable", string(store.DecisionRan)}; !equal(got, want) || c.runs["delete_contact"] != 1 {
		t.Fatalf("delete decisions %v, want %v; runs %v", got, want, c.runs)
	}
}

// samples-go's fileprocessing test sets its own worker options after building the
// environment, which drops the kit's interceptors: its activities then run without
// the gate and the test passes with no decision. The kit fails such a test, and
// WorkerOptions keeps the gate.
func TestSetWorkerOptionsAfterTheKitIsDetected(t *testing.T) {
	w, _ := world(t)
	r := newRecorder(t)
	k := idemgatetest.New(r)
	env, _ := newAgentEnv(t, k, w)
	env.SetWorkerOptions(worker.Options{EnableSessionWorker: true})
	if res := runIn(t, env, email); res.Stopped != "done" {
		t.Fatalf("job: %+v", res)
	}
	errs := r.finish()
	if len(k.Decisions("")) != 0 || !has(errs, "activity SendEmail", "completed without passing the gate", "env.SetWorkerOptions", "Next step") {
		t.Fatalf("decisions %d, failures %q; want none and one naming SendEmail", len(k.Decisions("")), errs)
	}

	r = newRecorder(t)
	k = idemgatetest.New(r)
	env, _ = newAgentEnv(t, k, w)
	env.SetWorkerOptions(k.WorkerOptions(worker.Options{EnableSessionWorker: true}))
	if res := runIn(t, env, email); res.Stopped != "done" {
		t.Fatalf("job: %+v", res)
	}
	if errs := r.finish(); len(errs) != 0 || len(k.Decisions("SendEmail")) != 1 {
		t.Fatalf("with k.WorkerOptions: failures %q, decisions %+v", errs, k.Decisions(""))
	}
}

// Activities mocked with plain values (OnActivity(...).Return(value)), as 8 of 13
// samples-go tests do, go through the gate too: keys, classes, injections.
func TestMockedActivitiesPassTheGate(t *testing.T) {
	w, _ := world(t)
	opts := activities.GateOptions(nil)
	opts.VendorWindows = nil
	k := idemgatetest.New(t, idemgatetest.WithOptions(opts))
	k.CrashAfterVendor("SendEmail")
	env, tools := newAgentEnv(t, k, w)
	env.OnActivity(tools.SendEmail, mock.Anything, mock.Anything).Return(activities.EmailReceipt{MessageID: "mocked"}, nil)
	env.OnActivity("ChargeCard", mock.Anything, mock.Anything).Return(activities.Charge{}, nil)
	res := runIn(t, env, charge, email)
	if len(res.Steps) != 2 || res.Steps[1].ErrorType != interceptor.ErrTypeInFlight {
		t.Fatalf("the crashed, mocked e-mail was not refused: %+v", res)
	}
	var got []string
	for _, d := range k.Decisions("SendEmail") {
		got = append(got, d.Decision)
	}
	if want := []string{string(store.DecisionUnknown), string(store.DecisionRefusedInFlight)}; !equal(got, want) {
		t.Fatalf("e-mail decisions %v, want %v", got, want)
	}
	if ds := k.Decisions("ChargeCard"); len(ds) != 1 || ds[0].Decision != string(store.DecisionRan) || ds[0].Effect != interceptor.Destructive {
		t.Fatalf("charge decisions %+v, want one destructive ran", ds)
	}
	if k.BodyRuns("SendEmail") != 1 || w.Email.Total() != 0 || w.Payments.Total() != 0 {
		t.Fatalf("mocked e-mail runs %d; sent %d, charged %d", k.BodyRuns("SendEmail"), w.Email.Total(), w.Payments.Total())
	}
}

// The same in an activity test: worker options set after the kit made the
// environment drop the gate, and the kit says so when the test ends.
func TestActivityEnvironmentWorkerOptionsAfterTheKitIsDetected(t *testing.T) {
	_, tools := world(t)
	r := newRecorder(t)
	k := idemgatetest.New(r)
	env := k.NewActivityEnvironment()
	env.SetWorkerOptions(worker.Options{})
	env.RegisterActivity(tools)
	if _, err := env.ExecuteActivity(tools.SendEmail, mail); err != nil {
		t.Fatal(err)
	}
	if errs := r.finish(); len(k.Decisions("")) != 0 || !has(errs, "TestActivityEnvironment", "no longer runs the kit's interceptors", "Next step") {
		t.Fatalf("decisions %d, failures %q", len(k.Decisions("")), errs)
	}
}

// A test that sets its own activity-started listener takes the kit's hook for
// plain-value mocks away: the mock then skips the gate, and the kit says so.
func TestPlainMockWithTheTestsListenerIsDetected(t *testing.T) {
	w, _ := world(t)
	r := newRecorder(t)
	k := idemgatetest.New(r)
	env, tools := newAgentEnv(t, k, w)
	env.SetOnActivityStartedListener(func(*activity.Info, context.Context, converter.EncodedValues) {})
	env.SetOnActivityCompletedListener(func(*activity.Info, converter.EncodedValue, error) {})
	env.OnActivity(tools.SendEmail, mock.Anything, mock.Anything).Return(activities.EmailReceipt{MessageID: "mocked"}, nil)
	if res := runIn(t, env, email); res.Stopped != "done" {
		t.Fatalf("job: %+v", res)
	}
	if errs := r.finish(); !has(errs, "activity SendEmail was mocked", "SetOnActivityStartedListener", "Next step") || len(errs) != 1 {
		t.Fatalf("failures %q", errs)
	}
}

// Two injections on one activity apply to its calls in order; the second does
// not silently replace the first.
func TestInjectionsOnOneActivityApplyInOrder(t *testing.T) {
	w, _ := world(t)
	r := newRecorder(t)
	k := idemgatetest.New(r, idemgatetest.WithOptions(activities.GateOptions(nil)))
	k.StoreDown("ChargeCard")
	k.CrashAfterVendor("ChargeCard")
	if res, err := runAgent(k, w, charge); err != nil || res.Stopped != "done" {
		t.Fatalf("job: %v %+v", err, res)
	}
	var got []string
	for _, d := range k.Decisions("ChargeCard") {
		got = append(got, d.Decision)
	}
	// Attempt 1: the store is down; 2: the body charges and the worker dies; 3: the
	// processor deduplicates on the key (GateOptions' window): one charge.
	if want := []string{"refused-store-unavailable", string(store.DecisionUnknown), string(store.DecisionRan)}; !equal(got, want) {
		t.Fatalf("decisions %v, want %v", got, want)
	}
	if errs := r.finish(); len(errs) != 0 || w.Payments.Total() != 1 {
		t.Fatalf("failures %q, charges %d", errs, w.Payments.Total())
	}
}

// A busy machine can leave a workflow task unrun for over a second; the SDK's
// deadlock detector (1 s of wall clock by default) would fail the workflow with
// TMPRL1101. The kit's environments allow for it. The sleep stands for the
// machine's delay; it synchronises nothing.
func TestSlowWorkflowTaskIsNotADeadlock(t *testing.T) {
	k := idemgatetest.New(t)
	env := k.NewWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(func(ctx workflow.Context) error {
		time.Sleep(1500 * time.Millisecond)
		return nil
	}, workflow.RegisterOptions{Name: "slowTask"})
	env.ExecuteWorkflow("slowTask")
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("completed %v, error %v", env.IsWorkflowCompleted(), env.GetWorkflowError())
	}
}

func localEmail(ctx workflow.Context, in activities.SendEmailInput) (activities.EmailReceipt, error) {
	ctx = workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: time.Minute})
	var r activities.EmailReceipt
	err := workflow.ExecuteLocalActivity(ctx, "SendEmail", in).Get(ctx, &r)
	return r, err
}

// Local activities mocked with plain values go through the gate too; a mock set
// to panic is no activity run without the gate.
func TestMockedLocalActivityPassesTheGate(t *testing.T) {
	w, tools := world(t)
	r := newRecorder(t)
	k := idemgatetest.New(r)
	env := k.NewWorkflowEnvironment()
	env.RegisterWorkflow(localEmail)
	env.RegisterActivity(tools)
	env.OnActivity(tools.SendEmail, mock.Anything, mock.Anything).Return(activities.EmailReceipt{MessageID: "mocked"}, nil)
	env.ExecuteWorkflow(localEmail, mail)
	var got activities.EmailReceipt
	if err := env.GetWorkflowResult(&got); err != nil || got.MessageID != "mocked" {
		t.Fatalf("result %+v, %v", got, err)
	}
	if ds := k.Decisions("SendEmail"); len(ds) != 1 || ds[0].Decision != string(store.DecisionRan) || w.Email.Total() != 0 {
		t.Fatalf("decisions %+v, e-mails %d; want one ran, none sent", ds, w.Email.Total())
	}

	// A mocked function: the testsuite runs the interceptors around it twice for a
	// local activity, one run inside the other; the gate decides once.
	env = k.NewWorkflowEnvironment()
	env.RegisterWorkflow(localEmail)
	env.RegisterActivity(tools)
	env.OnActivity(tools.SendEmail, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.SendEmailInput) (activities.EmailReceipt, error) {
			return activities.EmailReceipt{MessageID: "mocked function"}, nil
		})
	env.ExecuteWorkflow(localEmail, mail)
	if err := env.GetWorkflowResult(&got); err != nil || got.MessageID != "mocked function" {
		t.Fatalf("result %+v, %v", got, err)
	}
	if ds := k.Decisions("SendEmail"); len(ds) != 2 || ds[1].Decision != string(store.DecisionRan) || k.BodyRuns("SendEmail") != 2 {
		t.Fatalf("decisions %+v, body runs %d; want two ran, 2", ds, k.BodyRuns("SendEmail"))
	}

	env = k.NewWorkflowEnvironment()
	env.RegisterWorkflow(localEmail)
	env.RegisterActivity(tools)
	env.OnActivity(tools.SendEmail, mock.Anything, mock.Anything).Panic("the mail server is on fire")
	env.ExecuteWorkflow(localEmail, mail)
	if env.GetWorkflowError() == nil {
		t.Fatal("the panicking mock did not fail the workflow")
	}
	if errs := r.finish(); len(errs) != 0 {
		t.Fatalf("failures %q", errs)
	}
}
