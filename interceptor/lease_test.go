package interceptor_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/internal/testutil/patient"
	"github.com/idemgate/idemgate/store/memory"
)

// A claim is held until the attempt's deadline plus twice Options.ClockSkew: a worker
// whose clock runs ahead must not take over (or call unknown) a claim whose owner,
// with a clock behind, may still be running. The claim-rule model (store/claimmodel)
// finds that takeover when the stored lease is the bare deadline.
func TestClaimLeaseCoversClockSkew(t *testing.T) {
	for _, c := range []struct {
		skew, want time.Duration
	}{
		{0, 2 * interceptor.DefaultClockSkew},
		{7 * time.Second, 14 * time.Second},
	} {
		st := memory.New()
		gate, err := interceptor.New(interceptor.Options{Store: st, ClockSkew: c.skew})
		if err != nil {
			t.Fatal(err)
		}
		var padding time.Duration
		// CreateLeaseProbe is an idempotent write: it is claimed before it runs.
		probe := func(ctx context.Context) error {
			key, ok := interceptor.KeyFromContext(ctx)
			if !ok {
				t.Fatal("no key inside the gate")
			}
			rec, err := st.Get(ctx, key)
			if err != nil {
				return err
			}
			padding = rec.Lease.Sub(activity.GetInfo(ctx).Deadline)
			return nil
		}
		wf := func(ctx workflow.Context) error {
			ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
			return workflow.ExecuteActivity(ctx, "CreateLeaseProbe").Get(ctx, nil)
		}
		var suite testsuite.WorkflowTestSuite
		env := patient.Env(suite.NewTestWorkflowEnvironment())
		env.SetWorkerOptions(patient.WorkerOptions(gate))
		env.RegisterWorkflowWithOptions(wf, workflow.RegisterOptions{Name: "leaseProbe"})
		env.RegisterActivityWithOptions(probe, activity.RegisterOptions{Name: "CreateLeaseProbe"})
		env.ExecuteWorkflow("leaseProbe")
		if err := env.GetWorkflowError(); err != nil {
			t.Fatalf("skew %v: %v", c.skew, err)
		}
		if padding != c.want {
			t.Errorf("ClockSkew %v: stored lease = deadline + %v, want + %v", c.skew, padding, c.want)
		}
	}
}

func TestNegativeClockSkewRefused(t *testing.T) {
	_, err := interceptor.New(interceptor.Options{Store: memory.New(), ClockSkew: -time.Second})
	if err == nil || !strings.Contains(err.Error(), "Options.ClockSkew") {
		t.Fatalf("New with a negative ClockSkew = %v, want an error naming Options.ClockSkew", err)
	}
}
