package expense_test

import (
	"context"
	"io"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"

	"github.com/idemgate/idemgate/examples/recipes/expense"
	"github.com/idemgate/idemgate/idemgatetest"
	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/store"
)

// envClient stands in for the expense system's Temporal client: its
// CompleteActivity completes the activity in the test environment.
type envClient struct {
	mu  sync.Mutex
	env *testsuite.TestWorkflowEnvironment
}

func (c *envClient) CompleteActivity(_ context.Context, token []byte, result any, err error) error {
	c.mu.Lock()
	env := c.env
	c.mu.Unlock()
	return env.CompleteActivity(token, result, err)
}

// clock is the gate's clock, which the test moves past a claim's lease.
type clock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.off)
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.off += d
	c.mu.Unlock()
}

type fixture struct {
	k   *idemgatetest.Kit
	clk *clock
	tc  *envClient
	sys *expense.System
	srv *httptest.Server
}

// newFixture starts the expense system, completing decisions with complete(tc, opts):
// tc is its Temporal client, opts the gate's options (the kit's store).
func newFixture(t *testing.T, complete func(c interceptor.AsyncCompleter, opts interceptor.Options) expense.CompleteFunc) *fixture {
	f := &fixture{clk: &clock{}, tc: &envClient{}}
	opts := expense.GateOptions()
	opts.Now = f.clk.Now
	f.k = idemgatetest.New(t, idemgatetest.WithOptions(opts))
	// The expense system is another process: it reaches the same claim store and
	// uses the same data converter as the workers (the default one here).
	f.sys = expense.NewSystem(complete(f.tc, interceptor.Options{Store: f.k.Store, Now: f.k.Now}))
	f.srv = httptest.NewServer(f.sys)
	t.Cleanup(f.srv.Close)
	return f
}

// run runs the expense workflow for expense-1 in a new environment with one
// workflow ID for every run: the second run re-runs the same execution, with the
// same keys, as a reset does. approve has a person approve it a minute in.
func (f *fixture) run(t *testing.T, approve bool) (string, error) {
	env := f.k.NewWorkflowEnvironment()
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "expense-workflow-1", TaskQueue: "expense"})
	f.tc.mu.Lock()
	f.tc.env = env
	f.tc.mu.Unlock()
	env.RegisterWorkflow(expense.SampleExpenseWorkflow)
	env.RegisterActivity(&expense.Activities{BaseURL: f.srv.URL, HTTP: f.srv.Client()})
	if approve {
		env.RegisterDelayedCallback(func() {
			resp, err := f.srv.Client().Post(f.srv.URL+"/action?type=approve&id=expense-1", "", nil)
			if err != nil {
				t.Errorf("approve: %v", err)
				return
			}
			defer resp.Body.Close()
			if b, _ := io.ReadAll(resp.Body); string(b) != "SUCCEED" {
				t.Errorf("approve: the expense system answered %q", b)
			}
		}, time.Minute)
	}
	env.ExecuteWorkflow(expense.SampleExpenseWorkflow, "expense-1")
	if !env.IsWorkflowCompleted() {
		t.Fatal("the workflow did not complete")
	}
	if err := env.GetWorkflowError(); err != nil {
		return "", err
	}
	var out string
	return out, env.GetWorkflowResult(&out)
}

func decisions(k *idemgatetest.Kit, activity string) []string {
	var out []string
	for _, d := range k.Decisions(activity) {
		out = append(out, d.Decision)
	}
	return out
}

// The right way: the expense system completes through CompleteAsync. The decision
// is stored under the call's key before the activity completes, so nothing is left
// pending, and re-running the execution (a reset) returns the stored decision —
// nobody is asked again, and the expense is paid once.
func TestCompleteAsyncStoresTheDecision(t *testing.T) {
	f := newFixture(t, expense.GateCompleter)
	if got, err := f.run(t, true); err != nil || got != "COMPLETED" {
		t.Fatalf("first run: %q, %v", got, err)
	}
	h, ok := f.sys.HandOff("expense-1")
	if !ok || h.Key == "" || h.Owner == "" {
		t.Fatalf("the activity handed over %+v, want the gated call's key and owner", h)
	}
	if r, err := f.k.Store.Get(context.Background(), h.Key); err != nil || r.State != store.StateCompleted {
		t.Fatalf("the decision's record: %+v, %v; want completed", r, err)
	}
	f.clk.advance(time.Hour) // past every lease: nothing is pending
	if p, err := f.k.Store.Pending(context.Background(), f.k.Now(), 0); err != nil || len(p) != 0 {
		t.Fatalf("pending: %+v, %v; want none", p, err)
	}

	if got, err := f.run(t, false); err != nil || got != "COMPLETED" {
		t.Fatalf("re-run (reset): %q, %v; want the stored decision and COMPLETED", got, err)
	}
	if got, want := decisions(f.k, "WaitForDecisionActivity"), []string{"handed-off", "replayed"}; !slices.Equal(got, want) {
		t.Fatalf("WaitForDecisionActivity decisions %v, want %v", got, want)
	}
	if f.sys.Payments() != 1 {
		t.Fatalf("%d payments, want 1", f.sys.Payments())
	}
}

// The wrong way: the expense system completes with the plain
// client.CompleteActivity. The workflow gets its decision, but the gate's claim is
// never closed: it stays claimed, is pending for a person once the attempt's
// deadline passed, and a reset that re-runs the step is refused although the
// expense was approved.
func TestPlainCompleteActivityLeavesTheClaimOpen(t *testing.T) {
	f := newFixture(t, func(c interceptor.AsyncCompleter, _ interceptor.Options) expense.CompleteFunc {
		return func(ctx context.Context, h interceptor.HandOff, status string) error {
			return c.CompleteActivity(ctx, h.TaskToken, status, nil) // wrong: stores nothing
		}
	})
	if got, err := f.run(t, true); err != nil || got != "COMPLETED" {
		t.Fatalf("first run: %q, %v", got, err)
	}
	h, _ := f.sys.HandOff("expense-1")
	if r, err := f.k.Store.Get(context.Background(), h.Key); err != nil || r.State != store.StateClaimed {
		t.Fatalf("the decision's record: %+v, %v; want still claimed", r, err)
	}
	f.clk.advance(time.Hour) // past the attempt's deadline (10 minutes) and its margins
	p, err := f.k.Store.Pending(context.Background(), f.k.Now(), 0)
	if err != nil || len(p) != 1 || p[0].Key != h.Key {
		t.Fatalf("pending: %+v, %v; want the approved decision's key", p, err)
	}

	_, err = f.run(t, false)
	if interceptor.ErrorType(err) != interceptor.ErrTypeInFlight {
		t.Fatalf("re-run (reset): %v; want the gate's refusal (%s)", err, interceptor.ErrTypeInFlight)
	}
	if f.sys.Payments() != 1 {
		t.Fatalf("%d payments, want 1", f.sys.Payments())
	}
}
