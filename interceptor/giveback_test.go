package interceptor_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/internal/testutil/patient"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memory"
)

var errOutage = fmt.Errorf("%w: connection refused", store.ErrUnavailable)

// hookedStore is a memory store whose Begin can lose its reply after the claim
// committed, and whose Release can fail as if the store were down.
type hookedStore struct {
	*memory.Store
	mu       sync.Mutex
	begins   int
	releases int
	// loseBegin says, for the n-th Begin (from 1), whether its reply is lost.
	loseBegin func(n int) bool
	// failRelease says, for the n-th Release (from 1), whether the store is down.
	failRelease func(n int) bool
	// failComplete says, for the n-th Complete (from 1), whether the store is down.
	failComplete func(n int) bool
	completes    int
}

func (s *hookedStore) Complete(ctx context.Context, t store.Transition) error {
	s.mu.Lock()
	s.completes++
	n := s.completes
	s.mu.Unlock()
	if s.failComplete != nil && s.failComplete(n) {
		return errOutage
	}
	return s.Store.Complete(ctx, t)
}

func (s *hookedStore) Begin(ctx context.Context, c store.Claim) (store.Outcome, store.Record, error) {
	s.mu.Lock()
	s.begins++
	n := s.begins
	s.mu.Unlock()
	o, rec, err := s.Store.Begin(ctx, c)
	if err == nil && s.loseBegin != nil && s.loseBegin(n) {
		return "", store.Record{}, fmt.Errorf("%w: reply lost after the claim committed", store.ErrUnavailable)
	}
	return o, rec, err
}

func (s *hookedStore) Release(ctx context.Context, t store.Transition) error {
	s.mu.Lock()
	s.releases++
	n := s.releases
	s.mu.Unlock()
	if s.failRelease != nil && s.failRelease(n) {
		return errOutage
	}
	return s.Store.Release(ctx, t)
}

func (s *hookedStore) releaseCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.releases
}

// clock is a movable Options.Now.
type clock struct{ offset atomic.Int64 }

func (c *clock) now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *clock) advance(d time.Duration) { c.offset.Add(int64(d)) }

// waitState waits until key's record is in state want.
func waitState(t *testing.T, st store.Store, key string, want store.State) store.Record {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		rec, err := st.Get(context.Background(), key)
		if err == nil && rec.State == want {
			return rec
		}
		if time.Now().After(deadline) {
			t.Fatalf("record of %s: state %q owner %q (err %v), want state %s", key, rec.State, rec.Owner, err, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A Begin whose claim committed but whose reply was lost leaves a claim the gate
// knows never ran: the gate gives it back, so the write is not refused for good once
// the lease passes.
func TestLostClaimReplyGivesTheClaimBack(t *testing.T) {
	t.Run("fresh claim is released", func(t *testing.T) {
		h := newHarness(t)
		hs := &hookedStore{Store: h.store, loseBegin: func(n int) bool { return n == 1 }}
		var clk clock
		h.opts.Store, h.opts.Now = hs, clk.now
		key := interceptor.BusinessKey(testNamespace, "ChargeCard", bizKey)

		_, err := h.run("wf-lost", call{Activity: "ChargeCard", Key: bizKey, Charge: charge, MaxAttempts: 1})
		if app := appErr(t, err); app.Type() != interceptor.ErrTypeStoreUnavailable || h.v.count() != 0 {
			t.Fatalf("lost reply: %s, vendor %d", app.Type(), h.v.count())
		}
		waitState(t, h.store, key, store.StateReleased)
		// Past the lost claim's lease the write runs (the old gate refused it for good).
		clk.advance(2 * time.Hour)
		out, err := h.run("wf-lost-2", call{Activity: "ChargeCard", Key: bizKey, Charge: charge, MaxAttempts: 1})
		if err != nil || h.v.count() != 1 || len(out) != 1 {
			t.Fatalf("after the lease: vendor %d, out %q, err %v", h.v.count(), out, err)
		}
	})
	t.Run("possible takeover is abandoned, not released", func(t *testing.T) {
		h := newHarness(t)
		// The first Begin finds the earlier unknown outcome; the second takes over
		// inside the vendor window, and its reply is lost.
		hs := &hookedStore{Store: h.store, loseBegin: func(n int) bool { return n == 2 }}
		h.opts.Store = hs
		h.opts.VendorWindows = map[string]time.Duration{"ChargeCard": 24 * time.Hour}
		key := interceptor.BusinessKey(testNamespace, "ChargeCard", bizKey)
		args, hash := hashOf(t, charge)
		now := time.Now()
		if o, _, err := h.store.Begin(context.Background(), store.Claim{Key: key, Activity: "ChargeCard",
			Effect: "destructive", ArgsHash: hash, Args: args, Owner: "earlier", Lease: now.Add(-time.Minute),
			Window: 24 * time.Hour, WorkflowID: "earlier-wf", Attempt: 1, Now: now.Add(-time.Hour)}); err != nil || o != store.OutcomeClaimed {
			t.Fatalf("seed: %v %v", o, err)
		}
		// It left through a keyed transport: the evidence a re-send rests on.
		if err := h.store.RecordSent(context.Background(), key, "earlier", store.Sent{Via: "test:vendor", Host: "vendor.test",
			Window: 24 * time.Hour}); err != nil {
			t.Fatal(err)
		}
		if err := h.store.Abandon(context.Background(), store.Transition{Key: key, Owner: "earlier", Now: now.Add(-time.Hour)}); err != nil {
			t.Fatal(err)
		}
		_, err := h.run("wf-lost-takeover", call{Activity: "ChargeCard", Key: bizKey, Charge: charge, MaxAttempts: 1})
		if app := appErr(t, err); app.Type() != interceptor.ErrTypeStoreUnavailable || h.v.count() != 0 {
			t.Fatalf("lost takeover reply: %s, vendor %d", app.Type(), h.v.count())
		}
		rec := waitState(t, h.store, key, store.StateUnknown)
		if rec.Owner == "earlier" || hs.releaseCount() != 0 {
			t.Fatalf("the taken-over claim was not abandoned by its new owner: %+v, releases %d", rec, hs.releaseCount())
		}
	})
}

// A definite failure's Release that meets a store briefly down is retried until the
// store answers; the key is then free again.
func TestReleaseRetriedWhileTheStoreIsBrieflyDown(t *testing.T) {
	h := newHarness(t)
	hs := &hookedStore{Store: h.store, failRelease: func(n int) bool { return n <= 3 }}
	h.opts.Store = hs
	var failed atomic.Bool
	h.tools.fail = func(ctx context.Context) (error, bool) {
		if !failed.Swap(true) {
			return interceptor.NotCommitted(fmt.Errorf("card network rejected the request")), false
		}
		return nil, false
	}
	key := interceptor.BusinessKey(testNamespace, "ChargeCard", bizKey)
	if _, err := h.run("wf-rel", call{Activity: "ChargeCard", Key: bizKey, Charge: charge, MaxAttempts: 1}); err == nil {
		t.Fatal("the definite failure did not reach the workflow")
	}
	waitState(t, h.store, key, store.StateReleased)
	if n := hs.releaseCount(); n != 4 {
		t.Fatalf("Release tried %d times, want 3 failures then success", n)
	}
	if d := decisionsOf(h.receipts(store.ReceiptFilter{Key: key})); d != "claimed released" {
		t.Fatalf("receipts = %s", d)
	}
	// The next call of the key runs at once (the old gate left it claimed: refused).
	if _, err := h.run("wf-rel-2", call{Activity: "ChargeCard", Key: bizKey, Charge: charge, MaxAttempts: 1}); err != nil || h.v.count() != 1 {
		t.Fatalf("after the release: vendor %d, err %v", h.v.count(), err)
	}
}

// The retried Release does not hold the activity: it returns while the store is
// still down, and the Release lands once the store is back.
func TestReleaseGoesOnInTheBackground(t *testing.T) {
	h := newHarness(t)
	var healed atomic.Bool
	hs := &hookedStore{Store: h.store, failRelease: func(int) bool { return !healed.Load() }}
	h.opts.Store = hs
	h.tools.fail = func(ctx context.Context) (error, bool) {
		return interceptor.NotCommitted(fmt.Errorf("card network rejected the request")), false
	}
	key := interceptor.BusinessKey(testNamespace, "ChargeCard", bizKey)
	// A safety net against a gate that retries in the activity: heal after a while.
	heal := time.AfterFunc(20*time.Second, func() { healed.Store(true) })
	defer heal.Stop()
	if _, err := h.run("wf-bg", call{Activity: "ChargeCard", Key: bizKey, Charge: charge, MaxAttempts: 1}); err == nil {
		t.Fatal("the definite failure did not reach the workflow")
	}
	if healed.Load() {
		t.Fatal("the activity waited for the store instead of returning")
	}
	if rec, err := h.store.Get(context.Background(), key); err != nil || rec.State != store.StateClaimed {
		t.Fatalf("record while the store is down = %+v %v", rec, err)
	}
	// The background retries go on while the store is down...
	deadline := time.Now().Add(10 * time.Second)
	for hs.releaseCount() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("Release tried %d times in 10s, want retries", hs.releaseCount())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// ...and land once it is back.
	healed.Store(true)
	waitState(t, h.store, key, store.StateReleased)
}

// Issue 18, item 15: a definite failure's give-back meets a store that stays down
// past the attempt's lease. The give-back goes on (owner-checked) and lands when the
// store is back: the key is free, not an unknown outcome refused for good.
func TestGiveBackOutlastsTheLease(t *testing.T) {
	h := newHarness(t)
	var healed atomic.Bool
	hs := &hookedStore{Store: h.store, failRelease: func(int) bool { return !healed.Load() }}
	var clk clock
	h.opts.Store, h.opts.Now = hs, clk.now
	h.tools.fail = func(ctx context.Context) (error, bool) {
		return interceptor.NotCommitted(fmt.Errorf("card network rejected the request")), false
	}
	key := interceptor.BusinessKey(testNamespace, "ChargeCard", bizKey)
	if _, err := h.run("wf-long-outage", call{Activity: "ChargeCard", Key: bizKey, Charge: charge, MaxAttempts: 1}); err == nil {
		t.Fatal("the definite failure did not reach the workflow")
	}
	rec, err := h.store.Get(context.Background(), key)
	if err != nil || rec.State != store.StateClaimed {
		t.Fatalf("record while the store is down = %+v %v", rec, err)
	}
	// The outage outlasts the lease (and its margin) by the gate's clock.
	clk.advance(rec.Lease.Sub(clk.now()) + store.LeaseMargin + time.Hour)
	// Give-backs tried after the lease passed: the old gate stopped at the lease.
	n := hs.releaseCount()
	deadline := time.Now().Add(30 * time.Second)
	for hs.releaseCount() < n+2 {
		if time.Now().After(deadline) {
			t.Fatalf("Release tried %d times in 30s after the lease passed, want it to go on", hs.releaseCount()-n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	healed.Store(true)
	waitState(t, h.store, key, store.StateReleased)
	if _, err := h.run("wf-long-outage-2", call{Activity: "ChargeCard", Key: bizKey, Charge: charge, MaxAttempts: 1}); err == nil {
		t.Fatal("the second call did not fail as the tool says")
	}
	if d := decisionsOf(h.receipts(store.ReceiptFilter{Key: key})); !strings.HasPrefix(d, "claimed released claimed") {
		t.Fatalf("receipts = %s, want the key given back and claimed again", d)
	}
}

// The family of item 15: a write whose body finished while the store did not answer
// Complete. The activity fails closed (no receipt, no success), and the result is
// stored in the background once the store is back, owner-checked: Temporal's retry
// — here a second run with the same key — gets the stored result, where it met a
// claim whose outcome nobody knew (a destructive write refused for a person).
func TestResultStoredWhenTheStoreComesBack(t *testing.T) {
	h := newHarness(t)
	var healed atomic.Bool
	hs := &hookedStore{Store: h.store, failComplete: func(int) bool { return !healed.Load() }}
	h.opts.Store = hs
	key := interceptor.BusinessKey(testNamespace, "ChargeCard", bizKey)
	_, err := h.run("wf-complete-outage", call{Activity: "ChargeCard", Key: bizKey, Charge: charge, MaxAttempts: 1})
	if app := appErr(t, err); app.Type() != interceptor.ErrTypeStoreUnavailable || h.v.count() != 1 {
		t.Fatalf("complete during the outage: %s, vendor %d; want %s after one charge", app.Type(), h.v.count(), interceptor.ErrTypeStoreUnavailable)
	}
	healed.Store(true)
	waitState(t, h.store, key, store.StateCompleted)
	out, err := h.run("wf-complete-outage-2", call{Activity: "ChargeCard", Key: bizKey, Charge: charge, MaxAttempts: 1})
	if err != nil || len(out) != 1 || h.v.count() != 1 {
		t.Fatalf("after the store came back: out %q, err %v, vendor %d; want the stored result and one charge", out, err, h.v.count())
	}
}

// Item 15's race: the store comes back past the lease, and Temporal's retry reaches
// the gate of the same worker before the background give-back's next try (its
// backoff grows to 5 s). The retry must not be refused for good as an unknown
// outcome: the claim's owner is a give-back of this very gate, which knows nothing
// was sent — the gate settles it first. Here Release stays down until just before
// the retry, standing for the give-back that sleeps through the moment the store
// came back.
func TestRetryBeforeTheGiveBackLandsIsNotRefused(t *testing.T) {
	h := newHarness(t)
	var releaseUp atomic.Bool
	hs := &hookedStore{Store: h.store, failRelease: func(int) bool { return !releaseUp.Load() }}
	var clk clock
	h.opts.Store, h.opts.Now = hs, clk.now
	var runs atomic.Int32
	h.tools.fail = func(ctx context.Context) (error, bool) {
		if runs.Add(1) == 1 {
			return interceptor.NotCommitted(fmt.Errorf("connection refused before sending")), false
		}
		return nil, false
	}
	gate, err := interceptor.New(h.opts)
	if err != nil {
		t.Fatal(err)
	}
	run := sameGate(t, h, gate)
	key := interceptor.BusinessKey(testNamespace, "ChargeCard", bizKey)
	if _, err := run("wf-race-1"); err == nil {
		t.Fatal("the definite failure did not reach the workflow")
	}
	rec, err := h.store.Get(context.Background(), key)
	if err != nil || rec.State != store.StateClaimed {
		t.Fatalf("record while the store is down = %+v %v", rec, err)
	}
	clk.advance(rec.Lease.Sub(clk.now()) + store.LeaseMargin + time.Hour)
	releaseUp.Store(true) // the store answers again; the give-back sleeps in its backoff
	out, err := run("wf-race-2")
	if err != nil || len(out) != 1 || h.v.count() != 1 {
		t.Fatalf("the retry after the store came back: out %q, err %v, vendor %d; want it run once (nothing was sent before)",
			out, err, h.v.count())
	}
	if d := decisionsOf(h.receipts(store.ReceiptFilter{Key: key})); !strings.HasPrefix(d, "claimed released claimed ran") {
		t.Fatalf("receipts = %s, want the key given back, then claimed and run", d)
	}
}

// The same race for a result whose Complete met the outage (completeLater): the
// retry on the same worker gets the stored result, not a refusal for a person.
func TestRetryBeforeTheLateCompleteLandsGetsTheResult(t *testing.T) {
	h := newHarness(t)
	var up atomic.Bool
	hs := &hookedStore{Store: h.store, failComplete: func(int) bool { return !up.Load() }}
	var clk clock
	h.opts.Store, h.opts.Now = hs, clk.now
	gate, err := interceptor.New(h.opts)
	if err != nil {
		t.Fatal(err)
	}
	run := sameGate(t, h, gate)
	key := interceptor.BusinessKey(testNamespace, "ChargeCard", bizKey)
	if _, err := run("wf-late-1"); err == nil || h.v.count() != 1 {
		t.Fatalf("complete during the outage: %v, vendor %d; want a failure after one charge", err, h.v.count())
	}
	rec, err := h.store.Get(context.Background(), key)
	if err != nil || rec.State != store.StateClaimed {
		t.Fatalf("record while the store is down = %+v %v", rec, err)
	}
	clk.advance(rec.Lease.Sub(clk.now()) + store.LeaseMargin + time.Hour)
	up.Store(true)
	out, err := run("wf-late-2")
	if err != nil || len(out) != 1 || h.v.count() != 1 {
		t.Fatalf("the retry after the store came back: out %q, err %v, vendor %d; want the stored result, one charge", out, err, h.v.count())
	}
}

// sameGate runs one ChargeCard call per workflow, every run on the one gate (one
// worker process), and returns the results and the workflow error.
func sameGate(t *testing.T, h *harness, gate sdkinterceptor.WorkerInterceptor) func(id string) ([]string, error) {
	return func(id string) ([]string, error) {
		t.Helper()
		env := patient.Env(h.suite.NewTestWorkflowEnvironment())
		env.SetWorkerOptions(patient.WorkerOptions(gate))
		env.RegisterWorkflowWithOptions(callsWorkflow, workflow.RegisterOptions{Name: "calls"})
		env.RegisterActivity(h.tools)
		env.SetStartWorkflowOptions(startOptions(id))
		env.ExecuteWorkflow("calls", []call{{Activity: "ChargeCard", Key: bizKey, Charge: charge, MaxAttempts: 1}})
		if !env.IsWorkflowCompleted() {
			t.Fatalf("workflow %s did not complete", id)
		}
		var out []string
		err := env.GetWorkflowError()
		if err == nil {
			err = env.GetWorkflowResult(&out)
		}
		return out, err
	}
}
