package faults_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/idemgate/idemgate/idemhttp"
	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/sqlite"
	"github.com/idemgate/idemgate/vendorsim"
)

// zombieTools charges through idemhttp (Stripe profile) against the payments
// simulator. Attempt 1 stalls where the test says, ignoring its context, until the
// test releases it: the zombie.
type zombieTools struct {
	url     string
	client  *http.Client
	stall   string // "before-send": attempt 1 stalls, then sends; "after-send": sends, stalls, returns success
	release chan struct{}
	stalled chan struct{}

	mu      sync.Mutex
	sendErr map[int32]error
}

func newZombieTools(url, stall string) *zombieTools {
	return &zombieTools{url: url, client: idemhttp.Client(idemhttp.Stripe), stall: stall,
		release: make(chan struct{}), stalled: make(chan struct{}), sendErr: map[int32]error{}}
}

func (z *zombieTools) ChargeCard(ctx context.Context, amount int) (string, error) {
	a := activity.GetInfo(ctx).Attempt
	zombie := a == 1
	if zombie {
		activity.RecordHeartbeat(ctx, "started")
	}
	if zombie && z.stall == "before-send" {
		close(z.stalled)
		<-z.release // ignores ctx: a stuck attempt (GC pause, blocked call, stopped VM)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, z.url+"/v1/charges",
		bytes.NewReader(fmt.Appendf(nil, `{"customer":"cus_zombie","amount":%d,"currency":"usd"}`, amount)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := z.client.Do(req)
	z.mu.Lock()
	z.sendErr[a] = err
	z.mu.Unlock()
	if err != nil {
		return "", err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if zombie && z.stall == "after-send" {
		close(z.stalled)
		<-z.release
	}
	return fmt.Sprintf("attempt %d: %s", a, body), nil
}

func (z *zombieTools) err(a int32) error {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.sendErr[a]
}

// finished is a worker interceptor placed before the gate: it reports each attempt's
// end as the gate returned it, so the test knows when a zombie has gone all the way through.
type finished struct {
	sdkinterceptor.WorkerInterceptorBase
	ch chan attemptEnd
}

type attemptEnd struct {
	attempt int32
	err     error
}

func (f *finished) InterceptActivity(ctx context.Context, next sdkinterceptor.ActivityInboundInterceptor) sdkinterceptor.ActivityInboundInterceptor {
	i := &finishedInbound{ch: f.ch}
	i.Next = next
	return i
}

type finishedInbound struct {
	sdkinterceptor.ActivityInboundInterceptorBase
	ch chan attemptEnd
}

func (i *finishedInbound) ExecuteActivity(ctx context.Context, in *sdkinterceptor.ExecuteActivityInput) (any, error) {
	res, err := i.Next.ExecuteActivity(ctx, in)
	i.ch <- attemptEnd{activity.GetInfo(ctx).Attempt, err}
	return res, err
}

// ChargeOnce charges once with the given timeouts.
func ChargeOnce(ctx workflow.Context, startToClose, heartbeat time.Duration) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: startToClose, HeartbeatTimeout: heartbeat,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 50 * time.Millisecond, BackoffCoefficient: 1, MaximumAttempts: 10}})
	var out string
	err := workflow.ExecuteActivity(ctx, "ChargeCard", 100).Get(ctx, &out)
	return out, err
}

type zombieRig struct {
	t     *testing.T
	world *vendorsim.World
	tools *zombieTools
	ends  chan attemptEnd
	st    []*sqlite.Store
	queue string
}

// newZombieRig starts `workers` in-process workers on one task queue, each with its
// own handle on one SQLite file (as separate processes would have). The first worker
// runs one activity at a time, so while its zombie stalls, the retry runs elsewhere.
func newZombieRig(t *testing.T, stall string, workers int) *zombieRig {
	world, err := vendorsim.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(world.Close)
	r := &zombieRig{t: t, world: world, tools: newZombieTools(world.Payments.URL, stall), ends: make(chan attemptEnd, 16),
		queue: fmt.Sprintf("zombie-%s-%d", t.Name(), time.Now().UnixNano())}
	t.Cleanup(func() {
		select {
		case <-r.tools.release:
		default:
			close(r.tools.release)
		}
	})
	path := filepath.Join(t.TempDir(), "idemgate.db")
	for i := range workers {
		st, err := sqlite.Open(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		r.st = append(r.st, st)
		gate, err := interceptor.New(interceptor.Options{Store: st,
			VendorWindows: map[string]time.Duration{"ChargeCard": idemhttp.Stripe.Window}})
		if err != nil {
			t.Fatal(err)
		}
		opts := worker.Options{Interceptors: []sdkinterceptor.WorkerInterceptor{&finished{ch: r.ends}, gate}}
		if i == 0 && workers > 1 {
			opts.MaxConcurrentActivityExecutionSize = 1
		}
		w := worker.New(server.GetDefaultClient(), r.queue, opts)
		w.RegisterWorkflow(ChargeOnce)
		w.RegisterActivityWithOptions(r.tools.ChargeCard, activity.RegisterOptions{Name: "ChargeCard"})
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Stop)
	}
	return r
}

func (r *zombieRig) run(startToClose, heartbeat time.Duration) (client.WorkflowRun, string) {
	r.t.Helper()
	id := "zombie-" + r.queue
	run, err := server.GetDefaultClient().ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: id,
		TaskQueue: r.queue, WorkflowExecutionTimeout: 2 * time.Minute}, ChargeOnce, startToClose, heartbeat)
	if err != nil {
		r.t.Fatal(err)
	}
	return run, id
}

// waitEnd waits for the end of the given attempt as the gate returned it.
func (r *zombieRig) waitEnd(attempt int32) error {
	r.t.Helper()
	deadline := time.After(time.Minute)
	for {
		select {
		case e := <-r.ends:
			if e.attempt == attempt {
				return e.err
			}
		case <-deadline:
			r.t.Fatalf("attempt %d never ended", attempt)
		}
	}
}

func (r *zombieRig) waitStalled() {
	r.t.Helper()
	select {
	case <-r.tools.stalled:
	case <-time.After(time.Minute):
		r.t.Fatal("attempt 1 never started")
	}
}

func (r *zombieRig) record(id string) store.Record {
	r.t.Helper()
	rs, err := r.st[0].Receipts(context.Background(), store.ReceiptFilter{WorkflowID: id})
	if err != nil || len(rs) == 0 {
		r.t.Fatalf("receipts of %s: %v, %d", id, err, len(rs))
	}
	rec, err := r.st[0].Get(context.Background(), rs[0].Key)
	if err != nil {
		r.t.Fatal(err)
	}
	return rec
}

func result(t *testing.T, run client.WorkflowRun) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out string
	if err := run.Get(ctx, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// The start-to-close timeout fires while attempt 1 is stuck before it sends; attempt 1
// then wakes and tries to reach the vendor late: withheld, its context is done. The
// retry finds attempt 1's outcome unknown and no evidence that its key left through
// the keyed transport (it never sent), so it is refused like any destructive write
// whose outcome nobody knows — a re-send relying on the vendor's window needs that
// evidence (issue 18 item 12): the gate cannot tell a stuck attempt from one that
// called the vendor without the key. No charge at all; a person resolves the key.
func TestZombieStartToCloseSendsLate(t *testing.T) {
	r := newZombieRig(t, "before-send", 1)
	run, _ := r.run(2*time.Second, 0)
	r.waitStalled()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := run.Get(ctx, nil)
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != interceptor.ErrTypeInFlight || !app.NonRetryable() ||
		!strings.Contains(app.Error(), "keyed transport") {
		t.Fatalf("workflow: %v; want the retry refused for want of evidence (non-retryable %s)", err, interceptor.ErrTypeInFlight)
	}
	close(r.tools.release)
	zerr := r.waitEnd(1)
	if err := r.tools.err(1); !errors.Is(err, idemhttp.ErrNotSent) {
		t.Fatalf("the zombie's late request: %v; want it withheld (idemhttp.ErrNotSent)", err)
	}
	if p := r.world.Payments; p.Total() != 0 {
		t.Fatalf("payments: %d charges; want none", p.Total())
	}
	t.Logf("zombie ended with %v", zerr)
}

// The same with a heartbeat timeout: attempt 1 heartbeats once and stalls; Temporal
// gives it up after the heartbeat timeout, long before its start-to-close deadline.
// Its context must end then, so its late request is withheld.
func TestZombieHeartbeatSendsLate(t *testing.T) {
	r := newZombieRig(t, "before-send", 1)
	run, id := r.run(5*time.Second, time.Second)
	r.waitStalled()
	// Temporal has given attempt 1 up once attempt 2 has come and gone (refused while
	// attempt 1's lease runs).
	if err := r.waitEnd(2); interceptor.ErrorType(err) != interceptor.ErrTypeInFlight {
		t.Fatalf("attempt 2 = %v; want IdempotencyInFlight while attempt 1's lease runs", err)
	}
	close(r.tools.release) // attempt 1 wakes before its start-to-close deadline
	zerr := r.waitEnd(1)
	if err := r.tools.err(1); !errors.Is(err, idemhttp.ErrNotSent) {
		t.Fatalf("the zombie's late request: %v; want it withheld (idemhttp.ErrNotSent)", err)
	}
	if n := r.world.Payments.Total(); n != 0 {
		t.Fatalf("payments: %d charges from a zombie past its heartbeat timeout", n)
	}
	out := result(t, run)
	p := r.world.Payments
	if p.Total() != 1 {
		t.Fatalf("payments: %d charges, want 1", p.Total())
	}
	if rec := r.record(id); rec.State != store.StateCompleted || rec.Attempt < 3 {
		t.Fatalf("record: %+v", rec)
	}
	t.Logf("result %q; zombie ended with %v", out, zerr)
}

// Two workers poll one task queue. Attempt 1 charges on worker A and stalls before it
// returns; its timeout fires; worker B takes over with the same key (the vendor answers
// from its store) and completes. Then the zombie returns success: its late completion
// must not overwrite the record of the attempt that took over.
func TestZombieTwoWorkersLateCompletion(t *testing.T) {
	r := newZombieRig(t, "after-send", 2)
	run, id := r.run(2*time.Second, 0)
	r.waitStalled()
	out := result(t, run)
	before := r.record(id)
	close(r.tools.release)
	zerr := r.waitEnd(1)
	if interceptor.ErrorType(zerr) != interceptor.ErrTypeInFlight {
		t.Fatalf("the zombie's late success came out of the gate as %v; want IdempotencyInFlight (not the owner)", zerr)
	}
	after := r.record(id)
	if after.Owner != before.Owner || after.Attempt != before.Attempt || !bytes.Equal(after.Result, before.Result) ||
		after.State != store.StateCompleted {
		t.Fatalf("the zombie's completion changed the record:\nbefore %+v\nafter  %+v", before, after)
	}
	p := r.world.Payments
	if p.Total() != 1 || p.Replays() != 1 {
		t.Fatalf("payments: %d charges, %d replays; want 1 charge, the retry answered from the vendor's store", p.Total(), p.Replays())
	}
	ran, _ := r.st[1].Receipts(context.Background(), store.ReceiptFilter{WorkflowID: id, Decision: store.DecisionRan})
	if len(ran) != 1 || ran[0].Attempt < 2 {
		t.Fatalf("ran receipts %+v: want one, of the attempt that took over", ran)
	}
	t.Logf("result %q", out)
}
