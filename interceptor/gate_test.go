package interceptor_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/internal/attempt"
	"github.com/idemgate/idemgate/store"
)

func startOptions(id string) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{ID: id, TaskQueue: "test"}
}

var charge = Charge{Customer: "cus_1", Amount: 4200, Currency: "eur", Note: "order 4217", Rate: 0.25}

const bizKey = "order-4217/charge-card"

// TestGateTable pins the gate table (docs/how-it-decides.md) cell by cell: for
// each earlier record of the key and each effect class, does the body run, and what
// does the workflow see.
func TestGateTable(t *testing.T) {
	type seedFn func(t *testing.T, st store.Store, key, hash string, args []byte)
	now := time.Now()
	begin := func(t *testing.T, st store.Store, key, hash string, args []byte, at time.Time, lease time.Time) {
		t.Helper()
		o, _, err := st.Begin(context.Background(), store.Claim{Key: key, Activity: "seed", Effect: "destructive",
			ArgsHash: hash, Args: args, Owner: "earlier", Lease: lease, Window: 24 * time.Hour,
			WorkflowID: "earlier-wf", Attempt: 1, Now: at})
		if err != nil || o != store.OutcomeClaimed {
			t.Fatalf("seed Begin = %v %v", o, err)
		}
	}
	transition := func(t *testing.T, op func(context.Context, store.Transition) error, key string, at time.Time, result []byte) {
		t.Helper()
		if err := op(context.Background(), store.Transition{Key: key, Owner: "earlier", Now: at, Result: result, Window: 24 * time.Hour}); err != nil {
			t.Fatalf("seed transition: %v", err)
		}
	}
	seeds := map[string]seedFn{
		"none": func(*testing.T, store.Store, string, string, []byte) {},
		"completed same args": func(t *testing.T, st store.Store, key, hash string, args []byte) {
			begin(t, st, key, hash, args, now.Add(-time.Hour), now.Add(-time.Hour+time.Minute))
			transition(t, st.Complete, key, now.Add(-time.Hour), storedResult(t, "stored result"))
		},
		"completed other args": func(t *testing.T, st store.Store, key, _ string, _ []byte) {
			begin(t, st, key, "other-hash", []byte(`[{"amount":1}]`), now.Add(-time.Hour), now.Add(-time.Hour+time.Minute))
			transition(t, st.Complete, key, now.Add(-time.Hour), storedResult(t, "stored result"))
		},
		"claimed, lease live": func(t *testing.T, st store.Store, key, hash string, args []byte) {
			begin(t, st, key, hash, args, now.Add(-time.Minute), now.Add(time.Hour))
		},
		"claimed, owner gone": func(t *testing.T, st store.Store, key, hash string, args []byte) {
			begin(t, st, key, hash, args, now.Add(-time.Hour), now.Add(-time.Hour+time.Minute))
			transition(t, st.Abandon, key, now.Add(-time.Hour), nil)
		},
		"claimed, lease passed": func(t *testing.T, st store.Store, key, hash string, args []byte) {
			begin(t, st, key, hash, args, now.Add(-time.Hour), now.Add(-time.Minute))
		},
		"released": func(t *testing.T, st store.Store, key, hash string, args []byte) {
			begin(t, st, key, hash, args, now.Add(-time.Hour), now.Add(-time.Hour+time.Minute))
			transition(t, st.Release, key, now.Add(-time.Hour), nil)
		},
		// A destructive write whose outcome nobody knows stays blocked past its window.
		"unknown, past the window": func(t *testing.T, st store.Store, key, hash string, args []byte) {
			begin(t, st, key, hash, args, now.Add(-48*time.Hour), now.Add(-48*time.Hour+time.Minute))
			transition(t, st.Abandon, key, now.Add(-48*time.Hour), nil)
		},
		"claimed, owner gone long ago": func(t *testing.T, st store.Store, key, hash string, args []byte) {
			begin(t, st, key, hash, args, now.Add(-48*time.Hour), now.Add(-48*time.Hour+time.Minute))
		},
		"past the window": func(t *testing.T, st store.Store, key, hash string, args []byte) {
			begin(t, st, key, "other-hash", args, now.Add(-48*time.Hour), now.Add(-48*time.Hour+time.Minute))
			transition(t, st.Complete, key, now.Add(-48*time.Hour), storedResult(t, "stale result"))
		},
	}
	// want: "run", "stored" (stored result, not run), or an error type with "retryable"/"final".
	table := []struct {
		seed                    string
		read, idempotent, destr string
	}{
		{"none", "run", "run", "run"},
		{"completed same args", "run", "stored", "stored"},
		{"completed other args", "run", "IdempotencyConflict final", "IdempotencyConflict final"},
		{"claimed, lease live", "run", "IdempotencyInFlight retryable", "IdempotencyInFlight retryable"},
		{"claimed, owner gone", "run", "run", "IdempotencyInFlight final"},
		{"claimed, lease passed", "run", "run", "IdempotencyInFlight final"},
		{"released", "run", "run", "run"},
		{"unknown, past the window", "run", "run", "IdempotencyInFlight final"},
		{"claimed, owner gone long ago", "run", "run", "IdempotencyInFlight final"},
		{"past the window", "run", "run", "run"},
	}
	for _, row := range table {
		for _, cell := range []struct{ activity, want string }{
			{"GetBalance", row.read}, {"UpsertContact", row.idempotent}, {"ChargeCard", row.destr},
		} {
			t.Run(row.seed+"/"+cell.activity, func(t *testing.T) {
				h := newHarness(t)
				args, hash := hashOf(t, charge)
				seeds[row.seed](t, h.store, interceptor.BusinessKey(testNamespace, cell.activity, bizKey), hash, args)
				out, err := h.run("wf-table", call{Activity: cell.activity, Key: bizKey, Charge: charge, MaxAttempts: 1})
				switch cell.want {
				case "run":
					if err != nil || h.v.count() != 1 || len(out) != 1 || !strings.Contains(out[0], "done") {
						t.Fatalf("want a run: vendor %d, out %q, err %v", h.v.count(), out, err)
					}
				case "stored":
					if err != nil || h.v.count() != 0 || len(out) != 1 || out[0] != "stored result" {
						t.Fatalf("want the stored result without a run: vendor %d, out %q, err %v", h.v.count(), out, err)
					}
				default:
					typ, retry, _ := strings.Cut(cell.want, " ")
					if h.v.count() != 0 {
						t.Fatalf("refused call reached the vendor %d times", h.v.count())
					}
					app := appErr(t, err)
					if app.Type() != typ || app.NonRetryable() != (retry == "final") {
						t.Fatalf("error = %s non-retryable=%v, want %s (%s): %v", app.Type(), app.NonRetryable(), typ, retry, err)
					}
					if !strings.Contains(app.Error(), cell.activity) || !strings.Contains(app.Error(), "Next step") &&
						!strings.Contains(app.Error(), "retries after") {
						t.Fatalf("message must name the activity and the next step: %v", app)
					}
					if retry == "retryable" && app.NextRetryDelay() < 30*time.Minute {
						t.Fatalf("in-flight retry delay %v does not wait for the lease (an hour away)", app.NextRetryDelay())
					}
				}
			})
		}
	}
}

func TestKeyStableAcrossAttemptsDistinctAcrossExecutions(t *testing.T) {
	h := newHarness(t)
	h.tools.fail = func(ctx context.Context) (error, bool) {
		if a := ctxAttempt(ctx); a < 3 {
			return interceptor.NotCommitted(fmt.Errorf("vendor said 503 before doing anything (attempt %d)", a)), true
		}
		return nil, false
	}
	if _, err := h.run("wf-a", call{Activity: "ChargeCard", Charge: charge, MaxAttempts: 5}); err != nil {
		t.Fatal(err)
	}
	keys := h.v.seen()
	if len(keys) != 3 || keys[0] == "" || keys[0] != keys[1] || keys[1] != keys[2] {
		t.Fatalf("keys on attempts 1..3 = %q, want one key three times", keys)
	}
	if _, err := h.run("wf-b", call{Activity: "ChargeCard", Charge: charge, MaxAttempts: 5}); err != nil {
		t.Fatal(err)
	}
	other := h.v.seen()[3]
	if other == keys[0] {
		t.Fatalf("two executions minted the same key %s", other)
	}
	// Two calls of one activity in one execution are two writes with two keys.
	h2 := newHarness(t)
	if _, err := h2.run("wf-c", call{Activity: "ChargeCard", Charge: charge, MaxAttempts: 1},
		call{Activity: "ChargeCard", Charge: charge, MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	if k := h2.v.seen(); len(k) != 2 || k[0] == k[1] {
		t.Fatalf("second call of the same activity reused the key: %q", k)
	}
}

func TestScopeWorkflowIDSharesKeysAcrossRuns(t *testing.T) {
	h := newHarness(t)
	h.opts.Scope = interceptor.ScopeWorkflowID
	first, err := h.run("order-4217", call{Activity: "ChargeCard", Charge: charge, MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	// A re-run with the same workflow ID does not repeat the finished write.
	again, err := h.run("order-4217", call{Activity: "ChargeCard", Charge: charge, MaxAttempts: 1})
	if err != nil || h.v.count() != 1 || again[0] != first[0] {
		t.Fatalf("re-run: vendor %d, result %q vs %q, err %v", h.v.count(), again, first, err)
	}
	if _, err := h.run("order-4218", call{Activity: "ChargeCard", Charge: charge, MaxAttempts: 1}); err != nil || h.v.count() != 2 {
		t.Fatalf("another workflow ID must be a new write: vendor %d, err %v", h.v.count(), err)
	}
}

func TestDestructiveUnknownOutcomeIsNotRunAgain(t *testing.T) {
	for _, local := range []bool{false, true} {
		t.Run(map[bool]string{false: "activity", true: "local"}[local], func(t *testing.T) {
			h := newHarness(t)
			h.tools.fail = func(ctx context.Context) (error, bool) {
				if ctxAttempt(ctx) == 1 {
					return errors.New("connection reset by peer"), true // reached the vendor, then failed unmarked
				}
				return nil, false
			}
			_, err := h.run("wf-d", call{Activity: "ChargeCard", Charge: charge, MaxAttempts: 5, Local: local})
			if h.v.count() != 1 {
				t.Fatalf("vendor count = %d, want 1: a destructive call fired twice", h.v.count())
			}
			app := appErr(t, err)
			if app.Type() != interceptor.ErrTypeInFlight || !app.NonRetryable() {
				t.Fatalf("workflow saw %s non-retryable=%v, want non-retryable IdempotencyInFlight", app.Type(), app.NonRetryable())
			}
			var withheld interceptor.WithheldCall
			if err := app.Details(&withheld); err != nil {
				t.Fatalf("details: %v", err)
			}
			if withheld.Activity != "ChargeCard" || !strings.Contains(string(withheld.Args), `"amount":4200`) ||
				!strings.Contains(app.Error(), `ChargeCard([{"amount":4200`) {
				t.Fatalf("withheld call missing: details %+v, message %s", withheld, app.Error())
			}
			decisions := decisionsOf(h.receipts(store.ReceiptFilter{Activity: "ChargeCard"}))
			if decisions != "claimed unknown refused-in-flight" {
				t.Fatalf("receipts = %s", decisions)
			}
			refused := h.receipts(store.ReceiptFilter{Decision: store.DecisionRefusedInFlight})
			if len(refused) != 1 || !strings.Contains(string(refused[0].Call), `"amount":4200`) {
				t.Fatalf("refusal receipt lacks the withheld call: %+v", refused)
			}
		})
	}
}

func TestIdempotentUnknownOutcomeRunsAgainWithSameKey(t *testing.T) {
	for _, local := range []bool{false, true} {
		t.Run(map[bool]string{false: "activity", true: "local"}[local], func(t *testing.T) {
			h := newHarness(t)
			h.tools.fail = func(ctx context.Context) (error, bool) {
				if ctxAttempt(ctx) == 1 {
					return errors.New("timeout reading the response"), true
				}
				return nil, false
			}
			out, err := h.run("wf-i", call{Activity: "UpsertContact", Charge: charge, MaxAttempts: 5, Local: local})
			if err != nil {
				t.Fatal(err)
			}
			keys := h.v.seen()
			if len(keys) != 2 || keys[0] != keys[1] {
				t.Fatalf("vendor saw keys %q, want the same key twice", keys)
			}
			if !strings.Contains(out[0], "attempt 2") {
				t.Fatalf("result %q, want attempt 2's", out)
			}
			if d := decisionsOf(h.receipts(store.ReceiptFilter{Activity: "UpsertContact"})); d != "claimed unknown taken-over ran" {
				t.Fatalf("receipts = %s", d)
			}
		})
	}
}

func TestNotCommittedLetsTheRetryRun(t *testing.T) {
	h := newHarness(t)
	h.tools.fail = func(ctx context.Context) (error, bool) {
		if ctxAttempt(ctx) == 1 {
			return interceptor.NotCommitted(errors.New("card network rejected the request")), false
		}
		return nil, false
	}
	out, err := h.run("wf-n", call{Activity: "ChargeCard", Charge: charge, MaxAttempts: 3})
	if err != nil || h.v.count() != 1 || !strings.Contains(out[0], "attempt 2") {
		t.Fatalf("vendor %d, out %q, err %v", h.v.count(), out, err)
	}
	if d := decisionsOf(h.receipts(store.ReceiptFilter{Activity: "ChargeCard"})); d != "claimed released claimed ran" {
		t.Fatalf("receipts = %s", d)
	}
}

func TestWithKeyRepeatReturnsStoredResultAcrossWorkflows(t *testing.T) {
	h := newHarness(t)
	first, err := h.run("checkout-1", call{Activity: "ChargeCard", Key: bizKey, Charge: charge, MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	// The same business key from another workflow is the same write.
	again, err := h.run("support-bot-7", call{Activity: "ChargeCard", Key: bizKey, Charge: charge, MaxAttempts: 1},
		call{Activity: "ChargeCard", Key: bizKey, Charge: charge, MaxAttempts: 1})
	if err != nil || h.v.count() != 1 || again[0] != first[0] || again[1] != first[0] {
		t.Fatalf("repeat: vendor %d, results %q vs %q, err %v", h.v.count(), again, first, err)
	}
	if d := decisionsOf(h.receipts(store.ReceiptFilter{Activity: "ChargeCard"})); d != "claimed ran replayed replayed" {
		t.Fatalf("receipts = %s", d)
	}
	// Other arguments under the same key: a conflict that says what differs.
	other := charge
	other.Amount = 9900
	_, err = h.run("support-bot-8", call{Activity: "ChargeCard", Key: bizKey, Charge: other, MaxAttempts: 5})
	app := appErr(t, err)
	if app.Type() != interceptor.ErrTypeConflict || !app.NonRetryable() || h.v.count() != 1 {
		t.Fatalf("conflict: %s non-retryable=%v vendor %d", app.Type(), app.NonRetryable(), h.v.count())
	}
	var d interceptor.ConflictDetails
	if err := app.Details(&d); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(d.Differs) != "[amount]" || d.StoredArgsHash == d.ArgsHash || d.StoredAt.IsZero() ||
		d.Key != interceptor.BusinessKey(testNamespace, "ChargeCard", bizKey) || !strings.Contains(app.Error(), "differs: amount") {
		t.Fatalf("conflict details = %+v, message %s", d, app.Error())
	}
}

func TestWithKeyInvalid(t *testing.T) {
	for _, key := range []string{"", "too-short-key", strings.Repeat("k", 256)} {
		h := newHarness(t)
		_, err := h.run("wf-k", call{Activity: "ChargeCard", Key: key, EmptyKey: true, Charge: charge, MaxAttempts: 3})
		app := appErr(t, err)
		if app.Type() != interceptor.ErrTypeKeyInvalid || !app.NonRetryable() || h.v.count() != 0 {
			t.Fatalf("key %q: %s non-retryable=%v vendor %d", key, app.Type(), app.NonRetryable(), h.v.count())
		}
		if !strings.Contains(app.Error(), "ChargeCard") || !strings.Contains(app.Error(), "16 to 255") {
			t.Fatalf("message %q must name the activity and the rule", app.Error())
		}
	}
}

func TestReadsAreNeverDeduplicated(t *testing.T) {
	h := newHarness(t)
	_, err := h.run("wf-r", call{Activity: "GetBalance", Key: bizKey, Charge: charge, MaxAttempts: 1},
		call{Activity: "GetBalance", Key: bizKey, Charge: charge, MaxAttempts: 1},
		call{Activity: "GetBalance", Charge: charge, MaxAttempts: 1})
	if err != nil || h.v.count() != 3 {
		t.Fatalf("reads: vendor %d, err %v", h.v.count(), err)
	}
	if d := decisionsOf(h.receipts(store.ReceiptFilter{Activity: "GetBalance"})); d != "ran ran ran" {
		t.Fatalf("read receipts = %s", d)
	}
}

func TestRerunPolicyLevels(t *testing.T) {
	levels := []struct {
		name               string
		p                  interceptor.RerunPolicy
		upsert, chargeCard bool
	}{
		{"reads only", interceptor.RerunPolicy{}, false, false},
		{"allow writes", interceptor.RerunPolicy{AllowWrites: true}, true, false},
		{"allow destructive", interceptor.RerunPolicy{AllowDestructive: true}, true, true},
	}
	for _, l := range levels {
		t.Run(l.name, func(t *testing.T) {
			for _, c := range []struct {
				activity string
				allowed  bool
			}{{"GetBalance", true}, {"UpsertContact", l.upsert}, {"ChargeCard", l.chargeCard}} {
				h := newHarness(t)
				_, err := h.run("replay-"+c.activity, call{Activity: c.activity, Charge: charge, MaxAttempts: 3, Replay: &l.p})
				if c.allowed {
					if err != nil || h.v.count() != 1 {
						t.Fatalf("%s allowed: vendor %d err %v", c.activity, h.v.count(), err)
					}
					continue
				}
				app := appErr(t, err)
				if app.Type() != interceptor.ErrTypeWriteGated || !app.NonRetryable() || h.v.count() != 0 {
					t.Fatalf("%s gated: %s non-retryable=%v vendor %d", c.activity, app.Type(), app.NonRetryable(), h.v.count())
				}
				if !strings.Contains(app.Error(), c.activity+`([{"amount":4200,"currency":"eur"`) {
					t.Fatalf("message lacks the exact withheld call: %s", app.Error())
				}
				gated := h.receipts(store.ReceiptFilter{Decision: store.DecisionGated})
				if len(gated) != 1 || !strings.Contains(string(gated[0].Call), `"customer":"cus_1"`) {
					t.Fatalf("gated receipt = %+v", gated)
				}
			}
		})
	}
}

func TestStoreDownFailsWritesClosedReadsRun(t *testing.T) {
	h := newHarness(t)
	h.store.FailWith(fmt.Errorf("%w: connection refused", store.ErrUnavailable))
	if _, err := h.run("wf-s", call{Activity: "GetBalance", Charge: charge, MaxAttempts: 1}); err != nil || h.v.count() != 1 {
		t.Fatalf("read with the store down: vendor %d err %v", h.v.count(), err)
	}
	for _, name := range []string{"UpsertContact", "ChargeCard"} {
		_, err := h.run("wf-s-"+name, call{Activity: name, Charge: charge, MaxAttempts: 1})
		app := appErr(t, err)
		if app.Type() != interceptor.ErrTypeStoreUnavailable || app.NonRetryable() || h.v.count() != 1 {
			t.Fatalf("%s with the store down: %s non-retryable=%v vendor %d", name, app.Type(), app.NonRetryable(), h.v.count())
		}
	}
	// Healed: the write runs, and its key was never half-written.
	h.store.FailWith(nil)
	if _, err := h.run("wf-s-healed", call{Activity: "ChargeCard", Charge: charge, MaxAttempts: 1}); err != nil || h.v.count() != 2 {
		t.Fatalf("after recovery: vendor %d err %v", h.v.count(), err)
	}
}

func TestWrappedNonRetryableErrorStopsRetries(t *testing.T) {
	h := newHarness(t)
	attempts := 0
	h.tools.fail = func(ctx context.Context) (error, bool) {
		attempts++
		inner := temporal.NewNonRetryableApplicationError("card declined", "CardDeclined", nil)
		return interceptor.NotCommitted(fmt.Errorf("charging cus_1: %w", inner)), false
	}
	_, err := h.run("wf-w", call{Activity: "ChargeCard", Charge: charge, MaxAttempts: 5})
	app := appErr(t, err)
	if attempts != 1 || app.Type() != "CardDeclined" || !app.NonRetryable() {
		t.Fatalf("attempts %d, error %s non-retryable=%v: a wrapped non-retryable error must stop retries",
			attempts, app.Type(), app.NonRetryable())
	}
}

func TestArgumentsWithoutCanonicalFormAreRefused(t *testing.T) {
	for weird, where := range map[string]string{"nan": "argument 1 (at .Rate)", "chan": "argument 2", "func": "argument 2"} {
		for _, local := range []bool{false, true} {
			h := newHarness(t)
			_, err := h.run("wf-"+weird, call{Activity: "ChargeCard", Charge: charge, MaxAttempts: 3, Weird: weird, Local: local})
			app := appErr(t, err)
			if app.Type() != interceptor.ErrTypeArgsInvalid || !app.NonRetryable() || h.v.count() != 0 {
				t.Fatalf("%s: %s non-retryable=%v vendor %d", weird, app.Type(), app.NonRetryable(), h.v.count())
			}
			if !strings.Contains(app.Error(), "ChargeCard") || !strings.Contains(app.Error(), where) ||
				!strings.Contains(app.Error(), "Nothing was scheduled. Next step: pass plain data") {
				t.Fatalf("%s: message must name the activity and %q, and say nothing was scheduled and what to pass: %s", weird, where, app.Error())
			}
		}
	}
}

func TestIdentifyingFieldsMakeOneWrite(t *testing.T) {
	h := newHarness(t)
	h.opts.IdentifyingFields = map[string][]string{"UpsertContact": {"customer"}}
	same := charge
	if _, err := h.run("wf-id", call{Activity: "UpsertContact", Charge: charge, MaxAttempts: 1},
		call{Activity: "UpsertContact", Charge: same, MaxAttempts: 1}); err != nil || h.v.count() != 1 {
		t.Fatalf("same record twice: vendor %d err %v", h.v.count(), err)
	}
	other := charge
	other.Note = "changed"
	_, err := h.run("wf-id", call{Activity: "UpsertContact", Charge: charge, MaxAttempts: 1},
		call{Activity: "UpsertContact", Charge: other, MaxAttempts: 1})
	app := appErr(t, err)
	var d interceptor.ConflictDetails
	if app.Type() != interceptor.ErrTypeConflict || app.Details(&d) != nil || fmt.Sprint(d.Differs) != "[note]" ||
		d.StoredArgsHash == "" || d.ArgsHash == "" || d.StoredAt.IsZero() || d.Key == "" {
		t.Fatalf("conflict on the same record: %v details %+v", err, d)
	}
	if h.v.count() != 1 {
		t.Fatalf("vendor %d", h.v.count())
	}
	// A different record is a different write.
	third := charge
	third.Customer = "cus_2"
	if _, err := h.run("wf-id", call{Activity: "UpsertContact", Charge: third, MaxAttempts: 1}); err != nil || h.v.count() != 2 {
		t.Fatalf("another record: vendor %d err %v", h.v.count(), err)
	}
}

func TestOversizedResultIsNotRunAgain(t *testing.T) {
	h := newHarness(t)
	h.opts.MaxResultSize = 16
	if _, err := h.run("wf-big", call{Activity: "ChargeCard", Key: bizKey, Charge: charge, MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	_, err := h.run("wf-big-2", call{Activity: "ChargeCard", Key: bizKey, Charge: charge, MaxAttempts: 3})
	app := appErr(t, err)
	if app.Type() != interceptor.ErrTypeResultNotStored || !app.NonRetryable() || h.v.count() != 1 {
		t.Fatalf("repeat of an unstored result: %s non-retryable=%v vendor %d", app.Type(), app.NonRetryable(), h.v.count())
	}
}

func TestReceiptsCarryTheAttempt(t *testing.T) {
	h := newHarness(t)
	if _, err := h.run("wf-rc", call{Activity: "ChargeCard", Charge: charge, MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	rs := h.receipts(store.ReceiptFilter{WorkflowID: "wf-rc"})
	if len(rs) != 2 {
		t.Fatalf("receipts = %s", decisionsOf(rs))
	}
	ran := rs[1]
	_, hash := hashOf(t, charge)
	if ran.Decision != store.DecisionRan || ran.Key == "" || ran.Effect != "destructive" || ran.ArgsHash != hash ||
		ran.RunID == "" || ran.Attempt != 1 || !strings.HasPrefix(ran.ResultRef, "sha256:") {
		t.Fatalf("ran receipt = %+v", ran)
	}
	rec, err := h.store.Get(context.Background(), ran.Key)
	if err != nil || rec.State != store.StateCompleted || len(rec.Result) == 0 {
		t.Fatalf("result not stored before success: %+v %v", rec, err)
	}
}

// A write's record carries the root of its workflow's chain beside the workflow's
// own ID and run (F1 of the gate attack on issue 18): a workflow with no parent is
// its own root. (A child's root is its first ancestor's ID, which only a Temporal
// server sets: integration TestFeatureParentResetAfterTheWindowGrandchild.)
func TestRecordCarriesTheRootWorkflow(t *testing.T) {
	h := newHarness(t)
	if _, err := h.run("wf-root", call{Activity: "ChargeCard", Charge: charge, MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	rs := h.receipts(store.ReceiptFilter{WorkflowID: "wf-root"})
	if len(rs) == 0 {
		t.Fatal("no receipts")
	}
	rec, err := h.store.Get(context.Background(), rs[0].Key)
	if err != nil || rec.RootWorkflowID != "wf-root" || rec.WorkflowID != "wf-root" || rec.RunID == "" {
		t.Fatalf("record: workflow %q run %q root %q, %v; want its own workflow as the root", rec.WorkflowID, rec.RunID, rec.RootWorkflowID, err)
	}
}

func decisionsOf(rs []store.Receipt) string {
	var s []string
	for _, r := range rs {
		s = append(s, string(r.Decision))
	}
	return strings.Join(s, " ")
}

// What the calls of an attempt observed (package idemhttp reports it) decides an
// unmarked error: all definitely not performed → released, the retry runs; anything
// else → unknown; a vendor's key-reuse answer → a final conflict.
func TestObservationsDecideUnmarkedErrors(t *testing.T) {
	cases := []struct {
		name     string
		observe  []attempt.Outcome
		wantType string // "" → the retry runs and succeeds
		attempts int
	}{
		{"not sent", []attempt.Outcome{attempt.NotSent}, "", 2},
		{"rejected then not sent", []attempt.Outcome{attempt.Rejected, attempt.NotSent}, "", 2},
		{"committed then error", []attempt.Outcome{attempt.Committed}, interceptor.ErrTypeInFlight, 1},
		{"one unknown", []attempt.Outcome{attempt.NotSent, attempt.Unknown}, interceptor.ErrTypeInFlight, 1},
		{"vendor conflict", []attempt.Outcome{attempt.Conflict}, interceptor.ErrTypeConflict, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			attempts := 0
			h.tools.fail = func(ctx context.Context) (error, bool) {
				attempts++
				if ctxAttempt(ctx) > 1 {
					return nil, false
				}
				st, ok := attempt.FromContext(ctx)
				if !ok {
					t.Fatal("no attempt state in the activity context")
				}
				for _, o := range c.observe {
					st.Observe(attempt.Observation{Outcome: o, Vendor: "acme", Detail: o.String()})
				}
				return errors.New("request failed"), false
			}
			_, err := h.run("wf-obs", call{Activity: "ChargeCard", Charge: charge, MaxAttempts: 3})
			if c.wantType == "" {
				if err != nil || h.v.count() != 1 {
					t.Fatalf("want the retry to run: vendor %d err %v", h.v.count(), err)
				}
			} else if app := appErr(t, err); app.Type() != c.wantType || !app.NonRetryable() {
				t.Fatalf("error %s non-retryable=%v, want final %s", app.Type(), app.NonRetryable(), c.wantType)
			}
			// A refused retry never reaches the body.
			if attempts != c.attempts {
				t.Fatalf("body ran %d times, want %d", attempts, c.attempts)
			}
		})
	}
}

// A local activity's repeat returns the stored result exactly like a regular one.
func TestLocalActivityRepeatReturnsStoredResult(t *testing.T) {
	h := newHarness(t)
	out, err := h.run("wf-local", call{Activity: "ChargeCard", Key: bizKey, Charge: charge, MaxAttempts: 1, Local: true},
		call{Activity: "ChargeCard", Key: bizKey, Charge: charge, MaxAttempts: 1, Local: true},
		call{Activity: "ChargeCard", Key: bizKey, Charge: charge, MaxAttempts: 1})
	if err != nil || h.v.count() != 1 || len(out) != 3 || out[1] != out[0] || out[2] != out[0] {
		t.Fatalf("vendor %d, results %q, err %v", h.v.count(), out, err)
	}
}

// Attempt 1 may have reached the vendor (unknown); attempt 2 takes over inside the
// vendor's window and fails before sending. That definite failure says nothing about
// attempt 1: the key stays unknown, and attempt 3, past the vendor's window, is
// refused instead of charging a second time.
func TestTakeoverDefiniteFailureKeepsEarlierUnknown(t *testing.T) {
	h := newHarness(t)
	base := time.Now().UTC()
	var mu sync.Mutex
	clock := base
	h.opts.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	set := func(t time.Time) { mu.Lock(); clock = t; mu.Unlock() }
	h.opts.VendorWindows = map[string]time.Duration{"ChargeCard": time.Hour}
	h.tools.fail = func(ctx context.Context) (error, bool) {
		switch ctxAttempt(ctx) {
		case 1:
			set(base.Add(time.Minute)) // the next attempt starts inside the vendor's window
			return errors.New("connection reset by peer"), true
		case 2:
			set(base.Add(2 * time.Hour)) // the next attempt starts past it
			return interceptor.NotCommitted(errors.New("refused before sending: card network down")), false
		}
		return nil, false
	}
	_, err := h.run("wf-takeover-release", call{Activity: "ChargeCard", Charge: charge, MaxAttempts: 5})
	if h.v.count() != 1 {
		t.Fatalf("vendor count = %d, want 1: charged twice", h.v.count())
	}
	app := appErr(t, err)
	if app.Type() != interceptor.ErrTypeInFlight || !app.NonRetryable() {
		t.Fatalf("workflow saw %s non-retryable=%v, want a final IdempotencyInFlight: %v", app.Type(), app.NonRetryable(), err)
	}
	rs := h.receipts(store.ReceiptFilter{Activity: "ChargeCard"})
	if d := decisionsOf(rs); d != "claimed unknown taken-over resent unknown refused-in-flight" {
		t.Fatalf("receipts = %s", d)
	}
	if e := rs[4].Error; !strings.Contains(e, "card network down") || !strings.Contains(e, "earlier attempt may have reached the vendor") {
		t.Fatalf("attempt 2's receipt must say why the key stays unknown: %q", e)
	}
	rec, err := h.store.Get(context.Background(), rs[0].Key)
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != store.StateUnknown || !rec.MayHaveSent || !rec.CreatedAt.Equal(base) {
		t.Fatalf("record = state %q MayHaveSent %v CreatedAt %v, want unknown, true, attempt 1's %v", rec.State, rec.MayHaveSent, rec.CreatedAt, base)
	}
}

// A re-send under VendorWindows stops 2×Options.ClockSkew before the vendor's window
// ends: a worker whose clock runs behind would otherwise re-send to a vendor that
// already forgot the key, and it would charge again (found by store/claimmodel).
// Issue 18, item 11: with ClockSkew 10 min the margin is 20 min, not a fixed 2.
func TestVendorWindowLeavesRoomForClockSkew(t *testing.T) {
	h := newHarness(t)
	base := time.Now().UTC()
	var mu sync.Mutex
	clock := base
	h.opts.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	h.opts.ClockSkew = 10 * time.Minute
	h.opts.VendorWindows = map[string]time.Duration{"ChargeCard": time.Hour}
	h.tools.fail = func(ctx context.Context) (error, bool) {
		if ctxAttempt(ctx) == 1 {
			mu.Lock()
			// Inside the window by this clock, not by a clock 10 min ahead of it.
			clock = base.Add(time.Hour - 2*h.opts.ClockSkew + time.Minute)
			mu.Unlock()
			return errors.New("connection reset by peer"), true
		}
		return nil, false
	}
	_, err := h.run("wf-vendor-window-skew", call{Activity: "ChargeCard", Charge: charge, MaxAttempts: 3})
	if h.v.count() != 1 {
		t.Fatalf("vendor count = %d, want 1: re-sent at the window's edge", h.v.count())
	}
	if app := appErr(t, err); app.Type() != interceptor.ErrTypeInFlight || !app.NonRetryable() {
		t.Fatalf("workflow saw %s non-retryable=%v, want a final IdempotencyInFlight: %v", app.Type(), app.NonRetryable(), err)
	}
	if d := decisionsOf(h.receipts(store.ReceiptFilter{Activity: "ChargeCard"})); d != "claimed unknown refused-in-flight" {
		t.Fatalf("receipts = %s", d)
	}
}
