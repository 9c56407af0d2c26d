package mcptools_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/internal/attempt"
	"github.com/idemgate/idemgate/mcptools"
)

// BenchmarkBridge compares a bare go-sdk tools/call with the same call through the
// bridge (key in _meta, schema check, result conversion, outcome recording), over
// streamable HTTP on loopback against one server in this process, so the
// allocations counted include the server's (among them its decoding of _meta).
// The gate's store cost is not in it.
func BenchmarkBridge(b *testing.B) {
	s := newTestServer(b, nil, toolSpec{name: "create_contact"})
	benchBridge(b, s.streamable(b))
}

// BenchmarkBridgeRemote is BenchmarkBridge against the same server run as a
// process of its own (this test binary, re-run with IDEMGATE_MCPTOOLS_SERVE=1), so
// the allocations counted are the worker's alone, as in production.
func BenchmarkBridgeRemote(b *testing.B) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "IDEMGATE_MCPTOOLS_SERVE=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { stdin.Close(); _ = cmd.Wait() }()
	url, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatalf("the server process did not say its URL: %v", err)
	}
	tr, err := mcptools.Transport(strings.TrimSpace(url))
	if err != nil {
		b.Fatal(err)
	}
	benchBridge(b, tr)
}

// TestMain serves the benchmark's MCP server when run as BenchmarkBridgeRemote's
// server process: it prints its URL and serves until its stdin closes.
func TestMain(m *testing.M) {
	if os.Getenv("IDEMGATE_MCPTOOLS_SERVE") != "1" {
		os.Exit(m.Run())
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "bench", Version: "v1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "create_contact", InputSchema: &jsonschema.Schema{Type: "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
		})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	go func() {
		_ = http.Serve(ln, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	}()
	fmt.Println("http://" + ln.Addr().String())
	_, _ = io.Copy(io.Discard, os.Stdin)
}

func benchBridge(b *testing.B, tr mcp.Transport) {
	br, err := mcptools.Dial(context.Background(), "crm", tr, mcptools.Options{})
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
	o := interceptor.Options{}
	br.Apply(&o)
	bridged := func() {
		_ = o.Classify("mcp.crm.create_contact")
		ctx := attempt.NewContext(context.Background(), &attempt.State{Key: "3f1c2a4e-0000-5000-8000-000000000000"})
		if _, err := br.Call(ctx, "mcp.crm.create_contact", args); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("bridge", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			bridged()
		}
	})
	// Side by side: each iteration times one bare call and one through the bridge.
	b.Run("side-by-side", func(b *testing.B) {
		p := &mcp.CallToolParams{Name: "create_contact", Arguments: args}
		var bareT, bridgeT time.Duration
		for b.Loop() {
			t0 := time.Now()
			if _, err := br.Session().CallTool(context.Background(), p); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			bridged()
			bareT, bridgeT = bareT+t1.Sub(t0), bridgeT+time.Since(t1)
		}
		b.ReportMetric(float64(bareT.Nanoseconds())/float64(b.N), "bare-ns/op")
		b.ReportMetric(float64(bridgeT.Nanoseconds())/float64(b.N), "bridge-ns/op")
		b.ReportMetric(float64(bridgeT-bareT)/float64(b.N)/1e3, "added-µs/op")
	})
}

// BenchmarkDedupRepeat compares, on one server over streamable HTTP on loopback, a
// bare tools/call of a tool that does nothing (no Dedup on that server) with a
// repeat that Dedup answers from its store (same key, same arguments). The issue's
// target: the repeat costs ≤ 1.1× the bare call.
func BenchmarkDedupRepeat(b *testing.B) {
	args := map[string]any{"email": "a@example.com"}
	bareSrv := newTestServer(b, nil, toolSpec{name: "create_contact"})
	bare, err := mcptools.Dial(context.Background(), "crm", bareSrv.streamable(b), mcptools.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer bare.Session().Close()
	dedupSrv := newTestServer(b, mcptools.NewDedup(0), toolSpec{name: "create_contact"})
	dd, err := mcptools.Dial(context.Background(), "crm", dedupSrv.streamable(b), mcptools.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer dd.Session().Close()
	keyed := &mcp.CallToolParams{Name: "create_contact", Arguments: args,
		Meta: mcp.Meta{mcptools.MetaKey: "3f1c2a4e-0000-5000-8000-000000000000"}}
	if _, err := dd.Session().CallTool(context.Background(), keyed); err != nil { // the first call runs the tool
		b.Fatal(err)
	}
	b.Run("bare-noop", func(b *testing.B) {
		b.ReportAllocs()
		p := &mcp.CallToolParams{Name: "create_contact", Arguments: args}
		for b.Loop() {
			if _, err := bare.Session().CallTool(context.Background(), p); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("dedup-repeat", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			res, err := dd.Session().CallTool(context.Background(), keyed)
			if err != nil {
				b.Fatal(err)
			}
			if v, _ := res.Meta[mcptools.MetaReplayed].(bool); !v {
				b.Fatal("the repeat was not answered from Dedup's store")
			}
		}
	})
	// Side by side: each iteration times one bare call and one repeat, so both see
	// the same machine load; the ratio is the target's measure.
	b.Run("side-by-side", func(b *testing.B) {
		p := &mcp.CallToolParams{Name: "create_contact", Arguments: args}
		var bareT, repeatT time.Duration
		for b.Loop() {
			t0 := time.Now()
			if _, err := bare.Session().CallTool(context.Background(), p); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			if _, err := dd.Session().CallTool(context.Background(), keyed); err != nil {
				b.Fatal(err)
			}
			bareT, repeatT = bareT+t1.Sub(t0), repeatT+time.Since(t1)
		}
		b.ReportMetric(float64(bareT.Nanoseconds())/float64(b.N), "bare-ns/op")
		b.ReportMetric(float64(repeatT.Nanoseconds())/float64(b.N), "repeat-ns/op")
		b.ReportMetric(float64(repeatT)/float64(bareT), "repeat/bare")
	})
	if _, effects := dedupSrv.seen(); effects["create_contact"] != 1 {
		b.Fatalf("the tool ran %d times behind Dedup; want 1", effects["create_contact"])
	}
}
