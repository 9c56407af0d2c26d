package interceptor_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/idemgate/idemgate/interceptor"
)

// Profile is embedded by Customer, whose own name shadows the profile's, as
// encoding/json (and so the data converter) sees it.
type Profile struct {
	Name  string `json:"name"`
	Email string `json:"email"`
}

type Customer struct {
	Profile
	Name string `json:"name"`
}

type customerCall struct {
	Key      string
	Customer Customer
}

type customerTools struct{ v *vendor }

func (c *customerTools) ChargeCustomer(ctx context.Context, cu Customer) (string, error) {
	c.v.hit(ctx)
	return "charged " + cu.Name, nil
}

func customersWorkflow(ctx workflow.Context, calls []customerCall) ([]string, error) {
	var out []string
	for _, c := range calls {
		cctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute,
			RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}})
		if c.Key != "" {
			cctx = interceptor.WithKey(cctx, c.Key)
		}
		var s string
		if err := workflow.ExecuteActivity(cctx, "ChargeCustomer", c.Customer).Get(cctx, &s); err != nil {
			return out, err
		}
		out = append(out, s)
	}
	return out, nil
}

// TestShadowedFieldNeverHandsAliceResultToBob: the arguments hash and the identifying
// fields read the name the data converter carries (the outer one), so bob is never
// answered with alice's stored result.
func TestShadowedFieldNeverHandsAliceResultToBob(t *testing.T) {
	alice := Customer{Name: "alice", Profile: Profile{Email: "shared@example.com"}}
	bob := Customer{Name: "bob", Profile: Profile{Email: "shared@example.com"}}
	run := func(h *harness, calls ...customerCall) ([]string, error) {
		env := h.env("wf-customers")
		env.RegisterWorkflowWithOptions(customersWorkflow, workflow.RegisterOptions{Name: "customers"})
		env.RegisterActivity(&customerTools{v: h.v})
		env.ExecuteWorkflow("customers", calls)
		var out []string
		err := env.GetWorkflowError()
		if err == nil {
			if gerr := env.GetWorkflowResult(&out); gerr != nil {
				t.Fatal(gerr)
			}
		}
		return out, err
	}

	t.Run("IdentifyingFields", func(t *testing.T) {
		h := newHarness(t)
		h.opts.IdentifyingFields = map[string][]string{"ChargeCustomer": {"name"}}
		out, err := run(h, customerCall{Customer: alice}, customerCall{Customer: bob})
		if err != nil || len(out) != 2 || out[1] != "charged bob" || h.v.count() != 2 {
			t.Fatalf("bob after alice: results %q, vendor %d, err %v; want bob charged on his own", out, h.v.count(), err)
		}
	})
	t.Run("WithKey", func(t *testing.T) {
		h := newHarness(t)
		out, err := run(h, customerCall{Key: bizKey, Customer: alice}, customerCall{Key: bizKey, Customer: bob})
		if err == nil || h.v.count() != 1 {
			t.Fatalf("results %q, vendor %d, err %v; want alice charged once and bob refused", out, h.v.count(), err)
		}
		app := appErr(t, err)
		if app.Type() != interceptor.ErrTypeConflict || !strings.Contains(app.Error(), "name") {
			t.Fatalf("bob under alice's key: %v, want an IdempotencyConflict naming the field", err)
		}
	})
}
