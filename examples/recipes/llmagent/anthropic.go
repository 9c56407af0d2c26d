package llmagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"go.temporal.io/sdk/temporal"
)

// ClaudePlanner is the planner activity on Anthropic's Messages API, through the
// official client. Register it with worker.RegisterActivity(&ClaudePlanner{...}).
type ClaudePlanner struct {
	// Client is anthropic.NewClient(...): its API key, base URL and retries are yours.
	Client anthropic.Client
	// Model is the model (anthropic.ModelClaudeSonnet5_5, ...).
	Model anthropic.Model
	// MaxTokens bounds the answer. Optional: 0 means 1024.
	MaxTokens int64
}

// PlanNextStep asks the model for its next message. A read: it changes nothing
// outside, so the gate never holds it back.
func (p *ClaudePlanner) PlanNextStep(ctx context.Context, in PlanInput) (Plan, error) {
	params := anthropic.MessageNewParams{Model: p.Model, MaxTokens: p.MaxTokens}
	if params.MaxTokens == 0 {
		params.MaxTokens = 1024
	}
	if in.System != "" {
		params.System = []anthropic.TextBlockParam{{Text: in.System}}
	}
	// The results of one turn's calls go back together, as the blocks of one user
	// message after the assistant's tool_use blocks.
	var results []anthropic.ContentBlockParamUnion
	flush := func() {
		if len(results) > 0 {
			params.Messages = append(params.Messages, anthropic.NewUserMessage(results...))
			results = nil
		}
	}
	for _, m := range in.Messages {
		if m.Role != RoleTool {
			flush()
		}
		switch m.Role {
		case RoleUser:
			params.Messages = append(params.Messages, anthropic.NewUserMessage(anthropic.NewTextBlock(m.Text)))
		case RoleAssistant:
			var blocks []anthropic.ContentBlockParamUnion
			if m.Text != "" {
				blocks = append(blocks, anthropic.NewTextBlock(m.Text))
			}
			for _, c := range m.Calls {
				blocks = append(blocks, anthropic.NewToolUseBlock(c.ID, c.Args, c.Name))
			}
			params.Messages = append(params.Messages, anthropic.NewAssistantMessage(blocks...))
		case RoleTool:
			results = append(results, anthropic.NewToolResultBlock(m.CallID, m.Text, m.IsError))
		}
	}
	flush()
	for _, t := range in.Tools {
		var schema struct {
			Properties any      `json:"properties"`
			Required   []string `json:"required"`
		}
		if err := json.Unmarshal(t.Schema, &schema); err != nil {
			return Plan{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("tool %s: its schema is not a JSON object: %v", t.Name, err), "BadTool", nil)
		}
		params.Tools = append(params.Tools, anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{
			Name: t.Name, Description: anthropic.String(t.Description),
			InputSchema: anthropic.ToolInputSchemaParam{Properties: schema.Properties, Required: schema.Required}}})
	}
	resp, err := p.Client.Messages.New(ctx, params)
	if err != nil {
		return Plan{}, modelError("anthropic", err)
	}
	var plan Plan
	for _, b := range resp.Content {
		switch b.Type {
		case "text":
			plan.Text += b.Text
		case "tool_use":
			if !json.Valid(b.Input) {
				return Plan{}, fmt.Errorf("anthropic: tool call %s has no JSON input: %q", b.ID, b.Input)
			}
			plan.Calls = append(plan.Calls, ToolCall{ID: b.ID, Name: b.Name, Args: b.Input})
		}
	}
	return plan, nil
}

func anthropicStatus(err error) (int, bool) {
	var ae *anthropic.Error
	if errors.As(err, &ae) {
		return ae.StatusCode, true
	}
	return 0, false
}
