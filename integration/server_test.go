// Package integration runs idemgate against a real, in-process Temporal server
// (go.temporal.io/server/temporaltest): what only a real server shows — retries
// with real timeouts, reset, continue-as-new, sticky-cache eviction and replay.
package integration

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.temporal.io/server/temporaltest"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memory"
)

var server *temporaltest.TestServer

func TestMain(m *testing.M) {
	quiet := log.NewStructuredLogger(slog.New(slog.DiscardHandler))
	server = temporaltest.NewServer(temporaltest.WithBaseClientOptions(client.Options{Logger: quiet}))
	code := m.Run()
	server.Stop()
	os.Exit(code)
}

// vendor counts side effects per key.
type vendor struct {
	mu    sync.Mutex
	calls map[string]int
	order []string
}

func newVendor() *vendor { return &vendor{calls: map[string]int{}} }

func (v *vendor) hit(ctx context.Context) string {
	key, _ := interceptor.KeyFromContext(ctx)
	v.mu.Lock()
	defer v.mu.Unlock()
	v.calls[key]++
	v.order = append(v.order, key)
	return key
}

func (v *vendor) total() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.order)
}

func (v *vendor) keys() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]string(nil), v.order...)
}

type tools struct {
	v *vendor
	// failFirst makes attempt 1 reach the vendor and then fail with an unmarked error.
	failFirst bool
	// fail, when set, decides per attempt whether the body fails, after it reached
	// the vendor (reached) or before. Set it before the workflow starts.
	fail func(ctx context.Context) (err error, reached bool)
}

func (t *tools) body(ctx context.Context) (string, error) {
	if t.fail != nil {
		if err, reached := t.fail(ctx); err != nil {
			if reached {
				t.v.hit(ctx)
			}
			return "", err
		}
	}
	key := t.v.hit(ctx)
	if t.failFirst && activity.GetInfo(ctx).Attempt == 1 {
		return "", errors.New("connection reset after the request was written")
	}
	return "done:" + key, nil
}

func (t *tools) GetBalance(ctx context.Context, n int) (string, error)    { return t.body(ctx) }
func (t *tools) UpsertContact(ctx context.Context, n int) (string, error) { return t.body(ctx) }
func (t *tools) ChargeCard(ctx context.Context, n int) (string, error)    { return t.body(ctx) }

var retry = &temporal.RetryPolicy{InitialInterval: 50 * time.Millisecond, BackoffCoefficient: 1, MaximumAttempts: 4}

func actx(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second, RetryPolicy: retry})
}

// Steps runs the named activities in order; "local:" runs one as a local activity;
// "wait" blocks until the signal "go".
func Steps(ctx workflow.Context, steps []string) ([]string, error) {
	var out []string
	for i, s := range steps {
		var f workflow.Future
		switch {
		case s == "wait":
			workflow.GetSignalChannel(ctx, "go").Receive(ctx, nil)
			continue
		case len(s) > 6 && s[:6] == "local:":
			lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: 10 * time.Second, RetryPolicy: retry})
			f = workflow.ExecuteLocalActivity(lctx, s[6:], i)
		default:
			f = workflow.ExecuteActivity(actx(ctx), s, i)
		}
		var r string
		if err := f.Get(ctx, &r); err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

// Chain charges once per run and continues as new until it has run `runs` times.
func Chain(ctx workflow.Context, runs int) (string, error) {
	var r string
	if err := workflow.ExecuteActivity(actx(ctx), "ChargeCard", 0).Get(ctx, &r); err != nil {
		return "", err
	}
	if runs > 1 {
		return "", workflow.NewContinueAsNewError(ctx, Chain, runs-1)
	}
	return r, nil
}

type rig struct {
	t     *testing.T
	c     client.Client
	st    store.Store
	v     *vendor
	tools *tools
	gate  sdkinterceptor.WorkerInterceptor
	queue string
	w     worker.Worker
}

// rigStore sets opts.Store to a memory store when it is nil and returns it as the
// whole store.Store the rig reads receipts and records from.
func rigStore(t *testing.T, opts *interceptor.Options) store.Store {
	t.Helper()
	if opts.Store == nil {
		opts.Store = memory.New()
	}
	st, ok := opts.Store.(store.Store)
	if !ok {
		t.Fatalf("the rig reads receipts: Options.Store %T must be a store.Store", opts.Store)
	}
	return st
}

func newRig(t *testing.T, opts interceptor.Options) *rig {
	t.Helper()
	st := rigStore(t, &opts)
	gate, err := interceptor.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	v := newVendor()
	r := &rig{t: t, c: server.GetDefaultClient(), st: st, v: v, tools: &tools{v: v}, gate: gate,
		queue: fmt.Sprintf("q-%s-%d", t.Name(), time.Now().UnixNano())}
	r.startWorker()
	return r
}

func (r *rig) startWorker() {
	w := worker.New(r.c, r.queue, worker.Options{Interceptors: []sdkinterceptor.WorkerInterceptor{r.gate}})
	w.RegisterWorkflow(Steps)
	w.RegisterWorkflow(Chain)
	w.RegisterWorkflow(ChargeThenFail)
	w.RegisterActivity(r.tools)
	registerFeatures(w)
	if err := w.Start(); err != nil {
		r.t.Fatal(err)
	}
	r.w = w
	r.t.Cleanup(w.Stop)
}

func (r *rig) start(id string, wf any, args ...any) client.WorkflowRun {
	r.t.Helper()
	run, err := r.c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: id, TaskQueue: r.queue,
		WorkflowExecutionTimeout: time.Minute}, wf, args...)
	if err != nil {
		r.t.Fatal(err)
	}
	return run
}

func (r *rig) result(run client.WorkflowRun) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out []string
	err := run.Get(ctx, &out)
	return out, err
}

func (r *rig) history(id, runID string) []*historypb.HistoryEvent {
	r.t.Helper()
	it := r.c.GetWorkflowHistory(context.Background(), id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var events []*historypb.HistoryEvent
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			r.t.Fatal(err)
		}
		events = append(events, e)
	}
	return events
}

func TestRealServerDestructiveUnknownIsRefused(t *testing.T) {
	r := newRig(t, interceptor.Options{})
	r.tools.failFirst = true
	_, err := r.result(r.start("charge-unknown", Steps, []string{"ChargeCard"}))
	if r.v.total() != 1 {
		t.Fatalf("vendor count %d, want 1", r.v.total())
	}
	if interceptor.ErrorType(err) != interceptor.ErrTypeInFlight {
		t.Fatalf("workflow error %v, want IdempotencyInFlight", err)
	}
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || !app.NonRetryable() {
		t.Fatalf("refusal must be non-retryable: %v", err)
	}
}

func TestRealServerIdempotentUnknownRunsAgainWithSameKey(t *testing.T) {
	r := newRig(t, interceptor.Options{})
	r.tools.failFirst = true
	out, err := r.result(r.start("upsert-unknown", Steps, []string{"UpsertContact", "local:UpsertContact"}))
	if err != nil {
		t.Fatal(err)
	}
	k := r.v.keys()
	if len(k) != 4 || k[0] != k[1] || k[2] != k[3] || k[0] == k[2] || out[0] != "done:"+k[0] {
		t.Fatalf("vendor keys %q, results %q: want each write twice with one key", k, out)
	}
}

// The interceptor adds no commands: a history recorded with it replays, with it and
// without it, and the keys in the scheduled events are the ones the vendor saw.
func TestReplayerDeterminism(t *testing.T) {
	r := newRig(t, interceptor.Options{})
	run := r.start("replay-me", Steps, []string{"GetBalance", "UpsertContact", "local:ChargeCard", "ChargeCard"})
	if _, err := r.result(run); err != nil {
		t.Fatal(err)
	}
	events := r.history("replay-me", run.GetRunID())
	hist := &historypb.History{Events: events}
	for name, opts := range map[string]worker.WorkflowReplayerOptions{
		"with the interceptor":    {Interceptors: []sdkinterceptor.WorkerInterceptor{r.gate}},
		"without the interceptor": {},
	} {
		replayer, err := worker.NewWorkflowReplayerWithOptions(opts)
		if err != nil {
			t.Fatal(err)
		}
		replayer.RegisterWorkflow(Steps)
		if err := replayer.ReplayWorkflowHistory(nil, hist); err != nil {
			t.Fatalf("replay %s: %v", name, err)
		}
	}
	var scheduled []string
	for _, e := range events {
		if a := e.GetActivityTaskScheduledEventAttributes(); a != nil {
			scheduled = append(scheduled, string(a.GetHeader().GetFields()["idemgate"].GetData()))
		}
	}
	keys := r.v.keys()
	if len(scheduled) != 3 || len(keys) != 4 {
		t.Fatalf("scheduled %d activities, vendor saw %d calls", len(scheduled), len(keys))
	}
	for i, want := range []string{keys[0], keys[1], keys[3]} {
		if !strings.Contains(scheduled[i], want) {
			t.Errorf("scheduled activity %d header %s lacks the key the vendor saw (%s)", i, scheduled[i], want)
		}
	}
}

// ChargeThenFail charges, then fails its first run: Temporal retries the workflow.
func ChargeThenFail(ctx workflow.Context) (string, error) {
	var r string
	if err := workflow.ExecuteActivity(actx(ctx), "ChargeCard", 0).Get(ctx, &r); err != nil {
		return "", err
	}
	if workflow.GetInfo(ctx).Attempt == 1 {
		return "", temporal.NewApplicationError("the step after the charge failed", "AfterCharge")
	}
	return r, nil
}
