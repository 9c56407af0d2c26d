package interceptor_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/store"
)

// hooks lets a workflow step change the world between calls: ListHook is a read,
// so it runs even while the store is down.
type hooks struct{ fn map[string]func() }

func (h *hooks) ListHook(_ context.Context, name string) (string, error) {
	h.fn[name]()
	return name, nil
}

// tryCalls runs every call (one attempt each unless MaxAttempts says otherwise) and
// reports "ok" or the gate's error type per call; it does not stop at an error.
// A call with Activity "hook:NAME" runs ListHook(NAME).
func tryCalls(ctx workflow.Context, calls []call) ([]string, error) {
	var out []string
	for _, c := range calls {
		cctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute,
			RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 1, MaximumAttempts: max(c.MaxAttempts, 1)}})
		var f workflow.Future
		if name, ok := strings.CutPrefix(c.Activity, "hook:"); ok {
			f = workflow.ExecuteActivity(cctx, "ListHook", name)
		} else {
			f = workflow.ExecuteActivity(cctx, c.Activity, c.Charge)
		}
		var s string
		if err := f.Get(cctx, &s); err != nil {
			var app *temporal.ApplicationError
			if errors.As(err, &app) && app.Type() == interceptor.ErrTypeWriteGated {
				var w interceptor.WithheldCall
				_ = app.Details(&w)
				out = append(out, fmt.Sprintf("%s retryable=%v delay=%s call=%s msg=%s", app.Type(), !app.NonRetryable(),
					app.NextRetryDelay(), w, app.Message()))
				continue
			}
			out = append(out, interceptor.ErrorType(err))
			continue
		}
		out = append(out, "ok")
	}
	return out, nil
}

func (h *harness) tryEnv(hk *hooks) *testsuite.TestWorkflowEnvironment {
	env := h.env("wf-pause")
	env.RegisterWorkflowWithOptions(tryCalls, workflow.RegisterOptions{Name: "try"})
	env.RegisterActivityWithOptions(hk.ListHook, activity.RegisterOptions{Name: "ListHook"})
	return env
}

func pauseOf(t *testing.T, st store.Store, p store.Pause) {
	t.Helper()
	if p.Time.IsZero() {
		p.Time = time.Date(2026, 11, 29, 13, 0, 0, 0, time.UTC)
	}
	if err := st.Pause(context.Background(), p); err != nil {
		t.Fatal(err)
	}
}

// A paused activity is refused (retryable WriteGated, with who, when, why and the
// call); reads and other writes run; a store that cannot be read keeps the pause;
// a resume lets the write through — all in one worker, without a restart.
func TestPauseWithholdsWritesNotReads(t *testing.T) {
	h := newHarness(t)
	h.opts.PauseRefresh = time.Nanosecond // re-read before every write
	ctx := context.Background()
	pauseOf(t, h.store, store.Pause{Activity: "ChargeCard", Actor: "alice", Reason: "card network incident INC-7"})
	hk := &hooks{fn: map[string]func(){
		"down": func() { h.store.FailWith(fmt.Errorf("%w: connection refused", store.ErrUnavailable)) },
		"heal-and-resume": func() {
			h.store.FailWith(nil)
			if err := h.store.Resume(ctx, store.Pause{Activity: "ChargeCard", Actor: "bob", Reason: "INC-7 closed"}); err != nil {
				panic(err)
			}
		},
	}}
	env := h.tryEnv(hk)
	env.ExecuteWorkflow("try", []call{
		{Activity: "ChargeCard", Charge: charge},
		{Activity: "GetBalance", Charge: charge},
		{Activity: "UpsertContact", Charge: charge},
		{Activity: "hook:down"},
		{Activity: "ChargeCard", Charge: charge},
		{Activity: "UpsertContact", Charge: charge},
		{Activity: "hook:heal-and-resume"},
		{Activity: "ChargeCard", Charge: charge},
	})
	var out []string
	if err := env.GetWorkflowResult(&out); err != nil {
		t.Fatal(err)
	}
	gated := out[0]
	for _, want := range []string{"WriteGated retryable=true delay=1s", `call=ChargeCard([{"amount":4200`,
		"paused by alice", "card network incident INC-7", "idemgate resume --activity ChargeCard"} {
		if !strings.Contains(gated, want) {
			t.Fatalf("paused ChargeCard: %s\nwant it to contain %q", gated, want)
		}
	}
	if out[1] != "ok" || out[2] != "ok" {
		t.Fatalf("read and unpaused write while ChargeCard is paused: %q, %q; want both to run", out[1], out[2])
	}
	if !strings.HasPrefix(out[4], "WriteGated") {
		t.Fatalf("paused ChargeCard while the store is down: %s; want the last known pause kept (WriteGated)", out[4])
	}
	if out[5] != interceptor.ErrTypeStoreUnavailable {
		t.Fatalf("unpaused write while the store is down: %s; want it to fail closed", out[5])
	}
	if out[7] != "ok" {
		t.Fatalf("ChargeCard after resume: %s", out[7])
	}
	// Vendor: GetBalance, UpsertContact, ChargeCard once after the resume.
	if h.v.count() != 3 {
		t.Fatalf("vendor count %d, want 3", h.v.count())
	}
	rs := h.receipts(store.ReceiptFilter{Activity: "ChargeCard", Decision: store.DecisionGated})
	if len(rs) != 1 || !strings.Contains(string(rs[0].Call), `"amount":4200`) || !strings.Contains(rs[0].Error, "paused by alice") {
		// The second refusal's receipt was not stored: the store was down.
		t.Fatalf("gated receipts = %+v", rs)
	}
	if d := decisionsOf(h.receipts(store.ReceiptFilter{Activity: "ChargeCard"})); d != "paused gated resumed claimed ran" {
		t.Fatalf("ChargeCard receipts = %s", d)
	}
}

// A paused effect class withholds every write of that class; a workflow waiting on
// its retries continues by itself once the pause is lifted.
func TestPauseEffectAndResumeLetsRetriesThrough(t *testing.T) {
	h := newHarness(t)
	h.opts.PauseRefresh = time.Nanosecond
	pauseOf(t, h.store, store.Pause{Effect: "destructive", Actor: "alice", Reason: "freeze"})
	env := h.env("wf-pause-effect")
	var resumedAt time.Time
	env.RegisterDelayedCallback(func() {
		resumedAt = env.Now()
		if err := h.store.Resume(context.Background(), store.Pause{Effect: "destructive", Actor: "alice", Reason: "thaw"}); err != nil {
			t.Error(err)
		}
	}, 30*time.Second)
	env.ExecuteWorkflow("calls", []call{
		{Activity: "UpsertContact", Charge: charge, MaxAttempts: 1},
		{Activity: "ChargeCard", Charge: charge, MaxAttempts: 100}, // retried until it runs
	})
	var out []string
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if err := env.GetWorkflowResult(&out); err != nil || len(out) != 2 || !strings.HasPrefix(out[1], "charge done") {
		t.Fatalf("result %q, %v", out, err)
	}
	if h.v.count() != 2 || resumedAt.IsZero() {
		t.Fatalf("vendor count %d (want 2), resumed at %v", h.v.count(), resumedAt)
	}
	gated := h.receipts(store.ReceiptFilter{Activity: "ChargeCard", Decision: store.DecisionGated})
	if len(gated) < 2 {
		t.Fatalf("%d gated receipts before the resume, want the retries to have met the pause", len(gated))
	}
	if d := decisionsOf(h.receipts(store.ReceiptFilter{Activity: "UpsertContact"})); d != "claimed ran" {
		t.Fatalf("UpsertContact receipts = %s: an idempotent write is not paused by a destructive pause", d)
	}
}

// HoldUnknown > 0: a destructive write whose first attempt ended unknown is refused
// retryably; once a person resolves the key the workflow continues by itself.
func TestHoldUnknownWaitsForResolve(t *testing.T) {
	for _, tc := range []struct {
		name       string
		to         store.State
		wantVendor int
		wantResult string
	}{
		{"sent", store.StateCompleted, 1, "charged by hand"},
		{"not sent", store.StateReleased, 2, "charge done"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.opts.HoldUnknown = time.Minute
			h.tools.fail = func(ctx context.Context) (error, bool) {
				if ctxAttempt(ctx) == 1 {
					return errors.New("connection reset after the request was written"), true
				}
				return nil, false
			}
			var env *testsuite.TestWorkflowEnvironment
			h.opts.Now = func() time.Time { return env.Now() }
			env = h.env("wf-hold")
			env.RegisterDelayedCallback(func() {
				ctx := context.Background()
				key := h.v.seen()[0]
				rec, err := h.store.Get(ctx, key)
				if err != nil {
					t.Error(err)
					return
				}
				tr := store.Transition{Key: key, Owner: rec.Owner, Now: env.Now(), Window: interceptor.DefaultWindow,
					Receipt: store.Receipt{Key: key, Activity: rec.Activity, Effect: rec.Effect, Decision: store.DecisionResolved,
						ArgsHash: rec.ArgsHash, Actor: "alice", Reason: "checked the dashboard"}}
				if tc.to == store.StateCompleted {
					if tr.Result, tr.Receipt.ResultRef, err = interceptor.EncodeResult(nil, "charged by hand"); err != nil {
						t.Error(err)
					}
				}
				if err := h.store.Resolve(ctx, tr, tc.to); err != nil {
					t.Error(err)
				}
			}, 10*time.Minute)
			env.ExecuteWorkflow("calls", []call{{Activity: "ChargeCard", Charge: charge, MaxAttempts: 100}})
			if err := env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			var out []string
			if err := env.GetWorkflowResult(&out); err != nil || !strings.HasPrefix(out[0], tc.wantResult) {
				t.Fatalf("result %q (%v), want %q", out, err, tc.wantResult)
			}
			if h.v.count() != tc.wantVendor {
				t.Fatalf("vendor count %d, want %d", h.v.count(), tc.wantVendor)
			}
			refused := h.receipts(store.ReceiptFilter{Decision: store.DecisionRefusedInFlight})
			if n := len(refused); n < 5 || n > 12 {
				t.Fatalf("%d refusals in 10 minutes with HoldUnknown 1m, want about 10", n)
			}
			// The first refusal comes while attempt 1's lease (its 1m deadline plus twice the
			// skew) still runs: retried no sooner than that lease; later ones every HoldUnknown.
			if d := heldDelay(t, refused[0].Error); d < time.Minute+4*time.Second || d > time.Minute+6*time.Second ||
				!strings.Contains(refused[len(refused)-1].Error, "Held: Temporal retries in 1m0s") {
				t.Fatalf("refusal messages: first %s\nlast %s", refused[0].Error, refused[len(refused)-1].Error)
			}
		})
	}
}

// A hold outlives the gate's window: a destructive write whose outcome nobody knows
// is never forgotten (store.Expired), so the refusal stays held — retryable, every
// HoldUnknown — until a person resolves the key or the retry policy ends, and the
// write is never sent again, however long that takes.
func TestHoldUnknownOutlivesTheWindow(t *testing.T) {
	h := newHarness(t)
	h.opts.HoldUnknown = time.Minute
	h.opts.Window = 5 * time.Minute
	h.tools.fail = func(ctx context.Context) (error, bool) {
		if ctxAttempt(ctx) == 1 {
			return errors.New("timeout"), true
		}
		return nil, false
	}
	var env *testsuite.TestWorkflowEnvironment
	h.opts.Now = func() time.Time { return env.Now() }
	env = h.env("wf-hold-window")
	env.ExecuteWorkflow("calls", []call{{Activity: "ChargeCard", Charge: charge, MaxAttempts: 30}})
	app := appErr(t, env.GetWorkflowError())
	if app.Type() != interceptor.ErrTypeInFlight || app.NonRetryable() || !strings.Contains(app.Error(), "Held: Temporal retries in 1m0s") {
		t.Fatalf("after 30 attempts: %s non-retryable=%v: %s; want the held (retryable) refusal to the end", app.Type(), app.NonRetryable(), app.Error())
	}
	if h.v.count() != 1 {
		t.Fatalf("vendor count %d, want 1: the unknown write was sent again", h.v.count())
	}
	refused := h.receipts(store.ReceiptFilter{Decision: store.DecisionRefusedInFlight})
	if len(refused) != 29 {
		t.Fatalf("%d refusals, want one per attempt after the first (29)", len(refused))
	}
	rec, err := h.store.Get(context.Background(), refused[0].Key)
	if err != nil {
		t.Fatal(err)
	}
	last := refused[len(refused)-1].Time
	if !last.After(rec.ExpiresAt) || rec.State != store.StateUnknown {
		t.Fatalf("last refusal at %s, record %s expiring %s: want the hold to run past the record's window, the record kept",
			last, rec.State, rec.ExpiresAt)
	}
}

func TestEncodeResultIsWhatTheGateStores(t *testing.T) {
	h := newHarness(t)
	out, err := h.run("wf-enc", call{Activity: "ChargeCard", Charge: charge, MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := h.store.Get(context.Background(), h.v.seen()[0])
	if err != nil {
		t.Fatal(err)
	}
	data, ref, err := interceptor.EncodeResult(nil, out[0])
	if err != nil || string(data) != string(rec.Result) || !strings.HasPrefix(ref, "sha256:") {
		t.Fatalf("EncodeResult = %x %q %v; the gate stored %x", data, ref, err, rec.Result)
	}
	ran := h.receipts(store.ReceiptFilter{Decision: store.DecisionRan})
	if len(ran) != 1 || ran[0].ResultRef != ref {
		t.Fatalf("ran receipt ref %+v, want %s", ran, ref)
	}
}

// heldDelay reads the retry delay a held refusal's message names.
func heldDelay(t *testing.T, msg string) time.Duration {
	t.Helper()
	_, rest, ok := strings.Cut(msg, "Held: Temporal retries in ")
	if !ok {
		t.Fatalf("no held delay in %s", msg)
	}
	d, err := time.ParseDuration(strings.Fields(rest)[0])
	if err != nil {
		t.Fatalf("held delay in %s: %v", msg, err)
	}
	return d
}
