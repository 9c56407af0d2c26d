package interceptor_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"go.temporal.io/sdk/activity"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/store/memory"
)

// Wire the gate into a worker: one value in worker.Options.Interceptors. Here the
// worker is Temporal's test environment; in production it is
// worker.New(c, "agent", worker.Options{Interceptors: ...}) with the same value.
// A checkout that charges twice under one business key reaches the card once.
func ExampleNew() {
	gate, err := interceptor.New(interceptor.Options{
		Store: memory.New(), // sqlite.Open or postgres.Open in production
		Effects: map[string]interceptor.Effect{
			"SendHeartbeat": interceptor.Read, // correct a misread name
		},
		IdentifyingFields: map[string][]string{"UpsertContact": {"email"}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := suite.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(worker.Options{Interceptors: []sdkinterceptor.WorkerInterceptor{gate}})

	charges := 0
	env.RegisterActivityWithOptions(func(ctx context.Context, cents int64) (string, error) {
		charges++
		return fmt.Sprintf("ch_%d", charges), nil
	}, activity.RegisterOptions{Name: "ChargeCard"})
	env.RegisterWorkflowWithOptions(func(ctx workflow.Context) ([]string, error) {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
		ctx = interceptor.WithKey(ctx, "order-4217/charge")
		receipts := make([]string, 2)
		for i := range receipts {
			if err := workflow.ExecuteActivity(ctx, "ChargeCard", 4200).Get(ctx, &receipts[i]); err != nil {
				return nil, err
			}
		}
		return receipts, nil
	}, workflow.RegisterOptions{Name: "checkout"})

	env.ExecuteWorkflow("checkout")
	var receipts []string
	if err := env.GetWorkflowResult(&receipts); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("receipts:", receipts, "charges:", charges)
	// Output: receipts: [ch_1 ch_1] charges: 1
}

// New refuses options it cannot honour, naming the field and the fix.
func ExampleNew_missingStore() {
	_, err := interceptor.New(interceptor.Options{})
	fmt.Println(err)
	// Output: idemgate: invalid options: Options.Store is nil: writes need a durable claim store — open one with sqlite.Open(ctx, path) or postgres.Open(ctx, dsn) (memory.New() in tests)
}

func ExampleClassify() {
	for _, name := range []string{"SearchDocs", "crm.contacts.create", "charge_card", "HTTPPostWebhook", "Frobnicate",
		"GetBasketOrder", "GetAndRotateKeys", "CheckIn"} {
		c := interceptor.Classify(name)
		fmt.Printf("%-20s %-16s review=%v\n", name, c.Effect, c.Review)
	}
	fmt.Println(interceptor.Classify("CheckIn").Reason())
	// Output:
	// SearchDocs           read             review=false
	// crm.contacts.create  idempotent-write review=false
	// charge_card          destructive      review=false
	// HTTPPostWebhook      destructive      review=false
	// Frobnicate           destructive      review=true
	// GetBasketOrder       read             review=false
	// GetAndRotateKeys     destructive      review=false
	// CheckIn              destructive      review=true
	// "check" "in" is a phrasal verb, not the read "check": treated as destructive; confirm with Options.Effects
}

func ExampleCensus() {
	c := interceptor.Census([]string{"SearchDocs", "UpsertContact", "ChargeCard", "Frobnicate"})
	fmt.Println(c)
	for _, line := range c.Lines() {
		fmt.Println(line)
	}
	// Output:
	// effects: read=1 idempotent-write=1 destructive=2; review: Frobnicate (the name cannot tell: treated as destructive or the more severe; confirm with Options.Effects)
	// ChargeCard: destructive — "charge" is the verb: destructive
	// review: Frobnicate: destructive — no known verb in "frobnicate": treated as destructive; confirm with Options.Effects
	// SearchDocs: read — "search" is the verb: read
	// UpsertContact: idempotent-write — "upsert" is the verb: idempotent-write
}

// A business key makes two workflows' calls one write.
func ExampleWithKey() {
	checkout := func(ctx workflow.Context, orderID string, cents int64) (string, error) {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
		ctx = interceptor.WithKey(ctx, "order-"+orderID+"/charge")
		var receipt string
		err := workflow.ExecuteActivity(ctx, "ChargeCard", cents).Get(ctx, &receipt)
		return receipt, err
	}
	_ = checkout
}

// Inside an activity, the key is the same on every attempt: hand it to the vendor.
func ExampleKeyFromContext() {
	chargeCard := func(ctx context.Context, cents int64) (string, error) {
		key, ok := interceptor.KeyFromContext(ctx)
		if !ok {
			return "", errors.New("not running through the idemgate interceptor")
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://api.example.com/charges", nil)
		if err != nil {
			return "", interceptor.NotCommitted(err) // nothing was sent
		}
		req.Header.Set("Idempotency-Key", key) // or let idemhttp do it
		return key, nil
	}
	_ = chargeCard
}

// NotCommitted tells the gate the write certainly did not happen: the claim is
// released and the retry runs.
func ExampleNotCommitted() {
	send := func(ctx context.Context, to string) error {
		if to == "" {
			return interceptor.NotCommitted(errors.New("no recipient: nothing was sent"))
		}
		return nil
	}
	err := send(context.Background(), "")
	fmt.Println(errors.Is(err, interceptor.ErrNotCommitted), err)
	// Output: true no recipient: nothing was sent
}

// Re-run a recorded job: reads fire, writes are withheld with the exact call.
func ExampleWithRerunPolicy() {
	replay := func(ctx workflow.Context, allowWrites bool) error {
		ctx = interceptor.WithRerunPolicy(ctx, interceptor.RerunPolicy{AllowWrites: allowWrites})
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
		err := workflow.ExecuteActivity(ctx, "UpsertContact", "ann@example.com").Get(ctx, nil)
		if interceptor.ErrorType(err) == interceptor.ErrTypeWriteGated {
			workflow.GetLogger(ctx).Info("withheld", "error", err)
			return nil
		}
		return err
	}
	_ = replay
}
