package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemgate/idemgate/mcptools"
	"github.com/idemgate/idemgate/vendorsim"
)

// The harness's MCP server: its name in activity names (mcp.soak.TOOL), its tools
// and its Dedup window (the workers' mcptools.Options.DedupWindow).
const (
	mcpServerName  = "soak"
	mcpRead        = "get_order"
	mcpDestructive = "refund_payment"
	mcpDedupWindow = time.Hour
	// mcpVendor is the MCP server's name in its ledger's entries (vendorsim.Entry.Vendor).
	mcpVendor = "mcp"
)

// mcpServer is an MCP server built with the official go-sdk, served over streamable
// HTTP on loopback, with mcptools.Dedup installed (its middleware and its lookup,
// the workers' witness for its tools). Like a vendorsim vendor it keeps a ledger:
// one entry per side effect its destructive tool performed, under the idempotency
// key the call carried (Keyed) or none.
type mcpServer struct {
	URL string
	srv *http.Server

	mu      sync.Mutex
	ledger  []vendorsim.Entry
	answers map[string]*mcp.CallToolResult // by record ID
	runs    map[string]int                 // tool runs by tool
}

func startMCP() (*mcpServer, error) {
	m := &mcpServer{answers: map[string]*mcp.CallToolResult{}, runs: map[string]int{}}
	srv := mcp.NewServer(&mcp.Implementation{Name: mcpServerName, Version: "v1"}, nil)
	if err := mcptools.NewDedup(mcpDedupWindow).Install(srv); err != nil {
		return nil, err
	}
	str := func(props ...string) *jsonschema.Schema {
		s := &jsonschema.Schema{Type: "object", Required: props, Properties: map[string]*jsonschema.Schema{}}
		for _, p := range props {
			s.Properties[p] = &jsonschema.Schema{Type: "string"}
		}
		return s
	}
	refund := str("payment")
	refund.Properties["amount"] = &jsonschema.Schema{Type: "integer"}
	refund.Required = append(refund.Required, "amount")
	yes := true
	srv.AddTool(&mcp.Tool{Name: mcpRead, Description: "An order's status.", InputSchema: str("order"),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, m.getOrder)
	srv.AddTool(&mcp.Tool{Name: mcpDestructive, Description: "Refunds amount cents of a payment: each call refunds again.",
		InputSchema: refund, Annotations: &mcp.ToolAnnotations{DestructiveHint: &yes}}, m.refund)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("idemgate/integration/soak: the MCP server: listen on loopback: %w", err)
	}
	m.URL = "http://" + ln.Addr().String() + "/mcp"
	m.srv = &http.Server{Handler: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil),
		ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = m.srv.Serve(ln) }()
	return m, nil
}

func (m *mcpServer) getOrder(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var in struct {
		Order string `json:"order"`
	}
	_ = json.Unmarshal(req.Params.Arguments, &in)
	m.mu.Lock()
	m.runs[mcpRead]++
	m.mu.Unlock()
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Order + " shipped"}},
		StructuredContent: map[string]any{"order": in.Order, "status": "shipped"}}, nil
}

// refund performs the refund (a ledger entry) and answers with its record's ID.
func (m *mcpServer) refund(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	key, _ := req.Params.Meta[mcptools.MetaKey].(string)
	var in struct {
		Payment string `json:"payment"`
		Amount  int    `json:"amount"`
	}
	_ = json.Unmarshal(req.Params.Arguments, &in)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.runs[mcpDestructive]++
	seq := len(m.ledger) + 1
	id := fmt.Sprintf("rf_%06d", seq)
	e := vendorsim.Entry{Seq: seq, Vendor: mcpVendor, Key: key, Keyed: key != "", Path: "tools/call " + mcpDestructive,
		Body: json.RawMessage(slices.Clone(req.Params.Arguments)), RecordID: id, Time: time.Now()}
	if key == "" {
		e.Key = "call:" + id
	}
	m.ledger = append(m.ledger, e)
	res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("refund %s of %d on %s", id, in.Amount, in.Payment)}},
		StructuredContent: map[string]any{"id": id, "payment": in.Payment, "amount": in.Amount}}
	m.answers[id] = res
	return res, nil
}

// Ledger is every side effect the server's tools performed, in order.
func (m *mcpServer) Ledger() []vendorsim.Entry {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.ledger)
}

// Runs is how many times tool ran.
func (m *mcpServer) Runs(tool string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.runs[tool]
}

// Answer is what the tool activity returned (mcptools.Result) for the effect that
// produced record id: what the operator stores when it settles the call as sent.
func (m *mcpServer) Answer(id string) (mcptools.Result, bool) {
	m.mu.Lock()
	res := m.answers[id]
	m.mu.Unlock()
	if res == nil {
		return mcptools.Result{}, false
	}
	var out mcptools.Result
	out.Content, _ = json.Marshal(res.Content)
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			out.Text = t.Text
		}
	}
	out.Structured, _ = json.Marshal(res.StructuredContent)
	return out, true
}

// Close stops the server.
func (m *mcpServer) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = m.srv.Shutdown(ctx)
}
