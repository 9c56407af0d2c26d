package integration

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memory"
	"github.com/idemgate/idemgate/witness"
)

// skewClock is the gate's clock: the wall clock plus an offset a test moves
// forward to pass a claim's lease without waiting for it.
type skewClock struct{ off atomic.Int64 }

func (c *skewClock) now() time.Time       { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *skewClock) skip(d time.Duration) { c.off.Add(int64(d)) }

// plainExpense completes asynchronously as samples-go's expense sample does: the
// body files the expense with the vendor and hands the bare task token to an
// approver, who completes it with the plain client.CompleteActivity (not
// interceptor.CompleteAsync): the store never hears of the result.
type plainExpense struct {
	v        *vendor
	approver chan [2]string // task token, key
}

func (e *plainExpense) PayExpense(ctx context.Context, n int) (string, error) {
	key := e.v.hit(ctx)
	e.approver <- [2]string{string(activity.GetInfo(ctx).TaskToken), key}
	return "", activity.ErrResultPending
}

func recordOf(t *testing.T, st store.Store, key string) store.Record {
	t.Helper()
	rec, err := st.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("record of %s: %v", key, err)
	}
	return rec
}

// resolvedBy returns the resolutions of key, as "actor resolution".
func resolvedBy(t *testing.T, st store.Store, key string) []string {
	t.Helper()
	rs, err := st.Receipts(context.Background(), store.ReceiptFilter{Key: key, Decision: store.DecisionResolved})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rs {
		out = append(out, fmt.Sprintf("%s %s", r.Actor, r.Resolution))
	}
	return out
}

// An async activity completed by the plain client leaves its claim claimed; once
// its lease passed the plugin's background reconciler finds the completion in the
// workflow's history and settles the key as sent with that result, no person
// involved. A reset of the workflow to before the activity gets the stored result
// and the vendor counts one effect.
func TestTemporalWitnessSettlesPlainAsyncCompletionInTheBackground(t *testing.T) {
	clk := &skewClock{}
	st := memory.New()
	pl := newPlugin(t, interceptor.Options{Store: st, Now: clk.now},
		interceptor.PluginOptions{ReconcileEvery: 20 * time.Millisecond})
	v := newVendor()
	ex := &plainExpense{v: v, approver: make(chan [2]string, 4)}
	c := server.GetDefaultClient()
	r := &rig{t: t, c: c, st: st, v: v, tools: &tools{v: v}, queue: queueName(t)}
	w := worker.New(c, r.queue, worker.Options{Plugins: []worker.Plugin{pl}})
	w.RegisterWorkflow(Steps)
	w.RegisterActivity(ex)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	go func() {
		for h := range ex.approver {
			if err := c.CompleteActivity(context.Background(), []byte(h[0]), "approved:"+h[1], nil); err != nil {
				t.Errorf("CompleteActivity: %v", err)
			}
		}
	}()
	t.Cleanup(func() { close(ex.approver) })

	run := r.start("plain-expense", Steps, []string{"PayExpense"})
	first, err := r.result(run)
	if err != nil {
		t.Fatal(err)
	}
	key := v.keys()[0]
	if got := recordOf(t, st, key); got.State != store.StateClaimed {
		t.Fatalf("after a plain CompleteActivity the record is %s, want still claimed (the store never heard)", got.State)
	}
	clk.skip(time.Hour) // the attempt's lease passes: its owner is gone
	waitFor(t, "the reconciler to settle the key from Temporal's history", func() bool {
		rec, err := st.Get(context.Background(), key)
		return err == nil && rec.State == store.StateCompleted
	})
	if got := resolvedBy(t, st, key); len(got) != 1 || got[0] != "witness:temporal sent" {
		t.Fatalf("resolutions %q, want one by witness:temporal, sent", got)
	}
	var again []string
	r.resetToStart("plain-expense", run.GetRunID(), &again)
	if fmt.Sprint(again) != fmt.Sprint(first) || first[0] != "approved:"+key || v.total() != 1 {
		t.Fatalf("after reset: %q (first %q), vendor %d calls, want the stored result and 1 call", again, first, v.total())
	}
}

// lossyStore loses every Complete, as an operating-system crash loses a
// completion committed without its own sync (DESIGN: Durability): the activity
// answered Temporal, the store still holds the claim.
type lossyStore struct {
	store.Store
	lost atomic.Int32
}

func (s *lossyStore) Complete(ctx context.Context, t store.Transition) error {
	s.lost.Add(1)
	return nil
}

// The store lost the completion while Temporal got the result: a reset that runs
// the charge again meets a claim whose owner is gone, and the gate, before
// refusing it, asks Temporal's history through the worker's client: the
// completion is there, so the key settles as sent with that result and the reset
// run returns it. No person, one charge.
func TestTemporalWitnessAtTheGateSettlesACompletionTheStoreLost(t *testing.T) {
	clk := &skewClock{}
	st := &lossyStore{Store: memory.New()}
	r := newFeatureRig(t, interceptor.Options{Store: st, Now: clk.now}, worker.Options{})
	run := r.start("lost-completion", Steps, []string{"ChargeCard"})
	first, err := r.result(run)
	if err != nil {
		t.Fatal(err)
	}
	key := r.v.keys()[0]
	if st.lost.Load() == 0 || recordOf(t, st, key).State != store.StateClaimed {
		t.Fatalf("the completion was not lost (%d lost, record %s)", st.lost.Load(), recordOf(t, st, key).State)
	}
	clk.skip(time.Hour)
	var again []string
	r.resetToStart("lost-completion", run.GetRunID(), &again)
	if fmt.Sprint(again) != fmt.Sprint(first) || r.v.total() != 1 {
		t.Fatalf("after reset: %q (first %q), vendor %d calls, want the result from history and 1 call", again, first, r.v.total())
	}
	if got := resolvedBy(t, st, key); len(got) != 1 || got[0] != "witness:temporal sent" {
		t.Fatalf("resolutions %q, want one by witness:temporal, sent", got)
	}
}

// The witness itself, against the real server: a completed activity is Sent with
// the exact payloads of its ActivityTaskCompleted (without them when over
// MaxResultSize, as the gate); a failed one, a local activity, a key no event
// carries and a workflow Temporal does not have cannot tell — never not sent.
func TestTemporalWitnessAnswers(t *testing.T) {
	st := &lossyStore{Store: memory.New()}
	r := newFeatureRig(t, interceptor.Options{Store: st}, worker.Options{})
	run := r.start("witness-answers", Steps, []string{"ChargeCard"})
	if _, err := r.result(run); err != nil {
		t.Fatal(err)
	}
	done := recordOf(t, st, r.v.keys()[0])

	r.tools.fail = func(ctx context.Context) (error, bool) { return fmt.Errorf("connection reset"), true }
	failRun := r.start("witness-answers-failed", Steps, []string{"ChargeCard"})
	if _, err := r.result(failRun); err == nil {
		t.Fatal("the failing charge succeeded")
	}
	failed := recordOf(t, st, r.v.keys()[1])
	r.tools.fail = nil
	if _, err := r.result(r.start("witness-answers-local", Steps, []string{"local:ChargeCard"})); err != nil {
		t.Fatal(err)
	}
	local := recordOf(t, st, r.v.keys()[2])
	if local.State != store.StateClaimed {
		t.Fatalf("the local charge's record is %s, want claimed (its completion lost)", local.State)
	}

	w := interceptor.TemporalWitness(r.c, server.GetDefaultNamespace(), interceptor.Options{})
	ask := func(rec store.Record) witness.Answer {
		t.Helper()
		ans, err := w.Ask(context.Background(), witness.Query{Record: rec, Now: time.Now()})
		if err != nil {
			t.Fatalf("Ask %s: %v", rec.Key, err)
		}
		return ans
	}
	if a := ask(done); a.Verdict != witness.Sent || a.Payloads == nil || !strings.Contains(a.Evidence, "ActivityTaskCompleted") {
		t.Fatalf("completed: %+v, want sent with the payloads and the event named", a)
	}
	var got string
	if err := client.NewValue(ask(done).Payloads).Get(&got); err != nil || got != "done:"+done.Key {
		t.Fatalf("result from history %q (%v), want %q", got, err, "done:"+done.Key)
	}
	if a := ask(failed); a.Verdict != witness.CannotTell || !strings.Contains(a.Evidence, "ActivityTaskFailed") {
		t.Fatalf("failed: %+v, want cannot tell naming the failure", a)
	}
	if a := ask(local); a.Verdict != witness.CannotTell || !strings.Contains(a.Evidence, "local activity") {
		t.Fatalf("a local activity: %+v, want cannot tell (its marker carries no key)", a)
	}
	small := interceptor.TemporalWitness(r.c, server.GetDefaultNamespace(), interceptor.Options{MaxResultSize: 8})
	if a, err := small.Ask(context.Background(), witness.Query{Record: done, Now: time.Now()}); err != nil ||
		a.Verdict != witness.Sent || !a.NoResult || a.Payloads != nil {
		t.Fatalf("a result over MaxResultSize: %+v, %v; want sent, its result not stored (as the gate)", a, err)
	}
	// The same key scheduled with other arguments (a write of the key before this
	// record, past its window) is another write: its result is not this record's.
	otherArgs := done
	otherArgs.ArgsHash = "sha256:0000000000000000"
	if a := ask(otherArgs); a.Verdict != witness.CannotTell || !strings.Contains(a.Evidence, "arguments other") {
		t.Fatalf("the key with other arguments: %+v, want cannot tell", a)
	}
	// A completion before the record was first claimed is an earlier write of the
	// key (finished, forgotten past its window), not the one whose outcome is unknown.
	later := done
	later.CreatedAt = time.Now().Add(time.Hour)
	if a := ask(later); a.Verdict != witness.CannotTell || !strings.Contains(a.Evidence, "before the record was claimed") {
		t.Fatalf("a completion before the record: %+v, want cannot tell", a)
	}
	other := done
	other.Key = "00000000-0000-5000-8000-000000000000"
	if a := ask(other); a.Verdict != witness.CannotTell {
		t.Fatalf("a key no event carries: %+v, want cannot tell", a)
	}
	gone := done
	gone.WorkflowID, gone.RunID = "no-such-workflow", "6a1c1e5e-0000-4000-8000-000000000000"
	if a := ask(gone); a.Verdict != witness.CannotTell || a.Evidence == "" {
		t.Fatalf("a history Temporal does not have: %+v, want cannot tell with the reason", a)
	}
}

// RefundReq is identified by its order and amount (Options.IdentifyingFields).
type RefundReq struct {
	Order  string `json:"order"`
	Amount int64  `json:"amount"`
	Note   string `json:"note"`
}

// ToolCall is a generic tool call (Options.ToolNames names it by Tool).
type ToolCall struct {
	Tool string         `json:"tool"`
	Args map[string]any `json:"args"`
}

type keyedTools struct{ v *vendor }

func (k *keyedTools) RefundOrder(ctx context.Context, r RefundReq) (string, error) {
	return "refunded:" + k.v.hit(ctx), nil
}

func (k *keyedTools) CallTool(ctx context.Context, c ToolCall) (string, error) {
	return "tool:" + c.Tool + ":" + k.v.hit(ctx), nil
}

// WitnessKeys makes one write of each kind of key the gate computes from more
// than the minted header: identifying fields (with an amount past float64's exact
// integers), a WithKey business key, a tool's name read from the arguments, and a
// tool's business key (scoped by that name).
func WitnessKeys(ctx workflow.Context) ([]string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second, RetryPolicy: retry})
	var out []string
	for _, f := range []workflow.Future{
		workflow.ExecuteActivity(ctx, "RefundOrder", RefundReq{Order: "o-1", Amount: 9007199254740993, Note: "late"}),
		workflow.ExecuteActivity(interceptor.WithKey(ctx, "order-4217/charge"), "ChargeCard", 1),
		workflow.ExecuteActivity(ctx, "CallTool", ToolCall{Tool: "send_email", Args: map[string]any{"to": "a@example.com"}}),
		workflow.ExecuteActivity(interceptor.WithKey(ctx, "order-4217/receipt-mail"), "CallTool",
			ToolCall{Tool: "send_receipt", Args: map[string]any{"to": "b@example.com"}}),
	} {
		var s string
		if err := f.Get(ctx, &s); err != nil {
			return out, err
		}
		out = append(out, s)
	}
	return out, nil
}

// The witness recognises every key the gate computes — identifying fields, a
// business key, a tool's name from the arguments — from the scheduled event's
// header and input, given the workers' options; without them (the CLI) it cannot
// tell a key built from identifying fields or a tool's name, and never matches a
// wrong one.
func TestTemporalWitnessMatchesKeysAsTheGateComputesThem(t *testing.T) {
	st := &lossyStore{Store: memory.New()}
	opts := interceptor.Options{Store: st,
		IdentifyingFields: map[string][]string{"RefundOrder": {"order", "amount"}},
		ToolNames:         map[string]interceptor.ToolName{"CallTool": {Prefix: "t.", Fields: []string{"tool"}}}}
	kt := &keyedTools{}
	r := newFeatureRig(t, opts, worker.Options{}, func(w worker.Worker) {
		w.RegisterWorkflow(WitnessKeys)
		w.RegisterActivity(kt)
	})
	kt.v = r.v
	out, err := r.result(r.start("witness-keys", WitnessKeys))
	if err != nil {
		t.Fatal(err)
	}
	keys := r.v.keys()
	if len(keys) != 4 {
		t.Fatalf("vendor keys %q", keys)
	}
	full := interceptor.TemporalWitness(r.c, server.GetDefaultNamespace(), opts)
	bare := interceptor.TemporalWitness(r.c, server.GetDefaultNamespace(), interceptor.Options{})
	for _, key := range keys {
		rec := recordOf(t, st, key)
		if rec.State != store.StateClaimed {
			t.Fatalf("%s: %s, want claimed (the completion lost)", rec.Activity, rec.State)
		}
		ans, err := full.Ask(context.Background(), witness.Query{Record: rec, Now: time.Now()})
		if err != nil || ans.Verdict != witness.Sent {
			t.Fatalf("%s (%s): %+v, %v; want sent", rec.Activity, key, ans, err)
		}
		var got string
		if err := client.NewValue(ans.Payloads).Get(&got); err != nil || !strings.HasSuffix(got, ":"+key) ||
			!strings.Contains(strings.Join(out, " "), got) {
			t.Fatalf("%s: result %q (%v), want the one of key %s among %q", rec.Activity, got, err, key, out)
		}
		ans, err = bare.Ask(context.Background(), witness.Query{Record: rec, Now: time.Now()})
		want := witness.Sent // a business key, and a tool's minted key, need no options
		if rec.Activity == "RefundOrder" || rec.Activity == "t.send_receipt" {
			// Built from identifying fields, or from the tool's name read from the arguments.
			want = witness.CannotTell
		}
		if err != nil || ans.Verdict != want {
			t.Fatalf("%s without the workers' options: %+v, %v; want %s", rec.Activity, ans, err, want)
		}
	}
}

// watchedStore records whether the store was closed while the reconciler was
// listing pending keys; its Pending waits until its context ends, so the
// reconciler is surely inside it when the worker stops.
type watchedStore struct {
	store.Store
	entered       chan struct{}
	once          sync.Once
	mu            sync.Mutex
	inPending     int
	closed        bool
	closedInside  bool
	pendingClosed int
}

func (s *watchedStore) Pending(ctx context.Context, now time.Time, limit int) ([]store.Record, error) {
	s.mu.Lock()
	if s.closed {
		s.pendingClosed++
	}
	s.inPending++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inPending--
		s.mu.Unlock()
	}()
	s.once.Do(func() { close(s.entered) })
	<-ctx.Done()
	return nil, ctx.Err()
}

func (s *watchedStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed, s.closedInside = true, s.inPending > 0
	return nil
}

// The plugin's reconciler stops with the worker: Stop cancels it and waits for it
// before the plugin closes the store (PluginOptions.CloseStore), so it never lists
// or settles on a closed store.
func TestReconcilerStopsWithTheWorkerBeforeTheStoreCloses(t *testing.T) {
	st := &watchedStore{Store: memory.New(), entered: make(chan struct{})}
	pl := newPlugin(t, interceptor.Options{Store: st}, interceptor.PluginOptions{ReconcileEvery: 10 * time.Millisecond, CloseStore: true})
	w := worker.New(server.GetDefaultClient(), queueName(t), worker.Options{Plugins: []worker.Plugin{pl}})
	w.RegisterWorkflow(Steps)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-st.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the reconciler never listed the pending keys")
	}
	w.Stop()
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.closed || st.closedInside || st.inPending != 0 || st.pendingClosed != 0 {
		t.Fatalf("after Stop: closed %v, closed while listing %v, listing %d, listed after close %d",
			st.closed, st.closedInside, st.inPending, st.pendingClosed)
	}
}
