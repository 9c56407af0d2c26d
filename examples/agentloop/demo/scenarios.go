package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/idemgate/idemgate/activities"
	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/vendorsim"
	"github.com/idemgate/idemgate/workflows"
)

// Check is one scenario's verdict.
type Check struct {
	Scenario string   `json:"scenario"`
	OK       bool     `json:"ok"`
	Notes    []string `json:"notes"`
	// Jobs are the workflow IDs the scenario ran.
	Jobs []string `json:"jobs"`
}

func (c *Check) expect(ok bool, format string, args ...any) {
	note := fmt.Sprintf(format, args...)
	if !ok {
		c.OK = false
		note = "FAILED: " + note
	}
	c.Notes = append(c.Notes, note)
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
	c = Check{Scenario: "1. a normal agent job end to end", OK: true}
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
	for _, s := range res.Steps {
		if v, ok := vendorOf[s.Tool]; ok && s.Error == "" {
			want[v]++
		}
	}
	for _, v := range writeVendors {
		c.expect(after.delta(before, v) == want[v], "%s performed %d side effect(s), want %d", v, after.delta(before, v), want[v])
	}
	return c, jobID, runID, nil
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
		name = "2. the worker stopped after the card was charged, before the result was stored"
		v = d.World.Payments
		script = activities.Script{Goal: "Charge cus_7 for the annual plan.", Steps: []activities.Step{
			{Tool: "GetCustomer", Args: json.RawMessage(`{"customer_id":"cus_7"}`)},
			{Tool: "ChargeCard", Args: json.RawMessage(`{"customer":"cus_7","amount":19900,"currency":"usd","description":"annual plan"}`)},
		}}
	case "UpsertContact":
		name = "3. the worker stopped after the contact was written, before the result was stored"
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
		c.expect(v.Effects(key) == 1, "the card was charged %d time(s) for key %.8s, want 1", v.Effects(key), key)
		c.expect(after.delta(before, "payments-replays") >= 1,
			"the retry was answered from the processor's own idempotency store (%d replay(s))", after.delta(before, "payments-replays"))
	case "UpsertContact":
		rec, ok := v.Record("grace@example.com")
		c.expect(v.Effects("grace@example.com") == 2, "the upsert ran %d time(s) with one key: a re-run of an idempotent write, want 2", v.Effects("grace@example.com"))
		c.expect(ok && rec["name"] == "Grace Hopper" && rec["company"] == "Navy",
			"the record converged: %v", rec)
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

// ResetPastCharge resets a finished job to its first workflow task: the workflow
// code runs again, every write's key is the same, and the stored results come back
// without calling the vendors.
func (d *Demo) ResetPastCharge(ctx context.Context, jobID, runID string) (Check, error) {
	c := Check{Scenario: "4. a workflow reset past a finished ChargeCard", OK: true, Jobs: []string{jobID}}
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
	c.expect(replayed == writes, "%d writes returned their stored result without running, want %d", replayed, writes)
	return c, nil
}

// Rerun re-runs the recorded job under the default rerun policy: reads run, the
// first write is refused and its exact call printed.
func (d *Demo) Rerun(ctx context.Context) (Check, error) {
	c := Check{Scenario: "5. a re-run of the job: reads run, writes are withheld", OK: true}
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
	}
	for _, v := range writeVendors {
		c.expect(after.delta(before, v) == 0, "%s performed %d side effect(s), want 0", v, after.delta(before, v))
	}
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
