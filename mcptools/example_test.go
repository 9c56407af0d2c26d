package mcptools_test

import (
	"context"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/mcptools"
	"github.com/idemgate/idemgate/store/memory"
)

// A server whose Dedup is added with Install offers its lookup; the bridge's Apply
// then registers the bridge's witness for each of its tools, which the gate asks
// before it refuses an unknown outcome.
func ExampleDedup_Install() {
	ctx := context.Background()
	server := mcp.NewServer(&mcp.Implementation{Name: "shop", Version: "v1"}, nil)
	type refund struct {
		Order string `json:"order"`
	}
	mcp.AddTool(server, &mcp.Tool{Name: "refund"}, func(context.Context, *mcp.CallToolRequest, refund) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "refunded"}}}, nil, nil
	})
	if err := mcptools.NewDedup(time.Hour).Install(server); err != nil {
		fmt.Println(err)
		return
	}
	ct, st := mcp.NewInMemoryTransports()
	ss, err := server.Connect(ctx, st, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ss.Close()

	b, err := mcptools.Dial(ctx, "shop", ct, mcptools.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Session().Close()
	opts := interceptor.Options{Store: memory.New()}
	b.Apply(&opts)
	fmt.Println("lookup offered:", b.LookupOffered())
	for _, w := range opts.Witnesses["mcp.shop.refund"] {
		fmt.Println("witness:", w.Name())
	}
	// Output:
	// lookup offered: true
	// witness: mcp:shop
}
