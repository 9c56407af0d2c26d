package idemgatetest_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"

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
