package faults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/idemgate/idemgate/integration/faults/faultwf"
	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/internal/faultpoint"
	"github.com/idemgate/idemgate/internal/storeopen"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/vendorsim"
)

// Boundary is a point of a write where the worker is killed.
type Boundary struct {
	N    int
	Name string
	// Point is the faultpoint the worker kills itself at; "" means the vendor
	// simulator kills it after performing the write and before answering.
	Point string
}

// Boundaries are the five boundaries of a write, in order.
var Boundaries = []Boundary{
	{1, "before the claim", faultpoint.BeforeClaim},
	{2, "after the claim, before the request", faultpoint.AfterClaim},
	{3, "vendor performed it, before it answered", ""},
	{4, "after the answer, before the result is stored", faultpoint.AfterAnswer},
	{5, "after the result is stored, before Temporal got the completion", faultpoint.AfterStore},
}

// Tool is a write the trials make: one of package activities' tools and the vendor it changes.
type Tool struct {
	Name   string
	Effect string
	Vendor string
	// Keyed: the vendor deduplicates on the forwarded key.
	Keyed bool
	// Witness: a witness can tell whether the vendor performed the write (the card
	// processor's lookup by key, activities.ChargeLookupWitness, and its own
	// deduplication of a re-send with the key).
	Witness bool
	args    func(id string) map[string]any
}

// Tools are the writes of the matrix: an idempotent write and a destructive one, each
// to a vendor that deduplicates on the key and to one that does not.
var Tools = []Tool{
	{"UpsertContact", "idempotent-write", "crm", false, false, func(id string) map[string]any {
		return map[string]any{"email": id + "@example.com", "name": "Trial " + id, "company": "Faults"}
	}},
	{"CreateTicket", "idempotent-write", "tickets", true, false, func(id string) map[string]any {
		return map[string]any{"subject": "trial " + id, "requester": id + "@example.com", "body": "fault trial"}
	}},
	{"ChargeCard", "destructive", "payments", true, true, func(id string) map[string]any {
		return map[string]any{"customer": "cus_" + id, "amount": 1999, "currency": "usd", "description": "trial " + id}
	}},
	{"SendEmail", "destructive", "email", false, false, func(id string) map[string]any {
		return map[string]any{"to": id + "@example.com", "subject": "trial " + id, "body": "fault trial"}
	}},
}

// Stores are the claim stores the matrix runs on.
var Stores = []string{"sqlite", "postgres"}

// Cell is one boundary × tool × store.
type Cell struct {
	Boundary Boundary
	Tool     Tool
	Store    string
}

// Cells returns every cell of the stores given.
func Cells(stores []string) []Cell {
	var out []Cell
	for _, s := range stores {
		for _, b := range Boundaries {
			for _, t := range Tools {
				out = append(out, Cell{b, t, s})
			}
		}
	}
	return out
}

// Env is what trials run against.
type Env struct {
	HostPort, Namespace string
	Client              client.Client
	// Bin is the worker binary built with faults (BuildWorker(ctx, dir, true)).
	Bin string
	// Dir holds the SQLite files.
	Dir string
	// PostgresDSN is the DSN of the PostgreSQL cells.
	PostgresDSN string
	// Timeout is each attempt's start-to-close timeout. Optional: 0 means 3 s.
	Timeout time.Duration
	// HoldUnknown is the workers' Options.HoldUnknown: a refused unknown outcome is
	// retried until it is settled, so a trial whose write a witness settles finishes
	// by itself. Optional: 0 means 1 s.
	HoldUnknown time.Duration
	// Scheduled ends a trial early when a witness said "not sent" before its answer
	// could count (store.NotSentFrom: the claim's lease plus store.LeaseMargin, 5
	// minutes) and the held write's retry is scheduled at that time: verified (the
	// refusal quotes the witness's early "not sent", its withheld call carries the
	// time, Temporal's next attempt is scheduled at or after it, the vendor has no
	// effect), the trial counts as scheduled to be settled by that witness and the
	// harness terminates the workflow. The tests set it, so CI does not wait 5
	// minutes per trial. False (faultreport's default): the trial really waits for
	// the retry, which the witness settles and which runs the write once.
	Scheduled bool
}

// trialWait bounds how long a trial waits for its workflow after the kill: the
// retries of a held write, and with !Scheduled the witness's not-sent that counts
// only from the claim's lease plus store.LeaseMargin.
func (e *Env) trialWait() time.Duration {
	if e.Scheduled {
		return 3 * time.Minute
	}
	return 5*time.Minute + store.LeaseMargin
}

// Trial is what one trial saw.
type Trial struct {
	ID string
	// Effects is how many times the vendor performed the write.
	Effects int
	// Replays is how many retries the vendor answered from its own idempotency store.
	Replays int
	// Records is how many records the vendor holds after the trial (contacts, tickets, charges).
	Records int
	// Succeeded: the workflow reported success.
	Succeeded bool
	// Refused: the write was refused for a person to resolve (IdempotencyInFlight,
	// non-retryable); WithCall: the refusal carried the exact withheld call.
	Refused, WithCall bool
	// Lost: the workflow reported success, but the vendor never performed the write,
	// or its result is not the vendor's record.
	Lost bool
	// Converged: the vendor's record is what the call asked for.
	Converged bool
	// Err is a workflow failure that is not a refusal, or a harness error.
	Err string

	// Unknown: a later attempt found the write's claim with its owner gone and no
	// outcome (it took over, re-sent, asked the witnesses or refused).
	Unknown bool
	// SettledBy says who settled the unknown outcome without a person:
	// "witness:NAME (sent|not sent)", "vendor dedup (re-sent with the key)" or
	// "idempotent re-run" ("" when nobody did).
	SettledBy string
	// ByPerson: a person resolved it (a DecisionResolved receipt not by a witness).
	ByPerson bool
	// Pending: still blocked for a person when the trial ended: the write was refused
	// (Refused, WithCall) after its lease with no witness's answer waiting to count,
	// and the harness terminated the held workflow.
	Pending bool
	// Scheduled (Env.Scheduled only): a witness said "not sent" before its answer
	// could count and the held write's retry was scheduled for when it counts
	// (ScheduledAt); the harness terminated the workflow before that retry.
	// SettledBy names the witness, as a settlement would.
	Scheduled   bool
	ScheduledAt time.Time
	// Wrong: a settlement that contradicts the vendor's ledger: "not sent" for a
	// write the vendor performed before the settlement, or "sent" for one it had not.
	Wrong bool
	// EffectsBefore is what the vendor had performed when the first worker was gone.
	EffectsBefore int
}

// Run runs one trial of c: start a worker process, kill it with SIGKILL at the
// boundary, start another, and let the workflow finish (or be refused).
func (e *Env) Run(ctx context.Context, c Cell, i int) (tr Trial) {
	tr.ID = fmt.Sprintf("%s-%s-b%d-%d-%s", c.Store, strings.ToLower(c.Tool.Name), c.Boundary.N, i, uuid.NewString()[:8])
	fail := func(format string, args ...any) Trial {
		tr.Err = fmt.Sprintf(format, args...)
		return tr
	}
	world, err := vendorsim.Start()
	if err != nil {
		return fail("%v", err)
	}
	defer world.Close()
	v := vendorNamed(world, c.Tool.Vendor)
	lookup, err := serveLookup(world.Payments)
	if err != nil {
		return fail("%v", err)
	}
	defer lookup.Close()
	hold := e.HoldUnknown
	if hold == 0 {
		hold = time.Second
	}
	spec := WorkerSpec{Bin: e.Bin, HostPort: e.HostPort, Namespace: e.Namespace, Queue: "faults-" + tr.ID, World: world,
		KillAt: c.Boundary.Point, PaymentsLookup: lookup.URL, HoldUnknown: hold}
	switch c.Store {
	case "sqlite":
		spec.Store = filepath.Join(e.Dir, tr.ID+".db")
	case "postgres":
		if e.PostgresDSN == "" {
			return fail("no PostgreSQL DSN")
		}
		spec.Store = e.PostgresDSN
	default:
		return fail("unknown store %q", c.Store)
	}
	first, err := StartWorker(spec)
	if err != nil {
		return fail("%v", err)
	}
	defer first.Stop()
	if c.Boundary.Point == "" {
		var once sync.Once
		v.SetBeforeAnswer(func(string) {
			once.Do(func() {
				first.Kill()
				wctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				_, _ = first.Wait(wctx) // answer only once the worker is gone
			})
		})
	}
	args := c.Tool.args(tr.ID)
	timeout := e.Timeout
	if timeout == 0 {
		timeout = 3 * time.Second
	}
	// The execution timeout caps every activity's ScheduleToClose, and Temporal
	// schedules no retry past it: it must outlast the held write's retry at the time a
	// witness's not-sent counts (lease + store.LeaseMargin), or the activity fails
	// for good on the refusal that schedules it — in both modes.
	run, err := e.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "faults-" + tr.ID, TaskQueue: spec.Queue,
		WorkflowExecutionTimeout: 5*time.Minute + store.LeaseMargin + 2*time.Minute}, faultwf.Job, faultwf.JobInput{Tool: c.Tool.Name, Args: args, Timeout: timeout})
	if err != nil {
		return fail("start workflow: %v", err)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	_, err = first.Wait(wctx)
	cancel()
	if err != nil {
		return fail("the worker was not killed at %s: %v\n%s", c.Boundary.Name, err, first.Stderr())
	}
	if !first.KilledBySIGKILL() {
		return fail("the worker ended without SIGKILL (%v)\n%s", first.state, first.Stderr())
	}
	if p := c.Boundary.Point; p != "" && !strings.Contains(first.Stderr(), "faultpoint: "+p) {
		return fail("the worker was killed, but not at %s\n%s", p, first.Stderr())
	}
	v.SetBeforeAnswer(nil)
	tr.EffectsBefore = v.Total()

	spec.KillAt = ""
	second, err := StartWorker(spec)
	if err != nil {
		return fail("%v", err)
	}
	defer second.Stop()
	st, err := storeopen.Open(ctx, spec.Store)
	if err != nil {
		return fail("open the trial's store: %v", err)
	}
	defer st.Close()
	rctx, cancel := context.WithTimeout(ctx, e.trialWait())
	defer cancel()
	var out json.RawMessage
	h, werr := e.await(rctx, st, run, &out)
	switch {
	case h.person != nil:
		// Held for a person: the refusal carries the withheld call; no witness's answer
		// is waiting to count, so the trial ends with the key pending.
		tr.Refused, tr.Pending = true, true
		tr.WithCall = h.person.Activity == c.Tool.Name && strings.Contains(string(h.person.Args), tr.ID)
	case h.scheduled != nil:
		tr.Scheduled, tr.ScheduledAt = true, *h.scheduled.NotSentCountsFrom
		tr.SettledBy = "witness " + h.witness + " (not sent)"
		tr.Unknown = true
		if v.Total() > 0 {
			tr.Wrong = true // the witness said not sent, but the vendor performed it
		}
	}
	if h.person != nil || h.scheduled != nil {
		tctx, tcancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = e.Client.TerminateWorkflow(tctx, run.GetID(), run.GetRunID(), "faults: "+h.why())
		tcancel()
	}

	tr.Effects, tr.Replays, tr.Records = v.Total(), v.Replays(), v.Records()
	tr.Converged = converged(c.Tool, v, args)
	switch {
	case h.person != nil || h.scheduled != nil:
	case werr == nil:
		tr.Succeeded = true
		tr.Lost = tr.Effects == 0 || !resultIsTheVendors(c.Tool, v, out)
	default:
		var app *temporal.ApplicationError
		if errors.As(werr, &app) && app.Type() == interceptor.ErrTypeInFlight && app.NonRetryable() {
			tr.Refused = true
			var call interceptor.WithheldCall
			if app.HasDetails() && app.Details(&call) == nil && call.Activity == c.Tool.Name &&
				strings.Contains(string(call.Args), tr.ID) {
				tr.WithCall = true
			}
		} else {
			tr.Err = fmt.Sprintf("workflow failed: %v\nfirst worker:\n%s\nsecond worker:\n%s", werr, first.Stderr(), second.Stderr())
		}
	}
	if err := tr.settlement(ctx, st, c.Tool, "faults-"+tr.ID); err != nil && tr.Err == "" {
		tr.Err = err.Error()
	}
	return tr
}

// held is why await stopped waiting for a workflow that has not ended.
type held struct {
	// person: the write is held for a person (its withheld call).
	person *interceptor.WithheldCall
	// scheduled: a witness's early "not sent" (named witness) counts at
	// scheduled.NotSentCountsFrom, and the retry is scheduled then (Env.Scheduled).
	scheduled *interceptor.WithheldCall
	witness   string
}

func (h held) why() string {
	if h.person != nil {
		return "held for a person"
	}
	return "the witness " + h.witness + "'s not-sent counts at " + h.scheduled.NotSentCountsFrom.UTC().Format(time.RFC3339) +
		" and the retry is scheduled then"
}

// await waits for run to end, or for its write to be held for a person (see
// heldFor), or, with Env.Scheduled, for its retry to be scheduled when a witness's
// early "not sent" counts. It returns the workflow's error, or why it stopped.
func (e *Env) await(ctx context.Context, st storeopen.Store, run client.WorkflowRun, out *json.RawMessage) (held, error) {
	done := make(chan error, 1)
	go func() { done <- run.Get(ctx, out) }()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			return held{}, err
		case <-tick.C:
		}
		if h := e.heldFor(ctx, st, run); h.person != nil || h.scheduled != nil {
			return h, nil
		}
	}
}

// heldFor: the write was refused with its withheld call after the claim's lease
// (its owner gone, the outcome unknown), and Temporal's latest failure of the
// activity is that refusal. Held for a person when no witness's answer is waiting to
// count (WithheldCall.NotSentCountsFrom is nil: no witness said "not sent" early);
// otherwise, with Env.Scheduled, scheduled once the refusal quotes the witness's
// early "not sent" and Temporal's next attempt is scheduled at or after the time it
// counts.
func (e *Env) heldFor(ctx context.Context, st storeopen.Store, run client.WorkflowRun) held {
	rs, err := st.Receipts(ctx, store.ReceiptFilter{WorkflowID: run.GetID(), Decision: store.DecisionRefusedInFlight})
	if err != nil {
		return held{}
	}
	var last *store.Receipt
	for i, r := range rs {
		if len(r.Call) == 0 {
			continue
		}
		rec, err := st.Get(ctx, r.Key)
		if err != nil || !store.UnknownOutcome(rec) || r.Time.Before(rec.Lease) {
			continue
		}
		if last == nil || r.Time.After(last.Time) {
			last = &rs[i]
		}
	}
	if last == nil {
		return held{}
	}
	d, err := e.Client.DescribeWorkflowExecution(ctx, run.GetID(), run.GetRunID())
	if err != nil {
		return held{}
	}
	for _, pa := range d.PendingActivities {
		if pa.LastFailure == nil {
			continue
		}
		var app *temporal.ApplicationError
		ferr := temporal.GetDefaultFailureConverter().FailureToError(pa.LastFailure)
		var call interceptor.WithheldCall
		if !errors.As(ferr, &app) || app.Type() != interceptor.ErrTypeInFlight || !app.HasDetails() || app.Details(&call) != nil {
			continue
		}
		if call.NotSentCountsFrom == nil {
			return held{person: &call}
		}
		if !e.Scheduled {
			continue // really wait: the retry asks the witness again when its answer counts
		}
		name := earlyNotSentBy(last.Error)
		next := pa.GetNextAttemptScheduleTime()
		if name != "" && next != nil && !next.AsTime().Before(*call.NotSentCountsFrom) {
			return held{scheduled: &call, witness: name}
		}
	}
	return held{}
}

// earlyNotSent matches a witness's early "not sent" as a refusal quotes it
// (witness.Said.String).
var earlyNotSent = regexp.MustCompile(`([^\s:;]+): not sent, but asked before `)

// earlyNotSentBy names the witness whose early "not sent" the refusal msg quotes, or "".
func earlyNotSentBy(msg string) string {
	if m := earlyNotSent.FindStringSubmatch(msg); m != nil {
		return m[1]
	}
	return ""
}

type receiptLister interface {
	Receipts(ctx context.Context, f store.ReceiptFilter) ([]store.Receipt, error)
}

// settlement reads from the trial's receipts whether the write's outcome was
// unknown and who settled it, and checks every settlement against the vendor's
// ledger (EffectsBefore: what it had performed before anyone could settle).
func (tr *Trial) settlement(ctx context.Context, st receiptLister, t Tool, workflowID string) error {
	rs, err := st.Receipts(ctx, store.ReceiptFilter{WorkflowID: workflowID})
	if err != nil {
		return fmt.Errorf("read the trial's receipts: %v", err)
	}
	for _, r := range rs {
		switch {
		case r.Decision == store.DecisionResolved:
			tr.Unknown = true
			if name, ok := strings.CutPrefix(r.Actor, "witness:"); ok {
				tr.SettledBy = "witness " + name + " (" + strings.ReplaceAll(r.Resolution, "-", " ") + ")"
			} else {
				tr.ByPerson = true
			}
			if r.Resolution == store.ResolvedNotSent && tr.EffectsBefore > 0 || r.Resolution == store.ResolvedSent && tr.EffectsBefore == 0 {
				tr.Wrong = true
			}
		case r.Decision == store.DecisionTakenOver:
			tr.Unknown = true
			if tr.SettledBy == "" {
				if t.Effect == "destructive" {
					tr.SettledBy = "vendor dedup (re-sent with the key)"
				} else {
					tr.SettledBy = "idempotent re-run"
				}
			}
		case r.Decision == store.DecisionRefusedInFlight && len(r.Call) > 0:
			tr.Unknown = true
		}
	}
	return nil
}

// serveLookup serves v's lookup by key (vendorsim.Vendor.LookupHandler) on loopback,
// for the workers' ChargeCard witness.
func serveLookup(v *vendorsim.Vendor) (*lookupServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("idemgate/integration/faults: the payments lookup: %w", err)
	}
	s := &lookupServer{URL: "http://" + ln.Addr().String() + "/lookup", srv: &http.Server{Handler: v.LookupHandler(), ReadHeaderTimeout: 10 * time.Second}}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

type lookupServer struct {
	URL string
	srv *http.Server
}

func (s *lookupServer) Close() { _ = s.srv.Close() }

func vendorNamed(w *vendorsim.World, name string) *vendorsim.Vendor {
	for _, v := range w.Vendors() {
		if v.Name == name {
			return v
		}
	}
	panic("faults: no vendor " + name)
}

// converged: the vendor holds exactly the record the call asked for (or, for a write
// that leaves no record, performed it at least once).
func converged(t Tool, v *vendorsim.Vendor, args map[string]any) bool {
	switch t.Name {
	case "UpsertContact":
		r, ok := v.Record(args["email"].(string))
		return ok && v.Records() == 1 && r["name"] == args["name"] && r["company"] == args["company"]
	case "SendEmail":
		return v.Total() >= 1
	}
	return v.Records() == 1
}

// resultIsTheVendors: the result the workflow got names the vendor's record.
func resultIsTheVendors(t Tool, v *vendorsim.Vendor, out json.RawMessage) bool {
	var r map[string]any
	if json.Unmarshal(out, &r) != nil {
		return false
	}
	switch t.Name {
	case "UpsertContact":
		email, _ := r["email"].(string)
		_, ok := v.Record(email)
		return ok
	case "SendEmail":
		id, _ := r["message_id"].(string)
		return id != ""
	}
	id, _ := r["id"].(string)
	_, ok := v.Record(id)
	return ok
}

// CellResult sums a cell's trials.
type CellResult struct {
	Cell
	Trials                            int
	Effects, Duplicates, Replays      int
	Succeeded, Refused, RefusedNoCall int
	Lost, NotConverged, Errors        int
	FirstError                        string
	Wall                              time.Duration
	// Unknown counts the trials whose write a later attempt found with an unknown
	// outcome; Settled counts who settled them without a person (Trial.SettledBy);
	// Scheduled counts who was to settle them when the harness ended the trial
	// (Trial.Scheduled, Env.Scheduled); ByPerson, Pending and Wrong count Trial's
	// fields of those names.
	Unknown                  int
	Settled, Scheduled       map[string]int
	ByPerson, Pending, Wrong int
}

// SettledWithoutAPerson is how many of the cell's unknown outcomes were settled
// without a person.
func (r CellResult) SettledWithoutAPerson() int { return sum(r.Settled) }

// ScheduledWithoutAPerson is how many of the cell's unknown outcomes a witness was
// to settle at a scheduled retry when the harness ended the trial (Env.Scheduled).
func (r CellResult) ScheduledWithoutAPerson() int { return sum(r.Scheduled) }

func sum(m map[string]int) int {
	n := 0
	for _, c := range m {
		n += c
	}
	return n
}

// RunMatrix runs trials trials of every cell, parallel at a time, interleaving the
// cells. progress (optional) is called after each trial.
func (e *Env) RunMatrix(ctx context.Context, cells []Cell, trials, parallel int, progress func(done, total int)) []CellResult {
	type job struct{ cell, i int }
	var jobs []job
	for i := range trials {
		for c := range cells {
			jobs = append(jobs, job{c, i})
		}
	}
	res := make([]CellResult, len(cells))
	for i, c := range cells {
		res[i].Cell = c
	}
	var mu sync.Mutex
	done := 0
	ch := make(chan job)
	var wg sync.WaitGroup
	for range max(parallel, 1) {
		wg.Go(func() {
			for j := range ch {
				start := time.Now()
				tr := e.Run(ctx, cells[j.cell], j.i)
				mu.Lock()
				r := &res[j.cell]
				r.Trials++
				r.Wall += time.Since(start)
				r.Effects += tr.Effects
				r.Replays += tr.Replays
				if tr.Effects > 1 {
					r.Duplicates += tr.Effects - 1
				}
				if tr.Succeeded {
					r.Succeeded++
				}
				if tr.Refused {
					r.Refused++
					if !tr.WithCall {
						r.RefusedNoCall++
					}
				}
				if tr.Lost {
					r.Lost++
				}
				if tr.Unknown {
					r.Unknown++
					m := &r.Settled
					if tr.Scheduled {
						m = &r.Scheduled
					}
					if tr.SettledBy != "" {
						if *m == nil {
							*m = map[string]int{}
						}
						(*m)[tr.SettledBy]++
					}
				}
				if tr.ByPerson {
					r.ByPerson++
				}
				if tr.Pending {
					r.Pending++
				}
				if tr.Wrong {
					r.Wrong++
				}
				if !tr.Converged && !tr.Refused {
					r.NotConverged++
				}
				if tr.Err != "" {
					r.Errors++
					if r.FirstError == "" {
						r.FirstError = tr.ID + ": " + tr.Err
					}
				}
				done++
				if progress != nil {
					progress(done, len(jobs))
				}
				mu.Unlock()
			}
		})
	}
	for _, j := range jobs {
		if ctx.Err() != nil {
			break
		}
		ch <- j
	}
	close(ch)
	wg.Wait()
	return res
}

// Violations lists every result that breaks the promise: a duplicate of a destructive
// or vendor-keyed write, a lost write, a refusal without its withheld call, a
// destructive write to an unkeyed vendor killed at boundary 3 or 4 that was not
// refused, an idempotent write that did not converge, and any trial that failed
// otherwise.
func Violations(res []CellResult) []string {
	var out []string
	for _, r := range res {
		name := fmt.Sprintf("boundary %d (%s) × %s (%s, %s) × %s", r.Boundary.N, r.Boundary.Name, r.Tool.Name, r.Tool.Effect, keyedness(r.Tool), r.Store)
		bad := func(format string, args ...any) { out = append(out, name+": "+fmt.Sprintf(format, args...)) }
		if r.Trials == 0 {
			bad("no trial ran")
		}
		if r.Errors > 0 {
			bad("%d of %d trials failed: %s", r.Errors, r.Trials, r.FirstError)
		}
		if (r.Tool.Effect == "destructive" || r.Tool.Keyed) && r.Duplicates > 0 {
			bad("%d duplicate side effects", r.Duplicates)
		}
		if r.Lost > 0 {
			bad("%d lost writes (success reported, the vendor never saw it)", r.Lost)
		}
		if r.RefusedNoCall > 0 {
			bad("%d refusals without the withheld call", r.RefusedNoCall)
		}
		if r.Tool.Effect == "destructive" && !r.Tool.Keyed && (r.Boundary.N == 3 || r.Boundary.N == 4) && r.Refused != r.Trials {
			bad("refused %d of %d; a destructive write the vendor may have performed must be refused", r.Refused, r.Trials)
		}
		if r.Tool.Effect == "idempotent-write" && (r.Succeeded != r.Trials || r.NotConverged > 0) {
			bad("%d of %d succeeded, %d did not converge", r.Succeeded, r.Trials, r.NotConverged)
		}
		// A vendor-keyed destructive write killed before its request left has no
		// evidence that its key left through the keyed transport: the gate cannot tell
		// it from a body that called the vendor without the key, and does not re-send
		// it (issue 18 item 12). The processor's lookup can tell: it never saw the key,
		// so once the attempt's lease plus store.LeaseMargin passed the witness settles
		// it "not sent" and the held write runs once (issue 19); with Env.Scheduled the
		// trial ends once that retry is scheduled (Trial.Scheduled). Past the request,
		// the evidence is in the claim and the write is re-sent with its key.
		noEvidence := r.Tool.Effect == "destructive" && r.Tool.Keyed && r.Boundary.N == 2
		if r.Tool.Keyed && r.Succeeded+r.ScheduledWithoutAPerson() != r.Trials {
			bad("%d of %d succeeded, %d scheduled to be settled by a witness; a vendor-keyed write must finish", r.Succeeded, r.Trials, r.ScheduledWithoutAPerson())
		}
		const lookupNotSent = "witness payments-lookup (not sent)"
		if n := r.Settled[lookupNotSent] + r.Scheduled[lookupNotSent]; noEvidence && n != r.Trials {
			bad("%d of %d settled or scheduled to be settled by the processor's lookup as not sent (settled %v, scheduled %v); a destructive write killed before its key left must be settled by the witness", n, r.Trials, r.Settled, r.Scheduled)
		}
		if r.Wrong > 0 {
			bad("%d wrong settlements (against the vendor's ledger)", r.Wrong)
		}
		if r.Pending > 0 && r.Tool.Witness {
			bad("%d of %d still pending for a person although a witness can tell", r.Pending, r.Trials)
		}
		if (r.Boundary.N == 1 || r.Boundary.N == 5) && r.Succeeded != r.Trials {
			bad("%d of %d succeeded; nothing was in doubt at this boundary", r.Succeeded, r.Trials)
		}
	}
	if sh := Shares(res); sh.WithWitness.Unknown > 0 && (sh.WithWitness.Settled+sh.WithWitness.Scheduled)*10 < sh.WithWitness.Unknown*9 {
		out = append(out, fmt.Sprintf("settled (or scheduled to be) without a person where a witness exists: %d+%d of %d unknown outcomes, below 90 %%",
			sh.WithWitness.Settled, sh.WithWitness.Scheduled, sh.WithWitness.Unknown))
	}
	return out
}

// Share is how many unknown outcomes were settled without a person, and (with
// Env.Scheduled) how many a witness was to settle at a scheduled retry when the
// trial ended.
type Share struct {
	Unknown, Settled, Scheduled, ByPerson, Pending, Wrong int
}

func (s Share) String() string {
	pct := func(n int) string {
		if s.Unknown == 0 {
			return "—"
		}
		return fmt.Sprintf("%.0f %%", 100*float64(n)/float64(s.Unknown))
	}
	sched := ""
	if s.Scheduled > 0 {
		sched = fmt.Sprintf(", %d scheduled to be settled by a witness when the trial ended (%s; with those settled, %s)",
			s.Scheduled, pct(s.Scheduled), pct(s.Settled+s.Scheduled))
	}
	return fmt.Sprintf("%d unknown outcomes, %d settled without a person (%s)%s, %d by a person, %d still pending, %d wrong settlements",
		s.Unknown, s.Settled, pct(s.Settled), sched, s.ByPerson, s.Pending, s.Wrong)
}

// Shares sums the unknown outcomes of destructive writes where a witness exists
// (Tool.Witness), of those where none does, and of idempotent writes (which the
// gate re-runs by its own rule).
func Shares(res []CellResult) (sh struct{ WithWitness, NoWitness, Idempotent Share }) {
	for _, r := range res {
		s := &sh.Idempotent
		switch {
		case r.Tool.Effect == "destructive" && r.Tool.Witness:
			s = &sh.WithWitness
		case r.Tool.Effect == "destructive":
			s = &sh.NoWitness
		}
		s.Unknown += r.Unknown
		s.Settled += r.SettledWithoutAPerson()
		s.Scheduled += r.ScheduledWithoutAPerson()
		s.ByPerson += r.ByPerson
		s.Pending += r.Pending
		s.Wrong += r.Wrong
	}
	return sh
}

// SharesMarkdown prints Shares as a list.
func SharesMarkdown(res []CellResult) string {
	sh := Shares(res)
	return fmt.Sprintf("- destructive writes where a witness exists (ChargeCard → payments: its lookup by key, its deduplication of a re-send): %s\n"+
		"- destructive writes where no witness exists (SendEmail → email, which takes no key): %s\n"+
		"- idempotent writes (re-run with the same key by the gate's own rule): %s\n", sh.WithWitness, sh.NoWitness, sh.Idempotent)
}

// byList is "N: n1 who1, n2 who2", or "0".
func byList(m map[string]int) string {
	n := sum(m)
	if n == 0 {
		return "0"
	}
	names := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = fmt.Sprintf("%d %s", m[k], k)
	}
	return fmt.Sprintf("%d: %s", n, strings.Join(parts, ", "))
}

func keyedness(t Tool) string {
	if t.Keyed {
		return "vendor dedupes on the key"
	}
	return "vendor takes no key"
}

// Markdown prints the matrix as a table.
func Markdown(res []CellResult) string {
	var b strings.Builder
	b.WriteString("| boundary | effect (tool → vendor) | store | trials | vendor effects | duplicates | refusals needing a person | lost | finished | vendor replays | unknown outcomes | settled without a person (by) | scheduled: a witness's not-sent counts later, trial ended before the retry (by) | settled by a person | still pending | wrong settlements |\n")
	b.WriteString("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---:|---:|---:|\n")
	rs := slices.Clone(res)
	slices.SortStableFunc(rs, func(a, b CellResult) int {
		if a.Store != b.Store {
			return strings.Compare(a.Store, b.Store)
		}
		return a.Boundary.N - b.Boundary.N
	})
	for _, r := range rs {
		dup := fmt.Sprint(r.Duplicates)
		if r.Tool.Effect == "idempotent-write" && !r.Tool.Keyed && r.Duplicates > 0 {
			dup += fmt.Sprintf(" (PUT re-applied; converged %d/%d)", r.Trials-r.NotConverged, r.Trials)
		}
		refused := fmt.Sprint(r.Refused)
		if r.RefusedNoCall > 0 {
			refused += fmt.Sprintf(" (%d WITHOUT the call)", r.RefusedNoCall)
		}
		fmt.Fprintf(&b, "| %d. %s | %s (%s → %s, %s) | %s | %d | %d | %s | %s | %d | %d | %d | %d | %s | %s | %d | %d | %d |\n",
			r.Boundary.N, r.Boundary.Name, r.Tool.Effect, r.Tool.Name, r.Tool.Vendor, keyedness(r.Tool), r.Store,
			r.Trials, r.Effects, dup, refused, r.Lost, r.Succeeded, r.Replays, r.Unknown, byList(r.Settled), byList(r.Scheduled),
			r.ByPerson, r.Pending, r.Wrong)
	}
	return b.String()
}

// PostgresSchema creates a fresh schema on dsn and returns a DSN whose search_path is
// that schema, and a function that drops it.
func PostgresSchema(ctx context.Context, dsn string) (string, func(), error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return "", nil, err
	}
	defer conn.Close(ctx)
	name := "idemgate_faults_" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+name); err != nil {
		return "", nil, err
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return "", nil, fmt.Errorf("idemgate/integration/faults: want a postgres:// DSN: %w", err)
	}
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	drop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if c, err := pgx.Connect(ctx, dsn); err == nil {
			_, _ = c.Exec(ctx, "DROP SCHEMA "+name+" CASCADE")
			c.Close(ctx)
		}
	}
	return u.String(), drop, nil
}
