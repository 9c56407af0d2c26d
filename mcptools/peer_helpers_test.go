package mcptools_test

import (
	"bytes"
	"context"
	"io"
	"net/http/httptest"
	"regexp"
	"sync"
	"testing"

	mgo "github.com/mark3labs/mcp-go/mcp"
	mgoserver "github.com/mark3labs/mcp-go/server"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// peerServer is a real MCP server built with github.com/mark3labs/mcp-go, the other
// Go SDK: its tools count their runs like testServer's.
type peerServer struct {
	srv     *mgoserver.MCPServer
	mu      sync.Mutex
	effects map[string]int
}

type peerTool struct {
	tool mgo.Tool
	// handle answers a call after it was counted (nil: "ok"); n is the tool's run count, from 1.
	handle func(ctx context.Context, req mgo.CallToolRequest, n int) (*mgo.CallToolResult, error)
}

func newPeerServer(tools ...peerTool) *peerServer {
	s := &peerServer{srv: mgoserver.NewMCPServer("peer", "v1", mgoserver.WithToolCapabilities(false)), effects: map[string]int{}}
	for _, pt := range tools {
		s.srv.AddTool(pt.tool, func(ctx context.Context, req mgo.CallToolRequest) (*mgo.CallToolResult, error) {
			s.mu.Lock()
			s.effects[pt.tool.Name]++
			n := s.effects[pt.tool.Name]
			s.mu.Unlock()
			if pt.handle != nil {
				return pt.handle(ctx, req, n)
			}
			return mgo.NewToolResultText("ok"), nil
		})
	}
	return s
}

func (s *peerServer) runs(tool string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.effects[tool]
}

// stdio serves the server over its stdio transport on pipes; rewrite, when given,
// changes each line the server writes.
func (s *peerServer) stdio(t testing.TB, rewrite func([]byte) []byte) mcp.Transport {
	t.Helper()
	clientR, serverW := io.Pipe()
	serverR, clientW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	var out io.Writer = serverW
	if rewrite != nil {
		out = &lineRewriter{w: serverW, f: rewrite}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = mgoserver.NewStdioServer(s.srv).Listen(ctx, serverR, out)
	}()
	t.Cleanup(func() {
		cancel()
		clientW.Close()
		serverW.Close()
		<-done
	})
	return &mcp.IOTransport{Reader: clientR, Writer: clientW}
}

// streamable serves the server over its streamable HTTP transport on loopback.
func (s *peerServer) streamable(t testing.TB) mcp.Transport {
	t.Helper()
	hs := httptest.NewServer(mgoserver.NewStreamableHTTPServer(s.srv))
	t.Cleanup(hs.Close)
	return &mcp.StreamableClientTransport{Endpoint: hs.URL + "/mcp", MaxRetries: -1}
}

// peerTransports runs f once per transport of the peer server.
func peerTransports(t *testing.T, s *peerServer, f func(t *testing.T, tr mcp.Transport)) {
	t.Run("mcp-go-stdio", func(t *testing.T) { f(t, s.stdio(t, nil)) })
	t.Run("mcp-go-streamable-http", func(t *testing.T) { f(t, s.streamable(t)) })
}

// lineRewriter applies f to each complete line written through it.
type lineRewriter struct {
	mu  sync.Mutex
	w   io.Writer
	f   func([]byte) []byte
	buf []byte
}

func (l *lineRewriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := l.f(append([]byte(nil), l.buf[:i]...))
		l.buf = l.buf[i+1:]
		if _, err := l.w.Write(append(line, '\n')); err != nil {
			return 0, err
		}
	}
}

var responseID = regexp.MustCompile(`"id":\s*\d+`)

// nullErrorIDs gives every error response the id null, as a server does when it
// cannot tell which request an error answers.
func nullErrorIDs(line []byte) []byte {
	if !bytes.Contains(line, []byte(`"error"`)) {
		return line
	}
	return responseID.ReplaceAll(line, []byte(`"id":null`))
}
