package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/idemgate/idemgate/activities"
	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/mcptools"
	"github.com/idemgate/idemgate/store"
)

// shopActivity is the activity a shop tool is registered under.
func shopActivity(tool string) string { return mcptools.ActivityName(ShopServer, tool) }

// MCPClasses shows how the gate classes the shop's tools — by name, tightened or
// refined by the server's annotations, a verb-list match never lowered — and what that means: a job
// calls each tool once, and a replay runs the tool the server rightly calls
// read-only but withholds create_invoice, which it wrongly calls read-only.
func (d *Demo) MCPClasses(ctx context.Context) (Check, error) {
	c := Check{Scenario: "6. An MCP server's 4 tools, classed by name and by its annotations; a job, then a replay (reads only)", Short: "6 a replay of MCP tools", OK: true}
	d.say("== %s (server %s at %s)", c.Scenario, ShopServer, d.Shop.URL)
	for _, l := range d.census.Lines() {
		if strings.HasPrefix(strings.TrimPrefix(l, "review: "), "mcp.") {
			d.say("   census: %s", l)
		}
	}
	for _, t := range ShopTools {
		cl := d.census.Effects[shopActivity(t.Name)]
		c.expect(cl.Effect == t.Effect && cl.Source == t.Source && cl.Contradicts == t.Contradicts && !cl.Review,
			"%s is %s (decided by %s): %s", t.Name, cl.Effect, cl.Source, t.Lesson)
	}

	jobID := d.jobID("mcp-shop")
	c.Jobs = []string{jobID}
	d.say("   job %s calls each tool once", jobID)
	script := activities.Script{Goal: "Welcome back cus_42 with a coupon, an invoice and a gift card.", Steps: []activities.Step{
		{Tool: shopActivity("stock_level"), Args: json.RawMessage(`{"sku":"PRO-1Y"}`)},
		{Tool: shopActivity("get_coupon"), Args: json.RawMessage(`{"customer":"cus_42"}`)},
		{Tool: shopActivity("create_invoice"), Args: json.RawMessage(`{"customer":"cus_42","amount":4200}`)},
		{Tool: shopActivity("gift_card"), Args: json.RawMessage(`{"customer":"cus_42","amount":1000}`)},
	}}
	runs := map[string]int{}
	for _, t := range ShopTools {
		runs[t.Name] = d.Shop.Runs(t.Name)
	}
	res, _, err := d.Job(ctx, jobID, d.input(&script))
	if err != nil {
		return c, err
	}
	c.expect(res.Stopped == "done", "the job finished (stopped: %s) after %d steps", res.Stopped, len(res.Steps))
	ran, err := d.Store.Receipts(ctx, store.ReceiptFilter{WorkflowID: jobID, Decision: store.DecisionRan})
	if err != nil {
		return c, err
	}
	gatedAs := map[string]string{}
	for _, r := range ran {
		gatedAs[r.Activity] = r.Effect
	}
	ranOnce := 0 // tools that ran once, gated as their class
	for _, t := range ShopTools {
		n := d.Shop.Runs(t.Name) - runs[t.Name]
		if n == 1 && gatedAs[shopActivity(t.Name)] == t.Effect.String() {
			ranOnce++
		}
		c.expect(n == 1 && gatedAs[shopActivity(t.Name)] == t.Effect.String(),
			"%s ran %d time(s) (want 1), gated as %s", t.Name, n, orString(gatedAs[shopActivity(t.Name)], "nothing"))
	}

	replayID := d.jobID("mcp-shop-replay")
	c.Jobs = append(c.Jobs, replayID)
	d.say("   replay %s: reads run, writes are withheld — whatever the server claims", replayID)
	script.Steps = []activities.Step{script.Steps[0], script.Steps[2]}
	in := d.input(&script)
	in.Rerun = &interceptor.RerunPolicy{}
	invoices := d.Shop.Runs("create_invoice")
	res, _, err = d.Job(ctx, replayID, in)
	if err != nil {
		return c, err
	}
	c.expect(len(res.Steps) == 2 && res.Steps[0].Error == "" && res.Steps[1].ErrorType == interceptor.ErrTypeWriteGated,
		"the replay ran stock_level (read, from its annotation) and withheld create_invoice (a write by its name, "+
			"though the server calls it read-only)")
	c.expect(d.Shop.Runs("create_invoice") == invoices, "create_invoice ran %d time(s) during the replay, want 0",
		d.Shop.Runs("create_invoice")-invoices)
	c.Without = "the replay trusts the server's readOnlyHint on create_invoice and creates a second invoice"
	var classes []string
	for _, t := range ShopTools {
		classes = append(classes, t.Name+" "+d.census.Effects[shopActivity(t.Name)].Effect.String())
	}
	c.Gate = []string{"idemgate: " + strings.Join(classes, ", ") + ";",
		"   create_invoice is a write by its name (\"create\"): the replay withheld it"}
	c.count("tools run once each, gated as their class", "", ranOnce, len(ShopTools))
	extra := d.Shop.Runs("create_invoice") - invoices
	c.count("invoices created by the replay", "", extra, 0)
	c.WithoutShort = "1 more invoice"
	c.WithShort = fmt.Sprintf("%d more (create_invoice withheld)", extra)
	return c, nil
}

// CrashAfterMCPTool runs a job whose one write is the shop's gift_card (destructive
// by its annotation); when the tool has issued the card and before it answers, the
// worker is stopped for real. The gate re-sends with the same key inside the shop's
// Dedup window, and Dedup answers from its store: one gift card.
func (d *Demo) CrashAfterMCPTool(ctx context.Context) (Check, error) {
	const tool = "gift_card"
	c := Check{Scenario: "7. The worker dies after an MCP tool issued a gift card, before the result is stored", Short: "7 worker died after an MCP tool", OK: true}
	jobID := d.jobID("mcp-gift-card")
	c.Jobs = []string{jobID}
	d.say("== %s (job %s)", c.Scenario, jobID)
	script := activities.Script{Goal: "Give cus_7 a gift card.", Steps: []activities.Step{
		{Tool: shopActivity(tool), Args: json.RawMessage(`{"customer":"cus_7","amount":2500}`)},
	}}
	before := d.counts()
	runs := d.Shop.Runs(tool)
	res, key, err := d.stopAfterActing(ctx, jobID, script, shopActivity(tool), "mcp "+ShopServer, d.Shop.SetBeforeAnswer)
	if err != nil {
		return c, err
	}
	after := d.counts()
	c.expect(res.Stopped == "done", "the job finished (stopped: %s)", res.Stopped)
	c.expect(d.Shop.Effects(key) == 1 && d.Shop.Runs(tool)-runs == 1, "the gift card was issued %d time(s) for key %.8s, want 1",
		d.Shop.Effects(key), key)
	var out mcptools.Result
	if len(res.Steps) == 1 {
		_ = json.Unmarshal(res.Steps[0].Result, &out)
	}
	c.expect(out.Replayed && after.delta(before, "mcp shop-replays") == 1,
		"the retry was answered by the server's Dedup middleware from its store (%d replay(s)): %q",
		after.delta(before, "mcp shop-replays"), out.Text)
	c.Without = "the retry calls gift_card again, with no key the shop could deduplicate on: a second gift card"
	c.Gate = []string{"idemgate: re-sent the call with the same key, inside the window the shop's Dedup remembers keys"}
	if out.Replayed {
		c.Gate = append(c.Gate, fmt.Sprintf("   the shop answered the re-send from its own store (%q): no new card", out.Text))
	} else {
		c.Gate = append(c.Gate, "   the shop did NOT answer the re-send from its store")
	}
	cards := d.Shop.Effects(key)
	c.count("gift cards issued", "", cards, 1)
	c.count("re-sends answered from the shop's store", "", after.delta(before, "mcp shop-replays"), 1)
	c.WithoutShort = fmt.Sprintf("%d gift cards", cards+1)
	c.WithShort = fmt.Sprintf("%d gift %s (the shop's Dedup)", cards, plural(cards, "card"))
	return c, nil
}
