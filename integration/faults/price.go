package faults

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/client"

	"github.com/idemgate/idemgate/integration/faults/faultwf"
	"github.com/idemgate/idemgate/vendorsim"
)

// PriceClass is one kind of activity the price is measured on.
type PriceClass struct {
	Effect, Tool string
	Args         map[string]string // "%d" is the call's index
}

// PriceClasses are a read, an idempotent write and a destructive write, each through
// idemhttp to a vendor simulator, each call distinct.
var PriceClasses = []PriceClass{
	{"read", "GetCustomer", map[string]string{"customer_id": "cus_%d"}},
	{"idempotent-write", "UpsertContact", map[string]string{"email": "p%d-RUN@example.com", "name": "Price %d"}},
	{"destructive", "SendEmail", map[string]string{"to": "p%d-RUN@example.com", "subject": "price %d", "body": "b"}},
}

// PriceOptions configures Price.
type PriceOptions struct {
	HostPort, Namespace string
	Client              client.Client
	// Bin is the worker binary built without faults (BuildWorker(ctx, dir, false)).
	Bin string
	// BareBin, when set, is the bare worker's binary instead of Bin.
	BareBin string
	// Stores are the gated configurations, each a name and a store spec.
	Stores []PriceStore
	// N is the activities per workflow. Optional: 0 means 200.
	N int
	// Rounds of side-by-side runs; medians are reported. Optional: 0 means 5.
	Rounds int
	// Progress is called with a line per finished run. Optional.
	Progress func(string)
	// ProfileDir, when set, receives a CPU profile of each worker process
	// (<configuration>.pprof), written when Price stops them.
	ProfileDir string
	// ProfileWindows, with ProfileDir, profiles only the measured workflows (not the
	// start, the warm-up, or the time other configurations run): each worker writes
	// ProfileDir/<configuration>/<tool>-<kind>-window-NNNN.pprof, one per measured
	// workflow, over the same span as its CPU reading. Merge one cell's with
	// `go tool pprof DIR/sqlite/SendEmail-regular-*.pprof`.
	ProfileWindows bool
	// ProfileHz is the profiles' sampling rate (0: runtime/pprof's 100 Hz).
	ProfileHz int
	// Tools, when set, limits the measurement to these tools of PriceClasses.
	Tools []string
	// Kinds, when set, limits it to "regular" or "local" activities.
	Kinds []string
	// Probe, when set, times N bare synced SQLite inserts in every round, beside the
	// workflows (PriceResult.Insert).
	Probe *SyncProbe
}

// PriceResult is what Price measured.
type PriceResult struct {
	Rows []PriceRow
	// Insert is the median over the rounds of a bare synced SQLite insert (zero
	// without PriceOptions.Probe).
	Insert time.Duration
}

// PriceStore is one gated configuration: a name for the tables, a store spec and
// its durability ("claim", "strict", or "" for the default), and optionally a worker
// binary of its own (another build, to compare side by side; "" is PriceOptions.Bin).
type PriceStore struct{ Name, Spec, Durability, Bin string }

// PriceRow is one class × regular/local × store, against the bare worker.
type PriceRow struct {
	Effect, Tool, Store string
	Local               bool
	// Per activity, medians over the rounds.
	BareWall, GateWall, BareCPU, GateCPU time.Duration
	// Medians of the per-round ratios gate/bare.
	WallRatio, CPURatio float64
	// The worker process's context switches per activity, medians over the rounds:
	// each is a thread that went to sleep (or was preempted) and was woken again,
	// which the Go scheduler and the kernel pay for in CPU.
	BareSwitches, GateSwitches float64
}

type sample struct {
	wall, cpu time.Duration
	switches  float64 // context switches per activity
}

// Price runs, side by side in rounds on one server, a workflow of N sequential
// activities of each class, regular and local, on a bare worker process (no
// interceptor) and on a gated one per store, and returns the per-activity wall time
// and worker CPU (the worker process's getrusage) with their ratios.
func Price(ctx context.Context, o PriceOptions) (PriceResult, error) {
	if o.N == 0 {
		o.N = 200
	}
	if o.Rounds == 0 {
		o.Rounds = 5
	}
	classes, kinds, err := o.selection()
	if err != nil {
		return PriceResult{}, err
	}
	world, err := vendorsim.Start()
	if err != nil {
		return PriceResult{}, err
	}
	defer world.Close()
	type cfg struct {
		name string
		proc *Proc
		q    string
	}
	cfgs := []*cfg{{name: "bare"}}
	for _, s := range o.Stores {
		cfgs = append(cfgs, &cfg{name: s.Name})
	}
	for i, c := range cfgs {
		c.q = "price-" + c.name + "-" + uuid.NewString()[:8]
		spec := WorkerSpec{Bin: o.Bin, HostPort: o.HostPort, Namespace: o.Namespace, Queue: c.q, World: world,
			Bare: i == 0, Sticky: true, CPUProfileHz: o.ProfileHz}
		if i > 0 {
			spec.Store, spec.Durability = o.Stores[i-1].Spec, o.Stores[i-1].Durability
			if b := o.Stores[i-1].Bin; b != "" {
				spec.Bin = b
			}
		} else if o.BareBin != "" {
			spec.Bin = o.BareBin
		}
		switch {
		case o.ProfileDir != "" && o.ProfileWindows:
			spec.CPUProfileWindows = filepath.Join(o.ProfileDir, c.name)
			if err := os.MkdirAll(spec.CPUProfileWindows, 0o755); err != nil {
				return PriceResult{}, err
			}
		case o.ProfileDir != "":
			spec.CPUProfile = filepath.Join(o.ProfileDir, c.name+".pprof")
		}
		if c.proc, err = StartWorker(spec); err != nil {
			return PriceResult{}, err
		}
		defer c.proc.Stop()
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := c.proc.WaitReady(rctx)
		cancel()
		if err != nil {
			return PriceResult{}, err
		}
	}
	runOne := func(c *cfg, pc PriceClass, local bool, n int, measured bool) (sample, error) {
		args := map[string]string{}
		tag := uuid.NewString()[:8]
		for k, v := range pc.Args {
			args[k] = strings.ReplaceAll(v, "RUN", tag)
		}
		window := measured && o.ProfileDir != "" && o.ProfileWindows
		if window {
			if _, err := c.proc.Profile(ctx); err != nil {
				return sample{}, err
			}
		}
		before, err := c.proc.Usage(ctx)
		if err != nil {
			return sample{}, err
		}
		start := time.Now()
		run, err := o.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "price-" + c.name + "-" + tag, TaskQueue: c.q,
			WorkflowExecutionTimeout: 10 * time.Minute}, faultwf.Sequence,
			faultwf.SequenceInput{Tool: pc.Tool, ArgsTemplate: args, N: n, Local: local})
		if err != nil {
			return sample{}, err
		}
		var done int
		if err := run.Get(ctx, &done); err != nil {
			return sample{}, fmt.Errorf("idemgate/integration/faults: %s %s on %s: %w", pc.Tool, kind(local), c.name, err)
		}
		wall := time.Since(start)
		after, err := c.proc.Usage(ctx)
		if err != nil {
			return sample{}, err
		}
		if window {
			f, err := c.proc.Profile(ctx)
			if err != nil {
				return sample{}, err
			}
			// Named for what it measured: merge one cell with DIR/<configuration>/<tool>-<kind>-*.pprof.
			if err := os.Rename(f, filepath.Join(filepath.Dir(f), fmt.Sprintf("%s-%s-%s", pc.Tool, kind(local), filepath.Base(f)))); err != nil {
				return sample{}, err
			}
		}
		return sample{wall / time.Duration(n), (after.CPU - before.CPU) / time.Duration(n),
			float64(after.Switches-before.Switches) / float64(n)}, nil
	}
	// Warm every worker up (connections, caches, JIT-free but page-faulting Go).
	for _, c := range cfgs {
		for _, pc := range classes {
			for _, local := range kinds {
				if _, err := runOne(c, pc, local, 20, false); err != nil {
					return PriceResult{}, err
				}
			}
		}
	}
	type cellKey struct {
		class int
		local bool
		cfg   int
	}
	samples := map[cellKey][]sample{}
	var inserts []time.Duration
	for r := range o.Rounds {
		if o.Probe != nil {
			d, err := o.Probe.Insert(ctx, o.N)
			if err != nil {
				return PriceResult{}, err
			}
			inserts = append(inserts, d)
			if o.Progress != nil {
				o.Progress(fmt.Sprintf("round %d bare synced SQLite insert: %v", r+1, d.Round(time.Microsecond)))
			}
		}
		for ci, pc := range classes {
			for _, local := range kinds {
				// Rotate the order each round so no configuration always runs first.
				for k := range cfgs {
					i := (k + r) % len(cfgs)
					s, err := runOne(cfgs[i], pc, local, o.N, true)
					if err != nil {
						return PriceResult{}, err
					}
					key := cellKey{ci, local, i}
					samples[key] = append(samples[key], s)
					if o.Progress != nil {
						o.Progress(fmt.Sprintf("round %d %s %s %s: %v wall, %v CPU, %.1f context switches per activity", r+1, pc.Tool,
							kind(local), cfgs[i].name, s.wall.Round(time.Microsecond), s.cpu.Round(time.Microsecond), s.switches))
					}
				}
			}
		}
	}
	var rows []PriceRow
	for ci, pc := range classes {
		for _, local := range kinds {
			bare := samples[cellKey{ci, local, 0}]
			for i := 1; i < len(cfgs); i++ {
				gate := samples[cellKey{ci, local, i}]
				row := PriceRow{Effect: pc.Effect, Tool: pc.Tool, Store: cfgs[i].name, Local: local}
				var bw, gw, bc, gc []time.Duration
				var wr, cr, bs, gs []float64
				for r := range bare {
					bs, gs = append(bs, bare[r].switches), append(gs, gate[r].switches)
					bw, gw = append(bw, bare[r].wall), append(gw, gate[r].wall)
					bc, gc = append(bc, bare[r].cpu), append(gc, gate[r].cpu)
					wr = append(wr, float64(gate[r].wall)/float64(bare[r].wall))
					cr = append(cr, float64(gate[r].cpu)/float64(bare[r].cpu))
				}
				row.BareWall, row.GateWall, row.BareCPU, row.GateCPU = median(bw), median(gw), median(bc), median(gc)
				row.WallRatio, row.CPURatio = median(wr), median(cr)
				row.BareSwitches, row.GateSwitches = median(bs), median(gs)
				rows = append(rows, row)
			}
		}
	}
	return PriceResult{Rows: rows, Insert: median(inserts)}, nil
}

// selection is the classes and kinds (false: regular, true: local) o.Tools and
// o.Kinds select.
func (o PriceOptions) selection() ([]PriceClass, []bool, error) {
	classes := PriceClasses
	if len(o.Tools) > 0 {
		classes = nil
		for _, t := range o.Tools {
			i := slices.IndexFunc(PriceClasses, func(pc PriceClass) bool { return pc.Tool == t })
			if i < 0 {
				return nil, nil, fmt.Errorf("idemgate/integration/faults: price: no tool %q; use one of GetCustomer, UpsertContact, SendEmail", t)
			}
			classes = append(classes, PriceClasses[i])
		}
	}
	kinds := []bool{false, true}
	if len(o.Kinds) > 0 {
		kinds = nil
		for _, k := range o.Kinds {
			switch k {
			case "regular":
				kinds = append(kinds, false)
			case "local":
				kinds = append(kinds, true)
			default:
				return nil, nil, fmt.Errorf("idemgate/integration/faults: price: no kind %q; use regular or local", k)
			}
		}
	}
	return classes, kinds, nil
}

func kind(local bool) string {
	if local {
		return "local"
	}
	return "regular"
}

func median[T int64 | float64 | time.Duration](xs []T) T {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// PriceMarkdown prints the price rows as a table.
func PriceMarkdown(rows []PriceRow, n, rounds int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Per activity, medians of %d rounds of %d sequential activities; ratios are medians of the per-round gate/bare ratios.\n\n", rounds, n)
	b.WriteString("| effect (tool) | activity | store | wall bare | wall gated | wall ratio | worker CPU bare | worker CPU gated | CPU ratio | CPU added |\n")
	b.WriteString("|---|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s (%s) | %s | %s | %v | %v | %.3f× | %v | %v | %.3f× | %+v |\n", r.Effect, r.Tool, kind(r.Local), r.Store,
			r.BareWall.Round(time.Microsecond), r.GateWall.Round(time.Microsecond), r.WallRatio,
			r.BareCPU.Round(time.Microsecond), r.GateCPU.Round(time.Microsecond), r.CPURatio,
			(r.GateCPU - r.BareCPU).Round(time.Microsecond))
	}
	return b.String()
}

// SwitchesMarkdown prints the worker processes' context switches per activity.
func SwitchesMarkdown(rows []PriceRow) string {
	var b strings.Builder
	b.WriteString("| effect (tool) | activity | store | bare | gated | added |\n|---|---|---|---:|---:|---:|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s (%s) | %s | %s | %.1f | %.1f | %+.1f |\n", r.Effect, r.Tool, kind(r.Local), r.Store,
			r.BareSwitches, r.GateSwitches, r.GateSwitches-r.BareSwitches)
	}
	return b.String()
}

// PriceTargets prints, for each gated configuration Price measured, the rows of
// the price targets (issue 11) that the harness measures, each with its measured
// value and whether it is met. Configurations are named as faultreport names
// them: "sqlite", "postgres", and "-strict" for the strict durability.
func PriceTargets(res PriceResult) string {
	var b strings.Builder
	b.WriteString("| measure | target | measured | |\n|---|---|---|---|\n")
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "**missed**"
	}
	us := func(d time.Duration) string { return d.Round(time.Microsecond).String() }
	for _, r := range res.Rows {
		base, _, _ := strings.Cut(r.Store, "+") // a label (another build)
		strict := strings.HasSuffix(base, "-strict")
		pg := strings.HasPrefix(r.Store, "postgres")
		what := fmt.Sprintf("%s %s (%s), %s", kind(r.Local), r.Effect, r.Tool, r.Store)
		added := r.GateWall - r.BareWall
		cpu := r.GateCPU - r.BareCPU
		switch {
		case r.Effect == "read" && !r.Local:
			fmt.Fprintf(&b, "| %s | ≤ 1.02× bare wall | %.3f× | %s |\n", what, r.WallRatio, verdict(r.WallRatio <= 1.02))
		case r.Effect == "read" && r.Local:
			fmt.Fprintf(&b, "| %s | ≤ bare + 30µs | %s + %s | %s |\n", what, us(r.BareWall), us(added), verdict(added <= 30*time.Microsecond))
		case r.Local && !pg && !strict:
			limit := res.Insert + 50*time.Microsecond
			fmt.Fprintf(&b, "| %s | ≤ bare + one synced insert (%s) + 50µs = bare + %s | %s + %s | %s |\n", what,
				us(res.Insert), us(limit), us(r.BareWall), us(added), verdict(res.Insert > 0 && added <= limit))
		case r.Local:
			fmt.Fprintf(&b, "| %s | (no target) | %s + %s | |\n", what, us(r.BareWall), us(added))
		case !pg && !strict:
			fmt.Fprintf(&b, "| %s | ≤ 1.05× bare wall, worker CPU added ≤ 200µs | %.3f×, CPU %+v | %s |\n", what, r.WallRatio, us(cpu),
				verdict(r.WallRatio <= 1.05 && cpu <= 200*time.Microsecond))
		case pg && !strict:
			fmt.Fprintf(&b, "| %s | ≤ 1.10× bare wall | %.3f× | %s |\n", what, r.WallRatio, verdict(r.WallRatio <= 1.10))
		case !pg && strict:
			fmt.Fprintf(&b, "| %s | ≤ 1.10× bare wall | %.3f× | %s |\n", what, r.WallRatio, verdict(r.WallRatio <= 1.10))
		default:
			fmt.Fprintf(&b, "| %s | (no target) | %.3f× | |\n", what, r.WallRatio)
		}
	}
	return b.String()
}
