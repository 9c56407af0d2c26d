package interceptor

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memory"
)

// Soak finding 2: a refusal of a write whose claim a live attempt holds was
// retryable and named no withheld call; a local activity's retry past its
// ScheduleToClose (by default its StartToClose) is never made, so that refusal was
// the workflow's last word on the write, without the call. The refusal now names
// its withheld call (message, receipt, details) and says when no retry can come.
func TestInFlightRefusalPastScheduleToCloseNamesItsCall(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	st := memory.New()
	r := &root{opts: Options{Store: st}}
	for _, tc := range []struct {
		name  string
		s2c   time.Duration
		final bool
	}{
		{"retry fits", time.Hour, false},
		{"retry past ScheduleToClose", 4 * time.Second, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "key-" + tc.name
			// An activity context for the call's logger and metrics; its info is the test's.
			var suite testsuite.WorkflowTestSuite
			env := suite.NewTestActivityEnvironment()
			env.RegisterActivityWithOptions(func(ctx context.Context) error {
				c := &call{r: r, ctx: ctx, name: "CreateTicket", effect: IdempotentWrite, key: key,
					args: []byte(`[{"subject":"s"}]`), now: t0.Add(time.Second),
					info: activity.Info{Attempt: 2, ScheduledTime: t0, ScheduleToCloseTimeout: tc.s2c, IsLocalActivity: true}}
				return c.inFlight(store.Record{Key: key, Attempt: 1, WorkflowID: "wf", Lease: t0.Add(8 * time.Second)})
			}, activity.RegisterOptions{Name: "Refuse"})
			_, err := env.ExecuteActivity("Refuse")
			var app *temporal.ApplicationError
			if !errors.As(err, &app) || app.Type() != ErrTypeInFlight {
				t.Fatalf("inFlight = %v, want an %s ApplicationError", err, ErrTypeInFlight)
			}
			var wc WithheldCall
			if !app.HasDetails() || app.Details(&wc) != nil || wc.Activity != "CreateTicket" || wc.Key != key {
				t.Errorf("details %+v: want the withheld call", wc)
			}
			if !strings.Contains(err.Error(), `Withheld call: CreateTicket([{"subject":"s"}])`) {
				t.Errorf("message %q does not name the withheld call", err)
			}
			if got := strings.Contains(err.Error(), "ScheduleToClose"); got != tc.final {
				t.Errorf("message says the ScheduleToClose ends it: %v, want %v: %q", got, tc.final, err)
			}
			if benign := app.Category() == temporal.ApplicationErrorCategoryBenign; benign == tc.final {
				t.Errorf("benign %v for a refusal that ends the activity: %v", benign, tc.final)
			}
			rs, _ := st.Receipts(context.Background(), store.ReceiptFilter{Key: key})
			if len(rs) != 1 || string(rs[0].Call) != `[{"subject":"s"}]` {
				t.Errorf("receipts %+v: want one refusal with its call", rs)
			}
		})
	}
}
