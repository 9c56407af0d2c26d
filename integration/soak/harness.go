package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/idemgate/idemgate/integration/faults"
	"github.com/idemgate/idemgate/integration/soak/soakwf"
	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/internal/storeopen"
	"github.com/idemgate/idemgate/mcptools"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/vendorsim"
)

// Broken variants the checker must catch (Config.Broken).
const (
	// BrokenPassThrough: the workers' gate classifies every tool read (the gate in
	// pass-through mode: keys minted and forwarded, nothing claimed).
	BrokenPassThrough = "passthrough"
	// BrokenBare: the workers run no interceptor at all.
	BrokenBare = "bare"
	// BrokenForget: the workers' store forgets completions (Complete stores nothing).
	BrokenForget = "forget"
)

// Config is one soak run.
type Config struct {
	// Duration is how long the workload starts workflows and the nemesis acts.
	Duration time.Duration
	// Drain bounds the wait, after Duration, for the workflows still running
	// (the rest are terminated and counted unfinished). Optional: 0 means 90 s.
	Drain time.Duration
	Seed  uint64
	// Store is "sqlite" or "postgres" (PostgresDSN: a DSN whose search_path is the run's schema).
	Store       string
	PostgresDSN string
	// Workers is how many worker processes poll the task queue (0: 3); InFlight how
	// many workflows run at once (0: 6).
	Workers, InFlight int
	// Nemesis turns the faults on.
	Nemesis bool
	// Broken runs a broken variant ("" for the real gate).
	Broken string
	// PGCtl, with Store "postgres", lets the nemesis restart the PostgreSQL server in
	// immediate mode (a crash: no checkpoint, connections cut): the pg_ctl wrapper
	// scripts/with-postgres.sh exports as IDEMGATE_PG_CTL. Only for a server nothing
	// else uses at the time.
	PGCtl string
	// Bin is the worker binary (BuildWorker); Dir holds the SQLite file.
	Bin, Dir string
	// HostPort, Namespace and Client reach the Temporal server.
	HostPort, Namespace string
	Client              client.Client
	// Log, when set, gets progress lines; with Verbose, also each fault with its time
	// (to line a violation's history up with the faults around it).
	Log     io.Writer
	Verbose bool
	// LocalScheduleToClose is the workload's soakwf.Input.LocalScheduleToClose.
	LocalScheduleToClose time.Duration
	// Only, when set, limits the nemesis to the actions named (kill, stop, reset,
	// pause, settle, skew, drop, delay, pgrestart).
	Only []string
	// Durability is the workers' store durability ("claim", the default, or "strict").
	Durability string
}

// Stats is what a run did and found.
type Stats struct {
	Seed       uint64
	Store      string
	Durability string
	Duration   time.Duration
	Wall       time.Duration
	Workflows  int
	Calls      int
	// Closed counts the workflows by their final status; Unfinished how many of them
	// the harness terminated because they still ran at the end of the drain.
	Closed     map[string]int
	Unfinished int
	// Effects is how many side effects the vendors performed; Receipts how many
	// receipts the store holds.
	Effects, Receipts int
	// Faults counts what the nemesis did, by kind; Workload the calls and workflows
	// of each feature (local activities, child workflows, continue-as-new, approvals,
	// signalled calls, updates, the asynchronous tool, the MCP tools).
	Faults   map[string]int
	Workload map[string]int
	// Ran counts, for each kind of call that needs more than the workload drawing it
	// (RanKinds), the calls that actually ran: a mix that silently never runs a kind
	// proves nothing about it.
	Ran        map[string]int
	Violations []Violation
}

// The kinds of call Stats.Ran counts.
const (
	// RanApproved: calls made after their approval signal, reported done.
	RanApproved = "approved call"
	// RanSignalled: calls that came in a signal, reported done.
	RanSignalled = "signalled call"
	// RanUpdate: update calls whose outcome (done) the client got.
	RanUpdate = "update"
	// RanAsync: ChargeCardAsync calls reported done (completed asynchronously, or
	// replayed from the completion stored under their key).
	RanAsync = "async completion"
	// RanHandedOff: the gate's handed-off receipts (an attempt that returned
	// ErrResultPending).
	RanHandedOff = "async hand-off"
	// RanMCPRead and RanMCPDestructive: the MCP server's tools ran (its own count).
	RanMCPRead        = "MCP read"
	RanMCPDestructive = "MCP destructive"
)

// RanKinds lists the kinds Stats.Ran counts.
var RanKinds = []string{RanApproved, RanSignalled, RanUpdate, RanAsync, RanHandedOff, RanMCPRead, RanMCPDestructive}

// BuildWorker builds integration/soak/workerproc into dir.
func BuildWorker(ctx context.Context, dir string) (string, error) {
	out := filepath.Join(dir, "soak-workerproc")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "github.com/idemgate/idemgate/integration/soak/workerproc")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("idemgate/integration/soak: go build workerproc: %v\n%s", err, b)
	}
	return out, nil
}

// tool is a call the workload makes, with its effect and arguments built around the
// call's token; local: it may run as a local activity.
type tool struct {
	name, effect string
	args         func(tok string, r *rand.Rand) map[string]any
	local        bool
}

// The tools that are not package activities': the one that completes asynchronously
// (workerproc's ChargeCardAsync) and the MCP server's (mcpserver.go), as activities.
var (
	asyncTool         = "ChargeCardAsync"
	mcpReadTool       = mcptools.ActivityName(mcpServerName, mcpRead)
	mcpDestructiveTol = mcptools.ActivityName(mcpServerName, mcpDestructive)
)

func chargeArgs(tok string, r *rand.Rand) map[string]any {
	return map[string]any{"customer": "cus_" + tok, "amount": 100 + r.IntN(9900), "currency": "usd", "description": "soak " + tok}
}

var tools = []tool{
	{"SearchDocs", "read", func(tok string, _ *rand.Rand) map[string]any { return map[string]any{"query": "refund " + tok} }, false},
	{"GetCustomer", "read", func(tok string, _ *rand.Rand) map[string]any { return map[string]any{"customer_id": "cus_" + tok} }, true},
	{"UpsertContact", "idempotent-write", func(tok string, r *rand.Rand) map[string]any {
		return map[string]any{"email": tok + "@example.com", "name": "Soak " + tok, "company": "C" + strconv.Itoa(r.IntN(9))}
	}, true},
	{"CreateTicket", "idempotent-write", func(tok string, _ *rand.Rand) map[string]any {
		return map[string]any{"subject": "soak " + tok, "requester": tok + "@example.com", "body": "soak"}
	}, true},
	{"ChargeCard", "destructive", chargeArgs, true},
	{"SendEmail", "destructive", func(tok string, _ *rand.Rand) map[string]any {
		return map[string]any{"to": tok + "@example.com", "subject": "soak " + tok, "body": "soak"}
	}, true},
	{asyncTool, "destructive", chargeArgs, false},
	{mcpReadTool, "read", func(tok string, _ *rand.Rand) map[string]any { return map[string]any{"order": "ord_" + tok} }, false},
	{mcpDestructiveTol, "destructive", func(tok string, r *rand.Rand) map[string]any {
		return map[string]any{"payment": "py_" + tok, "amount": 100 + r.IntN(900)}
	}, false},
}

// writeTools are the workload's write tools (what the nemesis pauses).
var writeTools = []string{"ChargeCard", "SendEmail", "CreateTicket", "UpsertContact", asyncTool, mcpDestructiveTol}

// witnessed: the activities whose workers ask a witness (the processor's lookup for
// both charges, the MCP server's Dedup lookup for its tools).
var witnessed = map[string]bool{"ChargeCard": true, asyncTool: true, mcpDestructiveTol: true}

// run is one soak run's state.
type run struct {
	cfg   Config
	world *vendorsim.World
	st    storeopen.Store
	spec  faults.WorkerSpec
	tag   string
	proxy *proxy // between the workers and PostgreSQL (nil for SQLite)

	mcp *mcpServer

	mu      sync.Mutex
	procs   []*faults.Proc
	calls   []soakwf.Call
	ids     []string
	faults  map[string]int
	plans   map[string]*plan // by workflow ID: what the harness signals and updates
	updates []Update         // the outcomes the harness got for update calls
	drivers sync.WaitGroup
}

func (r *run) logf(format string, args ...any) {
	if r.cfg.Log != nil {
		fmt.Fprintf(r.cfg.Log, "soak: "+format+"\n", args...)
	}
}

func (r *run) count(kind string) {
	r.mu.Lock()
	r.faults[kind]++
	r.mu.Unlock()
	if !strings.HasPrefix(kind, "workload: ") && r.cfg.Verbose {
		r.logf("%s %s", time.Now().UTC().Format("15:04:05.000"), kind)
	}
}

// Soak runs the workload (and the nemesis) for cfg.Duration, drains, and checks.
func Soak(ctx context.Context, cfg Config) (Stats, error) {
	start := time.Now()
	if cfg.Workers == 0 {
		cfg.Workers = 3
	}
	if cfg.InFlight == 0 {
		cfg.InFlight = 6
	}
	if cfg.Drain == 0 {
		cfg.Drain = 90 * time.Second
	}
	if cfg.Durability == "" {
		cfg.Durability = "claim"
	}
	st := Stats{Seed: cfg.Seed, Store: cfg.Store, Durability: cfg.Durability, Duration: cfg.Duration, Closed: map[string]int{}}
	world, err := vendorsim.Start()
	if err != nil {
		return st, err
	}
	defer world.Close()
	lookupURL, lookup, err := serveLookup(world.Payments)
	if err != nil {
		return st, err
	}
	defer lookup.Close()
	m, err := startMCP()
	if err != nil {
		return st, err
	}
	defer m.Close()
	r := &run{cfg: cfg, world: world, mcp: m, faults: map[string]int{}, plans: map[string]*plan{},
		tag: strconv.FormatUint(cfg.Seed, 36) + "x" + uuid.NewString()[:4]}
	spec := faults.WorkerSpec{Bin: cfg.Bin, HostPort: cfg.HostPort, Namespace: cfg.Namespace, Queue: "soak-" + r.tag,
		World: world, PaymentsLookup: lookupURL, HoldUnknown: time.Second, Bare: cfg.Broken == BrokenBare,
		Durability: cfg.Durability, Args: []string{"--mcp-url", m.URL, "--mcp-dedup-window", mcpDedupWindow.String()}}
	switch cfg.Broken {
	case "", BrokenBare:
	case BrokenForget:
		spec.Args = append(spec.Args, "--forget-completions")
	case BrokenPassThrough:
		spec.Args = append(spec.Args, "--all-read")
	default:
		return st, fmt.Errorf("idemgate/integration/soak: unknown broken variant %q (passthrough, bare or forget)", cfg.Broken)
	}
	switch cfg.Store {
	case "sqlite":
		spec.Store = filepath.Join(cfg.Dir, "soak-"+r.tag+".db")
	case "postgres":
		if cfg.PostgresDSN == "" {
			return st, errors.New("idemgate/integration/soak: -store postgres needs IDEMGATE_POSTGRES_DSN")
		}
		p, dsn, err := proxyDSN(cfg.PostgresDSN)
		if err != nil {
			return st, err
		}
		defer p.Close()
		r.proxy, spec.Store = p, dsn
	default:
		return st, fmt.Errorf("idemgate/integration/soak: unknown store %q (sqlite or postgres)", cfg.Store)
	}
	r.spec = spec
	// The harness's own handle: it creates the schema before the workers open it,
	// and is the operator's (pauses, settlements) and the checker's reader.
	own := spec.Store
	if cfg.Store == "postgres" {
		own = cfg.PostgresDSN // not through the proxy
	}
	r.st, err = storeopen.Open(ctx, own)
	if err != nil {
		return st, err
	}
	defer r.st.Close()
	r.procs = make([]*faults.Proc, cfg.Workers)
	for i := range r.procs {
		if err := r.startWorker(ctx, i, nil); err != nil {
			return st, err
		}
	}
	defer func() {
		r.mu.Lock()
		ps := slices.Clone(r.procs)
		r.mu.Unlock()
		for _, p := range ps {
			if p != nil {
				p.Stop()
			}
		}
	}()
	r.logf("seed %d, store %s, %d workers, %d in flight, nemesis %v, broken %q, queue %s", cfg.Seed, cfg.Store, cfg.Workers, cfg.InFlight,
		cfg.Nemesis, cfg.Broken, spec.Queue)

	// The drivers (signals and updates) outlive the workload: they serve the drain.
	dctx0, stopDrivers := context.WithCancel(ctx)
	defer func() {
		stopDrivers()
		r.drivers.Wait()
	}()
	wctx, stopLoad := context.WithTimeout(ctx, cfg.Duration)
	defer stopLoad()
	var wg sync.WaitGroup
	if cfg.Nemesis {
		wg.Go(func() { r.nemesis(wctx, dctx0) })
	}
	r.workload(wctx, dctx0)
	wg.Wait()
	if ctx.Err() != nil {
		return st, ctx.Err()
	}

	// Drain: every worker up, no pause in force, the operator settles what it can.
	r.logf("draining %d workflows", len(r.ids))
	for i := range r.procs {
		if r.procs[i].Exited() {
			if err := r.startWorker(ctx, i, nil); err != nil {
				return st, err
			}
		}
	}
	if ps, err := r.st.Pauses(ctx); err == nil {
		for _, p := range ps {
			_ = r.st.Resume(ctx, store.Pause{Activity: p.Activity, Effect: p.Effect, Actor: "soak-nemesis", Reason: "drain", Time: time.Now()})
		}
	}
	dctx, cancel := context.WithTimeout(ctx, cfg.Drain)
	// With the nemesis stopped nothing reopens a closed workflow: poll only the open ones.
	open := r.open(dctx, r.ids)
	for dctx.Err() == nil {
		r.settle(dctx)
		if open = r.open(dctx, open); len(open) == 0 {
			break
		}
		select {
		case <-dctx.Done():
		case <-time.After(time.Second):
		}
	}
	cancel()
	for _, id := range r.open(ctx, open) {
		if d, err := cfg.Client.DescribeWorkflowExecution(ctx, id, ""); err == nil {
			var pend []string
			for _, pa := range d.PendingActivities {
				why := ""
				if f := pa.LastFailure; f != nil {
					why = f.Message
					if len(why) > 200 {
						why = why[:200] + "…"
					}
				}
				pend = append(pend, fmt.Sprintf("%s attempt %d (%s)", pa.ActivityType.GetName(), pa.Attempt, why))
			}
			r.logf("%s still running after the drain; pending activities: %v; children: %d", id, pend, len(d.PendingChildren))
		}
		tctx, tcancel := context.WithTimeout(ctx, 10*time.Second)
		_ = cfg.Client.TerminateWorkflow(tctx, id, "", "soak: unfinished at the end of the drain")
		tcancel()
		st.Unfinished++
	}
	if ctx.Err() != nil {
		return st, ctx.Err()
	}
	// Every workflow is closed: the drivers stop, and what they got is final.
	stopDrivers()
	r.drivers.Wait()

	in, err := r.collect(ctx)
	if err != nil {
		return st, err
	}
	for _, rn := range in.Runs {
		st.Closed[rn.Status]++
	}
	st.Workflows, st.Calls, st.Effects, st.Receipts = len(r.ids), len(r.calls), len(in.Ledger), len(in.Receipts)
	st.Faults, st.Workload = map[string]int{}, map[string]int{}
	for k, n := range r.faults {
		if w, ok := strings.CutPrefix(k, "workload: "); ok {
			st.Workload[w] = n
		} else {
			st.Faults[k] = n
		}
	}
	st.Ran = r.ran(in)
	st.Violations = Check(in)
	st.Wall = time.Since(start)
	return st, nil
}

func (r *run) startWorker(ctx context.Context, i int, extra []string) error {
	spec := r.spec
	spec.Args = append(slices.Clone(spec.Args), extra...)
	p, err := faults.StartWorker(spec)
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := p.WaitReady(rctx); err != nil {
		p.Kill()
		return err
	}
	r.mu.Lock()
	r.procs[i] = p
	r.mu.Unlock()
	return nil
}

// workload keeps cfg.InFlight agent workflows running until ctx ends; dctx bounds
// the drivers that signal and update them (they outlive the workload, for the drain).
func (r *run) workload(ctx, dctx context.Context) {
	rng := rand.New(rand.NewPCG(r.cfg.Seed, 1))
	running := map[string]bool{}
	n := 0
	start, lastLog := time.Now(), time.Now()
	for ctx.Err() == nil {
		if time.Since(lastLog) >= time.Minute {
			lastLog = time.Now()
			r.mu.Lock()
			faults := 0
			for k, c := range r.faults {
				if !strings.HasPrefix(k, "workload: ") {
					faults += c
				}
			}
			r.mu.Unlock()
			r.logf("%s: %d workflows started, %d faults injected", time.Since(start).Round(time.Second), n, faults)
		}
		for id := range running {
			d, err := r.cfg.Client.DescribeWorkflowExecution(ctx, id, "")
			if err == nil && d.WorkflowExecutionInfo.Status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
				delete(running, id)
			}
		}
		for len(running) < r.cfg.InFlight && ctx.Err() == nil {
			wf := r.tag + "w" + strconv.Itoa(n)
			n++
			in, p := r.agentInput(rng, wf, n%8 == 1)
			id := "soak-" + wf
			// The calls are the checker's list of what the workload asked, recorded
			// before the start: a start that reached the server although its caller
			// got an error (the context ending mid-request) still runs them, and the
			// checker reports an effect that names no call (atk-check finding 5).
			r.mu.Lock()
			r.calls = append(r.calls, in.Calls...)
			r.calls = append(r.calls, p.signalled...)
			r.calls = append(r.calls, p.updates...)
			r.mu.Unlock()
			_, err := r.cfg.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: r.spec.Queue,
				WorkflowRunTimeout: 20 * time.Minute}, soakwf.Agent, in)
			if err != nil {
				if ctx.Err() == nil {
					r.logf("start %s: %v", id, err)
				}
				break
			}
			running[id] = true
			p.id, p.kick, p.rng = id, make(chan struct{}, 1), rand.New(rand.NewPCG(r.cfg.Seed, 3+uint64(n)))
			r.mu.Lock()
			r.ids = append(r.ids, id)
			if p.drives() {
				r.plans[id] = p
			}
			r.mu.Unlock()
			if p.drives() {
				r.kick(dctx, id)
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// agentInput draws a workflow's calls: 2–6 random tools, a quarter of them (of the
// tools that have a local form) as local activities; in a quarter of the workflows a
// run of calls in a child workflow, in another quarter continue-as-new every 1–3
// calls. Independently, in a third of the workflows one or two of the calls (not
// local, not a child's) wait for an approval signal; in a quarter one or two more
// calls come in signals; in a quarter of those that do not continue as new, one or
// two more calls are made by updates. The plan is what the harness sends.
//
// every (one workflow in eight, the first among them) adds a call of each kind the
// random draw may miss in a short run — the asynchronous charge, the MCP read
// (waiting for its approval) and the MCP refund, a call in a signal and one by an
// update — and neither continues as new nor starts a child.
func (r *run) agentInput(rng *rand.Rand, wf string, every bool) (soakwf.Input, *plan) {
	in := soakwf.Input{LocalScheduleToClose: r.cfg.LocalScheduleToClose}
	p := &plan{}
	i := 0
	byName := func(name string) tool {
		for _, t := range tools {
			if t.name == name {
				return t
			}
		}
		panic("soak: no tool " + name)
	}
	draw := func(via string, named ...string) soakwf.Call {
		t := tools[rng.IntN(len(tools))]
		if len(named) > 0 {
			t = byName(named[0])
		}
		tok := "tk-" + wf + "-" + strconv.Itoa(i)
		i++
		args, _ := json.Marshal(t.args(tok, rng))
		c := soakwf.Call{Token: tok, Tool: t.name, Effect: t.effect, Args: args, Via: via}
		if via == "" && t.local && rng.IntN(4) == 0 {
			c.Local = true
			r.count("workload: local activity")
		}
		switch t.name {
		case asyncTool:
			r.count("workload: async completion")
		case mcpReadTool, mcpDestructiveTol:
			r.count("workload: MCP tool")
		}
		return c
	}
	n := 2 + rng.IntN(5)
	for range n {
		in.Calls = append(in.Calls, draw(""))
	}
	if every {
		in.Calls = append(in.Calls, draw("", asyncTool), draw("", mcpReadTool), draw("", mcpDestructiveTol))
		in.Calls[len(in.Calls)-2].Approval = true
		p.approvals = append(p.approvals, in.Calls[len(in.Calls)-2].Token)
		p.signalled = append(p.signalled, draw(soakwf.ViaSignal))
		p.updates = append(p.updates, draw(soakwf.ViaUpdate))
		r.count("workload: approval signal")
		r.count("workload: call in a signal")
		r.count("workload: update")
		n = len(in.Calls)
	}
	switch x := rng.IntN(4); {
	case every:
	case x == 0:
		from := rng.IntN(n)
		to := from + 1 + rng.IntN(n-from)
		for i := from; i < to; i++ {
			in.Calls[i].Child = true
		}
		r.count("workload: child workflow")
	case x == 1:
		in.ContinueAfter = 1 + rng.IntN(3)
		r.count("workload: continue-as-new")
	}
	if rng.IntN(3) == 0 {
		for range 1 + rng.IntN(2) {
			c := &in.Calls[rng.IntN(n)]
			if c.Local || c.Child || c.Approval {
				continue
			}
			c.Approval = true
			p.approvals = append(p.approvals, c.Token)
			r.count("workload: approval signal")
		}
	}
	if rng.IntN(4) == 0 {
		for range 1 + rng.IntN(2) {
			p.signalled = append(p.signalled, draw(soakwf.ViaSignal))
			r.count("workload: call in a signal")
		}
	}
	if in.ContinueAfter == 0 && rng.IntN(4) == 0 {
		for range 1 + rng.IntN(2) {
			p.updates = append(p.updates, draw(soakwf.ViaUpdate))
			r.count("workload: update")
		}
	}
	in.Signalled, in.Updates = len(p.signalled), len(p.updates)
	return in, p
}

// open lists those of ids whose latest run is still running (or cannot be described).
func (r *run) open(ctx context.Context, ids []string) []string {
	var out []string
	for _, id := range ids {
		d, err := r.cfg.Client.DescribeWorkflowExecution(ctx, id, "")
		if err != nil || d.WorkflowExecutionInfo.Status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			out = append(out, id)
		}
	}
	return out
}

// nemesis injects faults at random from the seed until ctx ends (dctx bounds the
// drivers a reset wakes).
func (r *run) nemesis(ctx, dctx context.Context) {
	rng := rand.New(rand.NewPCG(r.cfg.Seed, 2))
	type action struct {
		name   string
		weight int
		do     func()
	}
	actions := []action{
		{"kill", 30, func() { r.restart(ctx, rng, true) }},
		{"stop", 10, func() { r.restart(ctx, rng, false) }},
		{"reset", 25, func() { r.reset(ctx, dctx, rng) }},
		{"pause", 10, func() { r.pause(ctx, rng) }},
		{"settle", 15, func() { r.settle(ctx) }},
		{"skew", 10, func() { r.skew(ctx, rng) }},
	}
	if r.proxy != nil {
		actions = append(actions,
			action{"drop", 5, func() {
				r.proxy.Drop()
				r.count("store connections dropped")
			}},
			action{"delay", 5, func() {
				r.proxy.Delay(time.Duration(20+rng.IntN(280))*time.Millisecond, time.Duration(2000+rng.IntN(3000))*time.Millisecond)
				r.count("store connections delayed")
			}})
	}
	if r.cfg.PGCtl != "" && r.cfg.Store == "postgres" {
		actions = append(actions, action{"pgrestart", 5, func() { r.restartPostgres(ctx) }})
	}
	if len(r.cfg.Only) > 0 {
		actions = slices.DeleteFunc(actions, func(a action) bool { return !slices.Contains(r.cfg.Only, a.name) })
	}
	if len(actions) == 0 {
		return
	}
	total := 0
	for _, a := range actions {
		total += a.weight
	}
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(500+rng.IntN(2500)) * time.Millisecond):
		}
		x := rng.IntN(total)
		for _, a := range actions {
			if x < a.weight {
				a.do()
				break
			}
			x -= a.weight
		}
	}
}

// restart SIGKILLs (or stops gracefully) a random worker and starts it again.
func (r *run) restart(ctx context.Context, rng *rand.Rand, kill bool) {
	i := rng.IntN(len(r.procs))
	r.mu.Lock()
	p := r.procs[i]
	r.mu.Unlock()
	if kill {
		p.Kill()
		wctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, _ = p.Wait(wctx)
		cancel()
		r.count("sigkill")
	} else {
		p.Stop()
		r.count("graceful stop")
	}
	if d := time.Duration(rng.IntN(3000)) * time.Millisecond; d > 0 {
		select {
		case <-ctx.Done():
		case <-time.After(d):
		}
	}
	if err := r.startWorker(context.WithoutCancel(ctx), i, nil); err != nil {
		r.logf("restart worker %d: %v", i, err)
	}
}

// restartPostgres restarts the PostgreSQL server in immediate mode.
func (r *run) restartPostgres(ctx context.Context) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 90*time.Second)
	defer cancel()
	if b, err := exec.CommandContext(cctx, r.cfg.PGCtl, "-m", "immediate", "restart").CombinedOutput(); err != nil {
		r.logf("restart PostgreSQL: %v\n%s", err, b)
		return
	}
	r.count("postgres restart (immediate)")
}

// skew restarts a random worker with its gate's clock off by up to ±1.5 s (inside
// Options.ClockSkew's default of 2 s).
func (r *run) skew(ctx context.Context, rng *rand.Rand) {
	i := rng.IntN(len(r.procs))
	r.mu.Lock()
	p := r.procs[i]
	r.mu.Unlock()
	p.Stop()
	off := time.Duration(rng.IntN(3001)-1500) * time.Millisecond
	if err := r.startWorker(context.WithoutCancel(ctx), i, []string{"--clock-offset", off.String()}); err != nil {
		r.logf("restart worker %d with skew: %v", i, err)
	}
	r.count("clock skew")
}

// reset resets a random workflow, running or closed, to a random completed
// workflow task of its latest run, and wakes its driver: it sends the workflow's
// signals and updates again (the new run may lack those received after the reset
// point; each call is made once whatever it gets twice).
func (r *run) reset(ctx, dctx context.Context, rng *rand.Rand) {
	r.mu.Lock()
	if len(r.ids) == 0 {
		r.mu.Unlock()
		return
	}
	id := r.ids[rng.IntN(len(r.ids))]
	// Half the time, a workflow whose signals and updates the harness is still
	// serving (most likely running: a reset across an approval, a signalled call or
	// an accepted update).
	var served []string
	for wid, p := range r.plans {
		if p.driving {
			served = append(served, wid)
		}
	}
	if rng.IntN(2) == 0 && len(served) > 0 {
		slices.Sort(served)
		id = served[rng.IntN(len(served))]
	}
	r.mu.Unlock()
	d, err := r.cfg.Client.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return
	}
	runID := d.WorkflowExecutionInfo.Execution.RunId
	closed := d.WorkflowExecutionInfo.Status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
	it := r.cfg.Client.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var points []int64
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return
		}
		if e.EventType == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
			points = append(points, e.EventId)
		}
	}
	if len(points) == 0 {
		return
	}
	_, err = r.cfg.Client.ResetWorkflowExecution(ctx, &workflowservice.ResetWorkflowExecutionRequest{
		Namespace: r.cfg.Namespace, WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: id, RunId: runID},
		Reason: "soak nemesis", WorkflowTaskFinishEventId: points[rng.IntN(len(points))], RequestId: uuid.NewString()})
	if err != nil {
		if ctx.Err() == nil {
			r.logf("reset %s: %v", id, err)
		}
		return
	}
	if closed {
		r.count("reset (closed workflow)")
	} else {
		r.count("reset (running workflow)")
	}
	r.mu.Lock()
	p := r.plans[id]
	r.mu.Unlock()
	if p != nil {
		r.count("workload: reset of a workflow with signals or updates")
	}
	r.kick(dctx, id)
}

// pause pauses one write activity, or a whole effect class, for 1–4 s.
func (r *run) pause(ctx context.Context, rng *rand.Rand) {
	p := store.Pause{Actor: "soak-nemesis", Reason: "soak: a person pauses writes", Time: time.Now()}
	switch x := rng.IntN(4); x {
	case 0:
		p.Effect = store.EffectDestructive
	case 1:
		p.Effect = "idempotent-write"
	default:
		p.Activity = writeTools[rng.IntN(len(writeTools))]
	}
	if err := r.st.Pause(ctx, p); err != nil {
		return
	}
	r.count("pause")
	d := time.Duration(1000+rng.IntN(3000)) * time.Millisecond
	go func() {
		<-time.After(d)
		p.Time, p.Reason = time.Now(), "soak: resumed"
		_ = r.st.Resume(context.Background(), p)
	}()
}

// settle is the scripted operator: every record a person may resolve now is
// resolved truthfully from the vendors' ledgers.
func (r *run) settle(ctx context.Context) {
	now := time.Now()
	recs, err := r.st.Pending(ctx, now, 0)
	if err != nil {
		return
	}
	for _, rec := range recs {
		if !store.Resolvable(rec, now) {
			continue
		}
		tok := tokenIn(rec.Args)
		var effects []vendorsim.Entry
		for _, e := range r.ledger() {
			if tok != "" && tokenIn([]byte(e.Path), e.Body) == tok {
				effects = append(effects, e)
			}
		}
		t := store.Transition{Key: rec.Key, Owner: rec.Owner, Now: now, Window: 24 * time.Hour}
		t.Receipt = store.Receipt{Time: now, Key: rec.Key, Activity: rec.Activity, Effect: rec.Effect, Decision: store.DecisionResolved,
			ArgsHash: rec.ArgsHash, WorkflowID: rec.WorkflowID, RunID: rec.RunID, Attempt: rec.Attempt,
			Actor: "soak-operator", Reason: "settled from the vendor's ledger"}
		to, res := store.StateReleased, store.ResolvedNotSent
		if len(effects) > 0 {
			to, res = store.StateCompleted, store.ResolvedSent
			var v any = r.answerOf(effects[0])
			if t.Result, t.Receipt.ResultRef, err = interceptor.EncodeResult(nil, v); err != nil {
				continue
			}
		}
		t.Receipt.Resolution = res
		if err := r.st.Resolve(ctx, t, to); err == nil {
			r.count("operator settled " + res)
		}
	}
}

// ledger is every vendor's ledger and the MCP server's.
func (r *run) ledger() []vendorsim.Entry {
	var out []vendorsim.Entry
	for _, v := range r.world.Vendors() {
		out = append(out, v.Ledger()...)
	}
	return append(out, r.mcp.Ledger()...)
}

// answerOf is what the vendor answered for an effect: its stored answer for a keyed
// one, the record (or message id) otherwise; for the MCP server's, what the tool's
// activity returned.
func (r *run) answerOf(e vendorsim.Entry) any {
	if e.Vendor == mcpVendor {
		if a, ok := r.mcp.Answer(e.RecordID); ok {
			return a
		}
	}
	for _, v := range r.world.Vendors() {
		if v.Name != e.Vendor {
			continue
		}
		if e.Keyed {
			return v.Lookup(e.Key).Body
		}
		if rec, ok := v.Record(e.RecordID); ok {
			return rec
		}
	}
	return map[string]any{"message_id": e.RecordID}
}

// collect reads everything the checker needs.
func (r *run) collect(ctx context.Context) (Input, error) {
	r.mu.Lock()
	in := Input{Seed: r.cfg.Seed, Calls: r.calls, Witnessed: witnessed, Grace: 2 * time.Minute, Updates: slices.Clone(r.updates)}
	r.mu.Unlock()
	in.Ledger = r.ledger()
	rs, err := r.st.Receipts(ctx, store.ReceiptFilter{})
	if err != nil {
		return in, fmt.Errorf("idemgate/integration/soak: read the receipts: %w", err)
	}
	in.Receipts = rs
	seen := map[string]bool{}
	for _, rc := range rs {
		if rc.Key == "" || seen[rc.Key] {
			continue
		}
		seen[rc.Key] = true
		rec, err := r.st.Get(ctx, rc.Key)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return in, fmt.Errorf("idemgate/integration/soak: read record %s: %w", rc.Key, err)
		}
		in.Records = append(in.Records, rec)
	}
	in.Now = time.Now()
	for _, id := range r.ids {
		d, err := r.cfg.Client.DescribeWorkflowExecution(ctx, id, "")
		if err != nil {
			return in, fmt.Errorf("idemgate/integration/soak: describe %s: %w", id, err)
		}
		info := d.WorkflowExecutionInfo
		rn := Run{WorkflowID: id, RunID: info.Execution.RunId, Status: statusName(info.Status)}
		if info.Status == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
			var res soakwf.Result
			if err := r.cfg.Client.GetWorkflow(ctx, id, rn.RunID).Get(ctx, &res); err != nil {
				return in, fmt.Errorf("idemgate/integration/soak: result of %s: %w", id, err)
			}
			rn.Result = &res
		}
		in.Runs = append(in.Runs, rn)
	}
	return in, nil
}

func statusName(s enumspb.WorkflowExecutionStatus) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(s.String(), "WORKFLOW_EXECUTION_STATUS_")), "_", "-")
}

// serveLookup serves v's lookup by key on loopback, for the workers' ChargeCard witness.
func serveLookup(v *vendorsim.Vendor) (string, *http.Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("idemgate/integration/soak: the payments lookup: %w", err)
	}
	s := &http.Server{Handler: v.LookupHandler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.Serve(ln) }()
	return "http://" + ln.Addr().String() + "/lookup", s, nil
}
