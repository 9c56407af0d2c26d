package idemgatetest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/idemgate/idemgate/idemgatetest"
	"github.com/idemgate/idemgate/interceptor"
)

// batch is samples-go's retryactivity: a heartbeating batch that fails part-way
// and resumes from its heartbeat details on the retry.
type batch struct{ attempts int }

func (b *batch) BatchProcessing(ctx context.Context, first, size int) error {
	b.attempts++
	i := first
	if activity.HasHeartbeatDetails(ctx) {
		var done int
		if err := activity.GetHeartbeatDetails(ctx, &done); err == nil {
			i = done + 1
		}
	}
	for ; i < first+size; i++ {
		activity.RecordHeartbeat(ctx, i)
		if b.attempts == 1 && i == first+size/2 {
			return interceptor.NotCommitted(errors.New("the batch broke half-way (nothing committed)"))
		}
	}
	return nil
}

func batchWorkflow(ctx workflow.Context) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute, HeartbeatTimeout: 10 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 1, MaximumAttempts: 3}})
	return workflow.ExecuteActivity(ctx, "BatchProcessing", 0, 20).Get(ctx, nil)
}

func TestHeartbeatingBatchRetries(t *testing.T) {
	r := newRecorder(t)
	k := idemgatetest.New(r, idemgatetest.WithOptions(interceptor.Options{Effects: map[string]interceptor.Effect{"BatchProcessing": interceptor.IdempotentWrite}}))
	b := &batch{}
	env := k.NewWorkflowEnvironment()
	env.RegisterWorkflow(batchWorkflow)
	env.RegisterActivity(b)
	env.ExecuteWorkflow(batchWorkflow)
	if err := env.GetWorkflowError(); err != nil || b.attempts != 2 {
		t.Fatalf("workflow error %v, attempts %d", err, b.attempts)
	}
	if errs := r.finish(); len(errs) != 0 {
		t.Fatalf("failures %q", errs)
	}
}

type notifier struct{}

func (*notifier) SendNotice(_ context.Context, to string) (string, error) {
	return "sent to " + to, nil
}

func childNotice(ctx workflow.Context, to string) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	var s string
	err := workflow.ExecuteActivity(ctx, "SendNotice", to).Get(ctx, &s)
	return s, err
}

func parentNotice(ctx workflow.Context) (string, error) {
	var a, b string
	if err := workflow.ExecuteChildWorkflow(ctx, childNotice, "ada").Get(ctx, &a); err != nil {
		return "", err
	}
	if err := workflow.ExecuteChildWorkflow(ctx, childNotice, "bob").Get(ctx, &b); err != nil {
		return "", err
	}
	return a + "; " + b, nil
}

// Child workflows whose activity is mocked with a plain value: each child's call
// is a write of its own, through the gate.
func TestChildWorkflowsMockedActivity(t *testing.T) {
	r := newRecorder(t)
	k := idemgatetest.New(r)
	env := k.NewWorkflowEnvironment()
	env.RegisterWorkflow(parentNotice)
	env.RegisterWorkflow(childNotice)
	env.RegisterActivity(&notifier{})
	env.OnActivity("SendNotice", mock.Anything, "ada").Return("mock ada", nil).Once()
	env.OnActivity("SendNotice", mock.Anything, "bob").Return("mock bob", nil).Once()
	env.ExecuteWorkflow(parentNotice)
	var s string
	if err := env.GetWorkflowResult(&s); err != nil || s != "mock ada; mock bob" {
		t.Fatalf("result %q, %v", s, err)
	}
	ds := k.Decisions("SendNotice")
	if len(ds) != 2 || ds[0].Key == ds[1].Key {
		t.Fatalf("decisions %+v", ds)
	}
	env.AssertExpectations(t)
	if errs := r.finish(); len(errs) != 0 {
		t.Fatalf("failures %q", errs)
	}
}

// A child workflow mocked with a function that runs an activity.
func TestMockedChildWorkflowFunctionRunsAnActivity(t *testing.T) {
	r := newRecorder(t)
	k := idemgatetest.New(r)
	env := k.NewWorkflowEnvironment()
	env.RegisterWorkflow(parentNotice)
	env.RegisterWorkflow(childNotice)
	env.RegisterActivity(&notifier{})
	env.OnWorkflow(childNotice, mock.Anything, mock.Anything).Return(func(ctx workflow.Context, to string) (string, error) {
		return childNotice(ctx, to)
	})
	env.ExecuteWorkflow(parentNotice)
	var s string
	if err := env.GetWorkflowResult(&s); err != nil || s != "sent to ada; sent to bob" {
		t.Fatalf("result %q, %v", s, err)
	}
	if ds := k.Decisions("SendNotice"); len(ds) != 2 || ds[0].Key == ds[1].Key || ds[1].Decision != "ran" {
		t.Fatalf("decisions %+v", ds)
	}
	if errs := r.finish(); len(errs) != 0 {
		t.Fatalf("failures %q", errs)
	}
}
