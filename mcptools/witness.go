package mcptools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.temporal.io/sdk/temporal"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/internal/secrets"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/witness"
)

// Witness is the witness of the bridge's server, named "mcp:SERVER": asked about a
// tool call whose outcome is unknown, it asks the server's Dedup (MethodLookup, over
// the bridge's session, as the same caller) whether the key acted, without running
// the tool. It answers only for the bridge's tools and only for records whose
// evidence (store.Record.Sent, of every attempt that claimed the key since its
// first: store.Exits) says the key left through this bridge; it says
// CannotTell for a server that does not offer the lookup (one without Dedup, one
// built with another SDK, a Dedup added without Dedup.Install).
//
// Sent carries the tool's stored answer as the tool activity returns it (a Result,
// Replayed, as a re-send answered by Dedup returns it); an answer with isError is
// CannotTell (the tool may have acted before it failed). NotSent comes only from a
// Dedup that proves it would have seen the call (LookupNotCalled): it has run since
// before the key could first have left (the record's CreatedAt less twice
// clockSkew, the gate's Options.ClockSkew; 0 means interceptor.DefaultClockSkew),
// within its window, and only when no attempt since the key's first claim left
// through another exit or recorded no evidence at all (then CannotTell). The gate
// counts a "not sent" only once the attempt's lease passed (store.Settleable).
//
// Apply registers it for every tool of a server that offers the lookup; register it
// yourself (interceptor.Options.Witnesses) when you build the options another way.
func (b *Bridge) Witness(clockSkew time.Duration) witness.Witness {
	if clockSkew <= 0 {
		clockSkew = interceptor.DefaultClockSkew
	}
	return &dedupWitness{b: b, skew: clockSkew}
}

// LookupOffered reports whether the server's Dedup answers MethodLookup (it announces
// it in CapabilityDedup): without it, the bridge's witness cannot tell.
func (b *Bridge) LookupOffered() bool { return b.lookup }

type dedupWitness struct {
	b    *Bridge
	skew time.Duration
}

func (w *dedupWitness) Name() string { return "mcp:" + w.b.server }

func (w *dedupWitness) Ask(ctx context.Context, q witness.Query) (witness.Answer, error) {
	b, rec := w.b, q.Record
	cannot := func(format string, a ...any) (witness.Answer, error) {
		return witness.Answer{Verdict: witness.CannotTell, Evidence: fmt.Sprintf(format, a...)}, nil
	}
	t := b.tools[rec.Activity]
	if t == nil {
		return cannot("%s is not a tool of server %s", rec.Activity, b.server)
	}
	// Every exit of every attempt that claimed the key since its first (a takeover
	// keeps the evidence of the attempts before it); an attempt that recorded none
	// may have sent another way.
	exits, silent := store.Exits(rec)
	ours, others := false, []string(nil)
	for _, s := range exits {
		if s.Via == w.Name() {
			ours = true
		} else if !slices.Contains(others, s.Via) {
			others = append(others, s.Via)
		}
	}
	if len(silent) > 0 {
		others = append(others, fmt.Sprintf("wherever the %d attempts that recorded no evidence sent it (claim owners %s)",
			len(silent), strings.Join(silent, ", ")))
	}
	if !ours {
		return cannot("the record of key %s has no evidence that the key left to server %s", rec.Key, b.server)
	}
	if !b.lookup {
		return cannot("server %s does not offer Dedup's lookup (no %q in capabilities.experimental[%q]); next step: "+
			"add its Dedup with Dedup.Install", b.server, MethodLookup, CapabilityDedup)
	}
	args, err := toolArguments(rec.Args)
	if err != nil {
		return cannot("the record's arguments cannot be read as the tool's: %v", err)
	}
	since := rec.CreatedAt.Add(-2 * w.skew).UTC().Format(time.RFC3339Nano)
	res, err := mcp.CallCustomMethod[*LookupParams, *LookupResult](ctx, b.session, MethodLookup,
		&LookupParams{Tool: t.name, Key: rec.Key, Arguments: args, Since: since})
	if err != nil {
		err = secrets.ScrubError(err, b.endpoint)
		var werr *jsonrpc.Error
		if errors.As(err, &werr) && werr.Code == jsonrpc.CodeMethodNotFound {
			return cannot("server %s does not answer the lookup: %v", b.server, err)
		}
		if strings.Contains(err.Error(), "is not registered") { // by the go-sdk's CallCustomMethod
			return cannot("the bridge's client cannot send the lookup (%v); next step: call mcptools.EnableLookup on "+
				"the client before Connect, or connect with mcptools.Dial", err)
		}
		return witness.Answer{}, fmt.Errorf("idemgate/mcptools: asking server %s's Dedup about key %s of %s: %w",
			b.server, rec.Key, rec.Activity, err)
	}
	said := fmt.Sprintf("server %s's Dedup: %s: %s", b.server, res.State, res.Reason)
	switch res.State {
	case LookupActed:
		if res.Result == nil {
			return witness.Answer{}, fmt.Errorf("idemgate/mcptools: server %s's Dedup says key %s acted, but sent no "+
				"answer", b.server, rec.Key)
		}
		if res.Result.IsError {
			return cannot("%s; but its answer is a tool error (%s): the tool may have acted before it failed", said,
				texts(res.Result.Content))
		}
		out, err := b.result(t, res.Result, &Result{Replayed: true})
		var aerr *temporal.ApplicationError
		if errors.As(err, &aerr) && aerr.Type() == errTypeResultTooLarge {
			return witness.Answer{Verdict: witness.Sent, NoResult: true, Evidence: said + "; its answer is over " +
				"MaxResultSize and is not stored"}, nil
		}
		if err != nil {
			return witness.Answer{}, err
		}
		return witness.Answer{Verdict: witness.Sent, Result: out, Evidence: said}, nil
	case LookupNotCalled:
		if len(others) > 0 {
			return cannot("%s; but the key may also have left through %s", said, strings.Join(others, ", "))
		}
		return witness.Answer{Verdict: witness.NotSent, Evidence: said}, nil
	}
	return cannot("%s", said)
}

// toolArguments are the tool's arguments in a record's Args: the canonical JSON of
// the tool activity's one argument.
func toolArguments(canonical []byte) (json.RawMessage, error) {
	var args []json.RawMessage
	if err := json.Unmarshal(canonical, &args); err != nil {
		return nil, err
	}
	if len(args) != 1 {
		return nil, fmt.Errorf("%d arguments, want 1 (a tool activity takes one)", len(args))
	}
	if string(args[0]) == "null" { // the bridge sends a nil map as {}
		return json.RawMessage("{}"), nil
	}
	return args[0], nil
}
