// Package workeroptions is a recipe: a workflow test that needs worker options of
// its own — here an interceptor of the team's (an audit trail, the shape of
// samples-go's interceptor samples) and a BackgroundActivityContext that carries a
// dependency to the activities — and keeps the idemgate gate through the
// idemgatetest kit's WorkerOptions. The code under test is here; the recipe is
// audit_test.go. See docs/recipes.md.
package workeroptions

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// Audit is a worker interceptor of the team's own: it records every activity
// attempt the worker starts, as "Activity#attempt".
type Audit struct {
	interceptor.WorkerInterceptorBase
	mu      sync.Mutex
	entries []string
}

// Entries lists the recorded attempts, oldest first.
func (a *Audit) Entries() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.entries...)
}

func (a *Audit) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	i := &auditInbound{a: a}
	i.Next = next
	return i
}

type auditInbound struct {
	interceptor.ActivityInboundInterceptorBase
	a *Audit
}

func (i *auditInbound) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	info := activity.GetInfo(ctx)
	i.a.mu.Lock()
	i.a.entries = append(i.a.entries, fmt.Sprintf("%s#%d", info.ActivityType.Name, info.Attempt))
	i.a.mu.Unlock()
	return i.Next.ExecuteActivity(ctx, in)
}

// Ledger is the dependency the worker gives every activity through
// worker.Options.BackgroundActivityContext: a vendor that books every payout it is
// given (it takes no idempotency key).
type Ledger struct {
	mu      sync.Mutex
	payouts []int64
}

// Payouts lists the amounts booked.
func (l *Ledger) Payouts() []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]int64(nil), l.payouts...)
}

type ledgerKey struct{}

// WithLedger returns ctx carrying l, for BackgroundActivityContext.
func WithLedger(ctx context.Context, l *Ledger) context.Context {
	return context.WithValue(ctx, ledgerKey{}, l)
}

// PayOut books amount (cents) with the ledger in the activity's context.
// Destructive by its name ("pay").
func PayOut(ctx context.Context, amount int64) (int, error) {
	l, ok := ctx.Value(ledgerKey{}).(*Ledger)
	if !ok {
		return 0, temporal.NewNonRetryableApplicationError("PayOut: no ledger in the activity context: "+
			"give the worker BackgroundActivityContext: WithLedger(ctx, ledger)", "NoLedger", errors.New("no ledger"))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.payouts = append(l.payouts, amount)
	return len(l.payouts), nil
}

// PayoutWorkflow pays amount out once.
func PayoutWorkflow(ctx workflow.Context, amount int64) (int, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 3},
	})
	var n int
	err := workflow.ExecuteActivity(ctx, PayOut, amount).Get(ctx, &n)
	return n, err
}
