package batch_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"

	"github.com/idemgate/idemgate/examples/recipes/batch"
	"github.com/idemgate/idemgate/idemgatetest"
	"github.com/idemgate/idemgate/interceptor"
)

// runSample runs samples-go's retryactivity test body in env: the activity is
// mocked with a function that notes where each attempt resumed and runs the real
// activity without its delay. It returns those resume points.
func runSample(env *testsuite.TestWorkflowEnvironment, b *batch.Batch) []int {
	env.RegisterWorkflow(batch.RetryWorkflow)
	env.RegisterActivity(b)
	var startedIDs []int
	env.OnActivity(b.BatchProcessingActivity, mock.Anything, mock.Anything, mock.Anything, mock.Anything).
		Return(func(ctx context.Context, firstTaskID, batchSize int, _ time.Duration) error {
			i := firstTaskID
			if activity.HasHeartbeatDetails(ctx) {
				var completedIdx int
				if err := activity.GetHeartbeatDetails(ctx, &completedIdx); err == nil {
					i = completedIdx + 1
				}
			}
			startedIDs = append(startedIDs, i)
			return b.BatchProcessingActivity(ctx, firstTaskID, batchSize, time.Nanosecond)
		})
	env.ExecuteWorkflow(batch.RetryWorkflow)
	return startedIDs
}

// The sample as it is, behind the gate: its first attempt processed tasks 0–5 and
// failed, so the outcome of a destructive write is unknown, and the retry is
// refused. This is the surprise the recipe answers.
func TestSampleAsIsIsRefusedOnRetry(t *testing.T) {
	k := idemgatetest.New(t)
	b := &batch.Batch{Records: batch.NewRecords()}
	started := runSample(k.NewWorkflowEnvironment(), b)
	if !slices.Equal(started, []int{0}) {
		t.Fatalf("attempts resumed at %v; want only the first attempt to run", started)
	}
	ds := k.Decisions("BatchProcessingActivity")
	if len(ds) != 2 || ds[0].Decision != "unknown" || ds[1].ErrorType != interceptor.ErrTypeInFlight {
		t.Fatalf("decisions %+v; want unknown, then refused (IdempotencyInFlight)", ds)
	}
	if _, n := b.Records.State(6); n != 0 {
		t.Fatalf("task 6 was processed %d times; the refused retry must not run", n)
	}
}

// Pattern 2: the items are idempotent (each sets its record's state), so the batch
// is, and the override says so. The retry takes the claim over with the same key
// and resumes from the heartbeat, exactly as in the sample's own test.
func TestIdempotentBatchResumesFromHeartbeat(t *testing.T) {
	k := idemgatetest.New(t, idemgatetest.WithOptions(batch.BatchOptions()))
	env := k.NewWorkflowEnvironment()
	b := &batch.Batch{Records: batch.NewRecords()}
	started := runSample(env, b)

	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow completed %v, error %v", env.IsWorkflowCompleted(), env.GetWorkflowError())
	}
	if !slices.Equal(started, []int{0, 6, 12, 18}) {
		t.Fatalf("attempts resumed at %v, want the sample's [0 6 12 18]", started)
	}
	for id := range 20 {
		if state, _ := b.Records.State(id); state != "processed" {
			t.Fatalf("record %d is %q, want processed", id, state)
		}
	}
	var ds []string
	for _, d := range k.Decisions("BatchProcessingActivity") {
		ds = append(ds, d.Decision)
	}
	if want := []string{"unknown", "unknown", "unknown", "ran"}; !slices.Equal(ds, want) {
		t.Fatalf("decisions %v, want %v (each failed attempt unknown, taken over by the next)", ds, want)
	}
}

func invoices(n int) []batch.Invoice {
	out := make([]batch.Invoice, n)
	for i := range out {
		out[i] = batch.Invoice{ID: fmt.Sprintf("inv-%02d", i+1), Email: fmt.Sprintf("customer%d@example.com", i+1), Amount: int64(1000 + i)}
	}
	return out
}

// Pattern 1: destructive items, one gated activity each, with a key per item. The
// mailer's answer to invoice 7 is lost after the e-mail went out: only invoice 7 is
// refused (and reported for a person), the other 19 are sent, each once. Running
// the same batch again sends nothing: 19 answers come from the store, invoice 7 is
// still refused.
func TestPerItemKeysSendEachItemOnce(t *testing.T) {
	k := idemgatetest.New(t)
	b := &batch.Batch{Mailer: batch.NewMailer()}
	b.Mailer.FailAfterSend["inv-07"] = true
	items := invoices(20)

	run := func() batch.BatchResult {
		env := k.NewWorkflowEnvironment()
		env.RegisterWorkflow(batch.InvoiceBatchWorkflow)
		env.RegisterActivity(b)
		env.ExecuteWorkflow(batch.InvoiceBatchWorkflow, "invoices-2026-11", items)
		var res batch.BatchResult
		if err := env.GetWorkflowResult(&res); err != nil {
			t.Fatalf("workflow: %v", err)
		}
		return res
	}
	for _, want := range []string{"first run", "the same batch again"} {
		res := run()
		if len(res.Sent) != 19 || !slices.Equal(res.Unknown, []string{"inv-07"}) {
			t.Fatalf("%s: sent %d %v, unknown %v; want 19 sent and inv-07 unknown", want, len(res.Sent), res.Sent, res.Unknown)
		}
		for _, inv := range items {
			if n := b.Mailer.Sent(inv.ID); n != 1 {
				t.Fatalf("%s: %s e-mailed %d times, want once", want, inv.ID, n)
			}
		}
	}
	if got := k.BodyRuns("SendInvoice"); got != 20 {
		t.Fatalf("SendInvoice ran %d times over both runs, want 20 (the second run ran nothing)", got)
	}
	replayed := 0
	for _, d := range k.Decisions("SendInvoice") {
		if d.Decision == "replayed" {
			replayed++
		}
	}
	if replayed != 19 {
		t.Fatalf("%d decisions replayed a stored result, want 19 (the second run)", replayed)
	}
}
