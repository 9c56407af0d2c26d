package mcptools

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// DefaultDedupWindow is how long Dedup remembers a finished call when no window is given.
const DefaultDedupWindow = 24 * time.Hour

// Dedup is the server side of the key: middleware for an MCP server built with the
// go-sdk that deduplicates tools/call requests carrying MetaKey in their _meta.
// The same key with the same tool and arguments gets the stored result (marked
// MetaReplayed); with another tool or other arguments, an error (CodeConflict); while
// the first call runs, an error the gate reads as in flight (CodeInFlight). A
// finished call is forgotten after the window; a running one never is. A call
// without a key runs as usual. The store is in memory: one server process.
//
//	server.AddReceivingMiddleware(mcptools.NewDedup(0).Middleware)
type Dedup struct {
	window time.Duration
	now    func() time.Time

	mu      sync.Mutex
	entries map[string]*dedupEntry
	swept   time.Time
}

type dedupEntry struct {
	tool string
	// raw hashes the arguments as sent, hash their canonical form: a repeat sent
	// byte for byte the same (what a retry of the same client sends) is matched
	// without decoding; any other is compared by canonical form.
	raw, hash [32]byte
	done      bool
	replay    *mcp.CallToolResult // the stored result, marked MetaReplayed
	expires   time.Time
}

// NewDedup returns a Dedup that remembers finished calls for window (0: DefaultDedupWindow).
func NewDedup(window time.Duration) *Dedup {
	if window <= 0 {
		window = DefaultDedupWindow
	}
	return &Dedup{window: window, now: time.Now, entries: map[string]*dedupEntry{}}
}

// Middleware is the mcp.Middleware to add with Server.AddReceivingMiddleware.
func (d *Dedup) Middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "tools/call" {
			return next(ctx, method, req)
		}
		p, ok := req.GetParams().(*mcp.CallToolParamsRaw)
		if !ok {
			return next(ctx, method, req)
		}
		key, _ := p.Meta[MetaKey].(string)
		if key == "" {
			return next(ctx, method, req)
		}
		raw := sha256.Sum256(p.Arguments)
		now := d.now()
		d.mu.Lock()
		e := d.entries[key]
		if e != nil && e.done && !now.Before(e.expires) {
			delete(d.entries, key)
			e = nil
		}
		if e != nil {
			d.mu.Unlock()
			same := e.tool == p.Name && e.raw == raw
			if !same && e.tool == p.Name {
				hash, err := argsHash(p.Arguments)
				if err != nil {
					return nil, invalidArgs(p.Name, err)
				}
				same = e.hash == hash
			}
			switch {
			case !same:
				return nil, &jsonrpc.Error{Code: CodeConflict, Message: fmt.Sprintf("idempotency key %s was used for "+
					"tool %s with other arguments; this call (tool %s) was not run", key, e.tool, p.Name)}
			case !e.done:
				return nil, &jsonrpc.Error{Code: CodeInFlight, Message: fmt.Sprintf("idempotency key %s: tool %s is "+
					"still running with it; not run twice", key, p.Name)}
			}
			return e.replay, nil
		}
		d.mu.Unlock()
		hash, err := argsHash(p.Arguments)
		if err != nil {
			return nil, invalidArgs(p.Name, err)
		}
		d.mu.Lock()
		if d.entries[key] != nil { // another call with this key came in meanwhile: let the caller retry
			d.mu.Unlock()
			return nil, &jsonrpc.Error{Code: CodeInFlight, Message: fmt.Sprintf("idempotency key %s: tool %s is "+
				"already being called with it; not run twice", key, p.Name)}
		}
		e = &dedupEntry{tool: p.Name, raw: raw, hash: hash}
		d.entries[key] = e
		d.expire(now)
		d.mu.Unlock()

		res, err := next(ctx, method, req)
		r, ok := res.(*mcp.CallToolResult)
		var replay *mcp.CallToolResult
		if err == nil && ok {
			replay = replayed(r)
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		if replay == nil {
			// A protocol error: the tool did not produce a result. Forget the key so a
			// retry runs; the tool's own contract decides whether that is safe.
			delete(d.entries, key)
			return res, err
		}
		e.done, e.replay, e.expires = true, replay, d.now().Add(d.window)
		return res, nil
	}
}

func invalidArgs(tool string, err error) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("tool %s: arguments are not JSON: %v", tool, err)}
}

// expire drops finished entries past their window; running ones stay. Called with
// d.mu held; it sweeps at most once a minute, so the map stays bounded by the calls
// of one window and a minute.
func (d *Dedup) expire(now time.Time) {
	if now.Sub(d.swept) < time.Minute {
		return
	}
	d.swept = now
	for k, e := range d.entries {
		if e.done && !now.Before(e.expires) {
			delete(d.entries, k)
		}
	}
}

// replayed is a copy of r marked as answered from the store; every repeat is
// answered with the same copy, which nothing changes.
func replayed(r *mcp.CallToolResult) *mcp.CallToolResult {
	c := *r
	c.Meta = mcp.Meta{}
	for k, v := range r.Meta {
		c.Meta[k] = v
	}
	c.Meta[MetaReplayed] = true
	return &c
}

// argsHash hashes the arguments in a canonical JSON form (object keys sorted).
func argsHash(raw json.RawMessage) ([32]byte, error) {
	if len(raw) == 0 {
		return sha256.Sum256(nil), nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return [32]byte{}, err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return [32]byte{}, err
	}
	return sha256.Sum256(b), nil
}
