package mcptools

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MethodLookup is the JSON-RPC method by which a client asks a server's Dedup
// whether a keyed call acted, and with what, without running the tool: a custom
// method (mcp.AddReceivingCustomMethod), which Dedup.Install registers and Dedup
// answers itself. A server that does not know it answers "method not found", so a
// lookup can never run a tool, whatever answers it. Dedup offers it in its
// announcement (CapabilityDedup: {"lookup": MethodLookup}).
const MethodLookup = "io.idemgate/dedup/lookup"

// LookupParams ask a Dedup about one call: for the caller's own scope (its
// principal, as for tools/call), tool Tool with key Key and arguments Arguments.
type LookupParams struct {
	mcp.ParamsBase
	Tool string `json:"tool"`
	Key  string `json:"key"`
	// Arguments are the call's arguments (a JSON object), compared as a repeated
	// call's are: a call kept for other arguments is not this call.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Since (RFC 3339) is the earliest time the key may have left the client: a
	// "not called" answer needs a Dedup that kept every call since then.
	Since string `json:"since,omitempty"`
}

// LookupState is what a Dedup knows of a call.
type LookupState string

// The answers to a lookup.
const (
	// LookupActed: the call ran and answered; Result is its answer (as a repeat
	// would get it, marked MetaReplayed). A result with isError says the tool failed,
	// and may have acted before it did.
	LookupActed LookupState = "acted"
	// LookupNotCalled: the call never ran here, and Dedup would have seen it: it has
	// kept every call since Since (it started before then), Since's window has not
	// passed (nothing it kept since then is forgotten yet), and no caller's scope
	// holds the key. Dedup never drops a kept call to make room (past its bounds it
	// refuses new keys, which then never run).
	LookupNotCalled LookupState = "not-called"
	// LookupRunning: the call is running here now.
	LookupRunning LookupState = "running"
	// LookupUnknown: the call failed after the tool may have acted (Reason says how).
	LookupUnknown LookupState = "unknown"
	// LookupOtherArguments: the key is kept here for other arguments.
	LookupOtherArguments LookupState = "other-arguments"
	// LookupCannotTell: nothing is kept for the call, and Dedup cannot prove it
	// would have kept it (Reason says why: it started after Since, Since is a
	// window or more ago, another caller's scope holds the key).
	LookupCannotTell LookupState = "cannot-tell"
)

// LookupResult is a Dedup's answer to a lookup.
type LookupResult struct {
	mcp.ResultBase
	State LookupState `json:"state"`
	// Result is the stored answer, for LookupActed.
	Result *mcp.CallToolResult `json:"result,omitempty"`
	// Reason says what the answer rests on.
	Reason string `json:"reason,omitempty"`
}

// Install adds d to server s: its middleware (as s.AddReceivingMiddleware(d.Middleware)
// does; do not add both) and MethodLookup, which lets the gate's witness
// (Bridge.Witness) ask whether a key acted when its answer was lost. Call it before
// the server accepts connections.
//
// The lookup's "not called" rests on d seeing every call of the server: one process
// (what Dedup keeps is in memory). Behind a load balancer with a Dedup per replica,
// a replica that never saw a call would answer "not called" and the gate would run
// it again: there, add the middleware alone (no lookup), as for DedupWindow.
func (d *Dedup) Install(s *mcp.Server) error {
	err := mcp.AddReceivingCustomMethod(s, MethodLookup, func(context.Context, *mcp.ServerSession, *LookupParams) (*LookupResult, error) {
		// Dedup's middleware answers the lookup before it gets here.
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "idemgate/mcptools: " + MethodLookup +
			" reached the server without its Dedup: the middleware is not in the server's chain. Next step: add the " +
			"Dedup with Dedup.Install only"}
	})
	if err != nil {
		return fmt.Errorf("idemgate/mcptools: Dedup.Install: %w", err)
	}
	d.lookup.Store(true)
	s.AddReceivingMiddleware(d.Middleware)
	return nil
}

// EnableLookup lets client c send MethodLookup: Dial does it; call it on a client
// whose session you give to New, before Connect, so that the bridge's witness can ask.
func EnableLookup(c *mcp.Client) error {
	return mcp.AddSendingCustomMethod[*LookupParams, *LookupResult](c, MethodLookup)
}

// answerLookup answers a MethodLookup request from what d keeps, running nothing.
func (d *Dedup) answerLookup(req mcp.Request) (mcp.Result, error) {
	p, ok := req.GetParams().(*LookupParams)
	if !ok || p == nil || p.Tool == "" || p.Key == "" {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "idemgate/mcptools: " + MethodLookup +
			" needs a tool and a key. Next step: send LookupParams with Tool and Key"}
	}
	who, ok := principal(req)
	if !ok {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: fmt.Sprintf("tool %s, idempotency key "+
			"%s: the caller's token names no user (TokenInfo.UserID is empty), so which calls are its own cannot be told; "+
			"nothing was looked up. Next step: set UserID in the server's TokenVerifier", p.Tool, p.Key)}
	}
	sk := dedupScope{principal: who, tool: p.Tool, key: p.Key}
	now := d.now()
	d.mu.Lock()
	d.expire(now)
	e := d.entries[sk]
	if e != nil && e.state != dedupRunning && !now.Before(e.expires) {
		d.drop(sk, e)
		e = nil
	}
	held := d.held[toolKey{p.Tool, p.Key}]
	var state dedupState
	var replay *mcp.CallToolResult
	var failure string
	if e != nil {
		state, replay, failure = e.state, e.replay, e.failure
		held--
	}
	d.mu.Unlock()

	if e != nil {
		same := e.raw == sha256.Sum256(p.Arguments)
		if !same {
			hash, err := argsHash(p.Arguments)
			if err != nil {
				return nil, invalidArgs(p.Tool, err)
			}
			same = e.hash == hash
		}
		switch {
		case !same:
			return &LookupResult{State: LookupOtherArguments, Reason: fmt.Sprintf("key %s of tool %s is kept for other "+
				"arguments", p.Key, p.Tool)}, nil
		case state == dedupRunning:
			return &LookupResult{State: LookupRunning, Reason: fmt.Sprintf("tool %s is running with key %s now", p.Tool, p.Key)}, nil
		case state == dedupUnknown:
			return &LookupResult{State: LookupUnknown, Reason: fmt.Sprintf("the call of tool %s with key %s failed after "+
				"the tool may have acted: %s", p.Tool, p.Key, failure)}, nil
		}
		return &LookupResult{State: LookupActed, Result: replay, Reason: fmt.Sprintf("tool %s ran with key %s and "+
			"answered; the answer is kept until its window passes", p.Tool, p.Key)}, nil
	}
	cannot := func(format string, a ...any) (mcp.Result, error) {
		return &LookupResult{State: LookupCannotTell, Reason: fmt.Sprintf("nothing is kept for key %s of tool %s, but ",
			p.Key, p.Tool) + fmt.Sprintf(format, a...)}, nil
	}
	if held > 0 {
		// Another caller's scope holds the key: the call may have run as that caller
		// (a rotated token, another session). Its answer is not this caller's to see.
		return cannot("another caller's call with that key is kept here")
	}
	if p.Since == "" {
		return cannot("the lookup does not say since when the key may have left")
	}
	since, err := time.Parse(time.RFC3339Nano, p.Since)
	if err != nil {
		return cannot("the lookup's since (%q) is not an RFC 3339 time", p.Since)
	}
	if d.started.After(since) {
		return cannot("this Dedup started at %s, after the key may have left (%s): a call before then was kept by a "+
			"Dedup that is gone", d.started.UTC().Format(time.RFC3339Nano), p.Since)
	}
	if !now.Before(since.Add(d.window)) {
		return cannot("the key may have left at %s, %v or more ago: this Dedup forgets a call that long after it "+
			"finished", p.Since, d.window)
	}
	return &LookupResult{State: LookupNotCalled, Reason: fmt.Sprintf("tool %s never ran with key %s here: this server's "+
		"Dedup has kept every keyed call since it started at %s (before the key could have left, %s), forgets none before "+
		"%s, and holds nothing for the key", p.Tool, p.Key, d.started.UTC().Format(time.RFC3339Nano), p.Since,
		since.Add(d.window).UTC().Format(time.RFC3339Nano))}, nil
}
