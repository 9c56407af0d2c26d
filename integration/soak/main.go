// Command soak runs idemgate's chaos soak: gated worker processes
// (./workerproc) on one task queue of a Temporal server, an agent-loop workload
// (soakwf.Agent: reads, idempotent and destructive writes to the vendor simulator
// and to an MCP server with mcptools.Dedup through the mcptools bridge, a charge
// that completes asynchronously; regular and local activities, children,
// continue-as-new, calls that wait for an approval signal, come in a signal or are
// made by an update; each call with a known expected effect), a nemesis that injects faults at random from
// the seed (SIGKILL and graceful restarts of workers, resets of running and closed
// workflows, pauses, a worker's clock skewed within Options.ClockSkew, a scripted
// operator that settles unknown outcomes truthfully from the vendors' ledgers), and
// at the end a checker (Check) over the vendors' and the MCP server's ledgers, the
// store's receipts and records, Temporal's results and the updates' answers. A
// violation prints the seed and the call's minimal history.
//
//	go run ./integration/soak -duration 10m -seed 42
//	scripts/with-postgres.sh go run ./integration/soak -duration 1h -seed 7 -store postgres
//
// It uses the Temporal server at TEMPORAL_ADDRESS, or an in-process one
// (temporaltest). It exits 1 when the checker found a violation. See docs/soak.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/server/temporaltest"

	"github.com/idemgate/idemgate/integration/faults"
)

func main() { os.Exit(cli()) }

func cli() int {
	duration := flag.Duration("duration", 2*time.Minute, "how long the workload and the nemesis run")
	drain := flag.Duration("drain", 90*time.Second, "how long to wait for the running workflows after -duration")
	seed := flag.Uint64("seed", uint64(time.Now().UnixNano()%1_000_000), "the seed of the workload and the nemesis")
	storeName := flag.String("store", "sqlite", "sqlite or postgres (IDEMGATE_POSTGRES_DSN)")
	workers := flag.Int("workers", 3, "worker processes")
	inflight := flag.Int("inflight", 6, "workflows running at once")
	nemesis := flag.Bool("nemesis", true, "inject faults")
	broken := flag.String("broken", "", "run a broken variant the checker must catch: passthrough (every tool classified read), bare (no interceptor) or forget (Complete stores nothing)")
	pgRestart := flag.Bool("pg-restart", true, "with -store postgres and IDEMGATE_PG_CTL (scripts/with-postgres.sh), the nemesis restarts PostgreSQL in immediate mode")
	durability := flag.String("durability", "claim", "the workers' store durability: claim or strict")
	verbose := flag.Bool("v", false, "log every fault with its time")
	only := flag.String("only", "", "limit the nemesis to these actions (comma-separated: kill, stop, reset, pause, settle, skew, drop, delay, pgrestart)")
	flag.Parse()
	say := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "soak: "+format+"\n", args...) }
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	dir, err := os.MkdirTemp("", "idemgate-soak")
	if err != nil {
		say("%v", err)
		return 2
	}
	defer os.RemoveAll(dir)
	bin, err := BuildWorker(ctx, dir)
	if err != nil {
		say("%v", err)
		return 2
	}
	cfg := Config{Duration: *duration, Drain: *drain, Seed: *seed, Store: *storeName, Workers: *workers, InFlight: *inflight,
		Nemesis: *nemesis, Broken: *broken, Bin: bin, Dir: dir, Log: os.Stderr, Verbose: *verbose, Durability: *durability}
	if *only != "" {
		cfg.Only = strings.Split(*only, ",")
	}
	if cfg.Store == "postgres" {
		dsn := os.Getenv("IDEMGATE_POSTGRES_DSN")
		if dsn == "" {
			say("-store postgres needs IDEMGATE_POSTGRES_DSN (run under scripts/with-postgres.sh)")
			return 2
		}
		d, drop, err := faults.PostgresSchema(ctx, dsn)
		if err != nil {
			say("%v", err)
			return 2
		}
		defer drop()
		cfg.PostgresDSN = d
		if *pgRestart {
			cfg.PGCtl = os.Getenv("IDEMGATE_PG_CTL")
		}
	}
	quiet := log.NewStructuredLogger(slog.New(slog.DiscardHandler))
	server := "in-process Temporal server (temporaltest)"
	if addr := os.Getenv("TEMPORAL_ADDRESS"); addr != "" {
		ns := os.Getenv("TEMPORAL_NAMESPACE")
		if ns == "" {
			ns = "default"
		}
		c, err := client.Dial(client.Options{HostPort: addr, Namespace: ns, Logger: quiet})
		if err != nil {
			say("cannot reach Temporal at %s: %v", addr, err)
			return 2
		}
		defer c.Close()
		cfg.HostPort, cfg.Namespace, cfg.Client, server = addr, ns, c, "Temporal at "+addr
	} else {
		srv := temporaltest.NewServer(temporaltest.WithBaseClientOptions(client.Options{Logger: quiet}))
		defer srv.Stop()
		cfg.HostPort, cfg.Namespace, cfg.Client = srv.GetFrontendHostPort(), srv.GetDefaultNamespace(), srv.GetDefaultClient()
	}
	st, err := Soak(ctx, cfg)
	if err != nil {
		say("%v", err)
		return 2
	}
	fmt.Printf("# idemgate soak\n\n%s, %s\n\n%s\n", time.Now().UTC().Format(time.RFC3339), server, Markdown(st))
	fmt.Print(Report(st.Seed, st.Violations))
	if len(st.Violations) > 0 {
		return 1
	}
	return 0
}

// Markdown prints a run's numbers as a table.
func Markdown(st Stats) string {
	var b strings.Builder
	row := func(k, v string) { fmt.Fprintf(&b, "| %s | %s |\n", k, v) }
	b.WriteString("| | |\n|---|---|\n")
	row("seed", fmt.Sprint(st.Seed))
	row("store", st.Store+" (durability "+st.Durability+")")
	row("duration (wall, with the drain)", fmt.Sprintf("%s (%s)", st.Duration, st.Wall.Round(time.Second)))
	row("workflows started", fmt.Sprint(st.Workflows))
	row("tool calls", fmt.Sprint(st.Calls))
	row("of them with a feature", list(st.Workload))
	row("calls that ran, by kind", list(st.Ran))
	row("workflows by final status", list(st.Closed))
	row("of them still running after the drain (terminated by the harness)", fmt.Sprint(st.Unfinished))
	row("vendor side effects", fmt.Sprint(st.Effects))
	row("receipts", fmt.Sprint(st.Receipts))
	row("faults injected", list(st.Faults))
	row("violations", list(CountByKind(st.Violations)))
	return b.String()
}

func list(m map[string]int) string {
	if len(m) == 0 {
		return "0"
	}
	var parts []string
	n := 0
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
		n += m[k]
	}
	return fmt.Sprintf("%d: %s", n, strings.Join(parts, ", "))
}
