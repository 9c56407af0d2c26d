// Command workerproc is the worker process of the fault harness (integration/faults):
// the agent's tools (package activities) behind the idemgate gate, with the harness's
// workflows, polling one task queue of the harness's Temporal server. The harness
// builds it with -tags idemgate_faults and kills it with SIGKILL at a write boundary
// (IDEMGATE_KILL_AT, see internal/faultpoint), or from the vendor's side. With
// --payments-lookup-url the gate asks the card processor's lookup about a ChargeCard
// whose outcome is unknown, and with --hold-unknown a refused unknown outcome is
// retried until a witness or a person settles it.
//
// On SIGUSR1 it prints "rusage <user µs> <system µs> <voluntary> <involuntary>
// context switches" of its own process to stdout, so the price measurement reads the
// worker's CPU without counting the server's.
// With --cpuprofile-windows DIR, each SIGUSR2 starts or stops a CPU profile
// (DIR/window-0001.pprof, ...) and answers "profile <n> on|off": the price
// measurement profiles exactly the workflows it measures (merge them with
// `go tool pprof DIR/*.pprof`). Profiling is off unless a flag asks for it.
// SIGTERM stops it gracefully.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sync"
	"syscall"
	"time"

	"go.temporal.io/sdk/client"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"github.com/idemgate/idemgate/activities"
	"github.com/idemgate/idemgate/integration/faults/faultwf"
	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/internal/faultpoint"
	"github.com/idemgate/idemgate/internal/storeopen"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/witness"
)

func main() {
	os.Exit(run())
}

func run() int {
	address := flag.String("temporal-address", "", "Temporal frontend host:port")
	namespace := flag.String("namespace", "default", "namespace")
	queue := flag.String("task-queue", "", "task queue")
	storeSpec := flag.String("store", "", "SQLite path or PostgreSQL DSN")
	durability := flag.String("durability", "claim", "claim or strict (store.Durability)")
	gate := flag.Bool("gate", true, "run the idemgate interceptor (false: the bare worker the price is measured against)")
	sticky := flag.Bool("sticky", true, "keep workflows in the sticky cache (false: a restarted worker picks them up at once)")
	verbose := flag.Bool("v", false, "log the SDK's and the gate's lines to stderr")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	windows := flag.String("cpuprofile-windows", "", "write a CPU profile of each window between two SIGUSR2 to this directory (window-0001.pprof, ...)")
	hz := flag.Int("cpuprofile-hz", 0, "CPU profile sampling rate (0: runtime/pprof's 100 Hz); the runtime warns once that it keeps this rate")
	lookup := flag.String("payments-lookup-url", "", "the card processor's lookup by key: ChargeCard's witness (activities.ChargeLookupWitness)")
	hold := flag.Duration("hold-unknown", 0, "Options.HoldUnknown: a refused unknown outcome is retried after this, until it is settled")
	var ep activities.Endpoints
	flag.StringVar(&ep.Docs, "docs-url", "", "")
	flag.StringVar(&ep.CRM, "crm-url", "", "")
	flag.StringVar(&ep.Tickets, "tickets-url", "", "")
	flag.StringVar(&ep.Payments, "payments-url", "", "")
	flag.StringVar(&ep.Email, "email-url", "", "")
	flag.StringVar(&ep.Chat, "chat-url", "", "")
	flag.Parse()
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "workerproc: "+format+"\n", args...)
		return 2
	}
	if *address == "" || *queue == "" {
		return fail("--temporal-address and --task-queue are required")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return fail("%v", err)
		}
		if err := startProfile(f); err != nil {
			return fail("%v", err)
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	profileHz = *hz
	if *cpuprofile != "" && *windows != "" {
		return fail("--cpuprofile and --cpuprofile-windows exclude each other (one CPU profile at a time)")
	}
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	go func() {
		for range usr1 {
			var ru syscall.Rusage
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
			fmt.Printf("rusage %d %d %d %d\n", ru.Utime.Nano()/1000, ru.Stime.Nano()/1000, ru.Nvcsw, ru.Nivcsw)
		}
	}()
	if *windows != "" {
		pw := &profileWindows{dir: *windows}
		defer pw.stop()
		usr2 := make(chan os.Signal, 1)
		signal.Notify(usr2, syscall.SIGUSR2)
		go func() {
			for range usr2 {
				fmt.Println(pw.toggle())
			}
		}()
	}

	tools, err := activities.New(ep)
	if err != nil {
		return fail("%v", err)
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	logger := log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})))
	var interceptors []sdkinterceptor.WorkerInterceptor
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
		opts := activities.GateOptions(st)
		opts.HoldUnknown = *hold
		if *lookup != "" {
			opts.Witnesses = map[string][]witness.Witness{"ChargeCard": {activities.ChargeLookupWitness(*lookup, nil)}}
		}
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
	w.RegisterWorkflow(faultwf.Job)
	w.RegisterWorkflow(faultwf.Sequence)
	w.RegisterActivity(tools)
	if err := w.Start(); err != nil {
		return fail("start: %v", err)
	}
	fmt.Printf("ready faults=%v gate=%v\n", faultpoint.Enabled, *gate)
	<-ctx.Done()
	w.Stop()
	for _, g := range interceptors {
		// Store the queued read receipts before the store closes.
		fctx, fcancel := context.WithTimeout(context.Background(), 30*time.Second)
		_ = interceptor.Flush(fctx, g)
		fcancel()
	}
	return 0
}

// profileHz is --cpuprofile-hz.
var profileHz int

// startProfile starts a CPU profile into f at profileHz: runtime/pprof asks for
// 100 Hz but keeps a rate set just before it (with a warning on stderr), and the
// profile's header carries the rate in force.
func startProfile(f *os.File) error {
	if profileHz > 0 {
		runtime.SetCPUProfileRate(profileHz)
	}
	err := pprof.StartCPUProfile(f)
	if err != nil && profileHz > 0 {
		runtime.SetCPUProfileRate(0)
	}
	return err
}

// profileWindows profiles the windows between two SIGUSR2: one file per window.
type profileWindows struct {
	dir string
	mu  sync.Mutex
	n   int
	f   *os.File // the open window's file, nil between windows
}

// toggle starts the next window's profile, or stops the open one, and says which
// ("profile <n> on", "profile <n> off <file>", or "profile <n> error: ...").
func (p *profileWindows) toggle() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.f != nil {
		pprof.StopCPUProfile()
		name := p.f.Name()
		err := p.f.Close()
		p.f = nil
		if err != nil {
			return fmt.Sprintf("profile %d error: %v", p.n, err)
		}
		return fmt.Sprintf("profile %d off %s", p.n, name)
	}
	p.n++
	f, err := os.Create(filepath.Join(p.dir, fmt.Sprintf("window-%04d.pprof", p.n)))
	if err != nil {
		return fmt.Sprintf("profile %d error: %v", p.n, err)
	}
	if err := startProfile(f); err != nil {
		f.Close()
		return fmt.Sprintf("profile %d error: %v", p.n, err)
	}
	p.f = f
	return fmt.Sprintf("profile %d on", p.n)
}

// stop ends an open window (at exit).
func (p *profileWindows) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.f != nil {
		pprof.StopCPUProfile()
		p.f.Close()
		p.f = nil
	}
}
