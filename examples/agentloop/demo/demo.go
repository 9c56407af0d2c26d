// Package demo is the agent-loop demo behind examples/agentloop: a real Temporal
// server (in-process unless an address is given), a SQLite store, the vendor
// simulators, an MCP server (the go-sdk's, over streamable HTTP on loopback, with
// mcptools.Dedup) whose tools the worker registers through mcptools, and a worker
// running AgentLoop through the idemgate gate; eight scenarios with real retries,
// real worker stops, a real reset, replays, a charge settled by the card
// processor's lookup (a witness) and an e-mail only a person can settle.
// The integration tests drive the same scenarios and check the vendors' counts.
package demo

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.temporal.io/sdk/client"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/server/temporaltest"

	"github.com/idemgate/idemgate/activities"
	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/internal/storeopen"
	"github.com/idemgate/idemgate/mcptools"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/vendorsim"
	"github.com/idemgate/idemgate/witness"
	"github.com/idemgate/idemgate/workflows"
)

// Config sets the demo up.
type Config struct {
	// TemporalAddress is a Temporal frontend (host:port). Optional: "" starts an
	// in-process server.
	TemporalAddress string
	// Namespace on an external server. Optional: "default".
	Namespace string
	// Store is a SQLite path or a PostgreSQL DSN. Required.
	Store string
	// Planner plans the jobs. Optional: nil runs the scripted Support scenario.
	Planner activities.Planner
	// Script is the job's plan when Planner is nil. Optional: activities.Support.
	Script *activities.Script
	// Out receives each scenario's short screen as it ends (and, with Verbose, a
	// line per gate decision and per step as they happen). Optional: discarded.
	Out io.Writer
	// Verbose adds to Out a line per gate decision and per scenario step.
	// Optional: false, the screens only.
	Verbose bool
	// PersonSettles leaves the e-mail of scenario 8 for a person to settle (from
	// the operator's page, --console, or `idemgate resolve`): the demo says which
	// key waits on Out and goes on once it is settled, instead of settling it
	// itself. Optional: false, the demo plays the person.
	PersonSettles bool
}

// Event is one line of what happened.
type Event struct {
	Time     time.Time `json:"time"`
	Kind     string    `json:"kind"` // "step" (the demo's narration) or "decision" (the gate's)
	Text     string    `json:"text"`
	Decision string    `json:"decision,omitempty"`
	Activity string    `json:"activity,omitempty"`
	Effect   string    `json:"effect,omitempty"`
	Key      string    `json:"key,omitempty"`
	Attempt  string    `json:"attempt,omitempty"`
}

// Demo is a running demo environment.
type Demo struct {
	cfg    Config
	Server *temporaltest.TestServer
	Client client.Client
	Store  storeopen.Store
	World  *vendorsim.World
	Tools  *activities.Tools
	// Shop is the MCP server; MCP its tools as activities (mcp.shop.TOOL).
	Shop    *Shop
	MCP     *mcptools.Bridge
	toolset activities.Toolset
	Queue   string
	planner activities.Planner
	gate    sdkinterceptor.WorkerInterceptor
	census  interceptor.CensusReport
	w       worker.Worker
	lookup  *lookupServer
	mu      sync.Mutex
	events  []Event
	out     io.Writer
}

// Setup starts everything but the scenarios. Close undoes it. On error nothing is
// left running.
func Setup(ctx context.Context, cfg Config) (*Demo, error) {
	d := &Demo{cfg: cfg, out: cfg.Out, Queue: fmt.Sprintf("agent-demo-%d", time.Now().UnixNano())}
	if d.out == nil {
		d.out = io.Discard
	}
	if err := d.setup(ctx); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

func (d *Demo) setup(ctx context.Context) (err error) {
	cfg := d.cfg
	d.planner = cfg.Planner
	if d.planner == nil {
		s := activities.Support
		if cfg.Script != nil {
			s = *cfg.Script
		}
		if err := s.Check(); err != nil {
			return fmt.Errorf("idemgate/examples/agentloop/demo: plan: %w", err)
		}
		d.planner = s
	}
	if d.Store, err = storeopen.Open(ctx, cfg.Store); err != nil {
		return err
	}
	if d.World, err = vendorsim.Start(); err != nil {
		return err
	}
	w := d.World
	if d.Tools, err = activities.New(activities.Endpoints{Docs: w.Docs.URL, CRM: w.CRM.URL, Tickets: w.Tickets.URL,
		Payments: w.Payments.URL, Email: w.Email.URL, Chat: w.Chat.URL}); err != nil {
		return err
	}
	if d.Shop, err = startShop(); err != nil {
		return err
	}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	d.MCP, err = mcptools.Dial(dctx, ShopServer, &mcp.StreamableClientTransport{Endpoint: d.Shop.URL, MaxRetries: -1},
		mcptools.Options{DedupWindow: shopDedupWindow})
	cancel()
	if err != nil {
		return err
	}
	d.toolset = append(activities.Toolset(activities.Registry), activities.MCPTools(d.MCP)...)
	logger := log.NewStructuredLogger(slog.New(&decisionHandler{d: d}))
	if cfg.TemporalAddress == "" {
		d.Server = temporaltest.NewServer()
		d.Client = d.Server.NewClientWithOptions(client.Options{Logger: logger})
	} else {
		ns := cfg.Namespace
		if ns == "" {
			ns = "default"
		}
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		d.Client, err = client.DialContext(dctx, client.Options{HostPort: cfg.TemporalAddress, Namespace: ns, Logger: logger})
		if err != nil {
			return fmt.Errorf("idemgate/examples/agentloop/demo: cannot reach Temporal at %s: %v (start one with `temporal server start-dev`, or drop --temporal-address to use the in-process server)", cfg.TemporalAddress, err)
		}
		if _, err := d.Client.CheckHealth(dctx, &client.CheckHealthRequest{}); err != nil {
			return fmt.Errorf("idemgate/examples/agentloop/demo: the Temporal server at %s is not healthy: %v", cfg.TemporalAddress, err)
		}
	}
	opts := activities.GateOptions(d.Store)
	// The card processor answers "what did key K do?" (its lookup by key): the gate
	// asks it about a charge whose outcome is unknown rather than re-sending the
	// charge, and a write nobody can tell about is held until a person settles it
	// (Options.HoldUnknown), the job going on by itself afterwards.
	lookup, err := serveLookup(w.Payments)
	if err != nil {
		return err
	}
	d.lookup = lookup
	delete(opts.VendorWindows, "ChargeCard")
	opts.Witnesses = map[string][]witness.Witness{"ChargeCard": {activities.ChargeLookupWitness(lookup.URL, nil)}}
	opts.HoldUnknown = holdUnknown
	d.MCP.Apply(&opts) // the annotations as hints; the shop's Dedup window as a vendor window
	if d.gate, err = interceptor.New(opts); err != nil {
		return err
	}
	d.census = opts.Census(append(activities.Names(), d.MCP.Names()...))
	return d.StartWorker()
}

// Census is the worker's census of its activities.
func (d *Demo) Census() interceptor.CensusReport { return d.census }

// StartWorker starts a worker on the demo's task queue.
func (d *Demo) StartWorker() error {
	w := worker.New(d.Client, d.Queue, worker.Options{
		Interceptors:      []sdkinterceptor.WorkerInterceptor{d.gate},
		WorkerStopTimeout: 500 * time.Millisecond,
	})
	w.RegisterWorkflow(workflows.AgentLoop)
	w.RegisterActivity(d.Tools)
	w.RegisterActivity(&activities.Planning{Planner: d.planner, Tools: d.toolset})
	d.MCP.Register(w)
	if err := w.Start(); err != nil {
		return fmt.Errorf("idemgate/examples/agentloop/demo: start the worker on %s: %w", d.Queue, err)
	}
	d.w = w
	return nil
}

// StopWorker stops the worker for real: polls end, running activities are cancelled
// after the stop timeout, and nothing they do after that is reported.
func (d *Demo) StopWorker() {
	if d.w != nil {
		d.w.Stop()
		d.w = nil
		d.flushReads(context.Background())
	}
}

// Close stops the worker, the server, the vendors and closes the store.
func (d *Demo) Close() {
	d.StopWorker()
	if d.Server != nil {
		d.Server.Stop()
	} else if d.Client != nil {
		d.Client.Close()
	}
	if d.lookup != nil {
		d.lookup.Close()
	}
	if d.World != nil {
		d.World.Close()
	}
	if d.MCP != nil {
		d.MCP.Session().Close()
	}
	if d.Shop != nil {
		d.Shop.Close()
	}
	if d.Store != nil {
		_ = d.Store.Close()
	}
}

// Events returns what happened so far.
func (d *Demo) Events() []Event {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]Event(nil), d.events...)
}

func (d *Demo) say(format string, args ...any) {
	e := Event{Time: time.Now(), Kind: "step", Text: fmt.Sprintf(format, args...)}
	d.mu.Lock()
	d.events = append(d.events, e)
	d.mu.Unlock()
	if d.cfg.Verbose {
		fmt.Fprintln(d.out, e.Text)
	}
}

// Job runs one AgentLoop job to its end.
func (d *Demo) Job(ctx context.Context, id string, in workflows.AgentInput) (workflows.AgentResult, string, error) {
	run, err := d.start(ctx, id, in)
	if err != nil {
		return workflows.AgentResult{}, "", fmt.Errorf("idemgate/examples/agentloop/demo: %w", err)
	}
	var res workflows.AgentResult
	err = run.Get(ctx, &res)
	d.flushReads(ctx)
	return res, run.GetRunID(), err
}

// readFlushTimeout bounds flushReads: a store that does not take the receipts
// must not hang the demo's stop.
var readFlushTimeout = 30 * time.Second

// flushReads stores the read receipts the gate still queues (interceptor.Flush),
// so that what the demo reads from the store next has the job's reads in it.
func (d *Demo) flushReads(ctx context.Context) {
	if d.gate != nil {
		ctx, cancel := context.WithTimeout(ctx, readFlushTimeout)
		defer cancel()
		_ = interceptor.Flush(ctx, d.gate)
	}
}

// start starts one AgentLoop job. Its error carries no package prefix: callers wrap it.
func (d *Demo) start(ctx context.Context, id string, in workflows.AgentInput) (client.WorkflowRun, error) {
	if in.Goal == "" {
		if s, ok := d.planner.(activities.Script); ok {
			in.Goal = s.Goal
		}
	}
	run, err := d.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: d.Queue,
		WorkflowExecutionTimeout: 5 * time.Minute}, workflows.AgentLoop, in)
	if err != nil {
		return nil, fmt.Errorf("start job %s: %w", id, err)
	}
	return run, nil
}

// holdUnknown is how soon a write held for a witness or a person is retried.
const holdUnknown = 2 * time.Second

// serveLookup serves v's lookup by key (vendorsim.Vendor.LookupHandler) on loopback.
func serveLookup(v *vendorsim.Vendor) (*lookupServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("idemgate/examples/agentloop/demo: the payments lookup: %w", err)
	}
	s := &lookupServer{URL: "http://" + ln.Addr().String() + "/lookup",
		srv: &http.Server{Handler: v.LookupHandler(), ReadHeaderTimeout: 10 * time.Second}}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

type lookupServer struct {
	URL string
	srv *http.Server
}

func (s *lookupServer) Close() { _ = s.srv.Close() }

// jobRetry keeps the demo quick: retries 300 ms apart, and a start-to-close
// timeout short enough that a stopped worker's attempt is retried within seconds.
var jobRetry = &temporal.RetryPolicy{InitialInterval: 300 * time.Millisecond, BackoffCoefficient: 1, MaximumAttempts: 10}

func (d *Demo) cancelJob(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = d.Client.TerminateWorkflow(ctx, id, "", "demo stopped")
}

// decisionHandler turns the gate's log records into one readable line each.
type decisionHandler struct {
	d     *Demo
	attrs []slog.Attr
}

func (h *decisionHandler) Enabled(_ context.Context, l slog.Level) bool { return true }

func (h *decisionHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "idemgate" {
		return nil
	}
	f := map[string]string{}
	for _, a := range h.attrs {
		f[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool { f[a.Key] = a.Value.String(); return true })
	e := Event{Time: r.Time, Kind: "decision", Decision: f["decision"], Activity: f["activity"], Effect: f["effect"],
		Key: f["key"], Attempt: f["attempt"]}
	e.Text = fmt.Sprintf("    gate: %-18s %-23s %-16s attempt %-2s key %.8s", e.Decision, e.Activity, e.Effect, e.Attempt, e.Key)
	if why := h.d.whyRanAgain(e); why != "" {
		e.Text += "\n          " + why
	}
	if msg := f["error"]; msg != "" && e.Decision != "ran" {
		e.Text += "\n          " + msg
	}
	h.d.mu.Lock()
	h.d.events = append(h.d.events, e)
	h.d.mu.Unlock()
	if h.d.cfg.Verbose {
		fmt.Fprintln(h.d.out, e.Text)
	}
	return nil
}

// whyRanAgain says why a write ran on a later attempt of its key: the gate re-sent
// a destructive write only because the vendor deduplicates on the key (the
// witness's "resent" receipt), and re-ran an idempotent write with the same key.
// A destructive "ran" on attempt 2 must never read as a second send.
func (d *Demo) whyRanAgain(e Event) string {
	if (e.Decision != string(store.DecisionRan) && e.Decision != string(store.DecisionReplayed)) || e.Attempt == "1" ||
		e.Effect == interceptor.Read.String() || d.Store == nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rs, err := d.Store.Receipts(ctx, store.ReceiptFilter{Key: e.Key})
	if err != nil {
		return ""
	}
	if e.Decision == string(store.DecisionReplayed) {
		for i := len(rs) - 1; i >= 0; i-- {
			if rs[i].Decision == store.DecisionResolved && rs[i].Resolution == store.ResolvedSent {
				return fmt.Sprintf("%s settled the key as sent: the retry returned that result and sent nothing", orString(rs[i].Actor, "a person"))
			}
		}
		return ""
	}
	for i := len(rs) - 1; i >= 0; i-- {
		switch rs[i].Decision {
		case store.DecisionResent:
			return fmt.Sprintf("a re-send with the same key, allowed by %s: the vendor deduplicates on it and answers from its own store",
				orString(rs[i].Actor, "the vendor's dedup window"))
		case store.DecisionTakenOver:
			if e.Effect == interceptor.IdempotentWrite.String() {
				return "a re-run with the same key: an idempotent write, safe to repeat (the vendor keeps one record)"
			}
		case store.DecisionReleased:
			return "the earlier attempt failed before it reached the vendor (released): the write runs once"
		case store.DecisionResolved:
			if rs[i].Resolution == store.ResolvedNotSent {
				return fmt.Sprintf("%s settled the earlier attempt as not sent: the write runs once", orString(rs[i].Actor, "a person"))
			}
		}
	}
	if e.Effect == interceptor.Destructive.String() {
		return "no receipt says why this destructive write ran again: check `idemgate receipts --key " + e.Key + "`"
	}
	return ""
}

func (h *decisionHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &decisionHandler{d: h.d, attrs: append(append([]slog.Attr{}, h.attrs...), as...)}
}

func (h *decisionHandler) WithGroup(string) slog.Handler { return h }
