package idemgatetest_test

import (
	"context"
	"fmt"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/idemgate/idemgate/activities"
	"github.com/idemgate/idemgate/idemgatetest"
	"github.com/idemgate/idemgate/vendorsim"
	"github.com/idemgate/idemgate/workflows"
)

// The e-mail's first attempt reached the sender, then the worker died. The
// sender takes no key, so the gate refuses to send again, for good: the agent
// loop stops with IdempotencyInFlight, and one e-mail went out.
func ExampleKit_CrashAfterVendor() {
	w, err := vendorsim.Start()
	if err != nil {
		panic(err)
	}
	defer w.Close()
	k := idemgatetest.New(nil, idemgatetest.WithOptions(activities.GateOptions(nil)))
	k.CrashAfterVendor("SendEmail")

	res, err := runAgent(k, w, charge, email)
	if err != nil {
		panic(err)
	}
	fmt.Println("stopped:", stopped(res))
	printDecisions(k, "SendEmail")
	fmt.Println("body runs:", k.BodyRuns("SendEmail"), "vendor calls:", k.VendorCalls("SendEmail"), "e-mails sent:", w.Email.Total())
	// Output:
	// stopped: IdempotencyInFlight
	// SendEmail attempt 1: unknown
	// SendEmail attempt 2: refused-in-flight (IdempotencyInFlight)
	// body runs: 1 vendor calls: 1 e-mails sent: 1
}

// The same crash on the card charge: its processor deduplicates on the forwarded
// key (activities.GateOptions sets its window), so the retry re-sends with the
// same key and gets the first charge back. One charge.
func ExampleKit_CrashAfterVendor_vendorDeduplicates() {
	w, err := vendorsim.Start()
	if err != nil {
		panic(err)
	}
	defer w.Close()
	k := idemgatetest.New(nil, idemgatetest.WithOptions(activities.GateOptions(nil)))
	k.CrashAfterVendor("ChargeCard")

	res, err := runAgent(k, w, charge)
	if err != nil {
		panic(err)
	}
	fmt.Println("stopped:", stopped(res))
	printDecisions(k, "ChargeCard")
	fmt.Println("body runs:", k.BodyRuns("ChargeCard"), "charges:", w.Payments.Total(), "answered from the processor's store:", w.Payments.Replays())
	// Output:
	// stopped: done
	// ChargeCard attempt 1: unknown
	// ChargeCard attempt 2: ran
	// body runs: 2 charges: 1 answered from the processor's store: 1
}

// The e-mail's outcome was unknown, and a person checked with the sender and
// resolved the key as sent: the retry returns the recorded result and sends nothing.
func ExampleKit_ResolvedAsSent() {
	w, err := vendorsim.Start()
	if err != nil {
		panic(err)
	}
	defer w.Close()
	k := idemgatetest.New(nil, idemgatetest.WithOptions(activities.GateOptions(nil)))
	k.ResolvedAsSent("SendEmail", activities.EmailReceipt{MessageID: "msg-checked-by-ops"})

	res, err := runAgent(k, w, email)
	if err != nil {
		panic(err)
	}
	fmt.Println("stopped:", stopped(res))
	fmt.Println("the workflow got:", string(res.Steps[0].Result))
	printDecisions(k, "SendEmail")
	fmt.Println("body runs:", k.BodyRuns("SendEmail"), "e-mails sent:", w.Email.Total())
	// Output:
	// stopped: done
	// the workflow got: {"message_id":"msg-checked-by-ops"}
	// SendEmail attempt 1: unknown
	// SendEmail attempt 2: replayed
	// body runs: 1 e-mails sent: 1
}

// The store cannot be reached when the charge is claimed: the write fails closed
// without running, Temporal retries, and the retry charges once.
func ExampleKit_StoreDown() {
	w, err := vendorsim.Start()
	if err != nil {
		panic(err)
	}
	defer w.Close()
	k := idemgatetest.New(nil, idemgatetest.WithOptions(activities.GateOptions(nil)))
	k.StoreDown("ChargeCard")

	res, err := runAgent(k, w, charge)
	if err != nil {
		panic(err)
	}
	fmt.Println("stopped:", stopped(res))
	printDecisions(k, "ChargeCard")
	fmt.Println("body runs:", k.BodyRuns("ChargeCard"), "charges:", w.Payments.Total())
	// Output:
	// stopped: done
	// ChargeCard attempt 1: refused-store-unavailable (IdempotencyStoreUnavailable)
	// ChargeCard attempt 2: ran
	// body runs: 1 charges: 1
}

// Charges are paused (`idemgate pause --activity ChargeCard`): every attempt is
// withheld until the retry policy gives up, and the loop stops with WriteGated.
func ExampleKit_Pause() {
	w, err := vendorsim.Start()
	if err != nil {
		panic(err)
	}
	defer w.Close()
	k := idemgatetest.New(nil, idemgatetest.WithOptions(activities.GateOptions(nil)))
	k.Pause("ChargeCard", "incident 77: processor double-charging")

	res, err := runAgent(k, w, charge)
	if err != nil {
		panic(err)
	}
	fmt.Println("stopped:", stopped(res))
	printDecisions(k, "ChargeCard")
	fmt.Println("body runs:", k.BodyRuns("ChargeCard"), "charges:", w.Payments.Total())
	// Output:
	// stopped: WriteGated
	// ChargeCard attempt 1: gated (WriteGated)
	// ChargeCard attempt 2: gated (WriteGated)
	// ChargeCard attempt 3: gated (WriteGated)
	// body runs: 0 charges: 0
}

// An activity test: the kit's activity environment gives each call a key. With
// a key of the test's own, the second call is the same write and returns the
// stored result without running.
func ExampleKit_NewActivityEnvironment() {
	w, err := vendorsim.Start()
	if err != nil {
		panic(err)
	}
	defer w.Close()
	tools, err := activities.New(activities.Endpoints{Docs: w.Docs.URL, CRM: w.CRM.URL, Tickets: w.Tickets.URL,
		Payments: w.Payments.URL, Email: w.Email.URL, Chat: w.Chat.URL})
	if err != nil {
		panic(err)
	}
	k := idemgatetest.New(nil)
	env := k.NewActivityEnvironment()
	env.RegisterActivity(tools)
	env.SetHeader(idemgatetest.KeyHeader("welcome-mail/cus_42"))
	in := activities.SendEmailInput{To: "ada@example.com", Subject: "Welcome back", Body: "Hi Ada"}
	for range 2 {
		v, err := env.ExecuteActivity(tools.SendEmail, in)
		if err != nil {
			panic(err)
		}
		var r activities.EmailReceipt
		if err := v.Get(&r); err != nil {
			panic(err)
		}
		fmt.Println("message id set:", r.MessageID != "")
	}
	printDecisions(k, "SendEmail")
	fmt.Println("e-mails sent:", w.Email.Total(), "receipts:", len(k.Receipts("SendEmail")))
	// Output:
	// message id set: true
	// message id set: true
	// SendEmail attempt 1: ran
	// SendEmail attempt 1: replayed
	// e-mails sent: 1 receipts: 3
}

// A test that sets worker options of its own (here the session worker, as
// samples-go's fileprocessing test does) passes them through k.WorkerOptions,
// which keeps the gate: env.SetWorkerOptions alone would replace it, and the kit
// would fail the test.
func ExampleKit_WorkerOptions() {
	w, err := vendorsim.Start()
	if err != nil {
		panic(err)
	}
	defer w.Close()
	tools, err := activities.New(activities.Endpoints{Docs: w.Docs.URL, CRM: w.CRM.URL, Tickets: w.Tickets.URL,
		Payments: w.Payments.URL, Email: w.Email.URL, Chat: w.Chat.URL})
	if err != nil {
		panic(err)
	}
	k := idemgatetest.New(nil)
	env := k.NewWorkflowEnvironment()
	env.SetWorkerOptions(k.WorkerOptions(worker.Options{EnableSessionWorker: true}))
	env.RegisterWorkflow(workflows.AgentLoop)
	env.RegisterActivity(tools)
	env.RegisterActivity(&activities.Planning{})
	script := activities.Script{Goal: "welcome", Steps: []activities.Step{email}}
	env.ExecuteWorkflow(workflows.AgentLoop, workflows.AgentInput{Script: &script})
	fmt.Println("completed:", env.IsWorkflowCompleted(), "error:", env.GetWorkflowError())
	printDecisions(k, "SendEmail")
	// Output:
	// completed: true error: <nil>
	// SendEmail attempt 1: ran
}

// An activity test with worker options of its own keeps the kit's per-call key and
// the gate through ActivityWorkerOptions: two different e-mails are two writes, each
// sent once.
func ExampleKit_ActivityWorkerOptions() {
	w, err := vendorsim.Start()
	if err != nil {
		panic(err)
	}
	defer w.Close()
	tools, err := activities.New(activities.Endpoints{Docs: w.Docs.URL, CRM: w.CRM.URL, Tickets: w.Tickets.URL,
		Payments: w.Payments.URL, Email: w.Email.URL, Chat: w.Chat.URL})
	if err != nil {
		panic(err)
	}
	k := idemgatetest.New(nil)
	env := k.NewActivityEnvironment()
	env.SetWorkerOptions(k.ActivityWorkerOptions(worker.Options{BackgroundActivityContext: context.Background()}))
	env.RegisterActivity(tools)
	for _, to := range []string{"ada@example.com", "grace@example.com"} {
		_, err := env.ExecuteActivity(tools.SendEmail, activities.SendEmailInput{To: to, Subject: "Welcome", Body: "Hi"})
		fmt.Println(to, "error:", err)
	}
	printDecisions(k, "SendEmail")
	fmt.Println("e-mails sent:", w.Email.Total())
	// Output:
	// ada@example.com error: <nil>
	// grace@example.com error: <nil>
	// SendEmail attempt 1: ran
	// SendEmail attempt 1: ran
	// e-mails sent: 2
}

// An activity mocked with a plain value goes through the gate like a real one:
// here its first attempt "reached the vendor" and the worker died, so the retry
// of the destructive e-mail is refused. The mock ran once.
func ExampleKit_NewWorkflowEnvironment_mockedActivity() {
	w, err := vendorsim.Start()
	if err != nil {
		panic(err)
	}
	defer w.Close()
	tools, err := activities.New(activities.Endpoints{Docs: w.Docs.URL, CRM: w.CRM.URL, Tickets: w.Tickets.URL,
		Payments: w.Payments.URL, Email: w.Email.URL, Chat: w.Chat.URL})
	if err != nil {
		panic(err)
	}
	k := idemgatetest.New(nil)
	k.CrashAfterVendor("SendEmail")
	env := k.NewWorkflowEnvironment()
	env.RegisterWorkflow(workflows.AgentLoop)
	env.RegisterActivity(tools)
	env.RegisterActivity(&activities.Planning{})
	env.OnActivity(tools.SendEmail, mock.Anything, mock.Anything).Return(activities.EmailReceipt{MessageID: "mocked"}, nil)
	script := activities.Script{Goal: "welcome", Steps: []activities.Step{email}}
	env.ExecuteWorkflow(workflows.AgentLoop, workflows.AgentInput{Script: &script,
		Retry: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 1, MaximumAttempts: 3}})
	var res workflows.AgentResult
	if err := env.GetWorkflowResult(&res); err != nil {
		panic(err)
	}
	fmt.Println("stopped:", stopped(res))
	printDecisions(k, "SendEmail")
	fmt.Println("mock runs:", k.BodyRuns("SendEmail"), "e-mails sent:", w.Email.Total())
	// Output:
	// stopped: IdempotencyInFlight
	// SendEmail attempt 1: unknown
	// SendEmail attempt 2: refused-in-flight (IdempotencyInFlight)
	// mock runs: 1 e-mails sent: 0
}
