// Package llmagent is a recipe: a tool-calling agent loop as a Temporal workflow,
// with the model called through an official client — openai-go (OpenAIPlanner) or
// anthropic-sdk-go (ClaudePlanner) — and every tool call the model asks for run as
// its own gated activity.
//
// The workflow keeps the conversation in a provider-neutral form (Message). Each
// turn it asks the planner activity, PlanNextStep, for the model's next message;
// each tool call in it runs as the activity of the same name, through the gate: a
// read (GetCustomer) always runs, a destructive write (ChargeCard) runs once,
// whatever Temporal retries. The result goes back to the model as the call's tool
// result, until the model answers without a tool call.
//
// PlanNextStep is a read (its name says so, and calling a model changes nothing
// outside), so a planner attempt that dies is simply asked again. The tools are
// the demo's (package activities); register your own the same way. The recipe is
// agent_test.go, which points the official clients at a scripted local server in
// each provider's wire format; see docs/recipes.md.
package llmagent

import (
	"encoding/json"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/idemgate/idemgate/interceptor"
)

// Roles of Message.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Message is one entry of the conversation, in no provider's format.
type Message struct {
	Role string `json:"role"`
	Text string `json:"text,omitempty"`
	// Calls are the tool calls of an assistant message.
	Calls []ToolCall `json:"calls,omitempty"`
	// CallID names the call a tool message answers; IsError marks a failed call.
	CallID  string `json:"call_id,omitempty"`
	IsError bool   `json:"is_error,omitempty"`
}

// ToolCall is a call the model asked for: the tool (an activity type) and its
// arguments, a JSON object.
type ToolCall struct {
	ID   string          `json:"id"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

// Tool is a tool offered to the model: an activity of the same name whose input
// the schema describes.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
}

// PlanInput is what the planner activity sends the model.
type PlanInput struct {
	System   string    `json:"system"`
	Messages []Message `json:"messages"`
	Tools    []Tool    `json:"tools"`
}

// Plan is the model's next message: text, tool calls, or both.
type Plan struct {
	Text  string     `json:"text,omitempty"`
	Calls []ToolCall `json:"calls,omitempty"`
}

// Tools are the tools the agent offers: a read and a destructive write, both
// activities of package activities (GetCustomer, ChargeCard).
var Tools = []Tool{
	{Name: "GetCustomer", Description: "Fetch a customer by id (cus_...). Read-only.",
		Schema: json.RawMessage(`{"type":"object","properties":{"customer_id":{"type":"string"}},"required":["customer_id"]}`)},
	{Name: "ChargeCard", Description: "Charge the customer's card on file. Amount in cents.",
		Schema: json.RawMessage(`{"type":"object","properties":{"customer":{"type":"string"},"amount":{"type":"integer","minimum":1},"currency":{"type":"string"},"description":{"type":"string"}},"required":["customer","amount","currency"]}`)},
}

// System is the agent's instructions.
const System = "You are a billing agent. Use the tools to do what the user asks, then say what you did."

// AgentResult is what the agent did.
type AgentResult struct {
	// Answer is the model's last text.
	Answer string `json:"answer"`
	// Calls are the tool calls run, in order, with their results or errors.
	Calls []CallRecord `json:"calls"`
	// Stopped is "done", "budget", or the gate's refusal type that ended the loop.
	Stopped string `json:"stopped"`
}

// CallRecord is one tool call and what came of it.
type CallRecord struct {
	Tool   string          `json:"tool"`
	Args   json.RawMessage `json:"args"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"`
}

// finalRefusals end the loop: the gate will not run that call whatever the model
// does next; a person has to look (`idemgate pending`).
var finalRefusals = []string{interceptor.ErrTypeInFlight, interceptor.ErrTypeConflict, interceptor.ErrTypeWriteGated,
	interceptor.ErrTypeKeyMissing, interceptor.ErrTypeKeyInvalid, interceptor.ErrTypeArgsInvalid, interceptor.ErrTypeResultNotStored}

// AgentWorkflow runs the loop for goal, for at most maxTurns model turns (0: 8).
func AgentWorkflow(ctx workflow.Context, goal string, maxTurns int) (AgentResult, error) {
	if maxTurns <= 0 {
		maxTurns = 8
	}
	planCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 2 * time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 5},
	})
	toolCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 3},
	})
	msgs := []Message{{Role: RoleUser, Text: goal}}
	var res AgentResult
	for range maxTurns {
		var plan Plan
		if err := workflow.ExecuteActivity(planCtx, "PlanNextStep", PlanInput{System: System, Messages: msgs, Tools: Tools}).Get(ctx, &plan); err != nil {
			return res, err
		}
		msgs = append(msgs, Message{Role: RoleAssistant, Text: plan.Text, Calls: plan.Calls})
		res.Answer = plan.Text
		if len(plan.Calls) == 0 {
			res.Stopped = "done"
			return res, nil
		}
		for _, call := range plan.Calls {
			rec := CallRecord{Tool: call.Name, Args: call.Args}
			var err error
			if slices.ContainsFunc(Tools, func(t Tool) bool { return t.Name == call.Name }) {
				// The arguments go as they are (a JSON object) and decode into the
				// activity's input type. The gate keys the call by its place among the
				// calls of this tool in this workflow.
				err = workflow.ExecuteActivity(toolCtx, call.Name, call.Args).Get(ctx, &rec.Result)
			} else {
				err = temporal.NewNonRetryableApplicationError("unknown tool "+call.Name, "UnknownTool", nil)
			}
			reply := Message{Role: RoleTool, CallID: call.ID, Text: string(rec.Result)}
			if err != nil {
				rec.Error, reply.Text, reply.IsError = err.Error(), err.Error(), true
			}
			res.Calls = append(res.Calls, rec)
			if t := interceptor.ErrorType(err); slices.Contains(finalRefusals, t) {
				res.Stopped = t
				return res, nil
			}
			msgs = append(msgs, reply)
		}
	}
	res.Stopped = "budget"
	return res, nil
}
