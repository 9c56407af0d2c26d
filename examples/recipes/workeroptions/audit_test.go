package workeroptions_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"

	"github.com/idemgate/idemgate/examples/recipes/workeroptions"
	"github.com/idemgate/idemgate/idemgatetest"
	"github.com/idemgate/idemgate/interceptor"
)

// The test's own worker options go through k.WorkerOptions: the team's interceptor
// and background context stay, and the kit's interceptors (the gate) are appended
// after the test's own. The audit interceptor runs first, so it sees every attempt
// Temporal made — the one the gate refused too.
func TestOwnWorkerOptionsKeepTheGate(t *testing.T) {
	k := idemgatetest.New(t)
	audit := &workeroptions.Audit{}
	ledger := &workeroptions.Ledger{}
	k.CrashAfterVendor("PayOut")

	env := k.NewWorkflowEnvironment()
	env.SetWorkerOptions(k.WorkerOptions(worker.Options{
		Interceptors:              []sdkinterceptor.WorkerInterceptor{audit},
		BackgroundActivityContext: workeroptions.WithLedger(context.Background(), ledger),
	}))
	env.RegisterWorkflow(workeroptions.PayoutWorkflow)
	env.RegisterActivity(workeroptions.PayOut)
	env.ExecuteWorkflow(workeroptions.PayoutWorkflow, int64(4200))

	if !env.IsWorkflowCompleted() {
		t.Fatal("the workflow did not complete")
	}
	if got := interceptor.ErrorType(env.GetWorkflowError()); got != interceptor.ErrTypeInFlight {
		t.Fatalf("workflow error %v (type %q), want the gate's %s", env.GetWorkflowError(), got, interceptor.ErrTypeInFlight)
	}
	if got := ledger.Payouts(); len(got) != 1 {
		t.Fatalf("payouts %v, want exactly the crashed attempt's", got)
	}
	if got := strings.Join(audit.Entries(), " "); got != "PayOut#1 PayOut#2" {
		t.Fatalf("audit %q, want both attempts", got)
	}
	var ds []string
	for _, d := range k.Decisions("PayOut") {
		ds = append(ds, d.Decision)
	}
	if got := strings.Join(ds, " "); got != "unknown refused-in-flight" {
		t.Fatalf("gate decisions %q, want unknown refused-in-flight", got)
	}
}

// The pitfall: env.SetWorkerOptions(o) without k.WorkerOptions replaces the kit's
// interceptors, so the payout runs without the gate — and the kit fails the test,
// naming the fix. (The recorder stands in for the test's T, to read that failure.)
func TestSetWorkerOptionsAloneFailsTheTest(t *testing.T) {
	rec := &recorder{TB: t}
	k := idemgatetest.New(rec)
	ledger := &workeroptions.Ledger{}

	env := k.NewWorkflowEnvironment()
	env.SetWorkerOptions(worker.Options{ // wrong: drops the gate
		Interceptors:              []sdkinterceptor.WorkerInterceptor{&workeroptions.Audit{}},
		BackgroundActivityContext: workeroptions.WithLedger(context.Background(), ledger),
	})
	env.RegisterWorkflow(workeroptions.PayoutWorkflow)
	env.RegisterActivity(workeroptions.PayOut)
	env.ExecuteWorkflow(workeroptions.PayoutWorkflow, int64(4200))

	errs := strings.Join(rec.finish(), "\n")
	if !strings.Contains(errs, "k.WorkerOptions") || !strings.Contains(errs, "Next step") {
		t.Fatalf("the kit did not fail the test that dropped the gate; it reported %q", errs)
	}
	if len(k.Decisions("")) != 0 {
		t.Fatalf("the gate decided %v, want nothing (it was not installed)", k.Decisions(""))
	}
}

// recorder is a testing.TB that keeps the failures the kit reports, for the test to
// read, and runs the kit's cleanups (its end-of-test checks) when finish is called.
type recorder struct {
	testing.TB
	mu       sync.Mutex
	errs     []string
	cleanups []func()
}

func (r *recorder) Helper() {}

func (r *recorder) Error(args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprint(args...))
}

func (r *recorder) Errorf(format string, args ...any) { r.Error(fmt.Sprintf(format, args...)) }

func (r *recorder) Fatal(args ...any) {
	r.Error(args...)
	panic(fmt.Sprint(args...))
}

func (r *recorder) Fatalf(format string, args ...any) { r.Fatal(fmt.Sprintf(format, args...)) }

func (r *recorder) Cleanup(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanups = append(r.cleanups, f)
}

func (r *recorder) finish() []string {
	r.mu.Lock()
	cs := r.cleanups
	r.cleanups = nil
	r.mu.Unlock()
	for i := len(cs) - 1; i >= 0; i-- {
		cs[i]()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.errs...)
}
