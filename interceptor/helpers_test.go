package interceptor_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/interceptor/internal/canon"
	"github.com/idemgate/idemgate/internal/attempt"
	"github.com/idemgate/idemgate/internal/testutil/patient"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memory"
)

const testNamespace = "default-test-namespace"

// vendor is the fake outside world: it counts the side effects it performed per key.
type vendor struct {
	mu    sync.Mutex
	calls map[string]int
	keys  []string // key seen by each call, in order
	total int
}

func newVendor() *vendor { return &vendor{calls: map[string]int{}} }

func (v *vendor) hit(ctx context.Context) string {
	key, _ := interceptor.KeyFromContext(ctx)
	// The fake vendor is reached as through a keyed transport that deduplicates for
	// a day: the evidence a re-send inside Options.VendorWindows rests on.
	if st, ok := attempt.FromContext(ctx); ok {
		_ = st.Sending(ctx, attempt.Sent{Via: "test:vendor", Host: "vendor.test", Window: 24 * time.Hour})
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.calls[key]++
	v.keys = append(v.keys, key)
	v.total++
	return key
}

func (v *vendor) count() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.total
}

func (v *vendor) seen() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]string(nil), v.keys...)
}

// Charge is a five-field argument, like a real tool call.
type Charge struct {
	Customer string  `json:"customer"`
	Amount   int64   `json:"amount"`
	Currency string  `json:"currency"`
	Note     string  `json:"note"`
	Rate     float64 `json:"rate"`
}

// tools are the activities under test. fail decides, per attempt, whether the body
// fails after it reached the vendor (reached=true) or before.
type tools struct {
	v    *vendor
	fail func(ctx context.Context) (err error, reached bool)
}

func (t *tools) body(ctx context.Context, what string) (string, error) {
	if t.fail != nil {
		if err, reached := t.fail(ctx); err != nil {
			if reached {
				t.v.hit(ctx)
			}
			return "", err
		}
	}
	key := t.v.hit(ctx)
	return fmt.Sprintf("%s done (attempt %d, key %.8s)", what, activity.GetInfo(ctx).Attempt, key), nil
}

func (t *tools) GetBalance(ctx context.Context, c Charge) (string, error) {
	return t.body(ctx, "balance")
}
func (t *tools) UpsertContact(ctx context.Context, c Charge) (string, error) {
	return t.body(ctx, "upsert")
}
func (t *tools) ChargeCard(ctx context.Context, c Charge) (string, error) {
	return t.body(ctx, "charge")
}

// call describes one activity call a test workflow makes.
type call struct {
	Activity    string
	Key         string // WithKey, when set (or when EmptyKey)
	EmptyKey    bool
	Charge      Charge
	Local       bool
	MaxAttempts int32
	Replay      *interceptor.RerunPolicy
	// Weird adds, inside the workflow, an argument no data converter carries:
	// "nan" (Rate becomes NaN), "chan" or "func" (a second argument).
	Weird string
}

// callsWorkflow runs calls in order and returns their results; it stops at the
// first error.
func callsWorkflow(ctx workflow.Context, calls []call) ([]string, error) {
	var out []string
	for _, c := range calls {
		cctx := ctx
		retry := &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 1, MaximumAttempts: c.MaxAttempts}
		if c.Key != "" || c.EmptyKey {
			cctx = interceptor.WithKey(cctx, c.Key)
		}
		if c.Replay != nil {
			cctx = interceptor.WithRerunPolicy(cctx, *c.Replay)
		}
		args := []any{c.Charge}
		switch c.Weird {
		case "nan":
			bad := c.Charge
			bad.Rate = math.NaN()
			args = []any{bad}
		case "chan":
			args = append(args, make(chan int))
		case "func":
			args = append(args, func() {})
		}
		var f workflow.Future
		if c.Local {
			cctx = workflow.WithLocalActivityOptions(cctx, workflow.LocalActivityOptions{StartToCloseTimeout: time.Minute, RetryPolicy: retry})
			f = workflow.ExecuteLocalActivity(cctx, c.Activity, args...)
		} else {
			cctx = workflow.WithActivityOptions(cctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute, RetryPolicy: retry})
			f = workflow.ExecuteActivity(cctx, c.Activity, args...)
		}
		var s string
		if err := f.Get(cctx, &s); err != nil {
			return out, err
		}
		out = append(out, s)
	}
	return out, nil
}

type harness struct {
	t     *testing.T
	store *memory.Store
	v     *vendor
	tools *tools
	opts  interceptor.Options
	suite testsuite.WorkflowTestSuite
}

func newHarness(t *testing.T) *harness {
	st := memory.New()
	v := newVendor()
	h := &harness{t: t, store: st, v: v, tools: &tools{v: v}, opts: interceptor.Options{Store: st}}
	h.suite.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	return h
}

func (h *harness) env(workflowID string) *testsuite.TestWorkflowEnvironment {
	h.t.Helper()
	gate, err := interceptor.New(h.opts)
	if err != nil {
		h.t.Fatalf("New: %v", err)
	}
	env := patient.Env(h.suite.NewTestWorkflowEnvironment())
	env.SetWorkerOptions(patient.WorkerOptions(gate))
	env.RegisterWorkflowWithOptions(callsWorkflow, workflow.RegisterOptions{Name: "calls"})
	env.RegisterActivity(h.tools)
	if workflowID != "" {
		env.SetStartWorkflowOptions(startOptions(workflowID))
	}
	return env
}

// run executes the calls in a fresh execution with the given workflow ID and
// returns the results and the workflow error.
func (h *harness) run(workflowID string, calls ...call) ([]string, error) {
	h.t.Helper()
	env := h.env(workflowID)
	env.ExecuteWorkflow("calls", calls)
	if !env.IsWorkflowCompleted() {
		h.t.Fatalf("workflow %s did not complete", workflowID)
	}
	var out []string
	err := env.GetWorkflowError()
	if err == nil {
		if gerr := env.GetWorkflowResult(&out); gerr != nil {
			h.t.Fatal(gerr)
		}
	}
	return out, err
}

func (h *harness) receipts(f store.ReceiptFilter) []store.Receipt {
	h.t.Helper()
	rs, err := h.store.Receipts(context.Background(), f)
	if err != nil {
		h.t.Fatal(err)
	}
	return rs
}

// appErr digs the gate's application error out of a workflow error.
func appErr(t *testing.T, err error) *temporal.ApplicationError {
	t.Helper()
	var app *temporal.ApplicationError
	if !errors.As(err, &app) {
		t.Fatalf("error %v carries no ApplicationError", err)
	}
	return app
}

// hashOf is the args hash the gate stores for one Charge argument.
func hashOf(t *testing.T, c Charge) ([]byte, string) {
	t.Helper()
	b, h, err := canon.EncodeHash([]any{c})
	if err != nil {
		t.Fatal(err)
	}
	return b, h
}

// storedResult is what the gate stores for a string result.
func storedResult(t *testing.T, s string) []byte {
	t.Helper()
	b, _, err := interceptor.EncodeResult(converter.GetDefaultDataConverter(), s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func ctxAttempt(ctx context.Context) int32 { return activity.GetInfo(ctx).Attempt }
