// Command faultreport runs idemgate's fault matrix and price measurement
// (package integration/faults) and prints them as markdown tables.
//
//	scripts/with-postgres.sh go run ./integration/faults/faultreport -trials 20
//
// A witness's early "not sent" counts only from the claim's lease plus 5 minutes
// (store.NotSentFrom); the report waits for that retry unless -scheduled.
//
// The worker runs as its own process, built with -tags idemgate_faults, and is killed
// with SIGKILL at each boundary of each kind of write on each store; the vendor
// simulators count what happened. Then the price: 200 sequential activities of each
// class, regular and local, on a bare worker and gated ones, side by side in rounds.
// Without IDEMGATE_POSTGRES_DSN the PostgreSQL cells are skipped (run it under
// scripts/with-postgres.sh). It uses an in-process Temporal server with
// history.transferProcessorMaxPollRPS at 1000, or the server at TEMPORAL_ADDRESS
// (namespace TEMPORAL_NAMESPACE, default "default"). It exits 1 when a cell breaks
// the promise (see faults.Violations).
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/temporal"
	"go.temporal.io/server/temporaltest"

	"github.com/idemgate/idemgate/integration/faults"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx))
}

func run(ctx context.Context) int {
	trials := flag.Int("trials", 20, "trials per cell of the fault matrix")
	parallel := flag.Int("parallel", 12, "trials run at once")
	matrix := flag.Bool("matrix", true, "run the fault matrix")
	price := flag.Bool("price", true, "run the price measurement")
	n := flag.Int("n", 200, "activities per workflow in the price measurement")
	rounds := flag.Int("rounds", 5, "side-by-side rounds of the price measurement")
	profile := flag.String("cpuprofile", "", "directory for CPU profiles of the price run's worker processes (bare.pprof, sqlite.pprof, postgres.pprof)")
	windows := flag.Bool("cpuprofile-windows", false, "with -cpuprofile: profile only the measured workflows, one file per workflow "+
		"under DIR/<configuration>/, named <tool>-<kind>-window-NNNN.pprof (merge one cell with `go tool pprof DIR/sqlite/SendEmail-regular-*.pprof`)")
	profileHz := flag.Int("cpuprofile-hz", 0, "with -cpuprofile: the sampling rate (0: 100 Hz; 1000 gives ten times the samples)")
	priceTools := flag.String("price-tools", "", "only these tools in the price measurement (GetCustomer, UpsertContact, SendEmail; default all)")
	priceKinds := flag.String("price-kinds", "", "only these kinds of activity in the price measurement (regular, local; default both)")
	priceBins := flag.String("price-bin", "", "CONFIG=PATH,...: run the gated configuration CONFIG of -price-stores (e.g. sqlite+old) "+
		"on this worker binary instead of the one built from this tree (bare=PATH for the bare worker): to compare builds side by side")
	scheduled := flag.Bool("scheduled", false, "end a trial once a witness's early not-sent has its retry scheduled for when it counts "+
		"(lease + 5 min), instead of waiting for that retry (faults.Env.Scheduled; the tests' mode)")
	stores := flag.String("stores", "sqlite,postgres", "stores the fault matrix runs on (PostgreSQL needs IDEMGATE_POSTGRES_DSN)")
	priceStores := flag.String("price-stores", "sqlite,sqlite-strict,postgres", "gated configurations the price is measured on: sqlite, postgres, each optionally with -strict (every step synced)")
	flag.Parse()
	say := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "faultreport: "+format+"\n", args...) }
	if *windows && *profile == "" {
		say("-cpuprofile-windows needs -cpuprofile DIR (where the windows' profiles go)")
		return 2
	}

	dsn := os.Getenv("IDEMGATE_POSTGRES_DSN")
	parse := func(flagName, list string, strictOK bool) ([]string, bool) {
		var st []string
		for _, s := range strings.Split(list, ",") {
			s = strings.TrimSpace(s)
			base := s
			if strictOK {
				base, _, _ = strings.Cut(s, "+") // a label: another worker binary (-price-bin)
				base = strings.TrimSuffix(base, "-strict")
			}
			switch base {
			case "sqlite":
				st = append(st, s)
			case "postgres":
				if dsn == "" {
					say("IDEMGATE_POSTGRES_DSN is not set: skipping %s (run under scripts/with-postgres.sh)", s)
					continue
				}
				st = append(st, s)
			default:
				if strictOK {
					say("-%s: unknown configuration %q: use sqlite, postgres, sqlite-strict, postgres-strict", flagName, s)
				} else {
					say("-%s: unknown store %q: use sqlite, postgres", flagName, s)
				}
				return nil, false
			}
		}
		return st, true
	}
	st, ok := parse("stores", *stores, false)
	if !ok {
		return 2
	}
	pst, ok := parse("price-stores", *priceStores, true)
	if !ok {
		return 2
	}
	dir, err := os.MkdirTemp("", "idemgate-faultreport")
	if err != nil {
		say("%v", err)
		return 1
	}
	defer os.RemoveAll(dir)

	quiet := log.NewStructuredLogger(slog.New(slog.DiscardHandler))
	var hostPort, ns string
	var c client.Client
	serverDesc := ""
	if addr := os.Getenv("TEMPORAL_ADDRESS"); addr != "" {
		ns = os.Getenv("TEMPORAL_NAMESPACE")
		if ns == "" {
			ns = "default"
		}
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		c, err = client.DialContext(dctx, client.Options{HostPort: addr, Namespace: ns, Logger: quiet})
		cancel()
		if err != nil {
			say("cannot reach Temporal at %s: %v", addr, err)
			return 1
		}
		defer c.Close()
		hostPort, serverDesc = addr, "external Temporal server at "+addr
	} else {
		srv := temporaltest.NewServer(
			temporaltest.WithBaseClientOptions(client.Options{Logger: quiet}),
			temporaltest.WithBaseServerOptions(temporal.WithDynamicConfigClient(dynamicconfig.StaticClient{
				dynamicconfig.TransferProcessorMaxPollRPS.Key():             1000,
				dynamicconfig.ForceSearchAttributesCacheRefreshOnRead.Key(): true,
			})))
		defer srv.Stop()
		c, hostPort, ns = srv.GetDefaultClient(), srv.GetFrontendHostPort(), srv.GetDefaultNamespace()
		serverDesc = "in-process Temporal server (temporaltest, history.transferProcessorMaxPollRPS=1000)"
	}
	priceOn := "no price"
	if *price {
		priceOn = "price on: " + strings.Join(pst, "+")
	}
	fmt.Printf("# idemgate fault report\n\n%s, %s, stores: %s, %s\n\n", time.Now().UTC().Format(time.RFC3339), serverDesc,
		strings.Join(st, "+"), priceOn)

	failed := false
	if *matrix {
		say("building the worker process with -tags idemgate_faults")
		bin, err := faults.BuildWorker(ctx, dir, true)
		if err != nil {
			say("%v", err)
			return 1
		}
		e := &faults.Env{HostPort: hostPort, Namespace: ns, Client: c, Bin: bin, Dir: dir, Scheduled: *scheduled}
		if slicesContains(st, "postgres") {
			d, drop, err := faults.PostgresSchema(ctx, dsn)
			if err != nil {
				say("PostgreSQL: %v", err)
				return 1
			}
			defer drop()
			e.PostgresDSN = d
		}
		cells := faults.Cells(st)
		start := time.Now()
		res := e.RunMatrix(ctx, cells, *trials, *parallel, func(done, total int) {
			if done%20 == 0 || done == total {
				say("%d/%d trials (%s)", done, total, time.Since(start).Round(time.Second))
			}
		})
		mode := "a witness's early not-sent really waited for (lease + 5 min)"
		if *scheduled {
			mode = "-scheduled: trials ended once a witness's early not-sent had its retry scheduled"
		}
		fmt.Printf("## Fault matrix: %d trials per cell, %d at once, %s, %s\n\n%s\n", *trials, *parallel, mode, time.Since(start).Round(time.Second), faults.Markdown(res))
		fmt.Printf("Unknown outcomes and who settled them:\n\n%s\n", faults.SharesMarkdown(res))
		if v := faults.Violations(res); len(v) > 0 {
			failed = true
			fmt.Printf("**%d violations:**\n\n", len(v))
			for _, x := range v {
				fmt.Printf("- %s\n", x)
			}
			fmt.Println()
		} else {
			fmt.Printf("No violations: no duplicate of a destructive or vendor-keyed write, no lost write, every refusal with its withheld call.\n\n")
		}
	}
	if *price {
		say("building the worker process (production build)")
		bin, err := faults.BuildWorker(ctx, dir, false)
		if err != nil {
			say("%v", err)
			return 1
		}
		probe, err := faults.NewSyncProbe(ctx, dir)
		if err != nil {
			say("%v", err)
			return 1
		}
		defer probe.Close()
		o := faults.PriceOptions{HostPort: hostPort, Namespace: ns, Client: c, Bin: bin, N: *n, Rounds: *rounds,
			Progress: func(s string) { say("%s", s) }, ProfileDir: *profile, ProfileWindows: *windows, ProfileHz: *profileHz, Probe: probe,
			Tools: list(*priceTools), Kinds: list(*priceKinds)}
		bins := map[string]string{}
		for _, kv := range list(*priceBins) {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || (k != "bare" && !slicesContains(pst, k)) {
				say("-price-bin: %q is not CONFIG=PATH with CONFIG bare or one of -price-stores (%s)", kv, strings.Join(pst, ","))
				return 2
			}
			bins[k] = v
		}
		o.BareBin = bins["bare"]
		for _, s := range pst {
			spec := filepath.Join(dir, s+".db")
			durability := "claim"
			if base, _, _ := strings.Cut(s, "+"); strings.HasSuffix(base, "-strict") {
				durability = "strict"
			}
			if strings.HasPrefix(s, "postgres") {
				d, drop, err := faults.PostgresSchema(ctx, dsn)
				if err != nil {
					say("PostgreSQL: %v", err)
					return 1
				}
				defer drop()
				spec = d
			}
			o.Stores = append(o.Stores, faults.PriceStore{Name: s, Spec: spec, Durability: durability, Bin: bins[s]})
		}
		res, err := faults.Price(ctx, o)
		if err != nil {
			say("price: %v", err)
			return 1
		}
		fmt.Printf("## Price\n\n%s\nBare synced SQLite insert (one row per commit, WAL, synchronous=FULL, same disk), median of the rounds: %v\n\n",
			faults.PriceMarkdown(res.Rows, *n, *rounds), res.Insert.Round(time.Microsecond))
		fmt.Printf("Worker context switches per activity (getrusage: voluntary + involuntary), medians of the rounds:\n\n%s\n",
			faults.SwitchesMarkdown(res.Rows))
		fmt.Printf("### Targets\n\n%s\n", faults.PriceTargets(res))
	}
	if failed {
		return 1
	}
	return 0
}

// list splits a comma-separated flag ("" is none).
func list(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

func slicesContains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
