package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.temporal.io/server/temporaltest"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/internal/storeopen"
)

// server is an in-process Temporal server shared by the end-to-end tests.
var server *temporaltest.TestServer

func TestMain(m *testing.M) {
	quiet := log.NewStructuredLogger(slog.New(slog.DiscardHandler))
	server = temporaltest.NewServer(temporaltest.WithBaseClientOptions(client.Options{Logger: quiet}))
	code := m.Run()
	server.Stop()
	os.Exit(code)
}

// ChargeResult is what the fake vendor answers.
type ChargeResult struct {
	ID     string `json:"id"`
	Amount int    `json:"amount"`
}

// vendor is a counting fake of the outside world.
type vendor struct {
	mu    sync.Mutex
	calls int
	// crashFirst: the first call reaches the vendor, then fails unmarked, as a
	// connection dropped after the request was written.
	crashFirst bool
}

func (v *vendor) ChargeCard(ctx context.Context, amount int) (ChargeResult, error) {
	v.mu.Lock()
	v.calls++
	n := v.calls
	v.mu.Unlock()
	if v.crashFirst && n == 1 {
		return ChargeResult{}, errors.New("connection reset after the request was written")
	}
	return ChargeResult{ID: fmt.Sprintf("ch_%d", n), Amount: amount}, nil
}

func (v *vendor) GetBalance(ctx context.Context, amount int) (int, error) { return 10000, nil }

func (v *vendor) count() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.calls
}

// Checkout reads the balance, then charges. The charge retries without a limit
// inside a ScheduleToClose far shorter than the gate's window: held refusals
// (Options.HoldUnknown) and pauses keep it waiting, and it continues by itself.
func Checkout(ctx workflow.Context, amount int) (ChargeResult, error) {
	return checkout(ctx, amount, 2*time.Minute)
}

// checkout is Checkout with the charge's ScheduleToClose.
func checkout(ctx workflow.Context, amount int, scheduleToClose time.Duration) (ChargeResult, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Second, ScheduleToCloseTimeout: scheduleToClose,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 100 * time.Millisecond, BackoffCoefficient: 1, MaximumAttempts: 0},
	})
	var balance int
	if err := workflow.ExecuteActivity(ctx, "GetBalance", amount).Get(ctx, &balance); err != nil {
		return ChargeResult{}, err
	}
	var r ChargeResult
	err := workflow.ExecuteActivity(ctx, "ChargeCard", amount).Get(ctx, &r)
	return r, err
}

type rig struct {
	t     *testing.T
	b     backend
	v     *vendor
	c     client.Client
	queue string
}

// newRig starts a worker over the backend's store, as a deployment would: the gate
// holds unknown outcomes and re-reads pauses every 100 ms.
func newRig(t *testing.T, b backend, v *vendor) *rig {
	t.Helper()
	return newRigWith(t, b, v, server.GetDefaultClient())
}

// newRigWith is newRig whose worker uses client c (its logger and metrics handler).
func newRigWith(t *testing.T, b backend, v *vendor, c client.Client) *rig {
	t.Helper()
	st, err := storeopen.Open(context.Background(), b.spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	gate, err := interceptor.New(interceptor.Options{Store: st, HoldUnknown: 200 * time.Millisecond, PauseRefresh: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, b: b, v: v, c: c, queue: fmt.Sprintf("cli-%s-%d", t.Name(), time.Now().UnixNano())}
	w := worker.New(r.c, r.queue, worker.Options{Interceptors: []sdkinterceptor.WorkerInterceptor{gate}})
	w.RegisterWorkflow(Checkout)
	w.RegisterWorkflow(CheckoutKeyed)
	w.RegisterWorkflow(CheckoutLast)
	w.RegisterActivity(v)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return r
}

// start starts Checkout; the workflow ID is id plus the backend's name, so runs on
// different backends never meet.
func (r *rig) start(id string) client.WorkflowRun {
	r.t.Helper()
	id += "-" + r.b.name
	run, err := r.c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: id, TaskQueue: r.queue,
		WorkflowExecutionTimeout: 3 * time.Minute}, Checkout, 4200)
	if err != nil {
		r.t.Fatal(err)
	}
	return run
}

func outcome(t *testing.T, run client.WorkflowRun) (ChargeResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out ChargeResult
	err := run.Get(ctx, &out)
	return out, err
}

// waitFor polls cond until it holds or 30 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// pendingOf waits until `idemgate pending` lists the charge of workflow id.
func (r *rig) pendingOf(id string) recordJSON {
	r.t.Helper()
	id += "-" + r.b.name
	var rec recordJSON
	waitFor(r.t, "the refused charge of "+id+" in `idemgate pending`", func() bool {
		for _, p := range decodeJSON[[]recordJSON](r.t, ok(r.t, "pending", "--store", r.b.spec, "--json")) {
			if p.WorkflowID == id {
				rec = p
				return true
			}
		}
		return false
	})
	return rec
}

func TestEndToEndResolveSent(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		v := &vendor{crashFirst: true}
		r := newRig(t, b, v)
		run := r.start("checkout-sent")
		p := r.pendingOf("checkout-sent")
		if p.Activity != "ChargeCard" || p.Call != "ChargeCard([4200])" || p.State != "unknown" {
			t.Fatalf("pending = %+v", p)
		}
		// The workflow is held, not failed: refusals keep coming while nobody decides.
		waitFor(t, "a held refusal", func() bool {
			return len(decodeJSON[[]receiptJSON](t, ok(t, "receipts", "--store", b.spec, "--json", "--key", p.Key,
				"--decision", "refused-in-flight"))) > 0
		})
		res := writeFile(t, "charge.json", `{"id": "ch_seen_on_dashboard", "amount": 4200}`)
		ok(t, "resolve", p.Key, "--store", b.spec, "--sent", "--result", res, "--reason", "dashboard shows ch_seen_on_dashboard", "--actor", "alice")
		out, err := outcome(t, run)
		if err != nil {
			t.Fatalf("workflow after resolve --sent: %v", err)
		}
		if out != (ChargeResult{ID: "ch_seen_on_dashboard", Amount: 4200}) {
			t.Fatalf("workflow result %+v, want the resolved result", out)
		}
		if v.count() != 1 {
			t.Fatalf("vendor count %d, want 1: the charge must not be sent again", v.count())
		}
		rs := decodeJSON[[]receiptJSON](t, ok(t, "receipts", "--store", b.spec, "--json", "--key", p.Key))
		var ds []string
		for _, r := range rs {
			if len(ds) == 0 || ds[len(ds)-1] != r.Decision {
				ds = append(ds, r.Decision)
			}
		}
		if got := strings.Join(ds, " "); got != "claimed unknown refused-in-flight resolved replayed" {
			t.Fatalf("receipts of the key: %s", got)
		}
	})
}

func TestEndToEndResolveNotSent(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		v := &vendor{crashFirst: true}
		r := newRig(t, b, v)
		run := r.start("checkout-not-sent")
		p := r.pendingOf("checkout-not-sent")
		// The person looks at the vendor once a request the attempt wrote before it gave
		// up can no longer land (store.NotSentFrom), and only then types --not-sent.
		if p.NotSentFrom.IsZero() {
			t.Fatalf("pending --json gives no not_sent_from for an unknown charge: %+v", p)
		}
		if res := idem(t, "resolve", p.Key, "--store", b.spec, "--not-sent", "--reason", "too early"); res.code == 0 {
			t.Fatalf("resolve --not-sent before not_sent_from %s was accepted:\n%s", ts(p.NotSentFrom), res)
		}
		typeAt(t, p.NotSentFrom)
		ok(t, "resolve", p.Key, "--store", b.spec, "--not-sent", "--reason", "no charge at the vendor", "--actor", "bob")
		out, err := outcome(t, run)
		if err != nil {
			t.Fatalf("workflow after resolve --not-sent: %v", err)
		}
		if v.count() != 2 || out.ID != "ch_2" {
			t.Fatalf("vendor count %d, result %+v: want the charge run exactly once more", v.count(), out)
		}
		if rs := decodeJSON[[]recordJSON](t, ok(t, "pending", "--store", b.spec, "--json")); len(rs) != 0 {
			t.Fatalf("still pending: %+v", rs)
		}
	})
}

func TestEndToEndPauseResume(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		v := &vendor{}
		r := newRig(t, b, v)
		ok(t, "pause", "--store", b.spec, "--activity", "ChargeCard", "--reason", "card network incident", "--actor", "alice")
		run := r.start("checkout-paused")
		// The running worker refuses the paused write (the read before it runs) ...
		var gated []receiptJSON
		waitFor(t, "the paused charge to be gated", func() bool {
			gated = decodeJSON[[]receiptJSON](t, ok(t, "receipts", "--store", b.spec, "--json", "--workflow", "checkout-paused-"+b.name, "--decision", "gated"))
			return len(gated) > 0
		})
		var call bytes.Buffer
		if err := json.Compact(&call, gated[0].Call); err != nil {
			t.Fatal(err)
		}
		if g := gated[0]; g.Activity != "ChargeCard" || call.String() != "[4200]" || !strings.Contains(g.Error, "paused by alice") ||
			!strings.Contains(g.Error, "card network incident") {
			t.Fatalf("gated receipt = %+v", g)
		}
		// The read's receipt is queued off its path and stored within 100 ms (issue 21).
		var ran []receiptJSON
		waitFor(t, "the read's receipt", func() bool {
			ran = decodeJSON[[]receiptJSON](t, ok(t, "receipts", "--store", b.spec, "--json", "--workflow", "checkout-paused-"+b.name, "--activity", "GetBalance"))
			return len(ran) > 0
		})
		if len(ran) != 1 || ran[0].Decision != "ran" {
			t.Fatalf("the read while paused: %+v", ran)
		}
		if v.count() != 0 {
			t.Fatalf("vendor count %d while paused", v.count())
		}
		// ... and lets it through after resume, without a restart.
		ok(t, "resume", "--store", b.spec, "--activity", "ChargeCard", "--reason", "incident closed")
		out, err := outcome(t, run)
		if err != nil || v.count() != 1 || out.ID != "ch_1" {
			t.Fatalf("after resume: result %+v, err %v, vendor %d", out, err, v.count())
		}
	})
}
