package activities

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
	"go.temporal.io/sdk/temporal"

	"github.com/idemgate/idemgate/internal/secrets"
)

// Step is what a planner decides next: a tool call, or done.
type Step struct {
	Tool   string          `json:"tool,omitempty"`
	Args   json.RawMessage `json:"args,omitempty"`
	Done   bool            `json:"done,omitempty"`
	Reason string          `json:"reason,omitempty"`
}

// StepRecord is one finished step, fed back to the planner.
type StepRecord struct {
	Tool   string          `json:"tool"`
	Args   json.RawMessage `json:"args"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"`
}

// PlanInput is what the planner sees.
type PlanInput struct {
	Goal    string       `json:"goal"`
	History []StepRecord `json:"history"`
	// Script, when set, plans this job instead of the worker's planner.
	Script *Script `json:"script,omitempty"`
	// Tools are the tools the worker offers; PlanNextStep sets them (they are not
	// part of the activity's input).
	Tools Toolset `json:"-"`
}

// Planner decides the next step.
type Planner interface {
	Next(ctx context.Context, in PlanInput) (Step, error)
}

// Planning is the planner activity. Register with worker.RegisterActivity(&Planning{...}).
type Planning struct {
	Planner Planner
	// Tools are the tools the planner may call. Optional: nil means Registry; a
	// worker with MCP servers gives Registry followed by MCPTools of each.
	Tools Toolset
}

// ErrTypePlanInvalid is the type of the error a planner's invalid step fails with.
const ErrTypePlanInvalid = "PlanInvalid"

// PlanNextStep asks the planner for the next step and checks it names a known tool
// with arguments that fit. Read (it changes nothing outside).
func (p *Planning) PlanNextStep(ctx context.Context, in PlanInput) (Step, error) {
	var planner Planner = p.Planner
	if in.Script != nil {
		planner = *in.Script
	}
	if planner == nil {
		return Step{}, temporal.NewNonRetryableApplicationError("idemgate/activities: no planner: give the worker one, or the job a script", ErrTypePlanInvalid, nil)
	}
	in.Tools = p.Tools
	if in.Tools == nil {
		in.Tools = Registry
	}
	step, err := planner.Next(ctx, in)
	if err != nil {
		return Step{}, err
	}
	if step.Done {
		return step, nil
	}
	if err := in.Tools.checkCall(step.Tool, step.Args); err != nil {
		return Step{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("idemgate/activities: planner step %d: %v", len(in.History)+1, err),
			ErrTypePlanInvalid, nil)
	}
	return step, nil
}

// Script is a scripted planner: it returns its steps in order, then done. The demo
// needs no model.
type Script struct {
	Goal  string `json:"goal"`
	Steps []Step `json:"steps"`
}

// Next returns the step after the ones already in the history.
func (s Script) Next(_ context.Context, in PlanInput) (Step, error) {
	if i := len(in.History); i < len(s.Steps) {
		return s.Steps[i], nil
	}
	return Step{Done: true, Reason: "script finished"}, nil
}

// Check validates every step of the script against Registry, so a bad plan fails
// before anything runs.
func (s Script) Check() error { return s.CheckWith(Registry) }

// CheckWith validates every step of the script against the tools.
func (s Script) CheckWith(tools Toolset) error {
	if err := s.check(tools); err != nil {
		return fmt.Errorf("idemgate/activities: %w", err)
	}
	return nil
}

// check is CheckWith without the package's prefix, for errors that wrap it.
func (s Script) check(tools Toolset) error {
	if len(s.Steps) == 0 {
		return errors.New("the plan has no steps: add at least one {\"tool\": ..., \"args\": {...}}")
	}
	for i, st := range s.Steps {
		if st.Done {
			continue
		}
		if err := tools.checkCall(st.Tool, st.Args); err != nil {
			return fmt.Errorf("step %d: %w", i+1, err)
		}
	}
	return nil
}

// LoadScript reads a plan file: {"goal": "...", "steps": [{"tool": "...", "args": {...}}]}.
func LoadScript(path string) (Script, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Script{}, fmt.Errorf("idemgate/activities: plan file: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var s Script
	if err := dec.Decode(&s); err != nil {
		return Script{}, fmt.Errorf("idemgate/activities: plan file %s is not a plan (want {\"goal\": ..., \"steps\": [{\"tool\": ..., \"args\": {...}}]}): %v", path, err)
	}
	if err := s.check(Registry); err != nil {
		return Script{}, fmt.Errorf("idemgate/activities: plan file %s: %w", path, err)
	}
	return s, nil
}

// Support is the built-in scenario: a customer asks about a charge; the agent reads
// the docs and the customer, updates the CRM, opens a ticket, charges a
// re-subscription, e-mails the customer and tells the team.
var Support = Script{
	Goal: "Ada (cus_42) wants to re-subscribe to Pro; take the payment and let everyone know.",
	Steps: []Step{
		{Tool: "SearchDocs", Args: json.RawMessage(`{"query":"re-subscribe after cancellation"}`)},
		{Tool: "GetCustomer", Args: json.RawMessage(`{"customer_id":"cus_42"}`)},
		{Tool: "UpsertContact", Args: json.RawMessage(`{"email":"ada@example.com","name":"Ada Lovelace","company":"Analytical Engines"}`)},
		{Tool: "CreateTicket", Args: json.RawMessage(`{"subject":"Re-subscription to Pro","requester":"ada@example.com"}`)},
		{Tool: "ChargeCard", Args: json.RawMessage(`{"customer":"cus_42","amount":4200,"currency":"eur","description":"Pro plan, 1 month"}`)},
		{Tool: "SendEmail", Args: json.RawMessage(`{"to":"ada@example.com","subject":"Welcome back to Pro","body":"Your card was charged EUR 42.00."}`)},
		{Tool: "PostSlackMessage", Args: json.RawMessage(`{"channel":"#billing","text":"cus_42 re-subscribed to Pro (EUR 42.00)"}`)},
	},
}

// ChatPlanner asks an OpenAI-compatible chat-completions endpoint for the next tool
// call, through OpenAI's official Go client (github.com/openai/openai-go/v3): the
// tools are offered as functions; a reply without a tool call means done.
//
// The request is sent once: Temporal's retry policy retries the activity, so the
// client's own retries are off. BaseURL, Model and APIKey override the client's
// OPENAI_BASE_URL and OPENAI_API_KEY; its other OPENAI_* settings (organization,
// project, custom headers) apply as in openai.NewClient. Errors never print the
// credentials of BaseURL or the API key.
type ChatPlanner struct {
	// BaseURL is the API root, e.g. https://api.openai.com/v1. Required.
	BaseURL string
	// Model names the model. Required.
	Model string
	// APIKey is sent as a bearer token. Optional for local servers: "" sends none.
	APIKey string
	// HTTP is the client. Optional: nil means a client with a 60 s timeout.
	HTTP *http.Client
}

// Next sends the goal and history and reads the first tool call of the reply.
func (c ChatPlanner) Next(ctx context.Context, in PlanInput) (Step, error) {
	if c.BaseURL == "" || c.Model == "" {
		return Step{}, temporal.NewNonRetryableApplicationError("idemgate/activities: chat planner: set the base URL and the model (--llm-base-url, --llm-model)", ErrTypePlanInvalid, nil)
	}
	offered := in.Tools
	if offered == nil {
		offered = Registry
	}
	history, _ := json.Marshal(in.History)
	params := openai.ChatCompletionNewParams{
		Model: c.Model,
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage("You are a support agent. Call exactly one tool per turn. When the goal is met, answer without a tool call."),
			openai.UserMessage("Goal: " + in.Goal + "\nSteps so far (JSON): " + string(history)),
		},
	}
	// Function names allow letters, digits, _ and - only: "mcp.shop.gift_card" is
	// offered as "mcp__shop__gift_card" and read back through byFunc.
	byFunc := make(map[string]string, len(offered))
	for _, t := range offered {
		var schema map[string]any // nil: a tool that takes no described arguments
		if err := unmarshalSchema(t.Schema, &schema); err != nil {
			return Step{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("idemgate/activities: chat planner: tool %s: "+
				"its schema is not a JSON object (%v). Next step: fix the tool's input schema", t.Name, err), ErrTypePlanInvalid, nil)
		}
		f := strings.ReplaceAll(t.Name, ".", "__")
		byFunc[f] = t.Name
		params.Tools = append(params.Tools, openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: f, Description: openai.String(t.Description), Parameters: schema}))
	}
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 60 * time.Second}
	}
	client := openai.NewClient(option.WithBaseURL(c.BaseURL), option.WithAPIKey(c.APIKey), option.WithHTTPClient(hc),
		option.WithMaxRetries(0))
	resp, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		return Step{}, c.apiError(err)
	}
	if len(resp.Choices) == 0 {
		return Step{}, fmt.Errorf("idemgate/activities: chat planner: the answer is not a chat completion (no choices): %.300s",
			c.scrub(resp.RawJSON()))
	}
	m := resp.Choices[0].Message
	if len(m.ToolCalls) == 0 {
		return Step{Done: true, Reason: strings.TrimSpace(m.Content)}, nil
	}
	call := m.ToolCalls[0].Function
	name, ok := byFunc[call.Name]
	if !ok {
		name = call.Name // PlanNextStep names the unknown tool
	}
	return Step{Tool: name, Args: json.RawMessage(call.Arguments)}, nil
}

// apiError says what went wrong without the credentials of the base URL or the key:
// the status and the start of the body for an answer, the scrubbed cause otherwise.
// Retryable, as every error of the planner was: Temporal asks again.
func (c ChatPlanner) apiError(err error) error {
	var oe *openai.Error
	if errors.As(err, &oe) {
		var body []byte
		if oe.Response != nil && oe.Response.Body != nil {
			body, _ = io.ReadAll(io.LimitReader(oe.Response.Body, 300))
		}
		return fmt.Errorf("idemgate/activities: chat planner: %s answered %d: %s", secrets.Redact(c.BaseURL), oe.StatusCode,
			c.scrub(strings.TrimSpace(string(body))))
	}
	err = secrets.ScrubError(err, c.BaseURL)
	if c.APIKey != "" && strings.Contains(err.Error(), c.APIKey) {
		return errors.New("idemgate/activities: chat planner: " + c.scrub(err.Error()))
	}
	return fmt.Errorf("idemgate/activities: chat planner: %w (Next step: check that the base URL, %s, is an OpenAI-compatible "+
		"API root that answers POST chat/completions, e.g. http://localhost:11434/v1)", err, secrets.Redact(c.BaseURL))
}

func unmarshalSchema(raw json.RawMessage, schema *map[string]any) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	return json.Unmarshal(raw, schema)
}

func (c ChatPlanner) scrub(text string) string {
	text = secrets.Scrub(text, c.BaseURL)
	if c.APIKey != "" {
		text = strings.ReplaceAll(text, c.APIKey, secrets.Mask)
	}
	return text
}
