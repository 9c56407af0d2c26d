package idemhttp_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/idemgate/idemgate/idemhttp"
	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/internal/testutil/patient"
	"github.com/idemgate/idemgate/internal/testutil/stripemock"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memory"
)

// payments is an activity that charges through stripe-go, whose HTTP client is the
// idemhttp transport. failAfter decides, per attempt, whether the attempt fails after the
// vendor answered (the worker "crashed" before it could report).
type payments struct {
	sc        *stripe.Client
	failAfter func(attempt int32) bool

	mu   sync.Mutex
	keys []string // Idempotency-Key stripe-mock reflected, per vendor call
	acts []string // the activity key, per vendor call
}

func (p *payments) ChargeCard(ctx context.Context, amount int64) (string, error) {
	pi, err := p.sc.V1PaymentIntents.Create(ctx, &stripe.PaymentIntentCreateParams{
		Amount: stripe.Int64(amount), Currency: stripe.String("usd"),
	})
	if err != nil {
		return "", err
	}
	key, _ := interceptor.KeyFromContext(ctx)
	p.mu.Lock()
	p.keys = append(p.keys, pi.LastResponse.IdempotencyKey)
	p.acts = append(p.acts, key)
	p.mu.Unlock()
	if p.failAfter != nil && p.failAfter(activity.GetInfo(ctx).Attempt) {
		return "", errors.New("worker lost after Stripe answered")
	}
	return pi.ID, nil
}

func (p *payments) calls() ([]string, []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.keys...), append([]string(nil), p.acts...)
}

func chargeWorkflow(ctx workflow.Context, amount int64) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 1, MaximumAttempts: 3},
	})
	var id string
	err := workflow.ExecuteActivity(ctx, "ChargeCard", amount).Get(ctx, &id)
	return id, err
}

func runCharge(t *testing.T, opts interceptor.Options, p *payments) (string, error) {
	t.Helper()
	gate, err := interceptor.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := patient.Env(suite.NewTestWorkflowEnvironment())
	env.SetWorkerOptions(patient.WorkerOptions(gate))
	env.RegisterWorkflow(chargeWorkflow)
	env.RegisterActivity(p)
	env.ExecuteWorkflow(chargeWorkflow, int64(2000))
	if !env.IsWorkflowCompleted() {
		t.Fatal("workflow did not complete")
	}
	if err := env.GetWorkflowError(); err != nil {
		return "", err
	}
	var id string
	if err := env.GetWorkflowResult(&id); err != nil {
		t.Fatal(err)
	}
	return id, nil
}

func stripeClient(url string, base http.RoundTripper) *stripe.Client {
	return stripe.NewClient("sk_test_123", stripe.WithBackends(stripe.NewBackendsWithConfig(&stripe.BackendConfig{
		HTTPClient:        &http.Client{Transport: idemhttp.NewTransport(base, idemhttp.Stripe)},
		URL:               stripe.String(url),
		LeveledLogger:     &stripe.LeveledLogger{Level: stripe.LevelNull},
		MaxNetworkRetries: stripe.Int64(0), // Temporal retries; stripe-go would retry inside one attempt
	})))
}

// plainStripeClient is stripeClient without idemhttp: the activity key never leaves.
func plainStripeClient(url string) *stripe.Client {
	return stripe.NewClient("sk_test_123", stripe.WithBackends(stripe.NewBackendsWithConfig(&stripe.BackendConfig{
		HTTPClient:        &http.Client{},
		URL:               stripe.String(url),
		LeveledLogger:     &stripe.LeveledLogger{Level: stripe.LevelNull},
		MaxNetworkRetries: stripe.Int64(0),
	})))
}

// TestStripeMockThroughTheGate runs stripe-go against stripe-mock inside a real Temporal
// activity gated by the interceptor.
func TestStripeMockThroughTheGate(t *testing.T) {
	url := stripemock.Start(t)

	// Attempt 1 reaches Stripe, then the worker is lost: the outcome is unknown. ChargeCard
	// is destructive, and Stripe deduplicates on the forwarded key for 24 h, so the gate
	// lets attempt 2 re-send, and it carries the same key.
	t.Run("unknown outcome, re-sent with the same key", func(t *testing.T) {
		p := &payments{sc: stripeClient(url, nil), failAfter: func(a int32) bool { return a == 1 }}
		st := memory.New()
		id, err := runCharge(t, interceptor.Options{
			Store:         st,
			VendorWindows: map[string]time.Duration{"ChargeCard": idemhttp.Stripe.Window},
		}, p)
		if err != nil || id == "" {
			t.Fatalf("workflow: id %q, err %v", id, err)
		}
		keys, acts := p.calls()
		if len(keys) != 2 {
			t.Fatalf("stripe-mock saw %d charges, want 2 (one per attempt)", len(keys))
		}
		want, err := idemhttp.Stripe.VendorKey(acts[0])
		if err != nil {
			t.Fatal(err)
		}
		if acts[0] == "" || acts[0] != acts[1] || keys[0] != want || keys[1] != want {
			t.Fatalf("activity keys %q, Idempotency-Key reflected %q; want one key %q on both attempts", acts, keys, want)
		}
		// The re-send is the vendor's deduplication acting as a witness: a receipt
		// beside the takeover names it and its evidence (issue 19).
		rs, err := st.Receipts(context.Background(), store.ReceiptFilter{Key: acts[0]})
		if err != nil {
			t.Fatal(err)
		}
		var ds []store.Decision
		for _, r := range rs {
			ds = append(ds, r.Decision)
		}
		if fmt.Sprint(ds) != "[claimed unknown taken-over resent ran]" {
			t.Fatalf("receipts %v, want claimed unknown taken-over resent ran", ds)
		}
		rsn := rs[3]
		if rsn.Actor != "witness:"+interceptor.VendorDedupWitness || rsn.Attempt != 2 ||
			!strings.Contains(rsn.Reason, "idemhttp:stripe to "+strings.TrimPrefix(url, "http://")) ||
			!strings.Contains(rsn.Reason, "24h0m0s") {
			t.Fatalf("re-send receipt %+v, want actor witness:vendor-dedup, attempt 2, the evidence and the window", rsn)
		}
	})

	// Issue 18 item 12: the same activity named in VendorWindows, but its body calls
	// Stripe through a plain http.Client (idemhttp forgotten): no key of ours leaves,
	// nothing records that it did, and the gate refuses attempt 2 instead of trusting
	// a deduplication that cannot happen (stripe-go's own random key differs per
	// attempt). Before, attempt 2 was re-sent: two charges, workflow green.
	t.Run("unknown outcome, refused when the body forgot idemhttp", func(t *testing.T) {
		p := &payments{sc: plainStripeClient(url), failAfter: func(a int32) bool { return a == 1 }}
		_, err := runCharge(t, interceptor.Options{
			Store:         memory.New(),
			VendorWindows: map[string]time.Duration{"ChargeCard": idemhttp.Stripe.Window},
		}, p)
		var app *temporal.ApplicationError
		if !errors.As(err, &app) || app.Type() != interceptor.ErrTypeInFlight || !app.NonRetryable() {
			t.Fatalf("workflow error %v, want a non-retryable %s", err, interceptor.ErrTypeInFlight)
		}
		if !strings.Contains(app.Error(), "keyed transport") {
			t.Errorf("the refusal does not say why the vendor window was not used: %v", app)
		}
		if keys, _ := p.calls(); len(keys) != 1 {
			t.Fatalf("stripe-mock saw %d charges, want 1: the forgotten idemhttp was trusted", len(keys))
		}
	})

	// Without a vendor window the gate refuses the destructive retry: one charge only.
	t.Run("unknown outcome, refused without a vendor window", func(t *testing.T) {
		p := &payments{sc: stripeClient(url, nil), failAfter: func(int32) bool { return true }}
		_, err := runCharge(t, interceptor.Options{Store: memory.New()}, p)
		var app *temporal.ApplicationError
		if !errors.As(err, &app) || app.Type() != interceptor.ErrTypeInFlight {
			t.Fatalf("workflow error %v, want %s", err, interceptor.ErrTypeInFlight)
		}
		if keys, _ := p.calls(); len(keys) != 1 {
			t.Fatalf("stripe-mock saw %d charges, want 1", len(keys))
		}
	})

	// Attempt 1's dial fails: the transport reports not-sent, the gate releases the claim,
	// and attempt 2 runs (a destructive write, with no vendor window needed).
	t.Run("not sent, released and run again", func(t *testing.T) {
		var dials atomic.Int32
		base := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if dials.Add(1) == 1 {
				return nil, &net.OpError{Op: "dial", Net: network, Err: errors.New("connection refused")}
			}
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}}
		defer base.CloseIdleConnections()
		p := &payments{sc: stripeClient(url, base)}
		id, err := runCharge(t, interceptor.Options{Store: memory.New()}, p)
		if err != nil || id == "" {
			t.Fatalf("workflow: id %q, err %v", id, err)
		}
		keys, acts := p.calls()
		if len(keys) != 1 || keys[0] != acts[0] {
			t.Fatalf("reflected keys %q for activity keys %q, want one charge with the activity key", keys, acts)
		}
	})
}
