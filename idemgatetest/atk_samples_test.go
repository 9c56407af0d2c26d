package idemgatetest_test

import (
	"context"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/workflow"

	"github.com/idemgate/idemgate/idemgatetest"
)

// expense is samples-go's expense pattern: the decision activity hands its task
// token to a person (here a channel) and returns ErrResultPending; the person
// completes it later through the client (here env.CompleteActivity).
type expense struct {
	tokens   chan []byte
	payments int
}

func (e *expense) CreateExpense(_ context.Context, id string) error { return nil }

func (e *expense) WaitForDecision(ctx context.Context, id string) (string, error) {
	e.tokens <- activity.GetInfo(ctx).TaskToken
	return "", activity.ErrResultPending
}

func (e *expense) Payment(_ context.Context, id string) error {
	e.payments++
	return nil
}

func expenseWorkflow(ctx workflow.Context, id string) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Minute})
	if err := workflow.ExecuteActivity(ctx, "CreateExpense", id).Get(ctx, nil); err != nil {
		return "", err
	}
	var status string
	if err := workflow.ExecuteActivity(ctx, "WaitForDecision", id).Get(ctx, &status); err != nil {
		return "", err
	}
	if status != "APPROVED" {
		return "REJECTED", nil
	}
	if err := workflow.ExecuteActivity(ctx, "Payment", id).Get(ctx, nil); err != nil {
		return "", err
	}
	return "COMPLETED", nil
}

// samples-go's expense test completes the decision activity asynchronously with
// env.CompleteActivity: a sound test, which the kit must pass.
func TestExpenseAsyncCompletionPasses(t *testing.T) {
	r := newRecorder(t)
	k := idemgatetest.New(r)
	e := &expense{tokens: make(chan []byte, 1)}
	env := k.NewWorkflowEnvironment()
	env.RegisterWorkflow(expenseWorkflow)
	env.RegisterActivity(e)
	var completeErr error
	env.RegisterDelayedCallback(func() {
		completeErr = env.CompleteActivity(<-e.tokens, "APPROVED", nil)
	}, time.Minute)
	env.ExecuteWorkflow(expenseWorkflow, "expense-1")
	if completeErr != nil {
		t.Fatalf("CompleteActivity: %v", completeErr)
	}
	var status string
	if err := env.GetWorkflowResult(&status); err != nil || status != "COMPLETED" || e.payments != 1 {
		t.Fatalf("result %q, %v; payments %d", status, err, e.payments)
	}
	if errs := r.finish(); len(errs) != 0 {
		t.Fatalf("the kit failed a sound async-completion test: %q", errs)
	}
	if ds := k.Decisions("WaitForDecision"); len(ds) == 0 {
		t.Fatalf("no decision for the async activity")
	}
}
