package main

import (
	"context"
	"flag"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/server/temporaltest"

	"github.com/idemgate/idemgate/internal/testutil/pgtest"
)

var (
	soakDuration = flag.Duration("soak.duration", 0, "how long TestSoak's workload and nemesis run "+
		"(0: IDEMGATE_SOAK_DURATION, else 2m, or 20s with -short)")
	soakSeed = flag.Uint64("soak.seed", 0, "TestSoak's seed (0: from the clock, printed)")
)

var server *temporaltest.TestServer

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if server != nil {
		server.Stop()
	}
	os.Exit(code)
}

var (
	setupOnce sync.Once
	binPath   string
	setupErr  error
)

// env starts the in-process Temporal server and builds the worker once per run.
func env(t *testing.T) Config {
	t.Helper()
	setupOnce.Do(func() {
		quiet := log.NewStructuredLogger(slog.New(slog.DiscardHandler))
		server = temporaltest.NewServer(temporaltest.WithBaseClientOptions(client.Options{Logger: quiet}))
		dir, err := os.MkdirTemp("", "idemgate-soak-bin")
		if err != nil {
			setupErr = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		binPath, setupErr = BuildWorker(ctx, dir)
	})
	if setupErr != nil {
		t.Fatal(setupErr)
	}
	return Config{Bin: binPath, Dir: t.TempDir(), HostPort: server.GetFrontendHostPort(), Namespace: server.GetDefaultNamespace(),
		Client: server.GetDefaultClient(), Workers: 2, InFlight: 4, Drain: 60 * time.Second, Store: "sqlite"}
}

func duration(t *testing.T) time.Duration {
	if *soakDuration > 0 {
		return *soakDuration
	}
	if s := os.Getenv("IDEMGATE_SOAK_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("IDEMGATE_SOAK_DURATION=%q: %v", s, err)
		}
		return d
	}
	if testing.Short() {
		return 20 * time.Second
	}
	return 2 * time.Minute
}

func seed() uint64 {
	if *soakSeed != 0 {
		return *soakSeed
	}
	return uint64(time.Now().UnixNano() % 1_000_000)
}

// soak runs cfg bounded by a context: the workload's duration, the drain, and a
// minute for starting and collecting, so CI's run cannot hang.
func soak(t *testing.T, cfg Config) Stats {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Duration+cfg.Drain+time.Minute)
	defer cancel()
	st, err := Soak(ctx, cfg)
	if err != nil {
		t.Fatalf("seed %d: %v", cfg.Seed, err)
	}
	t.Logf("\n%s", Markdown(st))
	return st
}

// The real gate under the nemesis, on SQLite and (when IDEMGATE_POSTGRES_DSN is set)
// PostgreSQL side by side: no violation. Each run is bounded by a context (soak), and
// the runs and the broken variants' run at once, so the package's wall time is that
// of one run: the duration (2 minutes in CI), the drain (at most 1 minute) and the
// start.
func TestSoak(t *testing.T) {
	d := duration(t)
	for _, name := range []string{"sqlite", "postgres"} {
		t.Run(name, func(t *testing.T) {
			cfg := env(t)
			if name == "postgres" {
				cfg.PostgresDSN = pgtest.Schema(t, pgtest.DSN(t, "./integration/soak/"), "idemgate_soak")
			}
			t.Parallel()
			cfg.Store, cfg.Duration, cfg.Seed, cfg.Nemesis = name, d, seed(), true
			st := soak(t, cfg)
			if st.Workflows == 0 || st.Effects == 0 {
				t.Fatalf("seed %d: nothing ran", cfg.Seed)
			}
			// Each kind of call in the mix ran at least once: a kind the run never
			// exercised proves nothing about it.
			for _, k := range RanKinds {
				if st.Ran[k] == 0 {
					t.Errorf("seed %d: no %s ran in %s (calls that ran, by kind: %v)", cfg.Seed, k, d, st.Ran)
				}
			}
			if len(st.Violations) > 0 {
				t.Fatal(Report(st.Seed, st.Violations))
			}
		})
	}
}

// brokenRun runs a broken variant for a short while and returns the violations of kind.
func brokenRun(t *testing.T, broken, kind string) []Violation {
	cfg := env(t)
	t.Parallel() // beside TestSoak: the package's wall time stays that of the longest run
	cfg.Broken, cfg.Duration, cfg.Seed, cfg.Nemesis = broken, 15*time.Second, seed(), true
	cfg.Drain = 20 * time.Second // a broken variant's stuck workflows need not finish
	st := soak(t, cfg)
	var out []Violation
	for _, v := range st.Violations {
		if v.Kind == kind {
			out = append(out, v)
		}
	}
	if len(out) == 0 {
		t.Fatalf("seed %d: the checker found no %s violation in the %s variant; it found:\n%s", cfg.Seed, kind, broken, Report(cfg.Seed, st.Violations))
	}
	return out
}

// The gate in pass-through mode (every tool classified read: keys minted and
// forwarded, nothing claimed): the vendors' effects have no claim receipts, and the
// checker says so within seconds.
func TestSoakCatchesPassThrough(t *testing.T) {
	vs := brokenRun(t, BrokenPassThrough, KindReceiptLost)
	if !strings.Contains(vs[0].Detail, "has no claim receipt") {
		t.Fatalf("want an effect without its claim receipt, got %s", vs[0])
	}
}

// A store whose Complete stores nothing: calls reported done have no receipt of
// their completion, and the checker says so within seconds.
func TestSoakCatchesAForgetfulStore(t *testing.T) {
	vs := brokenRun(t, BrokenForget, KindReceiptLost)
	if !strings.Contains(vs[0].Detail, "receipt of its completion") {
		t.Fatalf("want a done call without the receipt of its completion, got %s", vs[0])
	}
}
