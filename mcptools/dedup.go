package mcptools

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// DefaultDedupWindow is how long Dedup remembers a finished call when no window is given.
const DefaultDedupWindow = 24 * time.Hour

// Dedup is the server side of the key: middleware for an MCP server built with the
// go-sdk that deduplicates tools/call requests carrying MetaKey in their _meta.
//
// Stored answers are scoped by who calls, the tool and the key: the same key from
// another authenticated user, or for another tool, is another call. The caller is
// the go-sdk's bearer-token auth (auth.RequireBearerToken): its TokenInfo.UserID.
// Calls without a token form their own scope; a keyed call whose token names no user
// is refused (it cannot be kept apart from other users'), and not run.
//
// In one scope, the same key with the same arguments (compared exactly: numbers as
// written, object keys in any order) gets the stored result (marked MetaReplayed);
// with other arguments, an error (CodeConflict); while the first call runs, an error
// the gate reads as in flight (CodeInFlight). Only answers of calls that may have
// acted are stored: a result with isError and MetaNotPerformed, the SDK's refusal of
// arguments that fail the input schema (before the handler), or a protocol error
// that proves no handler ran (see the Bridge), forgets the key so a retry runs. Any
// other protocol error (a handler's error, an output that failed its schema) may come
// after the tool acted: the key is kept, and a repeat is answered with
// CodeOutcomeUnknown, never run again. A finished call is forgotten after the window;
// a running one never is. A call without a key runs as usual. The store is in
// memory: one server process.
//
//	server.AddReceivingMiddleware(mcptools.NewDedup(0).Middleware)
type Dedup struct {
	window time.Duration
	now    func() time.Time

	mu      sync.Mutex
	entries map[dedupScope]*dedupEntry
	swept   time.Time
}

// dedupScope is what a stored answer is kept under.
type dedupScope struct {
	principal string // "" without a token, else "user:" + TokenInfo.UserID
	tool, key string
}

type dedupState int

const (
	dedupRunning dedupState = iota
	dedupDone               // replay holds the stored result
	dedupUnknown            // failed after the tool may have acted: failure says how
)

type dedupEntry struct {
	// raw hashes the arguments as sent, hash their canonical form: a repeat sent
	// byte for byte the same (what a retry of the same client sends) is matched
	// without decoding; any other is compared by canonical form. Both are set once.
	raw, hash [32]byte

	// Guarded by Dedup.mu.
	state   dedupState
	replay  *mcp.CallToolResult // the stored result, marked MetaReplayed
	failure string
	expires time.Time
}

// NewDedup returns a Dedup that remembers finished calls for window (0: DefaultDedupWindow).
func NewDedup(window time.Duration) *Dedup {
	if window <= 0 {
		window = DefaultDedupWindow
	}
	return &Dedup{window: window, now: time.Now, entries: map[dedupScope]*dedupEntry{}}
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
		who, ok := principal(req)
		if !ok {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: fmt.Sprintf("tool %s, idempotency key "+
				"%s: the caller's token names no user (TokenInfo.UserID is empty), so its answers cannot be kept apart "+
				"from other users'; the call was not run. Next step: set UserID in the server's TokenVerifier", p.Name, key)}
		}
		sk := dedupScope{principal: who, tool: p.Name, key: key}
		raw := sha256.Sum256(p.Arguments)
		now := d.now()
		d.mu.Lock()
		e := d.entries[sk]
		if e != nil && e.state != dedupRunning && !now.Before(e.expires) {
			delete(d.entries, sk)
			e = nil
		}
		if e != nil {
			state, replay, failure := e.state, e.replay, e.failure
			d.mu.Unlock()
			same := e.raw == raw
			if !same {
				hash, err := argsHash(p.Arguments)
				if err != nil {
					return nil, invalidArgs(p.Name, err)
				}
				same = e.hash == hash
			}
			switch {
			case !same:
				return nil, &jsonrpc.Error{Code: CodeConflict, Message: fmt.Sprintf("idempotency key %s was used for "+
					"tool %s with other arguments; this call was not run. Next step: repeat the original arguments, or give "+
					"this call its own key", key, p.Name)}
			case state == dedupRunning:
				return nil, &jsonrpc.Error{Code: CodeInFlight, Message: fmt.Sprintf("idempotency key %s: tool %s is "+
					"still running with it; not run twice", key, p.Name)}
			case state == dedupUnknown:
				return nil, &jsonrpc.Error{Code: CodeOutcomeUnknown, Message: fmt.Sprintf("idempotency key %s: an "+
					"earlier call of tool %s with it failed after the tool may have acted (%s); not run again with "+
					"this key. Next step: find out whether the tool acted, then settle the key on the caller's side", key, p.Name,
					failure)}
			}
			return replay, nil
		}
		d.mu.Unlock()
		hash, err := argsHash(p.Arguments)
		if err != nil {
			return nil, invalidArgs(p.Name, err)
		}
		if err := ctx.Err(); err != nil { // the caller gave up before the call started: not run, not kept
			return nil, err
		}
		d.mu.Lock()
		if d.entries[sk] != nil { // another call with this key came in meanwhile: let the caller retry
			d.mu.Unlock()
			return nil, &jsonrpc.Error{Code: CodeInFlight, Message: fmt.Sprintf("idempotency key %s: tool %s is "+
				"already being called with it; not run twice", key, p.Name)}
		}
		e = &dedupEntry{raw: raw, hash: hash}
		d.entries[sk] = e
		d.expire(now)
		d.mu.Unlock()

		settled := false
		defer func() {
			if !settled { // the handler panicked: it may have acted
				d.settle(sk, e, nil, errors.New("the tool panicked"))
			}
		}()
		res, err := next(ctx, method, req)
		settled = true
		d.settle(sk, e, res, err)
		return res, err
	}
}

// settle records how the call of entry e ended.
func (d *Dedup) settle(sk dedupScope, e *dedupEntry, res mcp.Result, err error) {
	r, _ := res.(*mcp.CallToolResult)
	var werr *jsonrpc.Error
	forget := err == nil && r != nil && (notPerformed(r) || refusedArguments(r)) || // the tool (or the SDK before it) did nothing
		err != nil && errors.As(err, &werr) && notRun(werr) // refused before any handler ran
	var replay *mcp.CallToolResult
	if err == nil && r != nil && !forget {
		replay = replayed(r)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case forget:
		delete(d.entries, sk)
	case replay != nil:
		e.state, e.replay = dedupDone, replay
	default:
		e.state = dedupUnknown
		e.failure = "no result"
		if err != nil {
			e.failure = err.Error()
		}
	}
	e.expires = d.now().Add(d.window)
}

// notPerformed reports whether r is a tool error that says the tool did nothing.
func notPerformed(r *mcp.CallToolResult) bool {
	v, _ := r.Meta[MetaNotPerformed].(bool)
	return r.IsError && v
}

// principal names the caller of req for Dedup's scopes; ok is false when the caller
// is authenticated but its token names no user.
func principal(req mcp.Request) (string, bool) {
	x := req.GetExtra()
	if x == nil || x.TokenInfo == nil {
		return "", true
	}
	if x.TokenInfo.UserID == "" {
		return "", false
	}
	return "user:" + x.TokenInfo.UserID, true
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
		if e.state != dedupRunning && !now.Before(e.expires) {
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

// argsHash hashes the arguments in a canonical JSON form: object keys sorted,
// numbers exactly as written (decoded as json.Number, never through float64, so
// 12345678901234567 and 12345678901234568 differ).
func argsHash(raw json.RawMessage) ([32]byte, error) {
	if len(raw) == 0 {
		return sha256.Sum256(nil), nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return [32]byte{}, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return [32]byte{}, errors.New("more than one JSON value")
	}
	b, err := json.Marshal(v)
	if err != nil {
		return [32]byte{}, err
	}
	return sha256.Sum256(b), nil
}
