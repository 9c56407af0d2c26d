package mcptools

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// DefaultDedupWindow is how long Dedup remembers a finished call when no window is given.
const DefaultDedupWindow = 24 * time.Hour

// Dedup's default bounds (DedupOptions): past either, new keyed calls are refused.
const (
	DefaultDedupMaxEntries = 100_000
	DefaultDedupMaxBytes   = 64 << 20
)

// CapabilityDedup is the key under which Dedup announces itself in the server's
// capabilities.experimental (its answer to initialize and to server/discover), with
// its window: {"windowSeconds": N}, and, when added with Dedup.Install, its lookup:
// {"windowSeconds": N, "lookup": MethodLookup}. A Bridge accepts Options.DedupWindow
// only from a server that announces it, for at least that long, and asks the lookup
// (its Witness) only of a server that announces it.
const CapabilityDedup = "io.idemgate/dedup"

// DedupOptions configures a Dedup (NewDedupWith). The zero value is the defaults.
type DedupOptions struct {
	// Window is how long a finished call is remembered. 0: DefaultDedupWindow.
	Window time.Duration
	// MaxEntries bounds the calls kept at once (running and finished, in every
	// scope). 0: DefaultDedupMaxEntries.
	MaxEntries int
	// MaxBytes bounds the bytes kept: the stored answers (as JSON), the failures and
	// the keys. 0: DefaultDedupMaxBytes.
	MaxBytes int64
}

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
// memory: one server process (a restart forgets every key; so a re-send that says
// when its key may first have left, MetaSentSince, to a Dedup started after that
// which holds nothing for the key is answered CodeOutcomeUnknown, not run, and so is
// one saying that it may first have left a window or more ago).
//
// What Dedup keeps is bounded (DedupOptions.MaxEntries, MaxBytes): past a bound, a
// call with a new key is refused with JSON-RPC -32600 (invalid request) before its
// tool runs, which the gate reads as not performed and may retry; a stored answer, a
// running call and an unknown outcome are never dropped to make room (forgetting one
// would let its retry run again), they leave only when their window passes. A
// handler's own error with one of Dedup's codes (CodeInFlight, CodeConflict,
// CodeOutcomeUnknown) is passed on as -32603, so from a server that runs Dedup those
// codes are Dedup's.
//
// Dedup announces itself and its window in the server's capabilities
// (CapabilityDedup): a Bridge refuses Options.DedupWindow from a server without it.
// Added with Install, it also answers MethodLookup — did this caller's key K of tool
// T act, and with what — from what it keeps, running nothing: the bridge's witness
// (Bridge.Witness) settles an unknown outcome by it.
// Arguments are compared as Go's encoding/json reads them (a duplicate object key
// keeps its last value; invalid UTF-8 reads as U+FFFD), as a go-sdk typed handler
// sees them.
//
//	err := mcptools.NewDedup(0).Install(server) // or server.AddReceivingMiddleware(d.Middleware): no lookup
type Dedup struct {
	window     time.Duration
	maxEntries int
	maxBytes   int64
	now        func() time.Time
	started    time.Time // when this Dedup began to keep keys

	// lookup: Install registered MethodLookup on a server, so the announcement
	// offers it.
	lookup atomic.Bool

	mu      sync.Mutex
	entries map[dedupScope]*dedupEntry
	// held counts the entries of each tool and key, over every principal: a lookup
	// that finds nothing in its own scope must not say "not called" when another
	// caller's scope holds the key.
	held  map[toolKey]int
	bytes int64 // the sum of the entries' sizes
	// done holds finished entries in the order they finished, which (one window for
	// all) is the order they expire in; from head on. An entry already gone from
	// entries (or replaced there) is skipped.
	done []doneEntry
	head int
}

type doneEntry struct {
	sk dedupScope
	e  *dedupEntry
}

type toolKey struct{ tool, key string }

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
	size    int64 // counted in Dedup.bytes
}

// entryOverhead is what an entry costs besides its answer and its scope's strings.
const entryOverhead = 256

// maxFailure bounds the failure text an unknown outcome keeps.
const maxFailure = 1024

// NewDedup returns a Dedup that remembers finished calls for window (0:
// DefaultDedupWindow), within the default bounds.
func NewDedup(window time.Duration) *Dedup {
	return NewDedupWith(DedupOptions{Window: window})
}

// NewDedupWith returns a Dedup configured by o (negative values count as 0).
func NewDedupWith(o DedupOptions) *Dedup {
	if o.Window <= 0 {
		o.Window = DefaultDedupWindow
	}
	if o.MaxEntries <= 0 {
		o.MaxEntries = DefaultDedupMaxEntries
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultDedupMaxBytes
	}
	return &Dedup{window: o.Window, maxEntries: o.MaxEntries, maxBytes: o.MaxBytes, now: time.Now, started: time.Now(),
		entries: map[dedupScope]*dedupEntry{}, held: map[toolKey]int{}}
}

// Window is how long d remembers a finished call (what it announces).
func (d *Dedup) Window() time.Duration { return d.window }

// announce adds CapabilityDedup to the capabilities of res, the server's answer to
// initialize or server/discover (a copy: the server's own map is not changed).
func (d *Dedup) announce(res mcp.Result) {
	var caps **mcp.ServerCapabilities
	switch r := res.(type) {
	case *mcp.InitializeResult:
		caps = &r.Capabilities
	case *mcp.DiscoverResult:
		caps = &r.Capabilities
	default:
		return
	}
	c := &mcp.ServerCapabilities{}
	if *caps != nil {
		cp := **caps
		c = &cp
	}
	c.Experimental = maps.Clone(c.Experimental)
	if c.Experimental == nil {
		c.Experimental = map[string]any{}
	}
	ann := map[string]any{"windowSeconds": d.window.Seconds()}
	if d.lookup.Load() {
		ann["lookup"] = MethodLookup
	}
	c.Experimental[CapabilityDedup] = ann
	*caps = c
}

// ownCodes passes a handler's error on, turning one of Dedup's codes into -32603 so
// that a client reads those codes from this server as Dedup's answers only.
func ownCodes(err error) error {
	var werr *jsonrpc.Error
	if errors.As(err, &werr) && (werr.Code == CodeInFlight || werr.Code == CodeConflict || werr.Code == CodeOutcomeUnknown) {
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("the tool answered error %d "+
			"(a code this server's Dedup keeps for its own answers): %s", werr.Code, werr.Message), Data: werr.Data}
	}
	return err
}

// Middleware is the mcp.Middleware to add with Server.AddReceivingMiddleware.
func (d *Dedup) Middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case "initialize", "server/discover":
			res, err := next(ctx, method, req)
			if err == nil {
				d.announce(res)
			}
			return res, err
		case "tools/call":
		case MethodLookup:
			return d.answerLookup(req)
		default:
			return next(ctx, method, req)
		}
		call := func() (mcp.Result, error) {
			res, err := next(ctx, method, req)
			return res, ownCodes(err)
		}
		p, ok := req.GetParams().(*mcp.CallToolParamsRaw)
		if !ok {
			return call()
		}
		key, _ := p.Meta[MetaKey].(string)
		if key == "" {
			return call()
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
			d.drop(sk, e)
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
		if v, _ := p.Meta[MetaSentSince].(string); v != "" {
			// A re-send: the key may have left at since. A Dedup that started after
			// that and holds nothing for it may have lost the earlier call's record (a
			// restart): running the call could run it twice.
			since, err := time.Parse(time.RFC3339Nano, v)
			if err != nil || d.started.After(since) {
				return nil, &jsonrpc.Error{Code: CodeOutcomeUnknown, Message: fmt.Sprintf("idempotency key %s: tool "+
					"%s may have been called with it (from %s on) before this server's Dedup started (%s), which "+
					"holds nothing for it; not run. Next step: find out whether the tool acted, then settle the key on "+
					"the caller's side", key, p.Name, v, d.started.UTC().Format(time.RFC3339))}
			}
			// A key that may have left a window or more ago may have run here and
			// been forgotten since (a caller that believes a longer window: the
			// server restarted with a shorter one behind the same session).
			if !now.Before(since.Add(d.window)) {
				return nil, &jsonrpc.Error{Code: CodeOutcomeUnknown, Message: fmt.Sprintf("idempotency key %s: tool "+
					"%s may have been called with it (from %s on), %v or more ago: this server's Dedup forgets a call "+
					"that long after it finished and holds nothing for it; not run. Next step: find out whether the tool "+
					"acted, then settle the key on the caller's side", key, p.Name, v, d.window)}
			}
		}
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
		d.expire(now)
		if n, b := len(d.entries), d.bytes; n >= d.maxEntries || b >= d.maxBytes {
			d.mu.Unlock()
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: fmt.Sprintf("tool %s, idempotency key "+
				"%s: the server's Dedup is full (%d calls, %d bytes kept; its bounds are %d calls, %d bytes), so the call "+
				"was not run. Next step: retry later (finished calls are forgotten %v after they finished), or raise "+
				"DedupOptions.MaxEntries / MaxBytes on the server", p.Name, key, n, b, d.maxEntries, d.maxBytes, d.window)}
		}
		e = &dedupEntry{raw: raw, hash: hash, size: entryOverhead + int64(len(sk.principal)+len(sk.tool)+len(sk.key))}
		d.entries[sk] = e
		d.held[toolKey{sk.tool, sk.key}]++
		d.bytes += e.size
		d.mu.Unlock()

		settled := false
		defer func() {
			if !settled { // the handler panicked: it may have acted
				d.settle(sk, e, nil, errors.New("the tool panicked"))
			}
		}()
		res, err := call()
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
	var size int64
	if err == nil && r != nil && !forget {
		replay = replayed(r)
		b, merr := json.Marshal(replay)
		size = int64(len(b))
		if merr != nil { // the SDK cannot send it either; count it as large
			size = d.maxBytes
		}
	}
	failure := "no result"
	if err != nil {
		failure = err.Error()
	}
	if len(failure) > maxFailure {
		failure = failure[:maxFailure] + "…"
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if forget {
		d.drop(sk, e)
		return
	}
	if replay != nil {
		e.state, e.replay = dedupDone, replay
	} else {
		e.state, e.failure = dedupUnknown, failure
		size = int64(len(failure))
	}
	if d.entries[sk] == e {
		e.size += size
		d.bytes += size
	}
	e.expires = d.now().Add(d.window)
	d.done = append(d.done, doneEntry{sk, e})
}

// drop removes entry e of scope sk, if it is still there. Called with d.mu held.
func (d *Dedup) drop(sk dedupScope, e *dedupEntry) {
	if d.entries[sk] == e {
		delete(d.entries, sk)
		d.bytes -= e.size
		if tk := (toolKey{sk.tool, sk.key}); d.held[tk] > 1 {
			d.held[tk]--
		} else {
			delete(d.held, tk)
		}
	}
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

// expire drops finished entries past their window, oldest first; running ones
// stay. Called with d.mu held.
func (d *Dedup) expire(now time.Time) {
	for d.head < len(d.done) {
		q := d.done[d.head]
		if now.Before(q.e.expires) {
			break
		}
		d.drop(q.sk, q.e)
		d.done[d.head] = doneEntry{}
		d.head++
	}
	if d.head > 64 && d.head > len(d.done)/2 {
		n := copy(d.done, d.done[d.head:])
		clear(d.done[n:])
		d.done, d.head = d.done[:n], 0
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
