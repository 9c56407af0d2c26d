package activities_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idemgate/idemgate/activities"
)

// chatRequest is the part of a chat-completions request the tests read.
type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Type     string `json:"type"`
		Function struct {
			Name        string         `json:"name"`
			Description string         `json:"description"`
			Parameters  map[string]any `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
}

// chatServer is an OpenAI-compatible chat-completions endpoint under /v1: it checks
// the request is one (POST /v1/chat/completions, JSON), hands it to answer, and
// writes what answer returns.
func chatServer(t *testing.T, answer func(r *http.Request, req chatRequest) (status int, body string)) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req chatRequest
		if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
			t.Errorf("request %s %s (%s): want POST /v1/chat/completions with JSON", r.Method, r.URL.Path, r.Header.Get("Content-Type"))
		} else if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			t.Errorf("request body: %v", err)
		}
		status, body := answer(r, req)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// completion is a chat completion as the API sends it: a tool call when name is
// set, else the assistant's text.
func completion(name, args, text string) string {
	msg := fmt.Sprintf(`{"role":"assistant","content":%q,"refusal":null}`, text)
	finish := "stop"
	if name != "" {
		msg = fmt.Sprintf(`{"role":"assistant","content":null,"refusal":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":%q,"arguments":%q}}]}`, name, args)
		finish = "tool_calls"
	}
	return fmt.Sprintf(`{"id":"chatcmpl-1","object":"chat.completion","created":1796000000,"model":"m","choices":[{"index":0,"message":%s,"logprobs":null,"finish_reason":%q}],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`, msg, finish)
}

// The model planner offers the worker's tools, MCP tools included, under function
// names chat APIs accept (no dots), and reads a call back as the tool's activity name.
// It speaks through OpenAI's official client (its User-Agent and X-Stainless headers).
func TestChatPlannerOffersMCPTools(t *testing.T) {
	valid := regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	var got chatRequest
	var header http.Header
	chat := chatServer(t, func(r *http.Request, req chatRequest) (int, string) {
		got, header = req, r.Header.Clone()
		return 200, completion("mcp__shop__stock_level", `{"sku":"A"}`, "")
	})
	stock := activities.NewTool("mcp.shop.stock_level", "Units in stock.", json.RawMessage(`{"type":"object","properties":{"sku":{"type":"string"}}}`),
		func(args map[string]any) error {
			if _, ok := args["sku"].(string); !ok {
				return errors.New("sku: want a string")
			}
			return nil
		})
	p := &activities.Planning{Planner: activities.ChatPlanner{BaseURL: chat.URL + "/v1", Model: "m", APIKey: "sk-test"},
		Tools: append(activities.Toolset(activities.Registry), stock)}
	step, err := p.PlanNextStep(context.Background(), activities.PlanInput{Goal: "stock"})
	if err != nil || step.Tool != "mcp.shop.stock_level" || string(step.Args) != `{"sku":"A"}` {
		t.Fatalf("step %+v, %v: want the MCP tool by its activity name, with its arguments", step, err)
	}
	if header.Get("Authorization") != "Bearer sk-test" || !strings.HasPrefix(header.Get("User-Agent"), "OpenAI/Go ") ||
		header.Get("X-Stainless-Lang") != "go" {
		t.Errorf("headers %v: want the key as a bearer token, sent by openai-go", header)
	}
	if got.Model != "m" || len(got.Messages) != 2 || got.Messages[0].Role != "system" || got.Messages[1].Role != "user" ||
		!strings.Contains(got.Messages[1].Content, "Goal: stock") {
		t.Errorf("request %+v: want the model, a system message and the goal", got)
	}
	if len(got.Tools) != len(activities.Registry)+1 {
		t.Fatalf("offered %d tools: want the %d built-in tools and the MCP tool", len(got.Tools), len(activities.Registry))
	}
	last := got.Tools[len(got.Tools)-1]
	if last.Type != "function" || last.Function.Name != "mcp__shop__stock_level" || last.Function.Description != "Units in stock." ||
		last.Function.Parameters["type"] != "object" {
		t.Errorf("the MCP tool offered as %+v", last)
	}
	for _, tl := range got.Tools {
		if !valid.MatchString(tl.Function.Name) {
			t.Errorf("function name %q is not one chat APIs accept", tl.Function.Name)
		}
	}
	// The same call with arguments against the tool's check is refused, naming the field.
	if err := p.Tools.CheckCall("mcp.shop.stock_level", json.RawMessage(`{"sku":1}`)); err == nil || !strings.Contains(err.Error(), "sku") {
		t.Fatalf("CheckCall: %v", err)
	}
}

// A reply without a tool call means done, with the model's text as the reason.
func TestChatPlannerDoneWithoutToolCall(t *testing.T) {
	chat := chatServer(t, func(*http.Request, chatRequest) (int, string) { return 200, completion("", "", " All done. ") })
	step, err := activities.ChatPlanner{BaseURL: chat.URL + "/v1", Model: "m"}.Next(context.Background(), activities.PlanInput{Goal: "g"})
	if err != nil || !step.Done || step.Reason != "All done." {
		t.Fatalf("step %+v, %v: want done, with the model's text", step, err)
	}
}

// The planner's settings are its own: the client's OPENAI_API_KEY and
// OPENAI_BASE_URL do not replace them (no key means no Authorization header), and
// the request is sent once — Temporal's retry policy retries the activity.
func TestChatPlannerSendsOnceWithItsOwnSettings(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-from-env")
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
	var calls atomic.Int32
	chat := chatServer(t, func(r *http.Request, _ chatRequest) (int, string) {
		calls.Add(1)
		if a := r.Header.Get("Authorization"); a != "" {
			t.Errorf("Authorization %q sent for a planner without a key", a)
		}
		return 500, `{"error":{"message":"boom","type":"server_error","param":null,"code":null}}`
	})
	_, err := activities.ChatPlanner{BaseURL: chat.URL + "/v1", Model: "m"}.Next(context.Background(), activities.PlanInput{Goal: "g"})
	if err == nil || !strings.Contains(err.Error(), "answered 500") || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("error %v: want the status and the body", err)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d requests, want 1 (no retries inside the activity)", n)
	}
}

// TestChatPlannerErrorsHideCredentials: a model API root may carry credentials
// (user info, ?api-key= for some gateways), and a server may echo the API key in
// its error; the planner's errors print neither.
func TestChatPlannerErrorsHideCredentials(t *testing.T) {
	const pw, key = "Zq7-PW", "sk-Zq7-KEY"
	chat := chatServer(t, func(r *http.Request, _ chatRequest) (int, string) {
		if r.Header.Get("Authorization") == "Bearer "+key {
			return 401, `{"error":{"message":"Incorrect API key provided: ` + key + `.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`
		}
		return 503, `{"error":{"message":"overloaded","type":"server_error","param":null,"code":null}}`
	})
	for _, c := range []struct {
		base, key, want string
	}{
		{strings.Replace(chat.URL, "http://", "http://u:"+pw+"@", 1) + "/v1", "", "answered 503"}, // answered 503
		{"http://127.0.0.1:1/v1/openai/deployments/m?api-key=" + pw, "", "chat planner"},          // unreachable
		{chat.URL + "/v1", key, "answered 401"},                                                   // the key echoed
	} {
		_, err := activities.ChatPlanner{BaseURL: c.base, Model: "m", APIKey: c.key}.Next(context.Background(), activities.PlanInput{Goal: "g"})
		if err == nil || strings.Contains(err.Error(), pw) || strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("BaseURL %s: %v; want an error with %q, without the credentials", c.base, err, c.want)
		}
	}
}
