package integration

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/examples/agentloop/demo"
	"github.com/idemgate/idemgate/store"
)

// newDemo sets the demo up on the shared in-process server with a fresh SQLite file.
func newDemo(t *testing.T) *demo.Demo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, err := demo.Setup(ctx, demo.Config{
		TemporalAddress: server.GetFrontendHostPort(),
		Namespace:       server.GetDefaultNamespace(),
		Store:           filepath.Join(t.TempDir(), "idemgate.db"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return d
}

func ctxMinute(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func receiptsOf(t *testing.T, st store.Store, f store.ReceiptFilter) []store.Receipt {
	t.Helper()
	rs, err := st.Receipts(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func TestAgentLoopNormalJob(t *testing.T) {
	d := newDemo(t)
	c, jobID, _, err := d.Normal(ctxMinute(t))
	if err != nil || !c.OK {
		t.Fatalf("normal job: %v %v", err, c.Notes)
	}
	w := d.World
	for _, v := range w.Vendors()[1:] { // docs only reads
		if v.Total() != 1 || len(v.Duplicates()) != 0 {
			t.Errorf("%s performed %d side effects (duplicates %v), want 1", v.Name, v.Total(), v.Duplicates())
		}
	}
	ran := receiptsOf(t, d.Store, store.ReceiptFilter{WorkflowID: jobID, Decision: store.DecisionRan})
	if len(ran) != 15 { // 7 tools + 8 planner calls
		t.Fatalf("%d ran receipts, want 15", len(ran))
	}
}

// The worker stops for real after the processor charged and before the result was
// stored: the retry asks the processor's lookup by key (a witness), which holds the
// charge; the key is settled as sent with the charge as its result, and the job
// finishes with it — one charge, no re-send, nobody involved.
func TestAgentLoopWorkerStoppedAfterCharge(t *testing.T) {
	d := newDemo(t)
	c, err := d.CrashAfterVendor(ctxMinute(t), "ChargeCard")
	if err != nil || !c.OK {
		t.Fatalf("crash after charge: %v %v", err, c.Notes)
	}
	p := d.World.Payments
	if p.Total() != 1 || p.Replays() != 0 {
		t.Fatalf("payments: %d charges, %d replays from its own store; want 1 and 0", p.Total(), p.Replays())
	}
	rs := receiptsOf(t, d.Store, store.ReceiptFilter{WorkflowID: c.Jobs[0], Activity: "ChargeCard"})
	if got := decisionsOf(rs); got != "claimed unknown resolved replayed" {
		t.Fatalf("ChargeCard receipts %s", got)
	}
	if r := rs[2]; r.Actor != "witness:payments-lookup" || r.Resolution != store.ResolvedSent || !strings.Contains(r.Reason, "charge ch_") {
		t.Fatalf("settled by %q as %q (%q); want the processor's lookup, sent, naming the charge", r.Actor, r.Resolution, r.Reason)
	}
}

// Only a person can tell: the e-mail provider sent the message and the connection
// dropped before its answer; it takes no key and has no lookup. The write is held
// (refused, retried), the key is pending, a person resolves it as sent with the
// store call of `idemgate resolve`, and the job goes on by itself with the result
// the person gave — one e-mail, no reset.
func TestAgentLoopPersonSettlesEmail(t *testing.T) {
	d := newDemo(t)
	c, err := d.PersonSettles(ctxMinute(t))
	if err != nil || !c.OK {
		t.Fatalf("person settles: %v %v", err, c.Notes)
	}
	if d.World.Email.Total() != 1 {
		t.Fatalf("email: %d messages, want 1", d.World.Email.Total())
	}
	rs := receiptsOf(t, d.Store, store.ReceiptFilter{WorkflowID: c.Jobs[0], Activity: "SendEmail"})
	got := decisionsOf(rs)
	if !strings.HasPrefix(got, "claimed unknown refused-in-flight") || !strings.HasSuffix(got, "resolved replayed") ||
		strings.Count(got, "ran") > 0 {
		t.Fatalf("SendEmail receipts %s; want claimed, unknown, refused (held), resolved, replayed", got)
	}
	if r := rs[len(rs)-2]; r.Actor != "demo-operator" || r.Resolution != store.ResolvedSent {
		t.Fatalf("resolved by %q as %q", r.Actor, r.Resolution)
	}
	for _, r := range rs {
		if r.Decision == store.DecisionRefusedInFlight && !strings.Contains(string(r.Call), "ada@example.com") {
			t.Fatalf("a refusal without its withheld call: %+v", r)
		}
	}
}

func TestAgentLoopWorkerStoppedAfterUpsert(t *testing.T) {
	d := newDemo(t)
	c, err := d.CrashAfterVendor(ctxMinute(t), "UpsertContact")
	if err != nil || !c.OK {
		t.Fatalf("crash after upsert: %v %v", err, c.Notes)
	}
	crm := d.World.CRM
	rec, _ := crm.Record("grace@example.com")
	if crm.Effects("grace@example.com") != 2 || crm.Records() != 1 || rec["name"] != "Grace Hopper" {
		t.Fatalf("crm: %d upserts, %d records, %v", crm.Effects("grace@example.com"), crm.Records(), rec)
	}
	rs := receiptsOf(t, d.Store, store.ReceiptFilter{WorkflowID: c.Jobs[0], Activity: "UpsertContact"})
	if len(rs) != 4 || rs[0].Key != rs[3].Key || rs[3].Decision != store.DecisionRan {
		t.Fatalf("the re-run must use the same key: %s", decisionsOf(rs))
	}
}

func TestAgentLoopResetPastCharge(t *testing.T) {
	d := newDemo(t)
	ctx := ctxMinute(t)
	if _, jobID, runID, err := d.Normal(ctx); err != nil {
		t.Fatal(err)
	} else if c, err := d.ResetPastCharge(ctx, jobID, runID); err != nil || !c.OK {
		t.Fatalf("reset: %v %v", err, c.Notes)
	}
	if d.World.Payments.Total() != 1 || d.World.Email.Total() != 1 || d.World.Chat.Total() != 1 {
		t.Fatalf("after the reset: payments %d, email %d, chat %d; want 1 each",
			d.World.Payments.Total(), d.World.Email.Total(), d.World.Chat.Total())
	}
}

func TestAgentLoopReplayWithholdsWrites(t *testing.T) {
	d := newDemo(t)
	ctx := ctxMinute(t)
	c, err := d.Rerun(ctx)
	if err != nil || !c.OK {
		t.Fatalf("replay: %v %v", err, c.Notes)
	}
	for _, v := range d.World.Vendors() {
		if v.Total() != 0 {
			t.Fatalf("%s performed %d side effects during a replay", v.Name, v.Total())
		}
	}
	gated := receiptsOf(t, d.Store, store.ReceiptFilter{WorkflowID: c.Jobs[0], Decision: store.DecisionGated})
	if len(gated) != 1 || gated[0].Activity != "UpsertContact" ||
		!strings.Contains(string(gated[0].Call), `"email":"ada@example.com"`) {
		t.Fatalf("gated receipts %+v", gated)
	}
}

func decisionsOf(rs []store.Receipt) string {
	var s []string
	for _, r := range rs {
		s = append(s, string(r.Decision))
	}
	return strings.Join(s, " ")
}

// The shop's tools are classed by name, tightened or refined by their annotations:
// each runs once, gated as that class, and a replay withholds the tool the server
// wrongly calls read-only.
func TestAgentLoopMCPToolClasses(t *testing.T) {
	d := newDemo(t)
	c, err := d.MCPClasses(ctxMinute(t))
	if err != nil || !c.OK {
		t.Fatalf("MCP classes: %v %v", err, c.Notes)
	}
	want := map[string]string{"stock_level": "read", "get_coupon": "destructive", "create_invoice": "idempotent-write", "gift_card": "destructive"}
	for tool, effect := range want {
		name := "mcp.shop." + tool
		ran := receiptsOf(t, d.Store, store.ReceiptFilter{WorkflowID: c.Jobs[0], Activity: name, Decision: store.DecisionRan})
		if len(ran) != 1 || ran[0].Effect != effect {
			t.Errorf("%s: ran receipts %+v, want one, gated as %s", name, ran, effect)
		}
	}
	if cl := d.Census().Effects["mcp.shop.create_invoice"]; !cl.Contradicts || cl.Hinted.String() != "read" {
		t.Errorf("create_invoice: %+v; want its readOnlyHint shown as contradicting the name", cl)
	}
	for tool, runs := range map[string]int{"stock_level": 2, "get_coupon": 1, "create_invoice": 1, "gift_card": 1} {
		if d.Shop.Runs(tool) != runs {
			t.Errorf("%s ran %d times, want %d", tool, d.Shop.Runs(tool), runs)
		}
	}
	gated := receiptsOf(t, d.Store, store.ReceiptFilter{WorkflowID: c.Jobs[1], Decision: store.DecisionGated})
	if len(gated) != 1 || gated[0].Activity != "mcp.shop.create_invoice" {
		t.Fatalf("replay: gated receipts %+v, want create_invoice withheld", gated)
	}
}

// The worker stops for real after the MCP tool acted and before its result was
// stored: the gate re-sends with the same key inside the server's Dedup window, and
// the server answers from its store — one gift card.
func TestAgentLoopMCPToolStoppedAfterItActed(t *testing.T) {
	d := newDemo(t)
	c, err := d.CrashAfterMCPTool(ctxMinute(t))
	if err != nil || !c.OK {
		t.Fatalf("crash after the MCP tool: %v %v", err, c.Notes)
	}
	if d.Shop.Runs("gift_card") != 1 || d.Shop.Replays() != 1 {
		t.Fatalf("shop: gift_card ran %d times, %d replays from Dedup's store; want 1 and 1", d.Shop.Runs("gift_card"), d.Shop.Replays())
	}
	rs := receiptsOf(t, d.Store, store.ReceiptFilter{WorkflowID: c.Jobs[0], Activity: "mcp.shop.gift_card"})
	if got := decisionsOf(rs); got != "claimed unknown taken-over resent ran" || rs[0].Key != rs[4].Key || rs[0].Effect != "destructive" {
		t.Fatalf("gift_card receipts %s (effect %s)", got, rs[0].Effect)
	}
}
