package mcptools_test

import (
	"context"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	"github.com/idemgate/idemgate/mcptools"
)

// testServer is a real go-sdk MCP server whose tools record what they saw.
type testServer struct {
	srv *mcp.Server
	mu  sync.Mutex
	// keys are the MetaKey values the tools saw, in order; effects counts tool runs by tool.
	keys    []string
	effects map[string]int
}

type toolSpec struct {
	name   string
	ann    *mcp.ToolAnnotations
	schema *jsonschema.Schema
	// handle answers a call (nil: "ok"); n is the tool's run count, from 1.
	handle func(ctx context.Context, req *mcp.CallToolRequest, n int) (*mcp.CallToolResult, error)
}

func newTestServer(t testing.TB, dedup *mcptools.Dedup, tools ...toolSpec) *testServer {
	t.Helper()
	s := &testServer{srv: mcp.NewServer(&mcp.Implementation{Name: "test", Version: "v1"}, nil), effects: map[string]int{}}
	if dedup != nil {
		s.srv.AddReceivingMiddleware(dedup.Middleware)
	}
	for _, ts := range tools {
		schema := ts.schema
		if schema == nil {
			schema = &jsonschema.Schema{Type: "object"}
		}
		s.srv.AddTool(&mcp.Tool{Name: ts.name, Annotations: ts.ann, InputSchema: schema},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				key, _ := req.Params.Meta["io.idemgate/idempotency-key"].(string)
				s.mu.Lock()
				s.keys = append(s.keys, key)
				s.effects[ts.name]++
				n := s.effects[ts.name]
				s.mu.Unlock()
				if ts.handle != nil {
					return ts.handle(ctx, req, n)
				}
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
			})
	}
	return s
}

func (s *testServer) seen() ([]string, map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := map[string]int{}
	for k, v := range s.effects {
		m[k] = v
	}
	return append([]string(nil), s.keys...), m
}

// inMemory connects a client over the SDK's in-memory transport.
func (s *testServer) inMemory(t testing.TB) mcp.Transport {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := s.srv.Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	return ct
}

// streamable serves the server over streamable HTTP on loopback.
func (s *testServer) streamable(t testing.TB) mcp.Transport {
	t.Helper()
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.srv }, nil))
	t.Cleanup(hs.Close)
	return &mcp.StreamableClientTransport{Endpoint: hs.URL, MaxRetries: -1}
}

// transports runs f once per transport.
func transports(t *testing.T, s *testServer, f func(t *testing.T, tr mcp.Transport)) {
	t.Run("in-memory", func(t *testing.T) { f(t, s.inMemory(t)) })
	t.Run("streamable-http", func(t *testing.T) { f(t, s.streamable(t)) })
}

func quietSuite() *testsuite.WorkflowTestSuite {
	s := &testsuite.WorkflowTestSuite{}
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	return s
}

func bptr(b bool) *bool { return &b }

// claimsDedup is middleware that announces Dedup (mcptools.CapabilityDedup) with
// window, as Dedup does, without running it: a server that says it deduplicates.
func claimsDedup(window time.Duration) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			var caps *mcp.ServerCapabilities
			switch r := res.(type) {
			case *mcp.InitializeResult:
				caps = r.Capabilities
			case *mcp.DiscoverResult:
				caps = r.Capabilities
			}
			if caps != nil {
				caps.Experimental = maps.Clone(caps.Experimental)
				if caps.Experimental == nil {
					caps.Experimental = map[string]any{}
				}
				caps.Experimental[mcptools.CapabilityDedup] = map[string]any{"windowSeconds": window.Seconds()}
			}
			return res, err
		}
	}
}
