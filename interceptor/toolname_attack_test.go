package interceptor_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/internal/testutil/patient"
)

// toolTarget is the trusted half of a generic tool activity's arguments: the
// workflow's code, not the model, chooses it.
type toolTarget struct {
	Server string `json:"server"`
	Tool   string `json:"tool"`
}

// TestToolNameInTwoArguments: a generic tool activity whose first argument is the
// model's map and whose second names the tool. Fields are read "in the first argument
// that has them", so the model adds "tool": "get_contact" to its map and the delete
// named by the second argument is classified as a read: its unknown outcome is run
// again and the contact deleted twice. A field that two arguments have is refused as
// invalid arguments, and nothing runs.
func TestToolNameInTwoArguments(t *testing.T) {
	h := newHarness(t)
	h.opts.ToolNames = map[string]interceptor.ToolName{"CallTool": {Prefix: "mcp.", Fields: []string{"server", "tool"}}}
	callTool := func(ctx context.Context, args map[string]any, target toolTarget) (string, error) {
		h.v.hit(ctx)
		if ctxAttempt(ctx) == 1 {
			return "", errors.New("connection reset") // reached the vendor: the outcome is unknown
		}
		return "ran " + target.Tool, nil
	}
	wf := func(ctx workflow.Context, args map[string]any, target toolTarget) (string, error) {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute,
			RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 1, MaximumAttempts: 3}})
		var s string
		err := workflow.ExecuteActivity(ctx, "CallTool", args, target).Get(ctx, &s)
		return s, err
	}
	gate, err := interceptor.New(h.opts)
	if err != nil {
		t.Fatal(err)
	}
	env := patient.Env(h.suite.NewTestWorkflowEnvironment())
	env.SetWorkerOptions(patient.WorkerOptions(gate))
	env.RegisterWorkflowWithOptions(wf, workflow.RegisterOptions{Name: "generic"})
	env.RegisterActivityWithOptions(callTool, activity.RegisterOptions{Name: "CallTool"})
	env.ExecuteWorkflow("generic", map[string]any{"contact": "c-1", "tool": "get_contact", "server": "crm"},
		toolTarget{Server: "crm", Tool: "delete_contact"})
	err = env.GetWorkflowError()
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || ae.Type() != interceptor.ErrTypeArgsInvalid || !strings.Contains(err.Error(), "arguments 1 and 2") {
		t.Errorf("workflow error %v; want %s naming both arguments", err, interceptor.ErrTypeArgsInvalid)
	}
	if n := h.v.count(); n != 0 {
		t.Errorf("the tool ran %d times; want 0 (its name is ambiguous)", n)
	}
}

// TestToolNameInTwoArgumentsOnTheActivitySide: the activity worker reads the fields
// itself (its workflow worker may run without the gate's ToolNames).
func TestToolNameInTwoArgumentsOnTheActivitySide(t *testing.T) {
	h := newHarness(t)
	h.opts.ToolNames = map[string]interceptor.ToolName{"CallTool": {Prefix: "mcp.", Fields: []string{"server", "tool"}}}
	gate, err := interceptor.New(h.opts)
	if err != nil {
		t.Fatal(err)
	}
	ran := false
	env := h.suite.NewTestActivityEnvironment()
	env.SetWorkerOptions(patient.WorkerOptions(gate))
	env.RegisterActivityWithOptions(func(ctx context.Context, args map[string]any, target toolTarget) (string, error) {
		ran = true
		return "ran", nil
	}, activity.RegisterOptions{Name: "CallTool"})
	_, err = env.ExecuteActivity("CallTool", map[string]any{"tool": "get_contact"}, toolTarget{Server: "crm", Tool: "delete_contact"})
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || ae.Type() != interceptor.ErrTypeArgsInvalid {
		t.Errorf("err = %v; want %s", err, interceptor.ErrTypeArgsInvalid)
	}
	if ran {
		t.Error("the tool ran")
	}
}
