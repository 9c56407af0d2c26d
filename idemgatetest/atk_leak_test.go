package idemgatetest_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/idemgate/idemgate/idemgatetest"
	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/store"
)

// outage is a write whose store goes down while it runs (Kit.Store.FailWith, "for
// a longer outage"), and stays down until the test ends.
type outage struct{ k *idemgatetest.Kit }

func (o *outage) SendReminder(ctx context.Context, to string) (string, error) {
	o.k.Store.FailWith(fmt.Errorf("%w: the database is down (test)", store.ErrUnavailable))
	if activity.GetInfo(ctx).Attempt == 1 {
		return "", interceptor.NotCommitted(errors.New("the mail relay refused the connection"))
	}
	return "sent", nil
}

func reminderWorkflow(ctx workflow.Context) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 1, MaximumAttempts: 2}})
	var s string
	err := workflow.ExecuteActivity(ctx, "SendReminder", "ada").Get(ctx, &s)
	return s, err
}

// backgroundStoreWork reports whether a goroutine of the gate still retries a
// store write in the background.
func backgroundStoreWork() bool {
	buf := make([]byte, 1<<22)
	return strings.Contains(string(buf[:runtime.Stack(buf, true)]), "interceptor.(*call).keepTrying")
}

// A test that ends with the kit's store down leaves no goroutine of the gate
// retrying against it for the rest of the test binary (a goroutine leak that
// goleak reports, holding the kit and its store).
func TestStoreLeftDownLeavesNoGoroutine(t *testing.T) {
	r := newRecorder(t)
	k := idemgatetest.New(r)
	env := k.NewWorkflowEnvironment()
	env.RegisterWorkflow(reminderWorkflow)
	env.RegisterActivity(&outage{k: k})
	env.ExecuteWorkflow(reminderWorkflow)
	if err := env.GetWorkflowError(); interceptor.ErrorType(err) != interceptor.ErrTypeStoreUnavailable {
		t.Fatalf("workflow error %v, want %s", err, interceptor.ErrTypeStoreUnavailable)
	}
	if !backgroundStoreWork() {
		t.Fatal("no give-back retried in the background: the test's premise did not hold")
	}
	if errs := r.finish(); len(errs) != 0 {
		t.Fatalf("failures %q", errs)
	}
	deadline := time.Now().Add(30 * time.Second)
	for backgroundStoreWork() {
		if time.Now().After(deadline) {
			t.Fatal("30 s after the test's cleanup, a goroutine of the gate still retries against the kit's store")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
