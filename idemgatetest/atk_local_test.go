package idemgatetest_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"

	"github.com/idemgate/idemgate/idemgatetest"
	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/store"
)

// A test that watches local activities with its own listener, and mocks one with a
// value: the local activity still passes the gate (the testsuite runs a local
// activity's mock inside the worker's interceptors), so the kit has nothing to
// report.
func TestOwnLocalListenerWithAPlainLocalMock(t *testing.T) {
	r := newRecorder(t)
	k := idemgatetest.New(r)
	env := k.NewWorkflowEnvironment()
	env.RegisterWorkflow(localNoteWorkflow)
	env.RegisterActivity(&lookup{})
	var started []string
	env.SetOnLocalActivityStartedListener(func(info *activity.Info, _ context.Context, _ []any) {
		started = append(started, info.ActivityType.Name)
	})
	env.OnActivity("SendNote", mock.Anything, "ada").Return("mock ada", nil)
	env.ExecuteWorkflow(localNoteWorkflow)
	var s string
	if err := env.GetWorkflowResult(&s); err != nil || s != "mock ada" {
		t.Fatalf("result %q, %v", s, err)
	}
	if ds := k.Decisions("SendNote"); len(ds) != 1 || ds[0].Decision != string(store.DecisionRan) || len(started) != 1 {
		t.Fatalf("decisions %+v, started %v: want one ran", ds, started)
	}
	if errs := r.finish(); len(errs) != 0 {
		t.Fatalf("the kit failed a gated local activity: %q", errs)
	}
}

// Read-backs by a generic tool activity's type (Options.ToolNames) cover its
// tools: the gate records each call under the tool's name, and a test asking for
// the activity type's decisions or receipts must not get an empty list (an assertion
// that "nothing ran" would pass while both tools ran).
func TestReadBackByToolActivityType(t *testing.T) {
	c := &crm{runs: map[string]int{}}
	r := newRecorder(t)
	k := idemgatetest.New(r, idemgatetest.WithOptions(interceptor.Options{
		ToolNames: map[string]interceptor.ToolName{"CallTool": {Prefix: "crm.", Fields: []string{"tool"}}}}))
	env := k.NewWorkflowEnvironment()
	env.RegisterWorkflow(toolWorkflow)
	env.RegisterActivity(c)
	env.ExecuteWorkflow(toolWorkflow)
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range k.Decisions("CallTool") {
		got = append(got, d.Activity+" "+d.Decision)
	}
	if want := []string{"crm.get_contact ran", "crm.delete_contact ran"}; !equal(got, want) {
		t.Fatalf("Decisions(CallTool) = %v, want %v", got, want)
	}
	if rs := k.Receipts("CallTool"); len(rs) == 0 || len(rs) != len(k.Receipts("crm.delete_contact"))+len(k.Receipts("crm.get_contact")) {
		t.Fatalf("Receipts(CallTool) = %d receipts, want those of both tools (%d and %d)", len(rs),
			len(k.Receipts("crm.delete_contact")), len(k.Receipts("crm.get_contact")))
	}
	if errs := r.finish(); len(errs) != 0 {
		t.Fatalf("failures %q", errs)
	}
}

// A pause of a generic tool activity's type (`idemgate pause --activity CallTool`,
// the name an operator sees in Temporal) holds the writes of all its tools; it held
// none (the gate matched pauses against the tool's name only), so the delete ran
// during the pause.
func TestPauseByToolActivityTypeHoldsItsTools(t *testing.T) {
	c := &crm{runs: map[string]int{}}
	r := newRecorder(t)
	k := idemgatetest.New(r, idemgatetest.WithOptions(interceptor.Options{
		ToolNames: map[string]interceptor.ToolName{"CallTool": {Prefix: "crm.", Fields: []string{"tool"}}}}))
	k.Pause("CallTool", "incident 42: the CRM deletes the wrong contacts")
	env := k.NewWorkflowEnvironment()
	env.RegisterWorkflow(toolWorkflow)
	env.RegisterActivity(c)
	env.ExecuteWorkflow(toolWorkflow)
	if err := env.GetWorkflowError(); interceptor.ErrorType(err) != interceptor.ErrTypeWriteGated {
		t.Fatalf("workflow error %v, want %s", err, interceptor.ErrTypeWriteGated)
	}
	if c.runs["delete_contact"] != 0 || c.runs["get_contact"] != 1 {
		t.Fatalf("runs %v: the paused delete ran, or the read was held", c.runs)
	}
	if errs := r.finish(); len(errs) != 0 {
		t.Fatalf("failures %q", errs)
	}
}
