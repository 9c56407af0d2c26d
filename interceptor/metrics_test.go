package interceptor_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/workflow"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/internal/testutil/patient"
)

// FINDINGS-atk-gate F13: with Options.ToolNames the tool's name comes from the
// arguments a model writes. The decision counter must not be tagged with every name
// a model invents (one metric series per name, kept by the metrics backend for the
// life of the process): names the worker knows (named in Options.Effects, Hints,
// IdentifyingFields or VendorWindows) keep their own tag, the others count under the
// generic activity type.
func TestDecisionMetricsBoundedUnderModelNames(t *testing.T) {
	h := newHarness(t)
	metrics := &capturingMetrics{mu: &sync.Mutex{}, counts: map[string]int64{}}
	h.suite.SetMetricsHandler(metrics)
	h.opts.ToolNames = map[string]interceptor.ToolName{"CallTool": {Prefix: "mcp.", Fields: []string{"server", "tool"}}}
	h.opts.Hints = map[string]interceptor.Hints{"mcp.crm.get_contact": {}}
	h.opts.Effects = map[string]interceptor.Effect{"mcp.crm.lookup_thing": interceptor.Read}
	callTool := func(ctx context.Context, c ToolCall) (string, error) { return "ok", nil }
	const n = 50
	wf := func(ctx workflow.Context) error {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
		for i := range n {
			_ = workflow.ExecuteActivity(ctx, "CallTool", ToolCall{Server: "crm", Tool: fmt.Sprintf("get_made_up_%d", i)}).Get(ctx, nil)
		}
		_ = workflow.ExecuteActivity(ctx, "CallTool", ToolCall{Server: "crm", Tool: "get_contact"}).Get(ctx, nil)
		_ = workflow.ExecuteActivity(ctx, "CallTool", ToolCall{Server: "crm", Tool: "lookup_thing"}).Get(ctx, nil)
		return nil
	}
	gate, err := interceptor.New(h.opts)
	if err != nil {
		t.Fatal(err)
	}
	env := patient.Env(h.suite.NewTestWorkflowEnvironment())
	env.SetWorkerOptions(patient.WorkerOptions(gate))
	env.RegisterWorkflowWithOptions(wf, workflow.RegisterOptions{Name: "generic"})
	env.RegisterActivityWithOptions(callTool, activity.RegisterOptions{Name: "CallTool"})
	env.ExecuteWorkflow("generic")
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	series := map[string]bool{}
	metrics.mu.Lock()
	for k := range metrics.counts {
		if strings.HasPrefix(k, "idemgate_decisions ") {
			series[k] = true
		}
	}
	metrics.mu.Unlock()
	if len(series) >= n {
		t.Fatalf("%d decision series after %d made-up tool names: one per name the model wrote", len(series), n)
	}
	for want, count := range map[string]int64{
		"idemgate_decisions activity_type=CallTool decision=ran effect=read":             n,
		"idemgate_decisions activity_type=mcp.crm.get_contact decision=ran effect=read":  1,
		"idemgate_decisions activity_type=mcp.crm.lookup_thing decision=ran effect=read": 1,
	} {
		if got := metrics.get(want); got != count {
			t.Errorf("counter %q = %d, want %d (have %v)", want, got, count, series)
		}
	}
}
