package interceptor_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/store"
)

// expenses completes asynchronously, as Temporal's expense sample does: the body
// registers the expense with the vendor, hands its token on and returns ErrResultPending.
type expenses struct {
	v      *vendor
	handed []interceptor.HandOff
	// complete, when set, is called with the hand-off after the body returned.
	complete func(interceptor.HandOff)
}

func (e *expenses) PayExpense(ctx context.Context, c Charge) (string, error) {
	e.v.hit(ctx)
	h, err := interceptor.AsyncToken(ctx)
	if err != nil {
		return "", err
	}
	e.handed = append(e.handed, h)
	if e.complete != nil {
		e.complete(h)
	}
	return "", activity.ErrResultPending
}

// envCompleter completes activities of a test environment.
type envCompleter struct {
	env *testsuite.TestWorkflowEnvironment
}

func (c envCompleter) CompleteActivity(_ context.Context, token []byte, result any, err error) error {
	return c.env.CompleteActivity(token, result, err)
}

// countingCompleter records the completions it was asked for.
type countingCompleter struct{ calls int }

func (c *countingCompleter) CompleteActivity(context.Context, []byte, any, error) error {
	c.calls++
	return nil
}

// failingStore fails Complete, as a store that is down does.
type failingStore struct{ store.Store }

func (failingStore) Complete(context.Context, store.Transition) error { return store.ErrUnavailable }

// An activity completed later through CompleteAsync: the gate records the hand-off,
// the completer stores the result under the key, and a repeat of the write (a new
// execution with the same business key, as a reset re-running it would be) returns
// the stored result without running: one vendor call, nothing pending.
func TestCompleteAsync(t *testing.T) {
	h := newHarness(t)
	ex := &expenses{v: h.v}
	run := func() (string, error) {
		env := h.env("wf-expense")
		env.RegisterActivity(ex)
		ex.complete = func(hand interceptor.HandOff) {
			// Later, after the body returned: the expense is approved.
			env.RegisterDelayedCallback(func() {
				if err := interceptor.CompleteAsync(context.Background(), envCompleter{env}, h.opts, hand, "approved", nil); err != nil {
					t.Errorf("CompleteAsync: %v", err)
				}
			}, time.Minute)
		}
		env.ExecuteWorkflow("calls", []call{{Activity: "PayExpense", Key: bizKey, Charge: charge, MaxAttempts: 1}})
		var out []string
		if err := env.GetWorkflowError(); err != nil {
			return "", err
		}
		if err := env.GetWorkflowResult(&out); err != nil || len(out) != 1 {
			t.Fatalf("result %q: %v", out, err)
		}
		return out[0], nil
	}
	first, err := run()
	if err != nil || first != "approved" {
		t.Fatalf("first run: %q, %v", first, err)
	}
	key := ex.handed[0].Key
	if key == "" || ex.handed[0].Owner == "" || len(ex.handed[0].TaskToken) == 0 {
		t.Fatalf("hand-off lacks the key, owner or task token: %+v", ex.handed[0])
	}
	var decisions []store.Decision
	for _, r := range h.receipts(store.ReceiptFilter{Key: key}) {
		decisions = append(decisions, r.Decision)
	}
	if len(decisions) != 3 || decisions[0] != store.DecisionClaimed || decisions[1] != store.DecisionHandedOff ||
		decisions[2] != store.DecisionRan {
		t.Fatalf("receipts %q, want claimed, handed-off, ran", decisions)
	}
	if p, err := h.store.Pending(context.Background(), time.Now().Add(time.Hour), 0); err != nil || len(p) != 0 {
		t.Fatalf("pending after async completion: %+v, %v", p, err)
	}
	again, err := run()
	if err != nil || again != first || h.v.count() != 1 || len(ex.handed) != 1 {
		t.Fatalf("repeat: %q, %v; vendor %d, handed off %d times", again, err, h.v.count(), len(ex.handed))
	}

	// Calling CompleteAsync again for a stored outcome completes without storing twice.
	c := &countingCompleter{}
	if err := interceptor.CompleteAsync(context.Background(), c, h.opts, ex.handed[0], "approved", nil); err != nil || c.calls != 1 {
		t.Fatalf("second CompleteAsync: %v, %d completions", err, c.calls)
	}
	// Another owner's hand-off is refused: nothing stored, nothing completed.
	other := ex.handed[0]
	other.Owner = "someone-else"
	if err := interceptor.CompleteAsync(context.Background(), c, h.opts, other, "forged", nil); !errors.Is(err, store.ErrNotOwner) || c.calls != 1 {
		t.Fatalf("CompleteAsync by another owner: %v, %d completions", err, c.calls)
	}
}

// The outcome is stored before the activity completes: when the store cannot take
// it, nothing is completed (the completer calls again).
func TestCompleteAsyncStoresBeforeCompleting(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	now := time.Now()
	args, hash := hashOf(t, charge)
	cl := store.Claim{Key: "k-async", Activity: "PayExpense", Effect: "destructive", ArgsHash: hash, Args: args,
		Owner: "owner-1", Lease: now.Add(time.Hour), Window: time.Hour, Now: now}
	if _, _, err := h.store.Begin(ctx, cl); err != nil {
		t.Fatal(err)
	}
	hand := interceptor.HandOff{TaskToken: []byte("token"), Key: "k-async", Owner: "owner-1", Activity: "PayExpense"}
	c := &countingCompleter{}
	down := h.opts
	down.Store = failingStore{h.store}
	if err := interceptor.CompleteAsync(ctx, c, down, hand, "approved", nil); !errors.Is(err, store.ErrUnavailable) || c.calls != 0 {
		t.Fatalf("store down: %v, %d completions; want the store error and no completion", err, c.calls)
	}
	// A definite failure (NotCommitted) releases the key; then the activity completes.
	if err := interceptor.CompleteAsync(ctx, c, h.opts, hand, nil, interceptor.NotCommitted(errors.New("declined"))); err != nil || c.calls != 1 {
		t.Fatalf("NotCommitted: %v, %d completions", err, c.calls)
	}
	if r, err := h.store.Get(ctx, "k-async"); err != nil || r.State != store.StateReleased {
		t.Fatalf("record after NotCommitted: %+v, %v", r, err)
	}
}

// CompleteAsync called twice for one hand-off — the first stored its outcome but
// its completion failed — must not complete the activity with another result than
// the key stores: a reset or re-run would return the first. The same result again
// is fine; another result, or another kind of outcome, is refused and completes nothing.
func TestCompleteAsyncTwiceWithAnotherOutcome(t *testing.T) {
	for _, tc := range []struct {
		name           string
		first, second  any
		firstErr       error
		secondErr      error
		maxResult      int
		wantSecondFail bool
	}{
		{name: "another result", first: "approved", second: "rejected", wantSecondFail: true},
		{name: "the same result", first: "approved", second: "approved"},
		{name: "a result, then an error", first: "approved", secondErr: errors.New("timed out"), wantSecondFail: true},
		{name: "an error, then a result", firstErr: errors.New("timed out"), second: "approved", wantSecondFail: true},
		{name: "not committed twice", firstErr: interceptor.NotCommitted(errors.New("declined")),
			secondErr: interceptor.NotCommitted(errors.New("declined"))},
		// An unknown outcome stored first (the write may have happened) is not the
		// "nothing was performed" of NotCommitted, although both leave a record that may
		// have sent: the workflow must not be told the write did not happen.
		{name: "an unknown error, then not committed", firstErr: errors.New("timed out"),
			secondErr: interceptor.NotCommitted(errors.New("declined")), wantSecondFail: true},
		{name: "an unknown error twice", firstErr: errors.New("timed out"), secondErr: errors.New("timed out")},
		{name: "another result over the size limit", first: strings.Repeat("a", 64), second: strings.Repeat("b", 64),
			maxResult: 16, wantSecondFail: true},
		{name: "the same result over the size limit", first: strings.Repeat("a", 64), second: strings.Repeat("a", 64), maxResult: 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.opts.MaxResultSize = tc.maxResult
			ctx := context.Background()
			now := time.Now()
			args, hash := hashOf(t, charge)
			cl := store.Claim{Key: "k-async-twice", Activity: "PayExpense", Effect: "destructive", ArgsHash: hash, Args: args,
				Owner: "owner-1", Lease: now.Add(time.Hour), Window: time.Hour, Now: now, WorkflowID: "wf", RunID: "run", Attempt: 1}
			if _, _, err := h.store.Begin(ctx, cl); err != nil {
				t.Fatal(err)
			}
			hand := interceptor.HandOff{TaskToken: []byte("token"), Key: "k-async-twice", Owner: "owner-1",
				Activity: "PayExpense", Effect: "destructive", WorkflowID: "wf", RunID: "run", Attempt: 1}
			// The first call stores its outcome; completing the activity fails.
			down := &failingCompleter{}
			if err := interceptor.CompleteAsync(ctx, down, h.opts, hand, tc.first, tc.firstErr); err == nil {
				t.Fatal("first CompleteAsync: the completer failed, want an error")
			}
			c := &recordingCompleter{}
			err := interceptor.CompleteAsync(ctx, c, h.opts, hand, tc.second, tc.secondErr)
			if !tc.wantSecondFail {
				if err != nil || len(c.results) != 1 {
					t.Fatalf("second CompleteAsync with the same outcome: %v, %d completions; want it completed", err, len(c.results))
				}
				return
			}
			if !errors.Is(err, interceptor.ErrOutcomeDiffers) || len(c.results) != 0 {
				t.Fatalf("second CompleteAsync with another outcome: %v, completions %v; want ErrOutcomeDiffers and none", err, c.results)
			}
			for _, want := range []string{"PayExpense", "k-async-twice", "stored", "this call", "Next step"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the refusal %q does not say %q", err, want)
				}
			}
		})
	}
}

type failingCompleter struct{}

func (failingCompleter) CompleteActivity(context.Context, []byte, any, error) error {
	return errors.New("connection reset")
}

// recordingCompleter records the results it was asked to complete with.
type recordingCompleter struct{ results []any }

func (c *recordingCompleter) CompleteActivity(_ context.Context, _ []byte, result any, err error) error {
	c.results = append(c.results, result)
	return nil
}

// A NotCommitted completion of a claim taken over from an attempt that may have sent
// leaves the key unknown (store.ReleasedState); calling CompleteAsync again with the
// same outcome, after the first completion failed, completes the activity instead of
// saying the attempt lost its claim.
func TestCompleteAsyncNotCommittedTwiceAfterTakeover(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	now := time.Now()
	args, hash := hashOf(t, charge)
	cl := store.Claim{Key: "k-async-taken", Activity: "PayExpense", Effect: "destructive", ArgsHash: hash, Args: args,
		Owner: "owner-1", Lease: now.Add(-time.Minute), Window: time.Hour, Now: now.Add(-time.Hour)}
	if _, _, err := h.store.Begin(ctx, cl); err != nil {
		t.Fatal(err)
	}
	if err := h.store.Abandon(ctx, store.Transition{Key: cl.Key, Owner: "owner-1", Now: now.Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	cl.Owner, cl.Now, cl.Lease, cl.TakeOver = "owner-2", now, now.Add(time.Hour), true
	if o, _, err := h.store.Begin(ctx, cl); err != nil || o != store.OutcomeTakenOver {
		t.Fatalf("takeover: %v, %v", o, err)
	}
	hand := interceptor.HandOff{TaskToken: []byte("token"), Key: cl.Key, Owner: "owner-2", Activity: "PayExpense"}
	declined := interceptor.NotCommitted(errors.New("declined"))
	if err := interceptor.CompleteAsync(ctx, failingCompleter{}, h.opts, hand, nil, declined); err == nil {
		t.Fatal("first CompleteAsync: the completer failed, want an error")
	}
	c := &recordingCompleter{}
	if err := interceptor.CompleteAsync(ctx, c, h.opts, hand, nil, declined); err != nil || len(c.results) != 1 {
		t.Fatalf("second CompleteAsync with the same outcome: %v, %d completions; want it completed", err, len(c.results))
	}
}
