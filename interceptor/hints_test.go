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
	"github.com/idemgate/idemgate/store"
)

func ptr(b bool) *bool { return &b }

// TestHintsTightenOnly: hints raise a name's class, never lower it; a name with no
// known verb takes its class from them; Options.Effects overrides both.
func TestHintsTightenOnly(t *testing.T) {
	ro := interceptor.Hints{ReadOnly: ptr(true), From: "srv"}
	idem := interceptor.Hints{ReadOnly: ptr(false), Destructive: ptr(false), Idempotent: ptr(true), From: "srv"}
	destr := interceptor.Hints{Destructive: ptr(true), From: "srv"}
	write := interceptor.Hints{ReadOnly: ptr(false), Destructive: ptr(false), From: "srv"} // additive, not idempotent
	cases := []struct {
		name        string
		hints       interceptor.Hints
		want        interceptor.Effect
		source      interceptor.Source
		review      bool
		contradicts bool
	}{
		{"get_contact", ro, interceptor.Read, interceptor.SourceVerb, false, false},
		{"get_contact", idem, interceptor.IdempotentWrite, interceptor.SourceHint, false, false},
		{"get_contact", destr, interceptor.Destructive, interceptor.SourceHint, false, false},
		{"get_contact", write, interceptor.Destructive, interceptor.SourceHint, false, false},
		{"update_contact", ro, interceptor.IdempotentWrite, interceptor.SourceVerb, false, true},
		{"update_contact", idem, interceptor.IdempotentWrite, interceptor.SourceVerb, false, false},
		{"update_contact", destr, interceptor.Destructive, interceptor.SourceHint, false, false},
		{"delete_contact", ro, interceptor.Destructive, interceptor.SourceVerb, false, true},
		{"delete_contact", idem, interceptor.Destructive, interceptor.SourceVerb, false, true},
		{"delete_contact", destr, interceptor.Destructive, interceptor.SourceVerb, false, false},
		{"frobnicate", ro, interceptor.Read, interceptor.SourceHint, false, false},
		{"frobnicate", idem, interceptor.IdempotentWrite, interceptor.SourceHint, false, false},
		{"frobnicate", destr, interceptor.Destructive, interceptor.SourceHint, false, false},
		{"frobnicate", interceptor.Hints{}, interceptor.Destructive, interceptor.SourceNone, true, false},
		// A flagged name keeps its flag: hints tighten, they do not clear a review.
		{"CheckIn", ro, interceptor.Destructive, interceptor.SourcePhrasal, true, true},
	}
	for _, c := range cases {
		o := interceptor.Options{Hints: map[string]interceptor.Hints{c.name: c.hints}}
		got := o.Classify(c.name)
		if got.Effect != c.want || got.Source != c.source || got.Review != c.review || got.Contradicts != c.contradicts {
			t.Errorf("%s with %+v: got %s source=%s review=%v contradicts=%v (%s); want %s source=%s review=%v contradicts=%v",
				c.name, c.hints.Effect(), got.Effect, got.Source, got.Review, got.Contradicts, got.Reason(),
				c.want, c.source, c.review, c.contradicts)
		}
	}
	o := interceptor.Options{Hints: map[string]interceptor.Hints{"delete_contact": ro},
		Effects: map[string]interceptor.Effect{"delete_contact": interceptor.Read}}
	if got := o.Classify("delete_contact"); got.Effect != interceptor.Read || got.Source != interceptor.SourceOverride {
		t.Errorf("Effects must override hints: got %s %s", got.Effect, got.Source)
	}
	rep := interceptor.Options{Hints: map[string]interceptor.Hints{"delete_contact": ro, "frobnicate": ro}}.
		Census([]string{"delete_contact", "frobnicate"})
	if len(rep.Contradicts) != 1 || rep.Contradicts[0] != "delete_contact" || rep.Read != 1 {
		t.Errorf("census: %s", rep)
	}
	lines := strings.Join(rep.Lines(), "\n")
	for _, want := range []string{"delete_contact: destructive", "hints of srv say read: contradict the name",
		"frobnicate: read — no known verb in the name; the hints of srv say read"} {
		if !strings.Contains(lines, want) {
			t.Errorf("census lines lack %q:\n%s", want, lines)
		}
	}
}

// ToolCall is the argument of a generic tool-calling activity.
type ToolCall struct {
	Server string         `json:"server"`
	Tool   string         `json:"tool"`
	Args   map[string]any `json:"args"`
}

// TestGenericActivityGoesByTheTool: one activity type that calls many tools is
// classified, keyed and recorded by the tool it calls (Options.ToolNames).
func TestGenericActivityGoesByTheTool(t *testing.T) {
	h := newHarness(t)
	h.opts.ToolNames = map[string]interceptor.ToolName{"CallTool": {Prefix: "mcp.", Fields: []string{"server", "tool"}}}
	h.opts.Hints = map[string]interceptor.Hints{"mcp.crm.frobnicate": {ReadOnly: ptr(true), From: "mcp server crm"}}
	callTool := func(ctx context.Context, c ToolCall) (string, error) {
		key := h.v.hit(ctx)
		if ctxAttempt(ctx) == 1 {
			// Reached the vendor, then failed without proof: the outcome is unknown.
			return "", errors.New("connection reset")
		}
		return c.Tool + " " + key, nil
	}
	wf := func(ctx workflow.Context, calls []ToolCall) ([]string, error) {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute,
			RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 1, MaximumAttempts: 3}})
		var out []string
		for _, c := range calls {
			var s string
			err := workflow.ExecuteActivity(ctx, "CallTool", c).Get(ctx, &s)
			if err != nil {
				out = append(out, "error: "+err.Error())
				continue
			}
			out = append(out, s)
		}
		return out, nil
	}
	gate, err := interceptor.New(h.opts)
	if err != nil {
		t.Fatal(err)
	}
	env := patient.Env(h.suite.NewTestWorkflowEnvironment())
	env.SetWorkerOptions(patient.WorkerOptions(gate))
	env.RegisterWorkflowWithOptions(wf, workflow.RegisterOptions{Name: "generic"})
	env.RegisterActivityWithOptions(callTool, activity.RegisterOptions{Name: "CallTool"})
	env.ExecuteWorkflow("generic", []ToolCall{
		{Server: "crm", Tool: "get_contact"},    // read: the retry runs
		{Server: "crm", Tool: "frobnicate"},     // no verb, hinted read: the retry runs
		{Server: "crm", Tool: "delete_contact"}, // destructive: the retry is refused
		{Server: "crm"},                         // no tool named: refused before it runs
	})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var out []string
	if err := env.GetWorkflowResult(&out); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out[0], "get_contact ") || !strings.HasPrefix(out[1], "frobnicate ") {
		t.Errorf("reads by the tool must run again after an unknown outcome: %q", out[:2])
	}
	if !strings.Contains(out[2], "refused destructive mcp.crm.delete_contact") {
		t.Errorf("the destructive tool's retry must be refused by its tool name: %q", out[2])
	}
	if !strings.Contains(out[3], `CallTool: the tool name field "tool" is "", not a non-empty string`) {
		t.Errorf("a call without its tool name must be refused naming the field: %q", out[3])
	}
	if n := h.v.count(); n != 2+2+1 {
		t.Errorf("vendor calls = %d, want 5 (two per read, one destructive, none without a tool)", n)
	}
	rs := h.receipts(store.ReceiptFilter{Activity: "mcp.crm.delete_contact"})
	if len(rs) == 0 || rs[0].Effect != "destructive" {
		t.Fatalf("receipts by the tool's name: %+v", rs)
	}
	if got := h.receipts(store.ReceiptFilter{Activity: "CallTool"}); len(got) != 0 {
		t.Errorf("no receipt may carry the generic type name: %+v", got)
	}
	reads := h.receipts(store.ReceiptFilter{Activity: "mcp.crm.get_contact"})
	if len(reads) == 0 || reads[0].Key == rs[0].Key || reads[0].Effect != "read" {
		t.Errorf("each tool has its own key and class: %+v vs %+v", reads, rs)
	}
}

// TestToolNameCaseVariantRefused: the model writes a generic tool activity's
// arguments, so a second key naming the tool field in another case ("Tool":
// "get_contact" beside "tool": "delete_contact") must not decide the class. The
// call is refused as invalid arguments, naming the activity and both keys, and
// nothing runs; an identifying field given twice in two cases is refused too
// (which one keys the write would depend on map order).
func TestToolNameCaseVariantRefused(t *testing.T) {
	h := newHarness(t)
	h.opts.ToolNames = map[string]interceptor.ToolName{"CallTool": {Prefix: "mcp.", Fields: []string{"server", "tool"}}}
	h.opts.IdentifyingFields = map[string][]string{"mcp.crm.update_contact": {"email"}}
	callTool := func(ctx context.Context, c map[string]any) (string, error) {
		h.v.hit(ctx)
		if ctxAttempt(ctx) == 1 {
			return "", errors.New("connection reset") // reached the vendor: the outcome is unknown
		}
		return "ran", nil
	}
	wf := func(ctx workflow.Context, calls []map[string]any) ([]string, error) {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute,
			RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 1, MaximumAttempts: 3}})
		var out []string
		for _, c := range calls {
			var s string
			if err := workflow.ExecuteActivity(ctx, "CallTool", c).Get(ctx, &s); err != nil {
				var ae *temporal.ApplicationError
				if errors.As(err, &ae) {
					out = append(out, ae.Type()+": "+ae.Error())
					continue
				}
				out = append(out, "error: "+err.Error())
				continue
			}
			out = append(out, s)
		}
		return out, nil
	}
	gate, err := interceptor.New(h.opts)
	if err != nil {
		t.Fatal(err)
	}
	calls := []map[string]any{
		{"server": "crm", "tool": "delete_contact", "Tool": "get_contact"},
		{"server": "crm", "Tool": "get_contact"}, // only a case variant: not the field
		{"server": "crm", "tool": "update_contact", "email": "a@example.com", "EMAIL": "b@example.com"},
	}
	// Map order decides which key a loose reader takes: run it a few times.
	for range 4 {
		env := patient.Env(h.suite.NewTestWorkflowEnvironment())
		env.SetWorkerOptions(patient.WorkerOptions(gate))
		env.RegisterWorkflowWithOptions(wf, workflow.RegisterOptions{Name: "generic"})
		env.RegisterActivityWithOptions(callTool, activity.RegisterOptions{Name: "CallTool"})
		env.ExecuteWorkflow("generic", calls)
		if err := env.GetWorkflowError(); err != nil {
			t.Fatal(err)
		}
		var out []string
		if err := env.GetWorkflowResult(&out); err != nil {
			t.Fatal(err)
		}
		for i, want := range [][]string{
			{interceptor.ErrTypeArgsInvalid, "CallTool", `"Tool"`, `"tool"`, "Nothing was run", "Next step"},
			{interceptor.ErrTypeArgsInvalid, "CallTool", `"Tool"`, `"tool"`, "Next step"},
			{interceptor.ErrTypeArgsInvalid, "mcp.crm.update_contact", "ambiguous", `"EMAIL"`, `"email"`, "Nothing was run", "Next step"},
		} {
			for _, w := range want {
				if !strings.Contains(out[i], w) {
					t.Errorf("call %d (%v): %q lacks %q", i, calls[i], out[i], w)
				}
			}
		}
		if n := h.v.count(); n != 0 {
			t.Fatalf("the tool ran %d times; a call with an ambiguous field must not run", n)
		}
	}
}

// TestHintsLowerFlaggedNameToItsVerbs: a flagged name (its grammar cannot tell) may
// be lowered by hints, but only down to the most severe word in it that is a verb
// wherever it stands. github-mcp-server's and kubernetes-mcp-server's resource-first
// reads become reads with readOnlyHint; a destructive verb stays destructive.
func TestHintsLowerFlaggedNameToItsVerbs(t *testing.T) {
	ro := interceptor.Hints{ReadOnly: ptr(true), From: "mcp server github"}
	idem := interceptor.Hints{ReadOnly: ptr(false), Destructive: ptr(false), Idempotent: ptr(true), From: "mcp server github"}
	cases := []struct {
		name        string
		hints       interceptor.Hints
		want        interceptor.Effect
		review      bool
		contradicts bool
	}{
		{"actions_get", ro, interceptor.Read, false, false},
		{"actions_list", ro, interceptor.Read, false, false},
		{"issue_read", ro, interceptor.Read, false, false},
		{"projects_get", ro, interceptor.Read, false, false},
		{"pods_list", ro, interceptor.Read, false, false},
		{"pods_get", ro, interceptor.Read, false, false},
		{"namespaces_list", ro, interceptor.Read, false, false},
		{"labels_update", idem, interceptor.IdempotentWrite, false, false},
		// Never below a verb that is a verb wherever it stands.
		{"orders_cancel", ro, interceptor.Destructive, true, true},
		{"pods_delete", ro, interceptor.Destructive, true, true},
		{"pods_exec", ro, interceptor.Destructive, true, true},
		{"OrderCreate", ro, interceptor.IdempotentWrite, true, true},
		{"charges_create", ro, interceptor.Destructive, true, true}, // a create that moves money
		{"ProcessPayment", ro, interceptor.Destructive, true, true},
		{"CheckIn", ro, interceptor.Destructive, true, true},
		{"FetchNextJob", ro, interceptor.Destructive, true, true},
		{"InvokeModel", ro, interceptor.Destructive, true, true},
		{"aws.ec2.MonitorInstances", ro, interceptor.Destructive, true, true},
		// A name that was not flagged is never lowered.
		{"delete_contact", ro, interceptor.Destructive, false, true},
	}
	for _, c := range cases {
		o := interceptor.Options{Hints: map[string]interceptor.Hints{c.name: c.hints}}
		got := o.Classify(c.name)
		if got.Effect != c.want || got.Review != c.review || got.Contradicts != c.contradicts {
			t.Errorf("%s with hints saying %s: got %s review=%v contradicts=%v (%s); want %s review=%v contradicts=%v",
				c.name, c.hints.Effect(), got.Effect, got.Review, got.Contradicts, got.Reason(), c.want, c.review, c.contradicts)
		}
		if got.Effect < interceptor.Classify(c.name).Effect && (got.Source != interceptor.SourceHintLowered ||
			got.Source.EffectSource() != store.EffectByHint) {
			t.Errorf("%s lowered by hints: source %s, want %s recorded as %s", c.name, got.Source,
				interceptor.SourceHintLowered, store.EffectByHint)
		}
	}
	if r := (interceptor.Options{Hints: map[string]interceptor.Hints{"actions_get": ro}}).Classify("actions_get").Reason(); !strings.Contains(r, `"get"`) || !strings.Contains(r, "mcp server github") {
		t.Errorf("reason of a lowered name: %q", r)
	}
}

// TestToolNameCaseVariantRefusedOnTheActivitySide: the activity worker reads the
// tool field itself (its workflow worker may run another version, or none of the
// gate's ToolNames): a case variant is refused there too, before the body runs.
func TestToolNameCaseVariantRefusedOnTheActivitySide(t *testing.T) {
	h := newHarness(t)
	h.opts.ToolNames = map[string]interceptor.ToolName{"CallTool": {Prefix: "mcp.", Fields: []string{"server", "tool"}}}
	gate, err := interceptor.New(h.opts)
	if err != nil {
		t.Fatal(err)
	}
	ran := false
	env := h.suite.NewTestActivityEnvironment()
	env.SetWorkerOptions(patient.WorkerOptions(gate))
	env.RegisterActivityWithOptions(func(ctx context.Context, c map[string]any) (string, error) {
		ran = true
		return "ran", nil
	}, activity.RegisterOptions{Name: "CallTool"})
	_, err = env.ExecuteActivity("CallTool", map[string]any{"server": "crm", "tool": "delete_contact", "Tool": "get_contact"})
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || ae.Type() != interceptor.ErrTypeArgsInvalid || !strings.Contains(err.Error(), `"Tool" and "tool"`) {
		t.Fatalf("err = %v; want %s naming both keys", err, interceptor.ErrTypeArgsInvalid)
	}
	if ran {
		t.Fatal("the tool ran")
	}
}
