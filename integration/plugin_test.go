package integration

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/idemgate/idemgate/activities"
	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memory"
	"github.com/idemgate/idemgate/store/sqlite"
	"github.com/idemgate/idemgate/workflows"
)

var recordHistory = flag.Bool("record-history", false, "record "+demoHistory+" from a demo job on the in-process server")

const demoHistory = "testdata/agentloop-history.json"

// logLines is a log.Logger that keeps every line.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) add(level, msg string, kv []any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf("%s %s %v", level, msg, kv))
}
func (l *logLines) Debug(msg string, kv ...any) { l.add("DEBUG", msg, kv) }
func (l *logLines) Info(msg string, kv ...any)  { l.add("INFO", msg, kv) }
func (l *logLines) Warn(msg string, kv ...any)  { l.add("WARN", msg, kv) }
func (l *logLines) Error(msg string, kv ...any) { l.add("ERROR", msg, kv) }

func (l *logLines) with(sub string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, s := range l.lines {
		if strings.Contains(s, sub) {
			out = append(out, s)
		}
	}
	return out
}

func newPlugin(t *testing.T, opts interceptor.Options, p interceptor.PluginOptions) *interceptor.Plugin {
	t.Helper()
	if opts.Store == nil {
		opts.Store = memory.New()
	}
	pl, err := interceptor.NewPlugin(opts, p)
	if err != nil {
		t.Fatal(err)
	}
	return pl
}

func queueName(t *testing.T) string { return fmt.Sprintf("q-%s-%d", t.Name(), time.Now().UnixNano()) }

// Frobnicate has no known verb: the census flags it for review.
func Frobnicate(ctx context.Context, n int) (string, error) { return "frobnicated", nil }

// SettleLedger is registered under an alias.
func SettleLedger(ctx context.Context, n int) (string, error) { return "settled", nil }

// The plugin alone — worker.Options{Plugins: …}, no interceptor — gates writes: a
// destructive write whose first attempt reached the vendor and then failed unmarked
// is refused, and the vendor saw it once.
func TestPluginGatesWrites(t *testing.T) {
	pl := newPlugin(t, interceptor.Options{}, interceptor.PluginOptions{Logger: &logLines{}})
	v := newVendor()
	q := queueName(t)
	w := worker.New(server.GetDefaultClient(), q, worker.Options{Plugins: []worker.Plugin{pl}})
	w.RegisterWorkflow(Steps)
	w.RegisterActivity(&tools{v: v, failFirst: true})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	r := &rig{t: t, c: server.GetDefaultClient(), queue: q}
	run := r.start("plugin-charge-unknown", Steps, []string{"ChargeCard"})
	_, err := r.result(run)
	if v.total() != 1 {
		t.Fatalf("vendor count %d, want 1", v.total())
	}
	if interceptor.ErrorType(err) != interceptor.ErrTypeInFlight {
		t.Fatalf("workflow error %v, want IdempotencyInFlight", err)
	}

	// The history recorded with the plugin replays with the plugin and without idemgate.
	hist := &historypb.History{Events: r.history("plugin-charge-unknown", run.GetRunID())}
	for name, opts := range map[string]worker.WorkflowReplayerOptions{
		"with the plugin": {Plugins: []worker.Plugin{pl}}, "without idemgate": {},
	} {
		replayer, err := worker.NewWorkflowReplayerWithOptions(opts)
		if err != nil {
			t.Fatal(err)
		}
		replayer.RegisterWorkflow(Steps)
		if err := replayer.ReplayWorkflowHistory(nil, hist); err != nil {
			t.Errorf("replay %s: %v", name, err)
		}
	}
}

// The census is built from what was registered — struct methods, a struct with a
// name prefix, a function, an alias — and logged at start through the worker's
// logger: PluginOptions.Logger, or the logger of the client the plugin is on.
func TestPluginLogsCensusOfRegistered(t *testing.T) {
	register := func(w worker.Worker) {
		w.RegisterWorkflow(Steps)
		w.RegisterActivity(&tools{v: newVendor()})                                                       // GetBalance UpsertContact ChargeCard
		w.RegisterActivityWithOptions(&tools{v: newVendor()}, activity.RegisterOptions{Name: "Billing"}) // BillingGetBalance …
		w.RegisterActivity(Frobnicate)
		w.RegisterActivityWithOptions(SettleLedger, activity.RegisterOptions{Name: "SendLedger"})
		w.RegisterDynamicActivity(func(ctx context.Context, args converter.EncodedValues) (any, error) { return nil, nil },
			activity.DynamicRegisterOptions{})
	}
	// A registration prefix stands where the classifier looks for the verb, so the
	// prefixed methods are flagged for review (see the classifier's position rule).
	const want = "effects: read=1 idempotent-write=1 destructive=6; review: BillingChargeCard, BillingGetBalance, " +
		"BillingUpsertContact, Frobnicate"
	check := func(t *testing.T, logs *logLines, w worker.Worker) {
		t.Helper()
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		got := logs.with("effects:")
		if len(got) != 1 || !strings.Contains(got[0], "WARN idemgate: "+want) || !strings.Contains(got[0], "review [BillingChargeCard BillingGetBalance BillingUpsertContact Frobnicate]") {
			t.Fatalf("census log %q, want one WARN line with %q", got, want)
		}
		if got := logs.with("a dynamic activity is registered"); len(got) != 1 {
			t.Fatalf("dynamic activity log %q, want one line", got)
		}
	}
	t.Run("PluginOptions.Logger", func(t *testing.T) {
		logs := &logLines{}
		pl := newPlugin(t, interceptor.Options{}, interceptor.PluginOptions{Logger: logs})
		w := worker.New(server.GetDefaultClient(), queueName(t), worker.Options{Plugins: []worker.Plugin{pl}})
		register(w)
		check(t, logs, w)
	})
	t.Run("client logger through client.Options.Plugins", func(t *testing.T) {
		logs := &logLines{}
		pl := newPlugin(t, interceptor.Options{}, interceptor.PluginOptions{})
		c, err := client.Dial(client.Options{HostPort: server.GetFrontendHostPort(), Namespace: server.GetDefaultNamespace(),
			Logger: logs, Plugins: []client.Plugin{pl}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// The same plugin in both lists runs once.
		w := worker.New(c, queueName(t), worker.Options{Plugins: []worker.Plugin{pl}})
		register(w)
		check(t, logs, w)
	})
	t.Run("the demo's registrations match its hand-kept name list", func(t *testing.T) {
		logs := &logLines{}
		opts := activities.GateOptions(memory.New())
		pl := newPlugin(t, opts, interceptor.PluginOptions{Logger: logs})
		w := worker.New(server.GetDefaultClient(), queueName(t), worker.Options{Plugins: []worker.Plugin{pl}})
		tools, err := activities.New(activities.Endpoints{Docs: "http://d", CRM: "http://c", Tickets: "http://t",
			Payments: "http://p", Email: "http://e", Chat: "http://ch"})
		if err != nil {
			t.Fatal(err)
		}
		w.RegisterWorkflow(workflows.AgentLoop)
		w.RegisterActivity(tools)
		w.RegisterActivity(&activities.Planning{})
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		want := "idemgate: " + opts.Census(activities.Names()).String()
		if got := logs.with("effects:"); len(got) != 1 || !strings.Contains(got[0], want) {
			t.Fatalf("census log %q, want %q", got, want)
		}
	})
}

// Strict: a registered activity flagged for review keeps the worker from starting;
// classified in Options.Effects, it starts.
func TestPluginStrictRefusesFlagged(t *testing.T) {
	for _, c := range []struct {
		name    string
		effects map[string]interceptor.Effect
		refused bool
	}{{"flagged", nil, true}, {"classified", map[string]interceptor.Effect{"Frobnicate": interceptor.Destructive}, false}} {
		t.Run(c.name, func(t *testing.T) {
			pl := newPlugin(t, interceptor.Options{Effects: c.effects}, interceptor.PluginOptions{Strict: true, Logger: &logLines{}})
			w := worker.New(server.GetDefaultClient(), queueName(t), worker.Options{Plugins: []worker.Plugin{pl}})
			w.RegisterActivity(&tools{v: newVendor()})
			w.RegisterActivity(Frobnicate)
			err := w.Start()
			if err == nil {
				defer w.Stop()
			}
			if !c.refused {
				if err != nil {
					t.Fatalf("start: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "flagged for review: Frobnicate") ||
				!strings.Contains(err.Error(), "Next step") {
				t.Fatalf("start error %v: want a strict refusal naming Frobnicate and the next step", err)
			}
		})
	}
}

// downStore answers like a PostgreSQL server that cannot be reached; its error
// text carries the DSN's password, as driver errors sometimes do.
type downStore struct {
	store.Store
	pausesOnly bool
}

var errDown = fmt.Errorf("dial postgres://app:s3cret@db.internal:5432/idemgate: connection refused: %w", store.ErrUnavailable)

func (s downStore) Begin(ctx context.Context, c store.Claim) (store.Outcome, store.Record, error) {
	if s.pausesOnly {
		return s.Store.Begin(ctx, c)
	}
	return "", store.Record{}, errDown
}
func (s downStore) Pauses(ctx context.Context) ([]store.Pause, error) { return nil, errDown }

// hangingStore never answers a claim.
type hangingStore struct{ store.Store }

func (hangingStore) Begin(ctx context.Context, c store.Claim) (store.Outcome, store.Record, error) {
	<-ctx.Done()
	return "", store.Record{}, ctx.Err()
}

// A store that does not answer — unreachable, closed, unable to read the pauses,
// hanging — keeps the worker from starting, with an error that names the store
// without its password and says what to do.
func TestPluginRefusesToStartOnUnreachableStore(t *testing.T) {
	closed, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "idemgate.db"))
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	const dsn = "postgres://app:s3cret@db.internal:5432/idemgate"
	for _, c := range []struct {
		name, storeName string
		st              store.Store
		want            []string
		unavailable     bool
	}{
		{"unreachable", dsn, downStore{Store: memory.New()},
			[]string{"the store postgres://app:xxxxx@db.internal:5432/idemgate could not claim a key", "Next step"}, true},
		{"pauses unreadable", "host=db.internal user=app password=s3cret dbname=idemgate", downStore{Store: memory.New(), pausesOnly: true},
			[]string{"the store host=db.internal user=app password=xxxxx dbname=idemgate could not read the pauses"}, true},
		{"closed sqlite", "sqlite idemgate.db", closed, []string{"the store sqlite idemgate.db could not claim a key", "the store is closed"}, false},
		{"hanging, no name", "", hangingStore{memory.New()}, []string{"the store integration.hangingStore could not claim a key within 300ms",
			"deadline exceeded"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			pl := newPlugin(t, interceptor.Options{Store: c.st},
				interceptor.PluginOptions{StoreName: c.storeName, ProbeTimeout: 300 * time.Millisecond, Logger: &logLines{}})
			w := worker.New(server.GetDefaultClient(), queueName(t), worker.Options{Plugins: []worker.Plugin{pl}})
			w.RegisterActivity(&tools{v: newVendor()})
			began := time.Now()
			err := w.Start()
			if err == nil {
				w.Stop()
				t.Fatal("the worker started on a store that does not answer")
			}
			if took := time.Since(began); took > 10*time.Second {
				t.Errorf("start took %v with ProbeTimeout 300ms", took)
			}
			for _, s := range c.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("start error %q lacks %q", err, s)
				}
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("start error shows the password: %q", err)
			}
			if c.unavailable && !errors.Is(err, store.ErrUnavailable) {
				t.Errorf("start error %v does not wrap store.ErrUnavailable", err)
			}
		})
	}
}

// A worker that already has the gate as an interceptor does not start with the
// plugin too: the gate would run twice per attempt.
func TestPluginRefusesSecondGate(t *testing.T) {
	gate, err := interceptor.New(interceptor.Options{Store: memory.New()})
	if err != nil {
		t.Fatal(err)
	}
	pl := newPlugin(t, interceptor.Options{}, interceptor.PluginOptions{Logger: &logLines{}})
	w := worker.New(server.GetDefaultClient(), queueName(t), worker.Options{
		Interceptors: []sdkinterceptor.WorkerInterceptor{gate}, Plugins: []worker.Plugin{pl}})
	w.RegisterActivity(&tools{v: newVendor()})
	err = w.Start()
	if err == nil {
		w.Stop()
		t.Fatal("a worker with the interceptor and the plugin started")
	}
	if !strings.Contains(err.Error(), "already has an idemgate interceptor") {
		t.Fatalf("start error %v", err)
	}
	if _, err := worker.NewWorkflowReplayerWithOptions(worker.WorkflowReplayerOptions{
		Interceptors: []sdkinterceptor.WorkerInterceptor{gate}, Plugins: []worker.Plugin{pl}}); err == nil {
		t.Fatal("a replayer with the interceptor and the plugin was made")
	}
}

// closeCounter counts Close calls.
type closeCounter struct {
	store.Store
	closes atomic.Int32
}

func (c *closeCounter) Close() error { c.closes.Add(1); return nil }

// With CloseStore the store is closed once, when the last of the plugin's workers
// stopped — by Stop (twice), by an interrupted Run, or by a start that failed.
func TestPluginStopClosesStoreOnce(t *testing.T) {
	newWorker := func(t *testing.T, c client.Client) (worker.Worker, *closeCounter) {
		st := &closeCounter{Store: memory.New()}
		pl := newPlugin(t, interceptor.Options{Store: st}, interceptor.PluginOptions{CloseStore: true, Logger: &logLines{}})
		w := worker.New(c, queueName(t), worker.Options{Plugins: []worker.Plugin{pl}})
		w.RegisterWorkflow(Steps)
		w.RegisterActivity(&tools{v: newVendor()})
		return w, st
	}
	t.Run("Stop twice", func(t *testing.T) {
		w, st := newWorker(t, server.GetDefaultClient())
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		if n := st.closes.Load(); n != 0 {
			t.Fatalf("%d closes while running", n)
		}
		w.Stop()
		w.Stop()
		if n := st.closes.Load(); n != 1 {
			t.Fatalf("%d closes after Stop twice, want 1", n)
		}
	})
	t.Run("Run interrupted", func(t *testing.T) {
		w, st := newWorker(t, server.GetDefaultClient())
		stop := make(chan any)
		done := make(chan error, 1)
		go func() { done <- w.Run(stop) }()
		close(stop)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if n := st.closes.Load(); n != 1 {
			t.Fatalf("%d closes after an interrupted Run, want 1", n)
		}
	})
	t.Run("start failed", func(t *testing.T) {
		c, err := client.Dial(client.Options{HostPort: server.GetFrontendHostPort(), Namespace: "no-such-namespace",
			Logger: &logLines{}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		w, st := newWorker(t, c)
		if err := w.Run(nil); err == nil {
			t.Fatal("a worker on a namespace that does not exist ran")
		}
		if n := st.closes.Load(); n != 1 { // Run does not call Stop after a failed start
			t.Fatalf("%d closes after a failed start, want 1", n)
		}
		w.Stop()
		if n := st.closes.Load(); n != 1 {
			t.Fatalf("%d closes after a failed start and Stop, want 1", n)
		}
	})
	t.Run("two workers", func(t *testing.T) {
		st := &closeCounter{Store: memory.New()}
		pl := newPlugin(t, interceptor.Options{Store: st}, interceptor.PluginOptions{CloseStore: true, Logger: &logLines{}})
		var ws []worker.Worker
		for range 2 {
			w := worker.New(server.GetDefaultClient(), queueName(t), worker.Options{Plugins: []worker.Plugin{pl}})
			w.RegisterActivity(&tools{v: newVendor()})
			if err := w.Start(); err != nil {
				t.Fatal(err)
			}
			ws = append(ws, w)
		}
		ws[0].Stop()
		if n := st.closes.Load(); n != 0 {
			t.Fatalf("the store was closed while a worker of the plugin still runs")
		}
		ws[1].Stop()
		if n := st.closes.Load(); n != 1 {
			t.Fatalf("%d closes after both workers stopped, want 1", n)
		}
	})
}

// changedAgentLoop is AgentLoop after an incompatible change: it charges first.
func changedAgentLoop(ctx workflow.Context, in workflows.AgentInput) (workflows.AgentResult, error) {
	err := workflow.ExecuteActivity(actx(ctx), "ChargeCard", 0).Get(ctx, nil)
	return workflows.AgentResult{}, err
}

// A history recorded by the demo (its worker runs the gate) replays with the
// plugin and without idemgate; a changed workflow is caught. Regenerate the file
// with `go test ./integration -run TestPluginReplaysDemoHistory -record-history`.
func TestPluginReplaysDemoHistory(t *testing.T) {
	if *recordHistory {
		d := newDemo(t)
		c, jobID, runID, err := d.Normal(ctxMinute(t))
		if err != nil || !c.OK {
			t.Fatalf("demo job: %v %v", err, c.Notes)
		}
		r := &rig{t: t, c: d.Client}
		b, err := temporalproto.CustomJSONMarshalOptions{Indent: " "}.Marshal(&historypb.History{Events: r.history(jobID, runID)})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(demoHistory, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pl := newPlugin(t, interceptor.Options{}, interceptor.PluginOptions{})
	for _, c := range []struct {
		name   string
		opts   worker.WorkflowReplayerOptions
		wf     any
		nondet bool
	}{
		{name: "with the plugin", opts: worker.WorkflowReplayerOptions{Plugins: []worker.Plugin{pl}}, wf: workflows.AgentLoop},
		{name: "without idemgate", wf: workflows.AgentLoop},
		{name: "changed workflow", opts: worker.WorkflowReplayerOptions{Plugins: []worker.Plugin{pl}}, wf: changedAgentLoop, nondet: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			replayer, err := worker.NewWorkflowReplayerWithOptions(c.opts)
			if err != nil {
				t.Fatal(err)
			}
			replayer.RegisterWorkflowWithOptions(c.wf, workflow.RegisterOptions{Name: "AgentLoop"})
			err = replayer.ReplayWorkflowHistoryFromJSONFile(nil, demoHistory)
			if !c.nondet && err != nil {
				t.Fatalf("replay: %v", err)
			}
			if c.nondet && (err == nil || !strings.Contains(err.Error(), "TMPRL1100")) {
				t.Fatalf("replay of a changed workflow: %v, want a nondeterminism error (TMPRL1100)", err)
			}
		})
	}
}

// closeWatch is a SQLite store whose Close is seen by the test.
type closeWatch struct {
	*sqlite.Store
	once   sync.Once
	closed chan struct{}
}

func (c *closeWatch) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Store.Close()
}

// With CloseStore and the SDK's default WorkerStopTimeout (0: Stop does not wait for
// running activities), a destructive write still running at Stop must store its
// outcome before the store closes: the vendor acted, and a later attempt must get
// the stored result, not a refusal that only `idemgate resolve` lifts.
func TestPluginStopWaitsForRunningWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "idemgate.db")
	open := func() *sqlite.Store {
		st, err := sqlite.Open(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	st := &closeWatch{Store: open(), closed: make(chan struct{})}
	logs := &logLines{}
	pl := newPlugin(t, interceptor.Options{Store: st}, interceptor.PluginOptions{CloseStore: true, Logger: logs})
	entered, release := make(chan struct{}), make(chan struct{})
	var sent atomic.Int32
	charge := func(ctx context.Context, n int) (string, error) {
		if sent.Add(1) == 1 {
			close(entered)
			<-release // the vendor call in flight; it does not watch ctx
		}
		return "charged", nil
	}
	register := func(w worker.Worker) {
		w.RegisterWorkflow(Steps)
		w.RegisterActivityWithOptions(charge, activity.RegisterOptions{Name: "ChargeCard"})
	}
	q := queueName(t)
	w := worker.New(server.GetDefaultClient(), q, worker.Options{Plugins: []worker.Plugin{pl}})
	register(w)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, c: server.GetDefaultClient(), queue: q}
	run := r.start("plugin-stop-inflight-"+q, Steps, []string{"ChargeCard"})
	select {
	case <-entered:
	case <-time.After(time.Minute):
		t.Fatal("the activity did not start")
	}
	stopped := make(chan struct{})
	go func() { w.Stop(); close(stopped) }()
	// Let the vendor answer once the store is closed (the defect) or once the plugin
	// says it keeps it open for the running attempt (the fix).
	deadline := time.Now().Add(time.Minute)
	for {
		select {
		case <-st.closed:
		default:
			if len(logs.with("store stays open")) == 0 {
				if time.Now().After(deadline) {
					t.Fatal("Stop neither closed the store nor waited for the running attempt")
				}
				time.Sleep(5 * time.Millisecond) // polling a condition, with a deadline
				continue
			}
		}
		break
	}
	select {
	case <-st.closed:
		t.Error("the store was closed while the write was still running")
	default:
	}
	close(release)
	select {
	case <-stopped:
	case <-time.After(time.Minute):
		t.Fatal("Stop did not return after the running attempt finished")
	}
	select {
	case <-st.closed:
	default:
		t.Fatal("the store was not closed after the last worker stopped")
	}

	// The outcome is on record.
	st2 := open()
	defer st2.Close()
	ran, err := st2.Receipts(context.Background(), store.ReceiptFilter{Activity: "ChargeCard", Decision: store.DecisionRan})
	if err != nil || len(ran) != 1 {
		t.Fatalf("receipts of the finished charge: %+v %v; want one %q", ran, err, store.DecisionRan)
	}
	// A later attempt (on a worker with the store reopened) gets the stored result.
	pl2 := newPlugin(t, interceptor.Options{Store: st2}, interceptor.PluginOptions{Logger: &logLines{}})
	w2 := worker.New(server.GetDefaultClient(), q, worker.Options{Plugins: []worker.Plugin{pl2}})
	register(w2)
	if err := w2.Start(); err != nil {
		t.Fatal(err)
	}
	defer w2.Stop()
	out, err := r.result(run)
	if err != nil || len(out) != 1 || out[0] != "charged" {
		t.Fatalf("workflow = %q, %v; want the charge's result", out, err)
	}
	if n := sent.Load(); n != 1 {
		t.Fatalf("the charge ran %d times, want once", n)
	}
}
