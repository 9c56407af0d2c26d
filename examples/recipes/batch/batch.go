// Package batch is a recipe: a batch whose progress survives a failed attempt
// without any item being sent twice.
//
// samples-go's retryactivity runs one activity over the whole batch; it
// heartbeats the index of each finished item, and a retry resumes after the last
// index Temporal recorded. Behind idemgate that retry is refused: the activity's
// name has no verb the classifier knows, so it is destructive, and its first
// attempt failed after it had processed items — the gate cannot tell which, so it
// does not run the batch again. That is the rule working (a heartbeat is not a
// receipt: the SDK throttles heartbeats, so the last one Temporal recorded can be
// several items behind what the attempt did), but it surprises the sample's author.
// Two patterns keep the resume:
//
//   - Destructive items (an e-mail, a charge, a payout): one activity per item,
//     each with its own key (interceptor.WithKey(ctx, batchID+"/"+itemID)). The
//     workflow's history is the progress record; a failed item is retried on its
//     own, and when its outcome is unknown only that item is refused and left to a
//     person, while the rest of the batch goes on. See InvoiceBatchWorkflow.
//   - Idempotent items (setting each record to a state, an upsert by the item's
//     ID): keep the sample's single heartbeating activity and say what it is,
//     Options.Effects[name] = interceptor.IdempotentWrite, so an attempt whose
//     outcome is unknown is taken over and resumes. Honest only when doing an item
//     twice is harmless. See RetryWorkflow with BatchProcessingActivity.
//
// The recipe is batch_test.go; docs/recipes.md tells when to use which.
package batch

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/idemgate/idemgate/interceptor"
)

// Records is the target of BatchProcessingActivity: each task sets its record to
// "processed", which is idempotent by nature (the same state, however often).
type Records struct {
	mu     sync.Mutex
	state  map[int]string
	writes map[int]int
}

// NewRecords returns empty records.
func NewRecords() *Records { return &Records{state: map[int]string{}, writes: map[int]int{}} }

// Set sets record id to state.
func (r *Records) Set(id int, state string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.state[id] = state
	r.writes[id]++
}

// State is record id's state ("" when never set) and how often it was written.
func (r *Records) State(id int) (string, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state[id], r.writes[id]
}

// Batch holds the activities.
type Batch struct {
	Records *Records
	Mailer  *Mailer
}

// RetryWorkflow is samples-go's retryactivity workflow, unchanged.
func RetryWorkflow(ctx workflow.Context) error {
	ao := workflow.ActivityOptions{
		StartToCloseTimeout: 2 * time.Minute,
		HeartbeatTimeout:    10 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2.0,
			MaximumInterval:    time.Minute,
			MaximumAttempts:    5,
		},
	}
	ctx = workflow.WithActivityOptions(ctx, ao)
	var b *Batch
	return workflow.ExecuteActivity(ctx, b.BatchProcessingActivity, 0, 20, time.Second).Get(ctx, nil)
}

// BatchProcessingActivity is samples-go's: it processes batchSize tasks from
// firstTaskID, heartbeats each finished index, resumes after the recorded one on a
// retry, and fails (retryably) after a third of the batch in every attempt. Here
// "process task i" sets record i to "processed".
func (b *Batch) BatchProcessingActivity(ctx context.Context, firstTaskID, batchSize int, processDelay time.Duration) error {
	i := firstTaskID
	if activity.HasHeartbeatDetails(ctx) {
		var completedIdx int
		if err := activity.GetHeartbeatDetails(ctx, &completedIdx); err == nil {
			i = completedIdx + 1
		}
	}
	processed := 0
	for ; i < firstTaskID+batchSize; i++ {
		b.Records.Set(i, "processed")
		time.Sleep(processDelay) // the sample's simulated work
		activity.RecordHeartbeat(ctx, i)
		processed++
		if processed >= batchSize/3 && i < firstTaskID+batchSize-1 {
			return temporal.NewApplicationError("some retryable error", "SomeType")
		}
	}
	return nil
}

// BatchOptions are the gate options the single-activity pattern needs: its items
// are idempotent, so the batch is too, and a retry after an unknown outcome is
// taken over and resumes from the heartbeat instead of being refused.
func BatchOptions() interceptor.Options {
	return interceptor.Options{Effects: map[string]interceptor.Effect{
		"BatchProcessingActivity": interceptor.IdempotentWrite,
	}}
}

// Invoice is one item of an invoice batch.
type Invoice struct {
	ID     string `json:"id"`
	Email  string `json:"email"`
	Amount int64  `json:"amount"` // cents
}

// Mailer is an e-mail vendor that takes no key and sends every message it gets.
// FailAfterSend makes its answer to one invoice's first message fail after the
// message went out (a dropped connection, a worker that died): the sender cannot
// tell whether it left.
type Mailer struct {
	mu            sync.Mutex
	sent          map[string]int
	FailAfterSend map[string]bool
}

// NewMailer returns a mailer that has sent nothing.
func NewMailer() *Mailer { return &Mailer{sent: map[string]int{}, FailAfterSend: map[string]bool{}} }

// Sent is how many messages went out for invoice id.
func (m *Mailer) Sent(id string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sent[id]
}

// Total is how many messages went out.
func (m *Mailer) Total() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, c := range m.sent {
		n += c
	}
	return n
}

// SendInvoice e-mails one invoice. Destructive by its name ("send").
func (b *Batch) SendInvoice(_ context.Context, inv Invoice) (string, error) {
	b.Mailer.mu.Lock()
	defer b.Mailer.mu.Unlock()
	b.Mailer.sent[inv.ID]++
	if b.Mailer.FailAfterSend[inv.ID] {
		delete(b.Mailer.FailAfterSend, inv.ID)
		return "", fmt.Errorf("mailer: connection reset after the request for %s was written", inv.ID)
	}
	return "msg-" + inv.ID, nil
}

// BatchResult says what happened to each invoice of a batch.
type BatchResult struct {
	// Sent are the invoices whose e-mail went out, with this run or an earlier run
	// of the same batch (answered from the claim store).
	Sent []string `json:"sent"`
	// Unknown are the invoices whose e-mail may or may not have gone out: the gate
	// refused to send again. A person settles each (`idemgate pending`,
	// `idemgate resolve KEY --sent|--not-sent`).
	Unknown []string `json:"unknown"`
}

// InvoiceBatchWorkflow sends one e-mail per invoice, each its own gated activity
// with its own business key: batchID/invoice ID. A failed e-mail is retried on its
// own; one whose outcome is unknown is refused by the gate and reported, and the
// batch goes on. Running the batch again (a workflow retry, a reset, a second run
// with the same batchID) sends nothing twice: the invoices already sent return
// their stored results.
func InvoiceBatchWorkflow(ctx workflow.Context, batchID string, invoices []Invoice) (BatchResult, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumAttempts: 5},
	})
	var b *Batch
	var res BatchResult
	for _, inv := range invoices {
		// A business key of 16 to 255 characters, stable for this item of this batch.
		ictx := interceptor.WithKey(ctx, batchID+"/"+inv.ID)
		var msg string
		err := workflow.ExecuteActivity(ictx, b.SendInvoice, inv).Get(ctx, &msg)
		switch {
		case err == nil:
			res.Sent = append(res.Sent, inv.ID)
		case interceptor.ErrorType(err) == interceptor.ErrTypeInFlight:
			res.Unknown = append(res.Unknown, inv.ID)
		default:
			return res, err
		}
	}
	return res, nil
}
