package interceptor_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/store"
)

// A destructive retry refused because the earlier attempt's outcome is unknown
// quotes that attempt's own error: often the root cause (here an input validation
// failure, as in Temporal's money-transfer sample), which the workflow would otherwise lose.
func TestRefusalCarriesTheEarlierError(t *testing.T) {
	cases := []struct {
		name      string
		err       error
		wantError string
	}{
		{"unmarked error", errors.New("invalid Amount"), "invalid Amount"},
		{"application error", temporal.NewApplicationError("invalid Amount", "InvalidAmount"), "invalid Amount (type: InvalidAmount, retryable: true)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.tools.fail = func(ctx context.Context) (error, bool) {
				if ctxAttempt(ctx) == 1 {
					return tc.err, false
				}
				return nil, false
			}
			_, err := h.run("wf-root", call{Activity: "ChargeCard", Charge: charge, MaxAttempts: 3})
			app := appErr(t, err)
			if app.Type() != interceptor.ErrTypeInFlight || h.v.count() != 0 {
				t.Fatalf("want the retry refused: %s, vendor %d", app.Type(), h.v.count())
			}
			if !strings.Contains(app.Error(), `it failed with "`+tc.wantError+`"`) || !strings.Contains(app.Error(), "NotCommitted") {
				t.Fatalf("refusal does not quote the earlier error %q: %s", tc.wantError, app.Error())
			}
			var withheld interceptor.WithheldCall
			if err := app.Details(&withheld); err != nil {
				t.Fatal(err)
			}
			e := withheld.Earlier
			if e == nil || e.Error != tc.wantError || e.Attempt != 1 || e.WorkflowID != "wf-root" || e.RunID == "" || e.Time.IsZero() {
				t.Fatalf("details.Earlier = %+v, want attempt 1's error %q", e, tc.wantError)
			}
			refused := h.receipts(store.ReceiptFilter{Decision: store.DecisionRefusedInFlight})
			if len(refused) != 1 || !strings.Contains(refused[0].Error, tc.wantError) {
				t.Fatalf("refusal receipt does not carry the earlier error: %+v", refused)
			}
		})
	}
	t.Run("no error on record", func(t *testing.T) {
		// The earlier owner crashed: its lease passed with no receipt of its end.
		h := newHarness(t)
		args, hash := hashOf(t, charge)
		key := interceptor.BusinessKey(testNamespace, "ChargeCard", bizKey)
		now := time.Now()
		if o, _, err := h.store.Begin(context.Background(), store.Claim{Key: key, Activity: "ChargeCard",
			Effect: "destructive", ArgsHash: hash, Args: args, Owner: "earlier", Lease: now.Add(-time.Minute),
			Window: 24 * time.Hour, WorkflowID: "earlier-wf", Attempt: 1, Now: now.Add(-time.Hour)}); err != nil || o != store.OutcomeClaimed {
			t.Fatalf("seed: %v %v", o, err)
		}
		_, err := h.run("wf-crash", call{Activity: "ChargeCard", Key: bizKey, Charge: charge, MaxAttempts: 1})
		app := appErr(t, err)
		var withheld interceptor.WithheldCall
		if err := app.Details(&withheld); err != nil {
			t.Fatal(err)
		}
		if withheld.Earlier != nil || strings.Contains(app.Error(), "it failed with") {
			t.Fatalf("an error was quoted where none is on record: %+v, %s", withheld.Earlier, app.Error())
		}
	})
}

// A destructive write refused just after the earlier owner's lease passed says when
// `idemgate resolve` will accept the key (lease + store.LeaseMargin): before that a
// worker whose clock runs behind may still send, and resolve refuses. Once the margin
// passed, the refusal does not say it.
func TestRefusalSaysWhenResolveAccepts(t *testing.T) {
	for _, tc := range []struct {
		name     string
		leaseAgo time.Duration
		wantWhen bool
	}{
		{"inside the margin", time.Minute, true},
		{"past the margin", store.LeaseMargin + time.Minute, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			args, hash := hashOf(t, charge)
			key := interceptor.BusinessKey(testNamespace, "ChargeCard", bizKey)
			now := time.Now()
			lease := now.Add(-tc.leaseAgo)
			if o, _, err := h.store.Begin(context.Background(), store.Claim{Key: key, Activity: "ChargeCard",
				Effect: "destructive", ArgsHash: hash, Args: args, Owner: "earlier", Lease: lease,
				Window: 24 * time.Hour, WorkflowID: "earlier-wf", Attempt: 1, Now: now.Add(-time.Hour)}); err != nil || o != store.OutcomeClaimed {
				t.Fatalf("seed: %v %v", o, err)
			}
			_, err := h.run("wf-early", call{Activity: "ChargeCard", Key: bizKey, Charge: charge, MaxAttempts: 1})
			app := appErr(t, err)
			when := lease.Add(store.LeaseMargin).Format(time.RFC3339)
			if got := strings.Contains(app.Error(), "`idemgate resolve` accepts this key from "+when); got != tc.wantWhen {
				t.Fatalf("refusal names the resolve time %s: %v, want %v: %s", when, got, tc.wantWhen, app.Error())
			}
			if h.v.count() != 0 {
				t.Fatalf("vendor count %d, want 0", h.v.count())
			}
		})
	}
}

// A store.Gate that cannot list receipts (no store.Operator) still gates: the write
// runs once, its repeat gets the stored result, and a retry after an unknown outcome
// is refused — without the earlier attempt's error, which only a store that lists
// receipts can quote.
func TestGateOnlyStore(t *testing.T) {
	h := newHarness(t)
	h.opts.Store = struct{ store.Gate }{h.store}
	out, err := h.run("wf-gate-only", call{Activity: "ChargeCard", Key: bizKey, Charge: charge},
		call{Activity: "ChargeCard", Key: bizKey, Charge: charge})
	if err != nil || h.v.count() != 1 || len(out) != 2 || out[0] != out[1] {
		t.Fatalf("write and repeat = %q, %v, vendor %d; want one call and its result twice", out, err, h.v.count())
	}
	h.tools.fail = func(ctx context.Context) (error, bool) {
		if ctxAttempt(ctx) == 1 {
			return errors.New("invalid Amount"), false
		}
		return nil, false
	}
	_, err = h.run("wf-gate-only-unknown", call{Activity: "ChargeCard", Charge: charge, MaxAttempts: 3})
	app := appErr(t, err)
	if app.Type() != interceptor.ErrTypeInFlight || h.v.count() != 1 {
		t.Fatalf("want the retry refused: %s, vendor %d", app.Type(), h.v.count())
	}
	var withheld interceptor.WithheldCall
	if err := app.Details(&withheld); err != nil {
		t.Fatal(err)
	}
	if withheld.Earlier != nil || strings.Contains(app.Error(), "it failed with") {
		t.Fatalf("a gate-only store quoted an earlier error: %+v, %s", withheld.Earlier, app.Error())
	}
}
