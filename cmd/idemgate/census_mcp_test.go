package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestCensusMCP: census --mcp lists a real server's tools over streamable HTTP,
// annotations beside the name's class; --strict fails on a flagged tool and on one
// whose annotations contradict its name.
func TestCensusMCP(t *testing.T) {
	yes, no := true, false
	serve := func(tools map[string]*mcp.ToolAnnotations) string {
		srv := mcp.NewServer(&mcp.Implementation{Name: "crm", Version: "v1"}, nil)
		for name, ann := range tools {
			srv.AddTool(&mcp.Tool{Name: name, Annotations: ann, InputSchema: &jsonschema.Schema{Type: "object"}},
				func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					return &mcp.CallToolResult{}, nil
				})
		}
		hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
		t.Cleanup(hs.Close)
		return hs.URL
	}
	url := serve(map[string]*mcp.ToolAnnotations{
		"get_contact":    {ReadOnlyHint: true},
		"frobnicate":     {ReadOnlyHint: true},
		"update_contact": {DestructiveHint: &yes},
		"delete_contact": {ReadOnlyHint: true},
		"sync_ledger":    {DestructiveHint: &no, IdempotentHint: true},
	})
	r := ok(t, "census", "--mcp", url, "--mcp-name", "crm")
	for _, want := range []string{"mcp.crm.frobnicate", "no known verb in the name; the hints of mcp server crm say read",
		"mcp.crm.update_contact", "read (contradicts the name)", "effects: read=2 idempotent-write=1 destructive=2"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("census lacks %q:\n%s", want, r.stdout)
		}
	}
	r = idem(t, "census", "--strict", "--mcp", url, "--mcp-name", "crm")
	if r.code != exitFail || !strings.Contains(r.stderr, "mcp.crm.delete_contact: the name reads destructive, its annotations say read") {
		t.Errorf("--strict must fail on the contradiction: %d %s", r.code, r.stderr)
	}
	ok(t, "census", "--strict", "--mcp", serve(map[string]*mcp.ToolAnnotations{"get_contact": {ReadOnlyHint: true}}))
	r = idem(t, "census", "--mcp", "http://127.0.0.1:1/mcp", "--mcp-name", "down")
	if r.code == 0 || !strings.Contains(r.stderr, "server down cannot be reached") {
		t.Errorf("unreachable server: %d %s", r.code, r.stderr)
	}
	r = idem(t, "census", "--mcp-command", "  ")
	if r.code == 0 || !strings.Contains(r.stderr, "no MCP server given") {
		t.Errorf("blank command: %d %s", r.code, r.stderr)
	}
}

// TestCensusMCPNeverPrintsCredentials: census --mcp with a URL that carries
// credentials does not print them when the server cannot be reached.
func TestCensusMCPNeverPrintsCredentials(t *testing.T) {
	const pw = "Zq7-PW"
	for _, u := range []string{"http://u:" + pw + "@127.0.0.1:1/mcp", "http://127.0.0.1:1/mcp?access_token=" + pw,
		"http://127.0.0.1:1/mcp?token=" + pw + "&api_key=" + pw} {
		r := idem(t, "census", "--mcp", u, "--mcp-name", "down")
		if r.code == 0 || !strings.Contains(r.stderr, "server down cannot be reached") ||
			strings.Contains(r.stdout+r.stderr, pw) {
			t.Errorf("census --mcp %s: exit %d, output %q; want a failure without the credentials", u, r.code, r.stdout+r.stderr)
		}
	}
}
