package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/idemgate/idemgate/activities"
	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/internal/operate"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/vendorsim"
	"github.com/idemgate/idemgate/workflows"
)

// Check is one scenario's verdict, and its screen in the demo's output.
type Check struct {
	Scenario string `json:"scenario"`
	// Short is the scenario's name in the summary table.
	Short string `json:"short"`
	// Story says what happens, in one line.
	Story string `json:"story"`
	// Without says what would have happened without the gate; WithoutShort and
	// WithShort are the summary table's two cells.
	Without      string `json:"without"`
	WithoutShort string `json:"without_short"`
	WithShort    string `json:"with_short"`
	// Gate says what the gate did, a line each.
	Gate []string `json:"gate"`
	// Counts are what the vendors performed against what they should have.
	Counts []Count `json:"counts"`
	OK     bool    `json:"ok"`
	// Notes are every check made, for -v and --json.
	Notes []string `json:"notes"`
	// Jobs are the workflow IDs the scenario ran.
	Jobs []string `json:"jobs"`
}

// Count is one count a scenario checks: "card charged 1 time (want 1)".
type Count struct {
	What string `json:"what"`
	Unit string `json:"unit,omitempty"`
	Got  int    `json:"got"`
	Want int    `json:"want"`
}

func (n Count) String() string {
	s := fmt.Sprintf("%s %d", n.What, n.Got)
	if n.Unit != "" {
		s += " " + plural(n.Got, n.Unit)
	}
	return s + fmt.Sprintf(" (want %d)", n.Want)
}

func plural(n int, unit string) string {
	if n == 1 {
		return unit
	}
	return unit + "s"
}

func (c *Check) expect(ok bool, format string, args ...any) {
	note := fmt.Sprintf(format, args...)
	if !ok {
		c.OK = false
		note = "FAILED: " + note
	}
	c.Notes = append(c.Notes, note)
}

// count records a count for the screen; one that is off fails the scenario.
func (c *Check) count(what, unit string, got, want int) {
	n := Count{What: what, Unit: unit, Got: got, Want: want}
	c.Counts = append(c.Counts, n)
	c.expect(got == want, "%s", n)
}

type counts map[string]int

// vendorOf maps each write tool to the vendor it changes.
var vendorOf = map[string]string{"UpsertContact": "crm", "CreateTicket": "tickets", "ChargeCard": "payments",
	"SendEmail": "email", "PostSlackMessage": "chat"}

var writeVendors = []string{"crm", "tickets", "payments", "email", "chat", "mcp " + ShopServer}

func (d *Demo) counts() counts {
	c := counts{}
	for _, v := range d.World.Vendors() {
		c[v.Name] = v.Total()
		c[v.Name+"-replays"] = v.Replays()
	}
	sc := d.Shop.count()
	c[sc.Vendor], c[sc.Vendor+"-replays"] = sc.Effects, sc.Replays
	return c
}

func (c counts) delta(before counts, name string) int { return c[name] - before[name] }

func (d *Demo) input(s *activities.Script) workflows.AgentInput {
	return workflows.AgentInput{Retry: jobRetry, ToolTimeout: 5 * time.Second, Script: s}
}

func (d *Demo) jobID(name string) string { return fmt.Sprintf("%s-%d", name, time.Now().UnixNano()) }

// Normal runs a whole agent job: every write reaches its vendor exactly once.
func (d *Demo) Normal(ctx context.Context) (c Check, jobID, runID string, err error) {
	c = Check{Scenario: "1. A normal agent job, end to end", Short: "1 a normal job", OK: true}
	jobID = d.jobID("support")
	c.Jobs = []string{jobID}
	d.say("== %s (job %s)", c.Scenario, jobID)
	before := d.counts()
	res, runID, err := d.Job(ctx, jobID, d.input(nil))
	if err != nil {
		return c, jobID, runID, err
	}
	after := d.counts()
	c.expect(res.Stopped == "done", "the job finished (stopped: %s) after %d steps", res.Stopped, len(res.Steps))
	for _, s := range res.Steps {
		c.expect(s.Error == "", "%s: %s", s.Tool, firstLine(orString(s.Error, string(s.Result))))
	}
	want := counts{}
	writes := 0
	for _, s := range res.Steps {
		if v, ok := vendorOf[s.Tool]; ok && s.Error == "" {
			want[v]++
			writes++
		}
	}
	c.Scenario = fmt.Sprintf("1. A normal agent job: %d tool calls, %d of them writes (contact, ticket, charge, e-mail, Slack)",
		len(res.Steps), writes)
	c.Without = "the same: nothing failed, so nothing was retried"
	c.Gate = []string{"idemgate: minted a key for each write, ran each once and stored a receipt; the reads just ran"}
	c.WithoutShort = fmt.Sprintf("%d writes, once each", writes)
	c.WithShort = fmt.Sprintf("%d writes, once each", writes)
	if n := after.sum(before); n != writes {
		c.WithShort = fmt.Sprintf("%d side effects for %d writes", n, writes)
	}
	for _, v := range writeVendors {
		if want[v] > 0 || after.delta(before, v) > 0 {
			c.count(v, "", after.delta(before, v), want[v])
		} else {
			c.expect(after.delta(before, v) == 0, "%s performed %d side effect(s), want 0", v, after.delta(before, v))
		}
	}
	return c, jobID, runID, nil
}

// sum is how many side effects the write vendors performed since before.
func (c counts) sum(before counts) int {
	n := 0
	for _, v := range writeVendors {
		n += c.delta(before, v)
	}
	return n
}

// CrashAfterVendor runs a job whose one write is tool; when the vendor has performed
// it and before it answers, the worker is stopped for real, the write's answer never
// arrives, and a new worker picks up the retry.
func (d *Demo) CrashAfterVendor(ctx context.Context, tool string) (Check, error) {
	var (
		script activities.Script
		v      *vendorsim.Vendor
		name   string
	)
	switch tool {
	case "ChargeCard":
		name = "2. The worker dies after the card was charged, before the result is stored"
		v = d.World.Payments
		script = activities.Script{Goal: "Charge cus_7 for the annual plan.", Steps: []activities.Step{
			{Tool: "GetCustomer", Args: json.RawMessage(`{"customer_id":"cus_7"}`)},
			{Tool: "ChargeCard", Args: json.RawMessage(`{"customer":"cus_7","amount":19900,"currency":"usd","description":"annual plan"}`)},
		}}
	case "UpsertContact":
		name = "3. The worker dies after the CRM saved a contact, before the result is stored"
		v = d.World.CRM
		script = activities.Script{Goal: "Record Grace as a contact.", Steps: []activities.Step{
			{Tool: "UpsertContact", Args: json.RawMessage(`{"email":"grace@example.com","name":"Grace Hopper","company":"Navy"}`)},
		}}
	default:
		return Check{}, fmt.Errorf("idemgate/examples/agentloop/demo: CrashAfterVendor: no crash scenario for %s", tool)
	}
	c := Check{Scenario: name, OK: true}
	jobID := d.jobID(strings.ToLower(tool))
	c.Jobs = []string{jobID}
	d.say("== %s (job %s)", c.Scenario, jobID)
	before := d.counts()
	res, key, err := d.stopAfterActing(ctx, jobID, script, tool, v.Name, v.SetBeforeAnswer)
	if err != nil {
		return c, err
	}
	after := d.counts()
	c.expect(res.Stopped == "done", "the job finished (stopped: %s)", res.Stopped)
	switch tool {
	case "ChargeCard":
		c.Short = "2 worker died after a charge"
		c.Without = "Temporal retries ChargeCard and the card is charged a second time"
		settled, err := d.settledBy(ctx, jobID, "ChargeCard")
		if err != nil {
			return c, err
		}
		c.expect(settled.Actor == "witness:payments-lookup" && settled.Resolution == store.ResolvedSent,
			"settled %s by %s, nobody involved (%s); the retry returned the stored charge without calling the processor",
			orString(settled.Resolution, "-"), orString(settled.Actor, "nobody"), settled.Reason)
		found := settled.Reason
		if i := strings.LastIndex(found, ": "); i >= 0 {
			found = found[i+2:]
		}
		c.Gate = []string{fmt.Sprintf("idemgate: the retry asked the processor's lookup, not the card: it found %s, so the retry returned it",
			orString(found, "nothing"))}
		charged := v.Effects(key)
		c.count("card charged", "time", charged, 1)
		c.count("re-sends", "", after.delta(before, "payments-replays"), 0)
		c.WithoutShort = fmt.Sprintf("%d charges", charged+1)
		c.WithShort = fmt.Sprintf("%d %s (the processor's lookup)", charged, plural(charged, "charge"))
	case "UpsertContact":
		c.Short = "3 worker died after an upsert"
		c.Without = "the retry upserts again: an upsert is safe to repeat, one contact either way"
		c.Gate = []string{"idemgate: an idempotent write: it re-ran with the same key; the CRM kept one contact"}
		rec, ok := v.Record("grace@example.com")
		c.count("upserts, both with the one key", "", v.Effects("grace@example.com"), 2)
		contacts := 0
		if ok && rec["name"] == "Grace Hopper" && rec["company"] == "Navy" {
			contacts = 1
		}
		c.count("contacts for grace@example.com, up to date", "", contacts, 1)
		c.expect(ok, "the record converged: %v", rec)
		c.WithoutShort = "1 contact (re-run)"
		c.WithShort = fmt.Sprintf("%d %s (re-ran, same key)", contacts, plural(contacts, "contact"))
	}
	return c, nil
}

// stopAfterActing runs a job with script; when setHook's hook reports that tool has
// acted (its answer held back), the worker is stopped for real, the answer is let go
// to a worker that is gone, and a new worker picks up the retry. It returns the job's
// result and the key the tool acted with.
func (d *Demo) stopAfterActing(ctx context.Context, jobID string, script activities.Script, tool, vendor string,
	setHook func(func(key string))) (workflows.AgentResult, string, error) {
	performed := make(chan string, 1)
	release := make(chan struct{})
	var once sync.Once
	setHook(func(key string) {
		first := false
		once.Do(func() { first = true })
		if first {
			performed <- key
			<-release // hold the answer until the worker is gone
		}
	})
	defer setHook(nil)
	defer once.Do(func() {}) // a late first call must not block

	type result struct {
		res workflows.AgentResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		var res workflows.AgentResult
		run, err := d.start(ctx, jobID, d.input(&script)) // unprefixed: the error below wraps it
		if err == nil {
			err = run.Get(ctx, &res)
		}
		done <- result{res, err}
	}()
	var key string
	select {
	case key = <-performed:
	case r := <-done:
		close(release)
		return r.res, "", fmt.Errorf("idemgate/examples/agentloop/demo: the job ended before %s reached %s: %v", tool, vendor, r.err)
	case <-time.After(60 * time.Second):
		close(release)
		d.cancelJob(jobID)
		return workflows.AgentResult{}, "", fmt.Errorf("idemgate/examples/agentloop/demo: %s never reached %s within 60 s", tool, vendor)
	}
	d.say("   %s performed %s (key %.8s); stopping the worker before the result is stored", vendor, tool, key)
	d.StopWorker()
	close(release)
	d.say("   worker stopped; starting a new worker")
	if err := d.StartWorker(); err != nil {
		return workflows.AgentResult{}, key, err
	}
	select {
	case r := <-done:
		return r.res, key, r.err
	case <-time.After(90 * time.Second):
		d.cancelJob(jobID)
		return workflows.AgentResult{}, key, fmt.Errorf("idemgate/examples/agentloop/demo: the job did not finish within 90 s of the restart")
	}
}

// settledBy returns the resolution receipt of activity in job jobID (zero when none).
func (d *Demo) settledBy(ctx context.Context, jobID, activity string) (store.Receipt, error) {
	rs, err := d.Store.Receipts(ctx, store.ReceiptFilter{WorkflowID: jobID, Activity: activity, Decision: store.DecisionResolved})
	if err != nil || len(rs) == 0 {
		return store.Receipt{}, err
	}
	return rs[len(rs)-1], nil
}

// PersonSettles runs a job whose one write is an e-mail: the provider sends it, and
// the connection drops before its answer. The provider takes no key and offers no
// lookup, so no witness can tell: the gate holds the write (Options.HoldUnknown), the
// key shows as pending, a person checks the provider's log and resolves it as sent
// (the store call of `idemgate resolve --sent`), and the job goes on by itself with
// the result the person gave. One e-mail.
func (d *Demo) PersonSettles(ctx context.Context) (Check, error) {
	c := Check{Scenario: "8. The e-mail went out, its answer was lost: only a person can tell", Short: "8 an e-mail's answer lost", OK: true}
	jobID := d.jobID("email")
	c.Jobs = []string{jobID}
	d.say("== %s (job %s)", c.Scenario, jobID)
	mail := d.World.Email
	script := activities.Script{Goal: "Confirm Ada's order by e-mail.", Steps: []activities.Step{
		{Tool: "SendEmail", Args: json.RawMessage(`{"to":"ada@example.com","subject":"Order confirmed","body":"Your order ships today."}`)},
	}}
	var once sync.Once
	mail.SetBeforeAnswer(func(string) {
		// Sent; the connection drops before the answer (once).
		drop := false
		once.Do(func() { drop = true })
		if drop {
			panic(http.ErrAbortHandler)
		}
	})
	defer mail.SetBeforeAnswer(nil)
	before := d.counts()
	run, err := d.start(ctx, jobID, d.input(&script))
	if err != nil {
		return c, fmt.Errorf("idemgate/examples/agentloop/demo: %w", err)
	}
	done := make(chan error, 1)
	var res workflows.AgentResult
	go func() { done <- run.Get(ctx, &res) }()

	// The operator's view: `idemgate pending`.
	var rec store.Record
	deadline := time.After(90 * time.Second)
	for rec.Key == "" {
		select {
		case err := <-done:
			return c, fmt.Errorf("idemgate/examples/agentloop/demo: the job ended before its e-mail was pending: %v", err)
		case <-deadline:
			d.cancelJob(jobID)
			return c, fmt.Errorf("idemgate/examples/agentloop/demo: the e-mail was not pending within 90 s")
		case <-time.After(100 * time.Millisecond):
		}
		// Pending, and held: a retry was refused with the withheld call.
		refused, err := d.Store.Receipts(ctx, store.ReceiptFilter{WorkflowID: jobID, Decision: store.DecisionRefusedInFlight})
		if err != nil {
			return c, err
		}
		if len(refused) == 0 {
			continue
		}
		ps, err := d.Store.Pending(ctx, time.Now(), 0)
		if err != nil {
			return c, err
		}
		for _, p := range ps {
			if p.WorkflowID == jobID && p.Activity == "SendEmail" {
				rec = p
			}
		}
	}
	call := interceptor.WithheldCall{Activity: rec.Activity, Key: rec.Key, Effect: rec.Effect, Args: rec.Args}
	d.say("   held: no witness can tell (the provider takes no key); Temporal retries the refused write until it is settled")
	d.say("   $ idemgate pending → %s  %s  withheld: %s", rec.Key, rec.State, call)
	c.Without = "Temporal retries SendEmail and Ada gets the e-mail twice"
	c.Gate = []string{"idemgate: nobody could tell (the provider takes no key, has no lookup): it held the write",
		fmt.Sprintf("   idemgate pending: %s", call)}
	// The person checks the provider's log (here: the simulator's count) and resolves.
	sent := mail.Total() - before["email"]
	result := json.RawMessage(`{"message_id":"found in the provider's log"}`)
	reason := "the provider's log shows the message to ada@example.com"
	d.say("   the provider's log shows %d message(s) to ada@example.com", sent)
	d.say("   $ idemgate resolve %s --sent --result reply.json --reason %q", rec.Key, reason)
	if d.cfg.PersonSettles {
		// The person is at the operator's page (or the CLI): the demo waits for them.
		c.Gate = append(c.Gate, "   a person settled it (the provider's log shows the e-mail); the job went on by itself")
		fmt.Fprintf(d.out, "8. waiting for you: the e-mail %s is blocked; the provider's log shows %d message(s) to "+
			"ada@example.com. Settle it in the console (or idemgate resolve %s --sent --result r.json --reason …); "+
			"the job goes on by itself.\n", rec.Key, sent, rec.Key)
		select {
		case err = <-done:
		case <-ctx.Done():
			d.cancelJob(jobID)
			return c, fmt.Errorf("idemgate/examples/agentloop/demo: stopped while the e-mail waited on a person: %w", ctx.Err())
		}
	} else {
		c.Gate = append(c.Gate, "   found in the provider's log: idemgate resolve KEY --sent --result r.json --reason …; it went on")
		if err := resolveSent(ctx, d.Store, rec, result, "demo-operator", reason); err != nil {
			return c, err
		}
		select {
		case err = <-done:
		case <-time.After(90 * time.Second):
			d.cancelJob(jobID)
			return c, fmt.Errorf("idemgate/examples/agentloop/demo: the job did not go on within 90 s of the resolution")
		}
	}
	if err != nil {
		return c, err
	}
	after := d.counts()
	c.expect(sent == 1, "the provider had sent the e-mail once before anyone resolved it (%d)", sent)
	c.expect(res.Stopped == "done" && len(res.Steps) == 1 && res.Steps[0].Error == "",
		"the job went on by itself once the key was resolved, no reset (stopped: %s)", res.Stopped)
	if len(res.Steps) == 1 && !d.cfg.PersonSettles {
		c.expect(strings.Contains(string(res.Steps[0].Result), "provider's log"), "SendEmail returned the result the person gave: %s", res.Steps[0].Result)
	}
	sentNow := after.delta(before, "email")
	c.count("e-mails sent", "", sentNow, 1)
	c.WithoutShort = fmt.Sprintf("%d e-mails", sentNow+1)
	c.WithShort = fmt.Sprintf("%d %s (a person resolved it)", sentNow, plural(sentNow, "e-mail"))
	settled, err := d.settledBy(ctx, jobID, "SendEmail")
	if err != nil {
		return c, err
	}
	if d.cfg.PersonSettles {
		// Whoever settled it, and however: the counts above say whether they were right.
		c.expect(settled.Resolution != "", "resolved %s by %s", orString(settled.Resolution, "-"), orString(settled.Actor, "nobody"))
	} else {
		c.expect(settled.Actor == "demo-operator" && settled.Resolution == store.ResolvedSent, "resolved %s by %s",
			orString(settled.Resolution, "-"), orString(settled.Actor, "nobody"))
	}
	return c, nil
}

// resolveSent is `idemgate resolve KEY --sent --result FILE --reason WHY`: the same
// code path (internal/operate, shared with the console), owner-checked, with its receipt.
func resolveSent(ctx context.Context, st store.Store, rec store.Record, result json.RawMessage, actor, reason string) error {
	if _, err := operate.Resolve(ctx, st, operate.Settle{Key: rec.Key, Sent: true, Result: result, Actor: actor, Reason: reason,
		Window: interceptor.DefaultWindow, Now: time.Now(),
		Check: func(now store.Record) error {
			if now.Owner != rec.Owner {
				return fmt.Errorf("key %s changed since it was listed as pending", rec.Key)
			}
			return nil
		}}); err != nil {
		return fmt.Errorf("idemgate/examples/agentloop/demo: resolve %s: %w", rec.Key, err)
	}
	return nil
}

// ResetPastCharge resets a finished job to its first workflow task: the workflow
// code runs again, every write's key is the same, and the stored results come back
// without calling the vendors.
func (d *Demo) ResetPastCharge(ctx context.Context, jobID, runID string) (Check, error) {
	c := Check{Scenario: "4. A workflow reset takes job 1 back to its start: the workflow code runs again", Short: "4 a reset past the charge", OK: true, Jobs: []string{jobID}}
	d.say("== %s (job %s)", c.Scenario, jobID)
	var resetTo int64
	it := d.Client.GetWorkflowHistory(ctx, jobID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() && resetTo == 0 {
		e, err := it.Next()
		if err != nil {
			return c, err
		}
		if e.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
			resetTo = e.GetEventId()
		}
	}
	writes := 0
	var orig workflows.AgentResult
	if err := d.Client.GetWorkflow(ctx, jobID, runID).Get(ctx, &orig); err != nil {
		return c, err
	}
	for _, s := range orig.Steps {
		if _, ok := vendorOf[s.Tool]; ok && s.Error == "" {
			writes++
		}
	}
	before := d.counts()
	ns := d.cfg.Namespace
	if d.Server != nil {
		ns = d.Server.GetDefaultNamespace()
	} else if ns == "" {
		ns = "default"
	}
	resp, err := d.Client.ResetWorkflowExecution(ctx, &workflowservice.ResetWorkflowExecutionRequest{
		Namespace: ns, WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: jobID, RunId: runID},
		Reason: "demo: reset past ChargeCard", WorkflowTaskFinishEventId: resetTo,
		RequestId: fmt.Sprint(time.Now().UnixNano()),
	})
	if err != nil {
		return c, fmt.Errorf("idemgate/examples/agentloop/demo: reset %s: %w", jobID, err)
	}
	d.say("   reset to event %d: new run %s replays the job from the start", resetTo, resp.GetRunId())
	var res workflows.AgentResult
	if err := d.Client.GetWorkflow(ctx, jobID, resp.GetRunId()).Get(ctx, &res); err != nil {
		return c, err
	}
	after := d.counts()
	c.expect(res.Stopped == "done", "the reset job finished (stopped: %s)", res.Stopped)
	for _, v := range writeVendors {
		c.expect(after.delta(before, v) == 0, "%s performed %d new side effect(s), want 0", v, after.delta(before, v))
	}
	c.Without = fmt.Sprintf("the %d writes run again: a second charge, e-mail, Slack post, ticket", writes)
	c.Gate = []string{"idemgate: the same keys were minted again; each write returned its stored result without calling its vendor"}
	c.count("new side effects", "", after.sum(before), 0)
	rs, err := d.Store.Receipts(ctx, store.ReceiptFilter{WorkflowID: jobID, Decision: store.DecisionReplayed})
	if err != nil {
		return c, err
	}
	replayed := 0
	for _, r := range rs {
		if r.RunID == resp.GetRunId() {
			replayed++
		}
	}
	c.count("writes answered from the store", "", replayed, writes)
	c.WithoutShort = fmt.Sprintf("%d more side effects", writes)
	c.WithShort = fmt.Sprintf("%d more (stored results)", after.sum(before))
	return c, nil
}

// Rerun re-runs the recorded job under the default rerun policy: reads run, the
// first write is refused and its exact call printed.
func (d *Demo) Rerun(ctx context.Context) (Check, error) {
	c := Check{Scenario: "5. A re-run of the recorded job under the default rerun policy (RerunPolicy{}: only reads fire)", Short: "5 a re-run of the job", OK: true}
	jobID := d.jobID("support-replay")
	c.Jobs = []string{jobID}
	d.say("== %s (job %s)", c.Scenario, jobID)
	before := d.counts()
	in := d.input(nil)
	in.Rerun = &interceptor.RerunPolicy{}
	res, _, err := d.Job(ctx, jobID, in)
	if err != nil {
		return c, err
	}
	after := d.counts()
	var gated *workflows.StepResult
	for i := range res.Steps {
		if res.Steps[i].ErrorType == interceptor.ErrTypeWriteGated {
			gated = &res.Steps[i]
			break
		}
	}
	reads := 0
	for _, s := range res.Steps {
		if _, write := vendorOf[s.Tool]; !write && s.Error == "" {
			reads++
		}
	}
	c.expect(gated != nil && gated == &res.Steps[len(res.Steps)-1] && reads == len(res.Steps)-1,
		"the %d read(s) before the first write ran; the first write was refused with WriteGated", reads)
	if gated != nil {
		want := "UpsertContact(" + canonicalArgs(gated.Args) + ")"
		c.expect(strings.Contains(gated.Error, want), "the refusal carries the exact withheld call %s", want)
		d.say("   withheld: %s", want)
		c.Gate = append(c.Gate, "   withheld: "+want)
	}
	for _, v := range writeVendors {
		c.expect(after.delta(before, v) == 0, "%s performed %d side effect(s), want 0", v, after.delta(before, v))
	}
	c.Without = "the re-run performs the job's writes again: a second contact update, ticket, charge, e-mail…"
	c.Gate = append([]string{fmt.Sprintf("idemgate: ran the %d reads; stopped the job at its first write and printed it", reads)}, c.Gate...)
	c.count("side effects", "", after.sum(before), 0)
	c.WithoutShort = "the job's writes again"
	c.WithShort = fmt.Sprintf("%d side effects (writes withheld)", after.sum(before))
	return c, nil
}

// canonicalArgs is how the gate prints one JSON argument: a list, keys sorted.
func canonicalArgs(raw json.RawMessage) string {
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil {
		return string(raw)
	}
	b, _ := json.Marshal([]any{m})
	return string(b)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 100 {
		s = s[:100] + "…"
	}
	return s
}

func orString(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
