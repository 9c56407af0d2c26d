// Package testifysuite is a recipe: a testify suite (suite.Suite with Temporal's
// testsuite.WorkflowTestSuite, the shape of Temporal's samples) whose workflow
// tests run behind the idemgate gate through the idemgatetest kit, inject a crash
// and assert the refusal. The workflow and activities here are the code under
// test; order_test.go is the recipe. See docs/recipes.md.
package testifysuite

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// Order is what the shop knows of an order.
type Order struct {
	ID     string `json:"id"`
	Email  string `json:"email"`
	Amount int64  `json:"amount"` // cents
}

// Mailer is the e-mail vendor of this example: it sends every message it is given
// (it takes no idempotency key, like most e-mail and chat APIs) and counts them.
type Mailer struct {
	mu   sync.Mutex
	sent []string
}

// Sent lists the messages sent, oldest first.
func (m *Mailer) Sent() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.sent...)
}

func (m *Mailer) send(to, text string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sent = append(m.sent, to+": "+text)
	return fmt.Sprintf("msg-%d", len(m.sent))
}

// Shop holds the activities. GetOrder is a read, SendReceipt destructive: the gate
// classifies both by their names.
type Shop struct {
	Mailer *Mailer
}

// GetOrder looks the order up.
func (s *Shop) GetOrder(_ context.Context, id string) (Order, error) {
	return Order{ID: id, Email: "ada@example.com", Amount: 4200}, nil
}

// SendReceipt e-mails the receipt and returns the message ID.
func (s *Shop) SendReceipt(_ context.Context, o Order) (string, error) {
	return s.Mailer.send(o.Email, fmt.Sprintf("receipt for %s: %d cents", o.ID, o.Amount)), nil
}

// ReceiptWorkflow looks an order up and e-mails its receipt.
func ReceiptWorkflow(ctx workflow.Context, orderID string) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 3},
	})
	var s *Shop
	var o Order
	if err := workflow.ExecuteActivity(ctx, s.GetOrder, orderID).Get(ctx, &o); err != nil {
		return "", err
	}
	var msg string
	err := workflow.ExecuteActivity(ctx, s.SendReceipt, o).Get(ctx, &msg)
	return msg, err
}
