// Package expense is a recipe: an activity completed asynchronously from another
// process, the shape of samples-go's expense sample, behind the idemgate gate.
//
// WaitForDecisionActivity registers the expense with the expense system and returns
// activity.ErrResultPending; a person approves it there later, and the expense
// system — another process, with its own Temporal client — completes the activity.
// Behind the gate the activity hands over interceptor.AsyncToken(ctx) (the task
// token with the gated call's key and owner, as JSON) instead of the bare task
// token, and the expense system completes it with interceptor.CompleteAsync, which
// stores the decision under the key before it completes the activity. The plain
// client.CompleteActivity completes the activity but stores nothing: the gate's
// claim stays open, becomes pending for a person once the attempt's deadline
// passes, and a reset that re-runs the step is refused instead of answered with
// the decision. The recipe is expense_test.go; see docs/recipes.md.
package expense

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/workflow"

	"github.com/idemgate/idemgate/interceptor"
)

// Activities are the sample's three activities, calling the expense system at BaseURL.
type Activities struct {
	BaseURL string
	HTTP    *http.Client
}

// GateOptions says what the sample's activities are (their names carry no verb
// the classifier knows, so it would flag them for review): registering the
// expense for a decision and paying it are each to happen once.
func GateOptions() interceptor.Options {
	return interceptor.Options{Effects: map[string]interceptor.Effect{
		"CreateExpenseActivity":   interceptor.Destructive,
		"WaitForDecisionActivity": interceptor.Destructive,
		"PaymentActivity":         interceptor.Destructive,
	}}
}

// CreateExpenseActivity creates the expense report.
func (a *Activities) CreateExpenseActivity(ctx context.Context, expenseID string) error {
	return a.post(ctx, "/create?id="+url.QueryEscape(expenseID), nil)
}

// WaitForDecisionActivity hands the call over to the expense system and returns
// activity.ErrResultPending: the expense system completes it when a person decides.
func (a *Activities) WaitForDecisionActivity(ctx context.Context, expenseID string) (string, error) {
	// Not activity.GetInfo(ctx).TaskToken alone: the hand-off also names the gated
	// call's key and owner, under which CompleteAsync stores the decision.
	h, err := interceptor.AsyncToken(ctx)
	if err != nil {
		return "", err
	}
	body, err := json.Marshal(h)
	if err != nil {
		return "", err
	}
	if err := a.post(ctx, "/registerCallback?id="+url.QueryEscape(expenseID), body); err != nil {
		return "", err
	}
	return "", activity.ErrResultPending
}

// PaymentActivity pays the expense.
func (a *Activities) PaymentActivity(ctx context.Context, expenseID string) error {
	return a.post(ctx, "/action?type=payment&id="+url.QueryEscape(expenseID), nil)
}

func (a *Activities) post(ctx context.Context, path string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.BaseURL+path, strings.NewReader(string(body)))
	if err != nil {
		return err
	}
	resp, err := a.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if string(out) != "SUCCEED" {
		return fmt.Errorf("expense system: %s: %s", path, out)
	}
	return nil
}

// SampleExpenseWorkflow is the sample's workflow: create, wait for the decision,
// pay when approved.
func SampleExpenseWorkflow(ctx workflow.Context, expenseID string) (string, error) {
	var a *Activities
	ctx1 := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second})
	if err := workflow.ExecuteActivity(ctx1, a.CreateExpenseActivity, expenseID).Get(ctx1, nil); err != nil {
		return "", err
	}
	// The decision's timeout bounds how long a person may take.
	ctx2 := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Minute})
	var status string
	if err := workflow.ExecuteActivity(ctx2, a.WaitForDecisionActivity, expenseID).Get(ctx2, &status); err != nil {
		return "", err
	}
	if status != "APPROVED" {
		return "", nil
	}
	if err := workflow.ExecuteActivity(ctx2, a.PaymentActivity, expenseID).Get(ctx2, nil); err != nil {
		return "", err
	}
	return "COMPLETED", nil
}

// CompleteFunc completes the activity a hand-off names with a decision.
type CompleteFunc func(ctx context.Context, h interceptor.HandOff, status string) error

// GateCompleter is the expense system's way to complete: through CompleteAsync,
// with c its Temporal client (client.Client) and opts the gate's options as its
// workers have them — the same claim store and data converter.
func GateCompleter(c interceptor.AsyncCompleter, opts interceptor.Options) CompleteFunc {
	return func(ctx context.Context, h interceptor.HandOff, status string) error {
		return interceptor.CompleteAsync(ctx, c, opts, h, status, nil)
	}
}

// System is the sample's expense system (its ui/main.go), as an http.Handler:
// expenses by ID, and the hand-off of each expense waiting for a decision.
type System struct {
	Complete CompleteFunc

	mu       sync.Mutex
	state    map[string]string
	handOffs map[string]interceptor.HandOff
	payments int
}

// NewSystem returns an expense system that completes decisions with complete.
func NewSystem(complete CompleteFunc) *System {
	return &System{Complete: complete, state: map[string]string{}, handOffs: map[string]interceptor.HandOff{}}
}

// HandOff is what the activity handed over for expense id.
func (s *System) HandOff(id string) (interceptor.HandOff, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.handOffs[id]
	return h, ok
}

// Payments is how many payments the system made.
func (s *System) Payments() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.payments
}

func (s *System) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	s.mu.Lock()
	defer s.mu.Unlock()
	switch r.URL.Path {
	case "/create":
		if _, ok := s.state[id]; ok {
			fmt.Fprint(w, "ERROR:ID_ALREADY_EXISTS")
			return
		}
		s.state[id] = "CREATED"
	case "/registerCallback":
		var h interceptor.HandOff
		if err := json.NewDecoder(r.Body).Decode(&h); err != nil || s.state[id] != "CREATED" {
			fmt.Fprintf(w, "ERROR:INVALID_CALLBACK %v", err)
			return
		}
		s.handOffs[id] = h
	case "/action":
		switch typ := r.URL.Query().Get("type"); typ {
		case "approve", "reject":
			h, ok := s.handOffs[id]
			if !ok || s.state[id] != "CREATED" {
				fmt.Fprint(w, "ERROR:INVALID_ID")
				return
			}
			status := map[string]string{"approve": "APPROVED", "reject": "REJECTED"}[typ]
			// The decision is stored under the call's key, then the activity completes.
			if err := s.Complete(r.Context(), h, status); err != nil {
				fmt.Fprintf(w, "ERROR:%v", err)
				return
			}
			s.state[id] = status
		case "payment":
			if s.state[id] != "APPROVED" {
				fmt.Fprint(w, "ERROR:NOT_APPROVED")
				return
			}
			s.state[id] = "COMPLETED"
			s.payments++
		default:
			fmt.Fprint(w, "ERROR:INVALID_ACTION")
			return
		}
	default:
		http.NotFound(w, r)
		return
	}
	fmt.Fprint(w, "SUCCEED")
}
