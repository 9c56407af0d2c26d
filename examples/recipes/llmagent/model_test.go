package llmagent_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// scriptedModel is the only stand-in in these tests: a local server that answers
// in a provider's wire format (OpenAI's Chat Completions, Anthropic's Messages)
// with a fixed script — look the customer up, charge the card, say what was done
// — and checks that each request carries the key, the tools and the results of
// the calls it asked for. The clients, the workflow, the gate and the vendor
// (vendorsim's card processor) are the real ones.
type scriptedModel struct {
	t        *testing.T
	provider string // "openai" or "anthropic"

	mu       sync.Mutex
	requests int
}

func (m *scriptedModel) Requests() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.requests
}

// turn is the script: given the results of the calls made so far (by call ID),
// the next tool call, or the final text.
func turn(results map[string]string, idPrefix string) (id, name, args, text string, err error) {
	switch len(results) {
	case 0:
		return idPrefix + "1", "GetCustomer", `{"customer_id":"cus_42"}`, "", nil
	case 1:
		if !strings.Contains(results[idPrefix+"1"], "Ada Lovelace") {
			return "", "", "", "", fmt.Errorf("the GetCustomer result is missing or wrong: %q", results[idPrefix+"1"])
		}
		return idPrefix + "2", "ChargeCard", `{"customer":"cus_42","amount":4200,"currency":"eur","description":"Pro plan, December"}`, "", nil
	case 2:
		var charge struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal([]byte(results[idPrefix+"2"]), &charge); err != nil || charge.ID == "" {
			return "", "", "", "", fmt.Errorf("the ChargeCard result is not a charge: %q", results[idPrefix+"2"])
		}
		return "", "", "", "Charged Ada Lovelace EUR 42.00 (" + charge.ID + ").", nil
	}
	return "", "", "", "", fmt.Errorf("%d tool results, the script has 2 calls", len(results))
}

func (m *scriptedModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	m.requests++
	m.mu.Unlock()
	var (
		status int
		body   any
	)
	switch m.provider {
	case "openai":
		status, body = m.openAI(r)
	default:
		status, body = m.anthropic(r)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if err := json.NewEncoder(w).Encode(body); err != nil {
		m.t.Errorf("scripted model: %v", err)
	}
}

// text reads a message content that is a string or a list of text blocks.
func text(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &blocks)
	var b strings.Builder
	for _, bl := range blocks {
		b.WriteString(bl.Text)
	}
	return b.String()
}

func toolNames(names []string) error {
	if strings.Join(names, ",") != "GetCustomer,ChargeCard" {
		return fmt.Errorf("tools %q, want GetCustomer and ChargeCard", names)
	}
	return nil
}

// openAI answers POST /v1/chat/completions.
func (m *scriptedModel) openAI(r *http.Request) (int, any) {
	fail := func(status int, msg string) (int, any) {
		m.t.Errorf("scripted model (openai): %s", msg)
		return status, map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "param": nil, "code": nil}}
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		return fail(http.StatusNotFound, "unexpected "+r.Method+" "+r.URL.Path)
	}
	if r.Header.Get("Authorization") != "Bearer test-key" {
		return fail(http.StatusUnauthorized, "missing or wrong API key")
	}
	var req struct {
		Model    string `json:"model"`
		Messages []struct {
			Role       string          `json:"role"`
			Content    json.RawMessage `json:"content"`
			ToolCallID string          `json:"tool_call_id"`
		} `json:"messages"`
		Tools []struct {
			Type     string `json:"type"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		return fail(http.StatusBadRequest, "body: "+err.Error())
	}
	var names []string
	for _, t := range req.Tools {
		names = append(names, t.Function.Name)
	}
	if err := toolNames(names); err != nil {
		return fail(http.StatusBadRequest, err.Error())
	}
	results := map[string]string{}
	for _, msg := range req.Messages {
		if msg.Role == "tool" {
			results[msg.ToolCallID] = text(msg.Content)
		}
	}
	id, name, args, final, err := turn(results, "call_")
	if err != nil {
		return fail(http.StatusBadRequest, err.Error())
	}
	message := map[string]any{"role": "assistant", "content": final, "refusal": nil}
	finish := "stop"
	if name != "" {
		message["content"] = nil
		message["tool_calls"] = []any{map[string]any{"id": id, "type": "function",
			"function": map[string]any{"name": name, "arguments": args}}}
		finish = "tool_calls"
	}
	return http.StatusOK, map[string]any{"id": "chatcmpl-scripted", "object": "chat.completion", "created": 1764633600,
		"model": req.Model, "choices": []any{map[string]any{"index": 0, "message": message, "logprobs": nil, "finish_reason": finish}},
		"usage": map[string]any{"prompt_tokens": 60, "completion_tokens": 20, "total_tokens": 80}}
}

// anthropic answers POST /v1/messages.
func (m *scriptedModel) anthropic(r *http.Request) (int, any) {
	fail := func(status int, msg string) (int, any) {
		m.t.Errorf("scripted model (anthropic): %s", msg)
		return status, map[string]any{"type": "error", "error": map[string]any{"type": "invalid_request_error", "message": msg}}
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		return fail(http.StatusNotFound, "unexpected "+r.Method+" "+r.URL.Path)
	}
	// anthropic-sdk-go v2 sends the API key as a bearer token; the API also takes x-api-key.
	key := r.Header.Get("X-Api-Key")
	if key == "" {
		key = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	}
	if key != "test-key" || r.Header.Get("Anthropic-Version") == "" {
		return fail(http.StatusUnauthorized, "missing or wrong API key or anthropic-version")
	}
	var req struct {
		Model     string `json:"model"`
		MaxTokens int    `json:"max_tokens"`
		Messages  []struct {
			Role    string `json:"role"`
			Content []struct {
				Type      string          `json:"type"`
				ToolUseID string          `json:"tool_use_id"`
				Content   json.RawMessage `json:"content"`
			} `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		return fail(http.StatusBadRequest, "body: "+err.Error())
	}
	if req.MaxTokens <= 0 {
		return fail(http.StatusBadRequest, "max_tokens is required")
	}
	var names []string
	for _, t := range req.Tools {
		names = append(names, t.Name)
	}
	if err := toolNames(names); err != nil {
		return fail(http.StatusBadRequest, err.Error())
	}
	results := map[string]string{}
	for i, msg := range req.Messages {
		if (i%2 == 0) != (msg.Role == "user") {
			return fail(http.StatusBadRequest, "messages must alternate user and assistant")
		}
		for _, b := range msg.Content {
			if b.Type == "tool_result" {
				results[b.ToolUseID] = text(b.Content)
			}
		}
	}
	id, name, args, final, err := turn(results, "toolu_")
	if err != nil {
		return fail(http.StatusBadRequest, err.Error())
	}
	content := []any{map[string]any{"type": "text", "text": final}}
	stop := "end_turn"
	if name != "" {
		content = []any{map[string]any{"type": "tool_use", "id": id, "name": name, "input": json.RawMessage(args)}}
		stop = "tool_use"
	}
	return http.StatusOK, map[string]any{"id": "msg_scripted", "type": "message", "role": "assistant", "model": req.Model,
		"content": content, "stop_reason": stop, "stop_sequence": nil, "usage": map[string]any{"input_tokens": 60, "output_tokens": 20}}
}
