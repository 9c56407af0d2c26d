package interceptor_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/store"
)

// TestReceiptsNameTheEffectSource: every receipt the gate writes for an activity
// says what decided its class — the name (ChargeCard, a read, a generic activity's
// tool read by its name), the hints (UpsertContact, raised to destructive; a
// generic activity's tool hinted by its server) or Options.Effects (GetBalance,
// PayExpense) — on every path: read, claim, run, replay, hand-off and async
// completion, release, unknown, takeover, refusal.
func TestReceiptsNameTheEffectSource(t *testing.T) {
	h := newHarness(t)
	h.opts.Hints = map[string]interceptor.Hints{
		"UpsertContact":      {Destructive: ptr(true), From: "crm"},
		"mcp.crm.frobnicate": {Idempotent: ptr(true), From: "mcp server crm"},
	}
	h.opts.Effects = map[string]interceptor.Effect{"GetBalance": interceptor.IdempotentWrite, "PayExpense": interceptor.Destructive}
	// CallTool is a generic tool-calling activity: the tool is named by the Note.
	h.opts.ToolNames = map[string]interceptor.ToolName{"CallTool": {Prefix: "mcp.crm.", Fields: []string{"note"}}}
	want := map[string]string{
		"ListInvoices": store.EffectByName, "ChargeCard": store.EffectByName, "mcp.crm.delete_contact": store.EffectByName,
		"UpsertContact": store.EffectByHint, "mcp.crm.frobnicate": store.EffectByHint,
		"GetBalance": store.EffectByOverride, "PayExpense": store.EffectByOverride,
	}
	if got := h.opts.Classify("ChargeCard").Source.EffectSource(); got != store.EffectByName {
		t.Fatalf("Source.EffectSource of a name = %q", got)
	}
	ex := &expenses{v: h.v}
	run := func(id string, calls ...call) error {
		env := h.env(id)
		env.RegisterActivity(ex)
		env.RegisterActivityWithOptions(func(ctx context.Context, c Charge) (string, error) {
			return "invoices", nil
		}, activity.RegisterOptions{Name: "ListInvoices"})
		env.RegisterActivityWithOptions(func(ctx context.Context, c Charge) (string, error) {
			return h.tools.body(ctx, c.Note)
		}, activity.RegisterOptions{Name: "CallTool"})
		ex.complete = func(hand interceptor.HandOff) {
			if hand.EffectSource != store.EffectByOverride {
				t.Errorf("hand-off of PayExpense carries effect source %q, want %q", hand.EffectSource, store.EffectByOverride)
			}
			env.RegisterDelayedCallback(func() {
				if err := interceptor.CompleteAsync(context.Background(), envCompleter{env}, h.opts, hand, "approved", nil); err != nil {
					t.Errorf("CompleteAsync: %v", err)
				}
			}, time.Minute)
		}
		env.ExecuteWorkflow("calls", calls)
		if !env.IsWorkflowCompleted() {
			t.Fatalf("workflow %s did not complete", id)
		}
		return env.GetWorkflowError()
	}
	if err := run("wf-source-1",
		call{Activity: "ListInvoices", Charge: charge},
		call{Activity: "ChargeCard", Key: bizKey, Charge: charge},
		call{Activity: "ChargeCard", Key: bizKey, Charge: charge}, // replayed
		call{Activity: "UpsertContact", Charge: charge},
		call{Activity: "GetBalance", Charge: charge},
		call{Activity: "CallTool", Charge: Charge{Note: "frobnicate"}},
		call{Activity: "CallTool", Charge: Charge{Note: "delete_contact"}},
		call{Activity: "PayExpense", Charge: charge, MaxAttempts: 1},
	); err != nil {
		t.Fatal(err)
	}
	// First attempts fail: UpsertContact certainly before sending (released), the
	// others after reaching the vendor (unknown). GetBalance, an idempotent write,
	// takes over; ChargeCard's retry is refused.
	h.tools.fail = func(ctx context.Context) (error, bool) {
		info := activity.GetInfo(ctx)
		switch {
		case info.Attempt > 1:
			return nil, false
		case info.ActivityType.Name == "UpsertContact":
			return interceptor.NotCommitted(errors.New("declined")), false
		}
		return errors.New("connection reset"), true
	}
	err := run("wf-source-2",
		call{Activity: "UpsertContact", Charge: charge, MaxAttempts: 2},
		call{Activity: "GetBalance", Charge: charge, MaxAttempts: 2},
		call{Activity: "ChargeCard", Charge: charge, MaxAttempts: 2},
	)
	if err == nil {
		t.Fatal("ChargeCard's retry after an unknown outcome ran; want it refused")
	}

	var seen []store.Decision
	for _, r := range h.receipts(store.ReceiptFilter{}) {
		if w, ok := want[r.Activity]; !ok || r.EffectSource != w {
			t.Errorf("%s receipt of %s: effect source %q, want %q", r.Decision, r.Activity, r.EffectSource, w)
		}
		if !slices.Contains(seen, r.Decision) {
			seen = append(seen, r.Decision)
		}
	}
	for _, d := range []store.Decision{store.DecisionRan, store.DecisionClaimed, store.DecisionReplayed,
		store.DecisionHandedOff, store.DecisionReleased, store.DecisionUnknown, store.DecisionTakenOver,
		store.DecisionRefusedInFlight} {
		if !slices.Contains(seen, d) {
			t.Errorf("no %s receipt written; the test must cover it (saw %v)", d, seen)
		}
	}
}
