package idemgatetest_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/idemgate/idemgate/activities"
	"github.com/idemgate/idemgate/idemgatetest"
	"github.com/idemgate/idemgate/vendorsim"
	"github.com/idemgate/idemgate/workflows"
)

// charge and email are the two steps of the job the examples run.
var (
	charge = activities.Step{Tool: "ChargeCard", Args: json.RawMessage(`{"customer":"cus_42","amount":4200,"currency":"eur"}`)}
	email  = activities.Step{Tool: "SendEmail", Args: json.RawMessage(`{"to":"ada@example.com","subject":"Welcome back","body":"Charged EUR 42.00."}`)}
)

// runAgent runs the repo's agent loop with a script in a fresh workflow
// environment of k, against the simulated vendors of w.
func runAgent(k *idemgatetest.Kit, w *vendorsim.World, steps ...activities.Step) (workflows.AgentResult, error) {
	tools, err := activities.New(activities.Endpoints{Docs: w.Docs.URL, CRM: w.CRM.URL, Tickets: w.Tickets.URL,
		Payments: w.Payments.URL, Email: w.Email.URL, Chat: w.Chat.URL})
	if err != nil {
		return workflows.AgentResult{}, err
	}
	env := k.NewWorkflowEnvironment()
	env.RegisterWorkflow(workflows.AgentLoop)
	env.RegisterActivity(tools)
	env.RegisterActivity(&activities.Planning{})
	script := activities.Script{Goal: "test", Steps: steps}
	env.ExecuteWorkflow(workflows.AgentLoop, workflows.AgentInput{Script: &script,
		Retry: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 1, MaximumAttempts: 3}})
	if !env.IsWorkflowCompleted() {
		return workflows.AgentResult{}, fmt.Errorf("the workflow did not complete")
	}
	var res workflows.AgentResult
	if err := env.GetWorkflowError(); err != nil {
		return res, err
	}
	return res, env.GetWorkflowResult(&res)
}

// printDecisions prints what the gate decided for activity, one line per decision.
func printDecisions(k *idemgatetest.Kit, activity string) {
	for _, d := range k.Decisions(activity) {
		line := fmt.Sprintf("%s attempt %d: %s", d.Activity, d.Attempt, d.Decision)
		if d.ErrorType != "" {
			line += " (" + d.ErrorType + ")"
		}
		fmt.Println(line)
	}
}

// stopped is how the loop ended, without the refusal's message.
func stopped(res workflows.AgentResult) string {
	s, _, _ := strings.Cut(res.Stopped, ":")
	return s
}

// recorder is a testing.TB that keeps the kit's failures for the test to read,
// and runs the kit's cleanups when the test asks (finish).
type recorder struct {
	testing.TB
	mu       sync.Mutex
	errs     []string
	cleanups []func()
}

func newRecorder(t *testing.T) *recorder { return &recorder{TB: t} }

func (r *recorder) Helper() {}

func (r *recorder) Error(args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprint(args...))
}

func (r *recorder) Errorf(format string, args ...any) { r.Error(fmt.Sprintf(format, args...)) }

func (r *recorder) Fatal(args ...any) {
	r.Error(args...)
	panic(fmt.Sprint(args...))
}

func (r *recorder) Fatalf(format string, args ...any) { r.Fatal(fmt.Sprintf(format, args...)) }

func (r *recorder) Cleanup(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanups = append(r.cleanups, f)
}

// finish runs the cleanups, last first, as the end of a test does, and returns
// every failure reported.
func (r *recorder) finish() []string {
	r.mu.Lock()
	cs := r.cleanups
	r.cleanups = nil
	r.mu.Unlock()
	for i := len(cs) - 1; i >= 0; i-- {
		cs[i]()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.errs...)
}

// newAgentEnv is runAgent's environment, for tests that change it before running.
func newAgentEnv(t *testing.T, k *idemgatetest.Kit, w *vendorsim.World) (*testsuite.TestWorkflowEnvironment, *activities.Tools) {
	t.Helper()
	tools, err := activities.New(activities.Endpoints{Docs: w.Docs.URL, CRM: w.CRM.URL, Tickets: w.Tickets.URL,
		Payments: w.Payments.URL, Email: w.Email.URL, Chat: w.Chat.URL})
	if err != nil {
		t.Fatal(err)
	}
	env := k.NewWorkflowEnvironment()
	env.RegisterWorkflow(workflows.AgentLoop)
	env.RegisterActivity(tools)
	env.RegisterActivity(&activities.Planning{})
	return env, tools
}

// runIn runs the agent loop with a script in env.
func runIn(t *testing.T, env *testsuite.TestWorkflowEnvironment, steps ...activities.Step) workflows.AgentResult {
	t.Helper()
	script := activities.Script{Goal: "test", Steps: steps}
	env.ExecuteWorkflow(workflows.AgentLoop, workflows.AgentInput{Script: &script,
		Retry: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 1, MaximumAttempts: 3}})
	if !env.IsWorkflowCompleted() {
		t.Fatal("the workflow did not complete")
	}
	var res workflows.AgentResult
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	return res
}
