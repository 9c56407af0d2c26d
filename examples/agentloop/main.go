// Command agentloop is idemgate's demo: an agent loop on a real Temporal server with
// real HTTP vendors, a real MCP server and a real SQLite store, showing with real
// retries, real worker stops, a real reset and replays that no write reaches a vendor
// twice.
//
//	go run ./examples/agentloop                 # in-process Temporal server, temp SQLite file
//	go run ./examples/agentloop -v              # and every gate decision, the receipts, the vendors' tallies
//	go run ./examples/agentloop --json          # the same, as JSON for scripts
//	go run ./examples/agentloop --console       # and serve the operator's page on the demo's store
//	go run ./examples/agentloop --temporal-address localhost:7233   # e.g. `temporal server start-dev`
//	go run ./examples/agentloop --plan plan.json                    # your own scripted plan
//	go run ./examples/agentloop --llm-base-url http://localhost:11434/v1 --llm-model qwen2.5
//
// The model's API key comes from OPENAI_API_KEY or --llm-api-key-file FILE, never
// from the command line, where every user sees it in the process list.
//
// By default it prints one short screen per scenario (what happens, what would
// happen without the gate, what the gate did, the counts) and a summary table, in
// under 60 lines.
//
// It exits 0 when every vendor count is as expected, 1 when one is not, and 2 when it
// could not run (a clear one-line error says what to fix).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"time"

	"github.com/idemgate/idemgate/activities"
	"github.com/idemgate/idemgate/examples/agentloop/demo"
	"github.com/idemgate/idemgate/internal/secrets"
	"github.com/idemgate/idemgate/internal/storeopen"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("agentloop", flag.ContinueOnError)
	fs.SetOutput(stderr)
	address := fs.String("temporal-address", os.Getenv("TEMPORAL_ADDRESS"), "Temporal frontend host:port (default: start an in-process server)")
	namespace := fs.String("namespace", envOr("TEMPORAL_NAMESPACE", "default"), "namespace on an external Temporal server")
	storeSpec := fs.String("store", "", "SQLite file or PostgreSQL DSN for claims and receipts (default: a new file in the temp dir)")
	planFile := fs.String("plan", "", "JSON plan file: {\"goal\": ..., \"steps\": [{\"tool\": ..., \"args\": {...}}]} (default: the built-in support scenario)")
	asJSON := fs.Bool("json", false, "print the report as JSON (every decision, note and receipt)")
	verbose := fs.Bool("v", false, "print every gate decision as it happens, then the receipts and the vendors' tallies")
	withConsole := fs.Bool("console", false, "serve the operator's page (idemgate console) on the demo's store while the scenarios run, and until Ctrl-C after them")
	llmURL := fs.String("llm-base-url", os.Getenv("IDEMGATE_LLM_BASE_URL"), "OpenAI-compatible API root; enables the model planner (off by default)")
	llmModel := fs.String("llm-model", os.Getenv("IDEMGATE_LLM_MODEL"), "model name for the model planner")
	llmKeyFile := fs.String("llm-api-key-file", "", "file holding the model planner's API key (default: $OPENAI_API_KEY)")
	if err := secrets.RefuseFlag(args, "llm-api-key", "OPENAI_API_KEY", "llm-api-key-file"); err != nil {
		fmt.Fprintf(stderr, "agentloop: %v\n", err)
		return 2
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "agentloop: unexpected argument %q (flags only; see -h)\n", fs.Arg(0))
		return 2
	}

	cfg := demo.Config{TemporalAddress: *address, Namespace: *namespace, Store: *storeSpec}
	if cfg.Store == "" {
		cfg.Store = filepath.Join(os.TempDir(), fmt.Sprintf("idemgate-demo-%d.db", time.Now().UnixNano()))
	}
	if *planFile != "" {
		s, err := activities.LoadScript(*planFile)
		if err != nil {
			fmt.Fprintf(stderr, "agentloop: %v\n", err)
			return 2
		}
		cfg.Script = &s
	}
	if *llmURL != "" {
		if *llmModel == "" {
			fmt.Fprintln(stderr, "agentloop: --llm-base-url needs --llm-model (e.g. --llm-model gpt-4o-mini)")
			return 2
		}
		key := os.Getenv("OPENAI_API_KEY")
		if *llmKeyFile != "" {
			var err error
			if key, err = secrets.ReadFile(*llmKeyFile); err != nil {
				fmt.Fprintf(stderr, "agentloop: --llm-api-key-file: %v\n", err)
				return 2
			}
		}
		cfg.Planner = activities.ChatPlanner{BaseURL: *llmURL, Model: *llmModel, APIKey: key}
	}
	if !*asJSON {
		cfg.Out, cfg.Verbose = stdout, *verbose
		// With the operator's page up, the blocked e-mail waits for a person there.
		cfg.PersonSettles = *withConsole
		where := "an in-process Temporal server"
		if cfg.TemporalAddress != "" {
			where = "Temporal at " + cfg.TemporalAddress
		}
		kind := "a SQLite store"
		if storeopen.IsPostgres(cfg.Store) {
			kind = "a PostgreSQL store"
		}
		fmt.Fprintf(stdout, "idemgate demo: an agent loop on %s, real vendor simulators, %s\n", where, kind)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	d, err := demo.Setup(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "agentloop: %v\n", err)
		return 2
	}
	defer d.Close()
	if w := storeopen.PermissionWarning(cfg.Store); w != "" {
		fmt.Fprintf(stderr, "agentloop: %s\n", w)
	}
	if *withConsole {
		consoleOut := stdout
		if *asJSON {
			consoleOut = stderr // the JSON report stays the only thing on stdout
		}
		stopConsole, err := serveConsole(d.Store, consoleOut)
		if err != nil {
			fmt.Fprintf(stderr, "agentloop: %v\n", err)
			return 2
		}
		defer stopConsole()
		defer func() { <-ctx.Done() }() // the page stays up after the report until Ctrl-C
	}
	report, err := d.Run(ctx)
	if *asJSON {
		if jerr := report.WriteJSON(stdout); jerr != nil {
			fmt.Fprintf(stderr, "agentloop: %v\n", jerr)
			return 2
		}
	} else {
		if *verbose {
			report.WriteTables(stdout)
		}
		report.WriteSummary(stdout)
	}
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "agentloop: %v\n", err)
		return 2
	case !report.OK:
		return 1
	}
	return 0
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
