package activities_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/activities"
)

// The model planner offers the worker's tools, MCP tools included, under function
// names chat APIs accept (no dots), and reads a call back as the tool's activity name.
func TestChatPlannerOffersMCPTools(t *testing.T) {
	valid := regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	var offered []string
	chat := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Tools []struct {
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			} `json:"tools"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		for _, tl := range req.Tools {
			offered = append(offered, tl.Function.Name)
		}
		_, _ = w.Write([]byte(`{"choices":[{"message":{"tool_calls":[{"function":{"name":"mcp__shop__stock_level","arguments":"{\"sku\":\"A\"}"}}]}}]}`))
	}))
	defer chat.Close()
	stock := activities.NewTool("mcp.shop.stock_level", "Units in stock.", json.RawMessage(`{"type":"object"}`),
		func(args map[string]any) error {
			if _, ok := args["sku"].(string); !ok {
				return errors.New("sku: want a string")
			}
			return nil
		})
	p := &activities.Planning{Planner: activities.ChatPlanner{BaseURL: chat.URL, Model: "m"},
		Tools: append(activities.Toolset(activities.Registry), stock)}
	step, err := p.PlanNextStep(context.Background(), activities.PlanInput{Goal: "stock"})
	if err != nil || step.Tool != "mcp.shop.stock_level" {
		t.Fatalf("step %+v, %v: want the MCP tool by its activity name", step, err)
	}
	if len(offered) != len(activities.Registry)+1 || offered[len(offered)-1] != "mcp__shop__stock_level" {
		t.Fatalf("offered %q: want the built-in tools and the MCP tool", offered)
	}
	for _, n := range offered {
		if !valid.MatchString(n) {
			t.Errorf("function name %q is not one chat APIs accept", n)
		}
	}
	// The same call with arguments against the tool's check is refused, naming the field.
	if err := p.Tools.CheckCall("mcp.shop.stock_level", json.RawMessage(`{"sku":1}`)); err == nil || !strings.Contains(err.Error(), "sku") {
		t.Fatalf("CheckCall: %v", err)
	}
}

// TestChatPlannerErrorsHideCredentials: a model API root may carry credentials
// (user info, ?api-key= for some gateways); the planner's errors do not print them.
func TestChatPlannerErrorsHideCredentials(t *testing.T) {
	const pw = "Zq7-PW"
	chat := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "overloaded", http.StatusServiceUnavailable)
	}))
	defer chat.Close()
	for _, base := range []string{
		strings.Replace(chat.URL, "http://", "http://u:"+pw+"@", 1), // answered 503
		"http://127.0.0.1:1/v1/openai/deployments/m?api-key=" + pw,  // unreachable
	} {
		_, err := activities.ChatPlanner{BaseURL: base, Model: "m"}.Next(context.Background(), activities.PlanInput{Goal: "g"})
		if err == nil || strings.Contains(err.Error(), pw) {
			t.Errorf("BaseURL %s: %v; want an error without the credentials", base, err)
		}
	}
}
