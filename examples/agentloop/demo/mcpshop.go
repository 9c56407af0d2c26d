package demo

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/mcptools"
)

// ShopServer is the MCP server's name in activity names: its tools are mcp.shop.TOOL.
const ShopServer = "shop"

// shopDedupWindow is how long the shop's Dedup middleware remembers a call.
const shopDedupWindow = time.Hour

// ShopTool is one tool of the demo's MCP server and the class the gate must give it.
type ShopTool struct {
	Name        string
	Description string
	Annotations *mcp.ToolAnnotations
	// Effect and Source are what the gate decides: the name's class, tightened or
	// refined by the annotations (a verb-list match is never lowered).
	Effect interceptor.Effect
	Source interceptor.Source
	// Contradicts: the annotations claim less than the name reads as.
	Contradicts bool
	// Lesson says in a few words why it is classed so.
	Lesson string
}

func yes() *bool { b := true; return &b }

// ShopTools are the shop's tools: annotations that disagree with the names in
// instructive ways.
var ShopTools = []ShopTool{
	{Name: "stock_level", Description: "Units in stock for a SKU.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
		Effect: interceptor.Read, Source: interceptor.SourceHint,
		Lesson: "no verb in the name: the server's readOnlyHint gives the class"},
	{Name: "get_coupon", Description: "Hands out a single-use coupon code: each call uses one up.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: yes()},
		Effect:      interceptor.Destructive, Source: interceptor.SourceHint,
		Lesson: "'get' reads as a read, destructiveHint tightens it to destructive"},
	{Name: "create_invoice", Description: "Creates an invoice for the customer.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
		Effect: interceptor.IdempotentWrite, Source: interceptor.SourceVerb, Contradicts: true,
		Lesson: "'create' is a write: readOnlyHint cannot lower it (shown as contradicting)"},
	{Name: "gift_card", Description: "Issues a gift card worth amount cents to the customer.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: yes()},
		Effect:      interceptor.Destructive, Source: interceptor.SourceHint,
		Lesson: "no verb in the name: destructiveHint makes it destructive"},
}

var shopSchemas = map[string]*jsonschema.Schema{
	"stock_level":    object(map[string]string{"sku": "string"}, "sku"),
	"get_coupon":     object(map[string]string{"customer": "string"}, "customer"),
	"create_invoice": object(map[string]string{"customer": "string", "amount": "integer"}, "customer", "amount"),
	"gift_card":      object(map[string]string{"customer": "string", "amount": "integer"}, "customer", "amount"),
}

func object(props map[string]string, required ...string) *jsonschema.Schema {
	s := &jsonschema.Schema{Type: "object", Required: required, Properties: map[string]*jsonschema.Schema{}}
	for n, t := range props {
		s.Properties[n] = &jsonschema.Schema{Type: t}
	}
	return s
}

// Shop is the demo's MCP server: the go-sdk's server over streamable HTTP on
// loopback, with mcptools.Dedup, counting what its tools did.
type Shop struct {
	URL string
	srv *http.Server

	mu           sync.Mutex
	runs         map[string]int // tool runs by tool
	byKey        map[string]int // write-tool runs by idempotency key
	replays      int            // calls Dedup answered from its store
	beforeAnswer func(key string)
}

func startShop() (*Shop, error) {
	s := &Shop{runs: map[string]int{}, byKey: map[string]int{}}
	srv := mcp.NewServer(&mcp.Implementation{Name: "shop", Version: "v1"}, nil)
	srv.AddReceivingMiddleware(s.countReplays, mcptools.NewDedup(shopDedupWindow).Middleware)
	for _, t := range ShopTools {
		srv.AddTool(&mcp.Tool{Name: t.Name, Description: t.Description, Annotations: t.Annotations, InputSchema: shopSchemas[t.Name]},
			s.handler(t.Name))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("idemgate/examples/agentloop/demo: mcp shop: listen on loopback: %w", err)
	}
	s.URL = "http://" + ln.Addr().String() + "/mcp"
	s.srv = &http.Server{Handler: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil),
		ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

func (s *Shop) handler(tool string) mcp.ToolHandler {
	return func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		key, _ := req.Params.Meta[mcptools.MetaKey].(string)
		s.mu.Lock()
		s.runs[tool]++
		n := s.runs[tool]
		if tool != "stock_level" {
			s.byKey[key]++
		}
		hook := s.beforeAnswer
		s.mu.Unlock()
		if hook != nil && tool != "stock_level" {
			hook(key) // the tool has acted; its answer waits
		}
		var text string
		switch tool {
		case "stock_level":
			text = "7 in stock"
		case "get_coupon":
			text = fmt.Sprintf("coupon SAVE-%04d", n)
		case "create_invoice":
			text = fmt.Sprintf("invoice in_%04d created", n)
		case "gift_card":
			text = fmt.Sprintf("gift card gc_%04d issued", n)
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil
	}
}

// countReplays counts the calls Dedup answered from its store (it runs outside Dedup).
func (s *Shop) countReplays(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if r, ok := res.(*mcp.CallToolResult); ok && err == nil && r.Meta[mcptools.MetaReplayed] == true {
			s.mu.Lock()
			s.replays++
			s.mu.Unlock()
		}
		return res, err
	}
}

// SetBeforeAnswer sets a hook that runs after a write tool acted and before it
// answers (nil removes it).
func (s *Shop) SetBeforeAnswer(hook func(key string)) {
	s.mu.Lock()
	s.beforeAnswer = hook
	s.mu.Unlock()
}

// Runs returns how many times tool ran.
func (s *Shop) Runs(tool string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runs[tool]
}

// Effects returns how many times a write tool ran with key.
func (s *Shop) Effects(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byKey[key]
}

// Replays returns how many calls Dedup answered from its store.
func (s *Shop) Replays() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.replays
}

// count is the shop's tally as a vendor row: write-tool runs, replays, and the keys
// a write tool ran with more than once.
func (s *Shop) count() VendorCount {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := VendorCount{Vendor: "mcp " + ShopServer, Replays: s.replays, Duplicates: []string{}}
	for _, n := range s.byKey {
		c.Effects += n
	}
	for k, n := range s.byKey {
		if n > 1 {
			c.Duplicates = append(c.Duplicates, k)
		}
	}
	sort.Strings(c.Duplicates)
	return c
}

// Close stops the server.
func (s *Shop) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
}
