package idemgatetest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/idemgate/idemgate/idemgatetest"
	"github.com/idemgate/idemgate/interceptor"
)

type lookup struct{}

func (*lookup) GetQuote(_ context.Context, sym string) (float64, error) { return 1, nil }
func (*lookup) SendNote(_ context.Context, to string) (string, error)   { return "real " + to, nil }

func quoteWorkflow(ctx workflow.Context) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 1, MaximumAttempts: 3}})
	var q float64
	if err := workflow.ExecuteActivity(ctx, "GetQuote", "ACME").Get(ctx, &q); err != nil {
		return "", err
	}
	var a, b string
	fa := workflow.ExecuteActivity(ctx, "SendNote", "ada")
	fb := workflow.ExecuteActivity(ctx, "SendNote", "bob")
	if err := fa.Get(ctx, &a); err != nil {
		return "", err
	}
	if err := fb.Get(ctx, &b); err != nil {
		return "", err
	}
	var d string
	if err := workflow.ExecuteActivity(ctx, "DynamicThing", "x").Get(ctx, &d); err != nil {
		return "", err
	}
	return fmt.Sprintf("%v %s %s %s", q, a, b, d), nil
}

// The ordinary testsuite mock features under the kit, in parallel tests: a read
// mocked to fail then succeed (Times), parallel writes mocked per argument with a
// delay (After), an unused Maybe, a dynamic activity.
func TestMockFeaturesUnderTheKit(t *testing.T) {
	for i := range 4 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			r := newRecorder(t)
			k := idemgatetest.New(r)
			env := k.NewWorkflowEnvironment()
			env.RegisterWorkflow(quoteWorkflow)
			env.RegisterActivity(&lookup{})
			env.RegisterDynamicActivity(func(ctx context.Context, args converter.EncodedValues) (string, error) {
				return "dyn " + activity.GetInfo(ctx).ActivityType.Name, nil
			}, activity.DynamicRegisterOptions{})
			env.OnActivity("GetQuote", mock.Anything, "ACME").Return(0.0, errors.New("feed down")).Times(2)
			env.OnActivity("GetQuote", mock.Anything, "ACME").Return(42.0, nil).Once()
			env.OnActivity("SendNote", mock.Anything, "ada").Return("mock ada", nil).After(time.Hour).Once()
			env.OnActivity("SendNote", mock.Anything, "bob").Return("mock bob", nil).Once()
			env.OnActivity("SendNote", mock.Anything, "eve").Return("mock eve", nil).Maybe()
			env.ExecuteWorkflow(quoteWorkflow)
			var s string
			if err := env.GetWorkflowResult(&s); err != nil || s != "42 mock ada mock bob dyn DynamicThing" {
				t.Fatalf("result %q, %v", s, err)
			}
			env.AssertExpectations(t)
			if ds := k.Decisions("SendNote"); len(ds) != 2 || ds[0].Effect != interceptor.Destructive || ds[0].Key == ds[1].Key {
				t.Fatalf("SendNote decisions %+v", ds)
			}
			if ds := k.Decisions("DynamicThing"); len(ds) != 1 {
				t.Fatalf("dynamic decisions %+v", ds)
			}
			if errs := r.finish(); len(errs) != 0 {
				t.Fatalf("failures %q", errs)
			}
		})
	}
}

func noteWorkflow(ctx workflow.Context) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 1, MaximumAttempts: 3}})
	var a string
	err := workflow.ExecuteActivity(ctx, "SendNote", "ada").Get(ctx, &a)
	return a, err
}

// A write mocked to fail with a NotCommitted error and then succeed: the gate
// releases the key after the first, and the retry runs.
func TestMockedNotCommittedWriteRetries(t *testing.T) {
	r := newRecorder(t)
	k := idemgatetest.New(r)
	env := k.NewWorkflowEnvironment()
	env.RegisterWorkflow(noteWorkflow)
	env.RegisterActivity(&lookup{})
	env.OnActivity("SendNote", mock.Anything, "ada").Return("", interceptor.NotCommitted(errors.New("smtp down"))).Once()
	env.OnActivity("SendNote", mock.Anything, "ada").Return("mock ada", nil).Once()
	env.ExecuteWorkflow(noteWorkflow)
	var s string
	if err := env.GetWorkflowResult(&s); err != nil || s != "mock ada" {
		t.Fatalf("result %q, %v", s, err)
	}
	var got []string
	for _, d := range k.Decisions("SendNote") {
		got = append(got, d.Decision)
	}
	if len(got) != 2 || got[1] != "ran" || k.BodyRuns("SendNote") != 2 {
		t.Fatalf("decisions %v, body runs %d", got, k.BodyRuns("SendNote"))
	}
	if errs := r.finish(); len(errs) != 0 {
		t.Fatalf("failures %q", errs)
	}
}
