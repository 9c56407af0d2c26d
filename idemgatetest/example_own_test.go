package idemgatetest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/idemgate/idemgate/idemgatetest"
	"github.com/idemgate/idemgate/idemhttp"
	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/vendorsim"
)

// Shop is a user's activities: the card processor deduplicates on the key that
// idemhttp forwards; the e-mail sender takes no key.
type Shop struct {
	Processor, Mailer string // base URLs
	pay, mail         *http.Client
}

func NewShop(processor, mailer string) *Shop {
	return &Shop{Processor: processor, Mailer: mailer,
		pay: idemhttp.Client(idemhttp.Stripe), mail: idemhttp.Client(idemhttp.NoKey)}
}

func (s *Shop) ChargeCard(ctx context.Context, order string) error {
	return post(ctx, s.pay, s.Processor+"/v1/charges", `{"customer":"cus_42","amount":4200,"currency":"eur","description":"`+order+`"}`)
}

func (s *Shop) SendEmail(ctx context.Context, order string) error {
	return post(ctx, s.mail, s.Mailer+"/v3/mail/send", `{"to":"ada@example.com","subject":"`+order+` paid","body":"Thanks."}`)
}

func post(ctx context.Context, c *http.Client, url, body string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewBufferString(body))
	if err != nil {
		return interceptor.NotCommitted(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req) // the request's ctx carries the key to idemhttp
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s answered %d", url, resp.StatusCode)
	}
	return nil
}

// Checkout is a user's workflow: charge, then confirm by e-mail.
func Checkout(ctx workflow.Context, order string) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 1, MaximumAttempts: 3}})
	var s *Shop
	if err := workflow.ExecuteActivity(ctx, s.ChargeCard, order).Get(ctx, nil); err != nil {
		return err
	}
	return workflow.ExecuteActivity(ctx, s.SendEmail, order).Get(ctx, nil)
}

// A workflow test with an injected crash, in the library's names only: both
// writes reached their vendors and then the worker died. The options are the
// workers' own, and they decide what each crash turns into: the processor is in
// VendorWindows (it deduplicates by the key for 24 h), so the charge is re-sent
// with the same key and answered from the processor's store; the sender is not,
// so the e-mail is refused with its withheld call, waiting for a person.
func Example() {
	vendors, err := vendorsim.Start() // a card processor and an e-mail sender on loopback
	if err != nil {
		panic(err)
	}
	defer vendors.Close()

	k := idemgatetest.New(nil, idemgatetest.WithOptions(interceptor.Options{
		VendorWindows: map[string]time.Duration{"ChargeCard": 24 * time.Hour},
	}))
	k.CrashAfterVendor("ChargeCard") // the body reached the vendor, then the worker died
	k.CrashAfterVendor("SendEmail")
	env := k.NewWorkflowEnvironment()
	env.RegisterWorkflow(Checkout)
	env.RegisterActivity(NewShop(vendors.Payments.URL, vendors.Email.URL))
	env.ExecuteWorkflow(Checkout, "order-4217")

	var refused *temporal.ApplicationError
	if errors.As(env.GetWorkflowError(), &refused) {
		fmt.Println("workflow refused with:", refused.Type())
	}
	for _, a := range []string{"ChargeCard", "SendEmail"} {
		for _, d := range k.Decisions(a) {
			fmt.Printf("%s attempt %d: %s\n", d.Activity, d.Attempt, d.Decision)
		}
	}
	fmt.Println("charges:", vendors.Payments.Total(), "answered from the processor's store:", vendors.Payments.Replays(),
		"e-mails:", vendors.Email.Total())
	// Output:
	// workflow refused with: IdempotencyInFlight
	// ChargeCard attempt 1: unknown
	// ChargeCard attempt 2: ran
	// SendEmail attempt 1: unknown
	// SendEmail attempt 2: refused-in-flight
	// charges: 1 answered from the processor's store: 1 e-mails: 1
}
