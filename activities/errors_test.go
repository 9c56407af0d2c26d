package activities_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/activities"
)

// Every error that leaves the package starts with "idemgate/activities: ", once:
// an error the package wraps in another of its own (a plan file's bad step, a
// planner's bad call) does not repeat it.
func TestErrorsCarryThePackagePrefixOnce(t *testing.T) {
	const prefix = "idemgate/activities: "
	ctx := context.Background()
	vendor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/customers/missing":
			http.Error(w, `{"error":"no such customer"}`, http.StatusNotFound)
		case "/customers/down":
			http.Error(w, "maintenance", http.StatusServiceUnavailable)
		case "/api/chat.postMessage":
			_, _ = w.Write([]byte(`{"ok":false,"error":"channel_not_found"}`))
		default:
			_, _ = w.Write([]byte("not JSON"))
		}
	}))
	defer vendor.Close()
	u := vendor.URL
	tools, err := activities.New(activities.Endpoints{Docs: u, CRM: u, Tickets: u, Payments: u, Email: u, Chat: u})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	plan := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	badStep := &activities.Script{Steps: []activities.Step{{Tool: "ChargeCard", Args: json.RawMessage(`{"customer":"cus_1","amount":-5,"currency":"eur"}`)}}}

	errs := map[string]error{}
	_, errs["New: an endpoint that is not a URL"] = activities.New(activities.Endpoints{})
	_, errs["LoadScript: no such file"] = activities.LoadScript(filepath.Join(dir, "missing.json"))
	_, errs["LoadScript: not a plan"] = activities.LoadScript(plan("list.json", `[1]`))
	_, errs["LoadScript: no steps"] = activities.LoadScript(plan("empty.json", `{"goal":"g","steps":[]}`))
	_, errs["LoadScript: unknown tool"] = activities.LoadScript(plan("unknown.json", `{"goal":"g","steps":[{"tool":"DropDatabase","args":{}}]}`))
	errs["Script.Check"] = badStep.Check()
	errs["CheckCall"] = activities.CheckCall("DropDatabase", nil)
	_, errs["PlanNextStep: no planner"] = (&activities.Planning{}).PlanNextStep(ctx, activities.PlanInput{})
	_, errs["PlanNextStep: a step that does not fit"] = (&activities.Planning{}).PlanNextStep(ctx, activities.PlanInput{Script: badStep})
	_, errs["ChatPlanner: not a chat completion"] = activities.ChatPlanner{BaseURL: u, Model: "m"}.Next(ctx, activities.PlanInput{Goal: "g"})
	_, errs["GetCustomer: vendor rejected"] = tools.GetCustomer(ctx, activities.GetCustomerInput{CustomerID: "missing"})
	_, errs["GetCustomer: vendor unavailable"] = tools.GetCustomer(ctx, activities.GetCustomerInput{CustomerID: "down"})
	_, errs["SearchDocs: answer not JSON"] = tools.SearchDocs(ctx, activities.SearchDocsInput{Query: "refunds"})
	_, errs["PostSlackMessage: chat refused"] = tools.PostSlackMessage(ctx, activities.PostSlackMessageInput{Channel: "#nope", Text: "hi"})

	for name, err := range errs {
		if err == nil {
			t.Errorf("%s: no error", name)
			continue
		}
		if msg := err.Error(); !strings.HasPrefix(msg, prefix) || strings.Count(msg, prefix) != 1 {
			t.Errorf("%s: %q: want it to start with %q, once", name, msg, prefix)
		}
	}
}
