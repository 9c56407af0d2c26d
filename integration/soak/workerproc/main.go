// Command workerproc is the worker process of the soak harness (integration/soak):
// the agent's tools (package activities) behind the idemgate gate, with the soak's
// agent-loop workflow (soakwf.Agent), polling one task queue. It takes the flags of
// the fault harness's worker (integration/faults.StartWorker) and:
//
//   - --clock-offset: the gate's clock runs this far ahead (negative: behind) of the
//     machine's, for skew within Options.ClockSkew;
//   - --forget-completions: a broken store whose Complete stores nothing (the
//     checker must catch it: see TestSoakCatchesAForgetfulStore);
//   - --all-read: the gate classifies every tool read, the gate in pass-through
//     mode (the checker must catch it too: TestSoakCatchesPassThrough); --gate=false
//     runs no interceptor at all;
//   - --mcp-url: the harness's MCP server (streamable HTTP, with mcptools.Dedup and
//     its lookup): its tools are registered as activities mcp.soak.TOOL through
//     mcptools, as the agentloop demo does (Dial with DedupWindow, Apply, Register).
//
// It also registers ChargeCardAsync (async.go), a charge that completes
// asynchronously through interceptor.AsyncToken and CompleteAsync; the card
// processor's lookup (--payments-lookup-url) is its witness as ChargeCard's.
//
// SIGTERM stops it gracefully; the harness SIGKILLs it at random.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"github.com/idemgate/idemgate/activities"
	"github.com/idemgate/idemgate/integration/soak/soakwf"
	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/internal/storeopen"
	"github.com/idemgate/idemgate/mcptools"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/witness"
)

// forgetful is a broken store: Complete reports success and stores nothing (no
// result, no receipt).
type forgetful struct{ storeopen.Store }

func (forgetful) Complete(context.Context, store.Transition) error { return nil }

func main() { os.Exit(run()) }

func run() int {
	address := flag.String("temporal-address", "", "Temporal frontend host:port")
	namespace := flag.String("namespace", "default", "namespace")
	queue := flag.String("task-queue", "", "task queue")
	storeSpec := flag.String("store", "", "SQLite path or PostgreSQL DSN")
	durability := flag.String("durability", "claim", "claim or strict (store.Durability)")
	gate := flag.Bool("gate", true, "run the idemgate interceptor (false: pass-through, a broken variant)")
	sticky := flag.Bool("sticky", true, "keep workflows in the sticky cache")
	verbose := flag.Bool("v", false, "log the SDK's and the gate's lines to stderr")
	lookup := flag.String("payments-lookup-url", "", "the card processor's lookup by key: ChargeCard's witness")
	hold := flag.Duration("hold-unknown", 0, "Options.HoldUnknown")
	offset := flag.Duration("clock-offset", 0, "the gate's clock runs this far ahead of the machine's (negative: behind)")
	forget := flag.Bool("forget-completions", false, "a broken store whose Complete stores nothing")
	allRead := flag.Bool("all-read", false, "the gate classifies every tool read: a pass-through gate (a broken variant)")
	mcpURL := flag.String("mcp-url", "", "the MCP server (streamable HTTP) whose tools to register through mcptools")
	mcpWindow := flag.Duration("mcp-dedup-window", time.Hour, "mcptools.Options.DedupWindow for --mcp-url")
	_ = flag.String("cpuprofile", "", "accepted for the fault harness's StartWorker; unused")
	var ep activities.Endpoints
	flag.StringVar(&ep.Docs, "docs-url", "", "")
	flag.StringVar(&ep.CRM, "crm-url", "", "")
	flag.StringVar(&ep.Tickets, "tickets-url", "", "")
	flag.StringVar(&ep.Payments, "payments-url", "", "")
	flag.StringVar(&ep.Email, "email-url", "", "")
	flag.StringVar(&ep.Chat, "chat-url", "", "")
	flag.Parse()
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "soak workerproc: "+format+"\n", args...)
		return 2
	}
	if *address == "" || *queue == "" {
		return fail("--temporal-address and --task-queue are required")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	tools, err := activities.New(ep)
	if err != nil {
		return fail("%v", err)
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	slogger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	logger := log.NewStructuredLogger(slogger)
	var bridge *mcptools.Bridge
	if *mcpURL != "" {
		dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		bridge, err = mcptools.Dial(dctx, "soak", &mcp.StreamableClientTransport{Endpoint: *mcpURL, MaxRetries: -1},
			mcptools.Options{DedupWindow: *mcpWindow, Logger: slogger})
		cancel()
		if err != nil {
			return fail("%v", err)
		}
		defer bridge.Session().Close()
	}
	names := append(activities.Names(), AsyncTool)
	if bridge != nil {
		names = append(names, bridge.Names()...)
	}
	var interceptors []sdkinterceptor.WorkerInterceptor
	var gopts interceptor.Options
	if *gate {
		dur, err := store.ParseDurability(*durability)
		if err != nil {
			return fail("--durability: %v", err)
		}
		st, err := storeopen.OpenWith(ctx, *storeSpec, storeopen.Options{Durability: dur})
		if err != nil {
			return fail("%v", err)
		}
		defer st.Close()
		var gst store.Store = st
		if *forget {
			gst = forgetful{st}
		}
		opts := activities.GateOptions(gst)
		opts.HoldUnknown = *hold
		opts.Effects = map[string]interceptor.Effect{AsyncTool: interceptor.Destructive}
		if *allRead {
			for _, n := range names {
				opts.Effects[n] = interceptor.Read
			}
		}
		if *offset != 0 {
			off := *offset
			opts.Now = func() time.Time { return time.Now().Add(off) }
		}
		if *lookup != "" {
			w := activities.ChargeLookupWitness(*lookup, nil)
			opts.Witnesses = map[string][]witness.Witness{"ChargeCard": {w}, AsyncTool: {w}}
		}
		if bridge != nil {
			bridge.Apply(&opts) // the tools' hints, the server's Dedup window, its lookup as their witness
		}
		gopts = opts
		g, err := interceptor.New(opts)
		if err != nil {
			return fail("%v", err)
		}
		interceptors = append(interceptors, g)
	}
	dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	c, err := client.DialContext(dctx, client.Options{HostPort: *address, Namespace: *namespace, Logger: logger})
	cancel()
	if err != nil {
		return fail("dial %s: %v", *address, err)
	}
	defer c.Close()
	if !*sticky {
		worker.SetStickyWorkflowCacheSize(0)
	}
	w := worker.New(c, *queue, worker.Options{Interceptors: interceptors, WorkerStopTimeout: time.Second})
	w.RegisterWorkflow(soakwf.Agent)
	w.RegisterActivity(tools)
	async := &asyncCharger{payments: ep.Payments, complete: c, opts: gopts, gated: *gate,
		http: &http.Client{Timeout: 20 * time.Second}, log: slogger}
	w.RegisterActivityWithOptions(async.ChargeCardAsync, activity.RegisterOptions{Name: AsyncTool})
	if bridge != nil {
		bridge.Register(w)
	}
	if err := w.Start(); err != nil {
		return fail("start: %v", err)
	}
	fmt.Printf("ready gate=%v\n", *gate)
	<-ctx.Done()
	w.Stop()
	async.wait(10 * time.Second)
	return 0
}
