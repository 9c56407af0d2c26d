package faults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
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
	args  func(id string) map[string]any
}

// Tools are the writes of the matrix: an idempotent write and a destructive one, each
// to a vendor that deduplicates on the key and to one that does not.
var Tools = []Tool{
	{"UpsertContact", "idempotent-write", "crm", false, func(id string) map[string]any {
		return map[string]any{"email": id + "@example.com", "name": "Trial " + id, "company": "Faults"}
	}},
	{"CreateTicket", "idempotent-write", "tickets", true, func(id string) map[string]any {
		return map[string]any{"subject": "trial " + id, "requester": id + "@example.com", "body": "fault trial"}
	}},
	{"ChargeCard", "destructive", "payments", true, func(id string) map[string]any {
		return map[string]any{"customer": "cus_" + id, "amount": 1999, "currency": "usd", "description": "trial " + id}
	}},
	{"SendEmail", "destructive", "email", false, func(id string) map[string]any {
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
	spec := WorkerSpec{Bin: e.Bin, HostPort: e.HostPort, Namespace: e.Namespace, Queue: "faults-" + tr.ID, World: world,
		KillAt: c.Boundary.Point}
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
	run, err := e.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "faults-" + tr.ID, TaskQueue: spec.Queue,
		WorkflowExecutionTimeout: 3 * time.Minute}, faultwf.Job, faultwf.JobInput{Tool: c.Tool.Name, Args: args, Timeout: timeout})
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

	spec.KillAt = ""
	second, err := StartWorker(spec)
	if err != nil {
		return fail("%v", err)
	}
	defer second.Stop()
	rctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	var out json.RawMessage
	werr := run.Get(rctx, &out)

	tr.Effects, tr.Replays, tr.Records = v.Total(), v.Replays(), v.Records()
	tr.Converged = converged(c.Tool, v, args)
	switch {
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
	return tr
}

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
		// it from a body that called the vendor without the key, and refuses it
		// (issue 18 item 12). Past the request, the evidence is in the claim.
		noEvidence := r.Tool.Effect == "destructive" && r.Tool.Keyed && r.Boundary.N == 2
		if r.Tool.Keyed && !noEvidence && r.Succeeded != r.Trials {
			bad("%d of %d succeeded; a vendor-keyed write must finish", r.Succeeded, r.Trials)
		}
		if noEvidence && r.Refused != r.Trials {
			bad("refused %d of %d; a destructive write killed before its key left must be refused", r.Refused, r.Trials)
		}
		if (r.Boundary.N == 1 || r.Boundary.N == 5) && r.Succeeded != r.Trials {
			bad("%d of %d succeeded; nothing was in doubt at this boundary", r.Succeeded, r.Trials)
		}
	}
	return out
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
	b.WriteString("| boundary | effect (tool → vendor) | store | trials | vendor effects | duplicates | refusals needing a person | lost | finished | vendor replays |\n")
	b.WriteString("|---|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
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
		fmt.Fprintf(&b, "| %d. %s | %s (%s → %s, %s) | %s | %d | %d | %s | %s | %d | %d | %d |\n",
			r.Boundary.N, r.Boundary.Name, r.Tool.Effect, r.Tool.Name, r.Tool.Vendor, keyedness(r.Tool), r.Store,
			r.Trials, r.Effects, dup, refused, r.Lost, r.Succeeded, r.Replays)
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
