// Command worker runs the agent's Temporal worker with the idemgate gate: the
// AgentLoop workflow, the planner and the tools, against any Temporal server.
//
//	go run ./worker --temporal-address localhost:7233 --task-queue agent \
//	    --store idemgate.db \
//	    --docs-url http://docs.internal --crm-url ... --tickets-url ... \
//	    --payments-url ... --email-url ... --chat-url ...
//
// Every flag has an environment variable (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE,
// IDEMGATE_TASK_QUEUE, IDEMGATE_STORE, IDEMGATE_DOCS_URL, …). --store takes a SQLite
// path (default idemgate.db, created readable by its owner only) or a PostgreSQL DSN
// (postgres://… or host=… dbname=…); what the worker prints never shows its password.
// The model planner's API key comes from OPENAI_API_KEY or --llm-api-key-file FILE,
// never from the command line. At start it prints the census of its activities and
// names the ones flagged for review. --observe stdout prints each gate decision as a
// JSON line, keyed like the span attributes of contrib/otel.
//
// --mcp NAME=URL (repeatable) adds an MCP server's tools over streamable HTTP;
// --mcp 'NAME=COMMAND ARGS' runs the server as a command over stdio (split at
// spaces). The worker dials each at start — one it cannot reach stops it before
// anything starts — registers every tool as the activity mcp.NAME.TOOL, classifies
// it by its name tightened by its annotations, and offers it to the planner next to
// the built-in tools. --mcp-dedup NAME=DURATION relies on that server deduplicating
// calls by their key for that long (mcptools.Dedup): the gate then re-sends a
// destructive call whose outcome is unknown, with its key, inside that window instead
// of refusing it. The server must announce Dedup with a window at least that long
// (mcptools.CapabilityDedup), else the worker does not start; a server that announces
// it without --mcp-dedup is only reported.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.temporal.io/sdk/client"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"

	"github.com/idemgate/idemgate/activities"
	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/internal/secrets"
	"github.com/idemgate/idemgate/internal/storeopen"
	"github.com/idemgate/idemgate/mcptools"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/workflows"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(redacting{stderr}) // "invalid value ... for flag -mcp" quotes the value: an MCP URL may carry credentials
	address := fs.String("temporal-address", envOr("TEMPORAL_ADDRESS", "localhost:7233"), "Temporal frontend host:port")
	namespace := fs.String("namespace", envOr("TEMPORAL_NAMESPACE", "default"), "Temporal namespace")
	queue := fs.String("task-queue", envOr("IDEMGATE_TASK_QUEUE", "agent"), "task queue to poll")
	storeSpec := fs.String("store", envOr("IDEMGATE_STORE", storeopen.DefaultPath), "SQLite path or PostgreSQL DSN (postgres://... or host=... dbname=...)")
	fs.Lookup("store").DefValue = storeopen.Redact(*storeSpec) // -h prints it: never the password
	durability := fs.String("durability", envOr("IDEMGATE_DURABILITY", "claim"), "which store commits are synced before they return: claim (the claim only; later steps within 100 ms) or strict (every step)")
	var ep activities.Endpoints
	fs.StringVar(&ep.Docs, "docs-url", os.Getenv("IDEMGATE_DOCS_URL"), "document search base URL")
	fs.StringVar(&ep.CRM, "crm-url", os.Getenv("IDEMGATE_CRM_URL"), "CRM base URL")
	fs.StringVar(&ep.Tickets, "tickets-url", os.Getenv("IDEMGATE_TICKETS_URL"), "ticket desk base URL")
	fs.StringVar(&ep.Payments, "payments-url", os.Getenv("IDEMGATE_PAYMENTS_URL"), "card processor base URL")
	fs.StringVar(&ep.Email, "email-url", os.Getenv("IDEMGATE_EMAIL_URL"), "e-mail sender base URL")
	fs.StringVar(&ep.Chat, "chat-url", os.Getenv("IDEMGATE_CHAT_URL"), "chat base URL")
	llmURL := fs.String("llm-base-url", os.Getenv("IDEMGATE_LLM_BASE_URL"), "OpenAI-compatible API root for the model planner (default: jobs must carry a script)")
	llmModel := fs.String("llm-model", os.Getenv("IDEMGATE_LLM_MODEL"), "model for the model planner")
	llmKeyFile := fs.String("llm-api-key-file", "", "file holding the model planner's API key (default: $OPENAI_API_KEY)")
	observe := fs.String("observe", os.Getenv("IDEMGATE_OBSERVE"), "stdout: print each gate decision as a JSON line (span attribute names)")
	var servers mcpFlag
	fs.Var(&servers, "mcp", "an MCP server's tools as activities mcp.NAME.TOOL: NAME=URL (streamable HTTP) or 'NAME=COMMAND ARGS' (stdio); repeatable")
	dedup := dedupFlag{}
	fs.Var(dedup, "mcp-dedup", "NAME=DURATION: the MCP server NAME deduplicates calls by key for DURATION (e.g. shop=24h), so a destructive call whose outcome is unknown is re-sent with its key inside that window; the server must announce mcptools.Dedup with at least that window; repeatable")
	if err := secrets.RefuseFlag(args, "llm-api-key", "OPENAI_API_KEY", "llm-api-key-file"); err != nil {
		fmt.Fprintf(stderr, "worker: %v\n", err)
		return 2
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *observe != "" && *observe != "stdout" {
		fmt.Fprintf(stderr, "worker: --observe %q: the only exporter is stdout (for OpenTelemetry, see contrib/otel)\n", *observe)
		return 2
	}
	for _, e := range []struct{ flag, value string }{{"docs", ep.Docs}, {"crm", ep.CRM}, {"tickets", ep.Tickets},
		{"payments", ep.Payments}, {"email", ep.Email}, {"chat", ep.Chat}} {
		if e.value == "" {
			fmt.Fprintf(stderr, "worker: --%s-url is required (or IDEMGATE_%s_URL): the vendor's base URL\n", e.flag, strings.ToUpper(e.flag))
			return 2
		}
	}
	tools, err := activities.New(ep)
	if err != nil {
		fmt.Fprintf(stderr, "worker: %v\n", err)
		return 2
	}
	llmKey := os.Getenv("OPENAI_API_KEY")
	if *llmKeyFile != "" {
		if llmKey, err = secrets.ReadFile(*llmKeyFile); err != nil {
			fmt.Fprintf(stderr, "worker: --llm-api-key-file: %v\n", err)
			return 2
		}
	}
	var planner activities.Planner
	if *llmURL != "" {
		planner = activities.ChatPlanner{BaseURL: *llmURL, Model: *llmModel, APIKey: llmKey}
	}
	dur, err := store.ParseDurability(*durability)
	if err != nil {
		fmt.Fprintf(stderr, "worker: --durability: %v\n", err)
		return 2
	}
	for name := range dedup {
		if !slices.ContainsFunc(servers, func(m mcpServer) bool { return m.name == name }) {
			fmt.Fprintf(stderr, "worker: --mcp-dedup %s=%v: no --mcp %s=URL is given: name a server of --mcp\n", name, dedup[name], name)
			return 2
		}
	}
	bridges, err := dialMCP(ctx, servers, dedup)
	if err != nil {
		fmt.Fprintf(stderr, "worker: %v\n", err)
		return 2
	}
	for _, b := range bridges {
		if w := b.DedupOffered(); w > 0 && dedup[b.Server()] == 0 {
			fmt.Fprintf(stdout, "mcp: %s: the server announces Dedup for %v; without --mcp-dedup %s=%v an unknown outcome "+
				"of its destructive tools is refused, not re-sent\n", b.Server(), w, b.Server(), w)
		}
	}
	defer func() {
		for _, b := range bridges {
			b.Session().Close()
		}
	}()
	st, err := storeopen.OpenWith(ctx, *storeSpec, storeopen.Options{Durability: dur})
	if err != nil {
		fmt.Fprintf(stderr, "worker: %v\n", err)
		return 2
	}
	defer st.Close()
	if w := storeopen.PermissionWarning(*storeSpec); w != "" {
		fmt.Fprintf(stderr, "worker: %s\n", w)
	}
	opts := activities.GateOptions(st)
	names, toolset := activities.Names(), activities.Toolset(activities.Registry)
	for _, b := range bridges {
		b.Apply(&opts)
		names = append(names, b.Names()...)
		toolset = append(toolset, activities.MCPTools(b)...)
	}
	if *observe == "stdout" {
		opts.Observer = jsonLines(stdout)
	}
	gate, err := interceptor.New(opts)
	if err != nil {
		fmt.Fprintf(stderr, "worker: %v\n", err)
		return 2
	}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	c, err := client.DialContext(dctx, client.Options{HostPort: *address, Namespace: *namespace})
	cancel()
	if err != nil {
		fmt.Fprintf(stderr, "worker: cannot reach Temporal at %s: %v (check --temporal-address, or start `temporal server start-dev`)\n", *address, err)
		return 2
	}
	defer c.Close()

	w := worker.New(c, *queue, worker.Options{Interceptors: []sdkinterceptor.WorkerInterceptor{gate}})
	w.RegisterWorkflow(workflows.AgentLoop)
	w.RegisterActivity(tools)
	w.RegisterActivity(&activities.Planning{Planner: planner, Tools: toolset})
	for _, b := range bridges {
		b.Register(w)
	}
	census := opts.Census(names)
	fmt.Fprintln(stdout, census)
	for _, b := range bridges {
		for _, name := range b.Names() {
			cl := census.Effects[name]
			fmt.Fprintf(stdout, "mcp: %s: %s — %s\n", name, cl.Effect, cl.Reason())
			if w, ok := opts.VendorWindows[name]; ok {
				fmt.Fprintf(stdout, "mcp: %s: the server deduplicates keys for %v: an unknown outcome is re-sent with its key inside it, when the claim shows the key left through the bridge\n", name, w)
			}
		}
	}
	for _, name := range census.Review {
		fmt.Fprintf(stdout, "review: %s: %s\n", name, census.Effects[name].Reason())
	}
	for _, name := range census.Contradicts {
		cl := census.Effects[name]
		fmt.Fprintf(stdout, "contradicts: %s: the name reads %s, its annotations say %s (the name's class stands)\n",
			name, cl.Effect, cl.Hinted)
	}
	fmt.Fprintf(stdout, "worker: polling %s on %s (namespace %s), store %s (identity %s)\n", *queue, *address, *namespace,
		storeopen.Redact(*storeSpec), st.Identity())
	if err := w.Start(); err != nil {
		fmt.Fprintf(stderr, "worker: start: %v\n", err)
		return 2
	}
	<-ctx.Done()
	w.Stop()
	// The reads' receipts are appended in batches off their path: store the last
	// ones before the store closes.
	fctx, fcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer fcancel()
	if err := interceptor.Flush(fctx, gate); err != nil {
		fmt.Fprintf(stderr, "worker: %v\n", err)
	}
	return 0
}

// jsonLines is an observer that writes each decision to w as one JSON object,
// keyed like the span attributes of contrib/otel, plus the metric it counts.
func jsonLines(w io.Writer) interceptor.Observer {
	var mu sync.Mutex
	enc := json.NewEncoder(w)
	return func(_ context.Context, d interceptor.Decision) {
		line := map[string]any{"activity": d.Activity, interceptor.AttrDecision: d.Decision,
			interceptor.AttrEffect: d.Effect.String(), interceptor.AttrKey: d.Key, interceptor.AttrAttempt: d.Attempt,
			"metric": interceptor.MetricDecisions}
		if d.ErrorType != "" {
			line[interceptor.AttrErrorType] = d.ErrorType
		}
		mu.Lock()
		defer mu.Unlock()
		_ = enc.Encode(line) // an observer must not fail the activity
	}
}

// redacting writes through secrets.Redact: no URL's credentials, no password= pair.
type redacting struct{ w io.Writer }

func (r redacting) Write(p []byte) (int, error) {
	if _, err := io.WriteString(r.w, secrets.Redact(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// mcpFlag collects --mcp NAME=TARGET values, in order.
type mcpFlag []mcpServer

type mcpServer struct{ name, target string }

func (f *mcpFlag) String() string {
	var s []string
	for _, m := range *f {
		s = append(s, m.name+"="+secrets.Redact(m.target))
	}
	return strings.Join(s, " ")
}

func (f *mcpFlag) Set(v string) error {
	name, target, ok := strings.Cut(v, "=")
	name, target = strings.TrimSpace(name), strings.TrimSpace(target)
	if !ok || name == "" || target == "" {
		return fmt.Errorf("want NAME=URL or 'NAME=COMMAND ARGS' (e.g. crm=http://127.0.0.1:8080/mcp), got %q", secrets.Redact(v))
	}
	for _, m := range *f {
		if m.name == name {
			return fmt.Errorf("the server name %q is given twice: each server needs its own name", name)
		}
	}
	*f = append(*f, mcpServer{name, target})
	return nil
}

// dedupFlag collects --mcp-dedup NAME=DURATION values.
type dedupFlag map[string]time.Duration

func (f dedupFlag) String() string {
	var s []string
	for n, d := range f {
		s = append(s, n+"="+d.String())
	}
	slices.Sort(s)
	return strings.Join(s, " ")
}

func (f dedupFlag) Set(v string) error {
	name, window, ok := strings.Cut(v, "=")
	name = strings.TrimSpace(name)
	d, err := time.ParseDuration(strings.TrimSpace(window))
	if !ok || name == "" || err != nil || d <= 0 {
		return fmt.Errorf("want NAME=DURATION, the window the MCP server NAME deduplicates keys for (e.g. shop=24h), got %q", v)
	}
	if _, dup := f[name]; dup {
		return fmt.Errorf("the server name %q is given twice", name)
	}
	f[name] = d
	return nil
}

// dialMCP connects to each server and lists its tools; on the first that fails it
// closes the others and says which.
func dialMCP(ctx context.Context, servers mcpFlag, dedup dedupFlag) ([]*mcptools.Bridge, error) {
	var bridges []*mcptools.Bridge
	for _, m := range servers {
		tr, err := mcptools.Transport(m.target)
		if err == nil {
			dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			var b *mcptools.Bridge
			b, err = mcptools.Dial(dctx, m.name, tr, mcptools.Options{DedupWindow: dedup[m.name]})
			cancel()
			if err == nil {
				bridges = append(bridges, b)
				continue
			}
		}
		for _, b := range bridges {
			b.Session().Close()
		}
		// The URL may carry credentials (user info, ?access_token=), and errors from
		// net/url and net/http quote it.
		return nil, fmt.Errorf("--mcp %s=%s: %w (the worker did not start)", m.name, secrets.Redact(m.target),
			secrets.ScrubError(err, m.target))
	}
	return bridges, nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
