package mcptools_test

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/internal/attempt"
	"github.com/idemgate/idemgate/mcptools"
)

// BenchmarkBridge compares a bare go-sdk tools/call with the same call through the
// bridge (key in _meta, schema check, result conversion, outcome recording), over
// streamable HTTP on loopback against one server. The gate's store cost is not in it.
func BenchmarkBridge(b *testing.B) {
	s := newTestServer(b, nil, toolSpec{name: "create_contact"})
	br, err := mcptools.Dial(context.Background(), "crm", s.streamable(b), mcptools.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer br.Session().Close()
	args := map[string]any{"email": "a@example.com"}
	b.Run("bare", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := br.Session().CallTool(context.Background(), &mcp.CallToolParams{Name: "create_contact", Arguments: args}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("bridge", func(b *testing.B) {
		b.ReportAllocs()
		o := interceptor.Options{}
		br.Apply(&o)
		for b.Loop() {
			_ = o.Classify("mcp.crm.create_contact")
			ctx := attempt.NewContext(context.Background(), &attempt.State{Key: "3f1c2a4e-0000-5000-8000-000000000000"})
			if _, err := br.Call(ctx, "mcp.crm.create_contact", args); err != nil {
				b.Fatal(err)
			}
		}
	})
}
