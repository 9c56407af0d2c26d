package llmagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"
	"go.temporal.io/sdk/temporal"
)

// OpenAIPlanner is the planner activity on OpenAI's Chat Completions API, through
// the official client. Register it with worker.RegisterActivity(&OpenAIPlanner{...}).
type OpenAIPlanner struct {
	// Client is openai.NewClient(...): its API key, base URL and retries are yours.
	Client openai.Client
	// Model is the chat model (openai.ChatModelGPT5_5, ...).
	Model string
}

// PlanNextStep asks the model for its next message. A read: it changes nothing
// outside, so the gate never holds it back.
func (p *OpenAIPlanner) PlanNextStep(ctx context.Context, in PlanInput) (Plan, error) {
	params := openai.ChatCompletionNewParams{Model: p.Model}
	if in.System != "" {
		params.Messages = append(params.Messages, openai.SystemMessage(in.System))
	}
	for _, m := range in.Messages {
		switch m.Role {
		case RoleUser:
			params.Messages = append(params.Messages, openai.UserMessage(m.Text))
		case RoleAssistant:
			a := openai.ChatCompletionAssistantMessageParam{}
			if m.Text != "" {
				a.Content.OfString = openai.String(m.Text)
			}
			for _, c := range m.Calls {
				a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{ID: c.ID,
						Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: c.Name, Arguments: string(c.Args)}}})
			}
			params.Messages = append(params.Messages, openai.ChatCompletionMessageParamUnion{OfAssistant: &a})
		case RoleTool:
			params.Messages = append(params.Messages, openai.ToolMessage(m.Text, m.CallID))
		}
	}
	for _, t := range in.Tools {
		var schema map[string]any
		if err := json.Unmarshal(t.Schema, &schema); err != nil {
			return Plan{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("tool %s: its schema is not a JSON object: %v", t.Name, err), "BadTool", nil)
		}
		params.Tools = append(params.Tools, openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: t.Name, Description: openai.String(t.Description), Parameters: schema}))
	}
	resp, err := p.Client.Chat.Completions.New(ctx, params)
	if err != nil {
		return Plan{}, modelError("openai", err)
	}
	if len(resp.Choices) == 0 {
		return Plan{}, errors.New("openai: the answer has no choices")
	}
	msg := resp.Choices[0].Message
	plan := Plan{Text: msg.Content}
	for _, tc := range msg.ToolCalls {
		args := json.RawMessage(tc.Function.Arguments)
		if tc.Type != "function" || !json.Valid(args) {
			// Asking again may well give a usable call: retryable.
			return Plan{}, fmt.Errorf("openai: tool call %s (%s) has no JSON arguments: %q", tc.ID, tc.Type, tc.Function.Arguments)
		}
		plan.Calls = append(plan.Calls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Args: args})
	}
	return plan, nil
}

// modelError makes an API error that asking again cannot fix (a bad key, a bad
// request) non-retryable; rate limits, timeouts and server errors stay retryable.
func modelError(provider string, err error) error {
	var status int
	var oe *openai.Error
	if errors.As(err, &oe) {
		status = oe.StatusCode
	}
	if s, ok := anthropicStatus(err); ok {
		status = s
	}
	if status >= 400 && status < 500 && status != http.StatusRequestTimeout && status != http.StatusConflict && status != http.StatusTooManyRequests {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s: %v", provider, err), "ModelRequestRejected", err)
	}
	return fmt.Errorf("%s: %w", provider, err)
}
