// Package mcptools makes every tool of an MCP server a gated Temporal activity: it
// lists a client session's tools, registers one activity per tool under
// "mcp.SERVER.TOOL", hands the tools' annotations to the interceptor as untrusted
// Hints (they may tighten the class the name reads as and never lower a verb-list
// match; a name flagged for review they may lower only down to the most severe verb
// it contains), sends the idempotency key of a write (never of a read) in the
// request's _meta under MetaKey, and reports to the gate whether a failed call may
// have acted. Dedup is the server side: middleware for MCP servers built with the
// same SDK that answers a repeated key from its store, within bounds, and announces
// itself and its window in the server's capabilities (CapabilityDedup).
//
// # Re-sending on the server's word
//
// Options.DedupWindow lets the gate re-send an unknown outcome with its key inside
// the window, relying on the server's Dedup. It rests on evidence twice: New and
// Dial accept it only from a server that announces Dedup for at least that window
// (none built with another SDK can), and the bridge records in the claim, before
// the key leaves, that it left through the bridge to that server.
//
// # Asking the server what happened
//
// A call whose answer was lost (a protocol error after the tool acted, a dropped
// connection, a worker killed mid-call) leaves an unknown outcome, which the gate
// refuses to send again. A server whose Dedup was added with Dedup.Install answers
// a lookup (MethodLookup, a custom JSON-RPC method: a server that does not know it
// answers "method not found", so a lookup never runs a tool) for the same caller:
// the call acted, and its stored answer; it never ran here and Dedup can prove it
// would have seen it (it has run since before the key could first have left, and
// that was less than its window ago); or it cannot tell (running, failed after it
// may have acted, another caller holds the key, a restart, the window passed). The
// bridge's Witness ("mcp:SERVER") asks it, and Apply registers it for every tool of
// a server that offers the lookup, so the gate settles the key by it before it
// asks a person: "sent" with the tool's result (the next attempt returns it),
// "not sent" once the attempt's lease passed (the next runs the tool). It answers
// only for keys whose record says they left through this bridge (the gate records
// that for destructive writes with witnesses).
//
// # What counts as not performed
//
// A failed call is definite (the gate may send it again) only with proof that the tool
// did nothing: a result with isError and MetaNotPerformed, the tool error an SDK
// answers before any handler for arguments that fail the input schema (the go-sdk's
// `validating "arguments": …`, mcp-go's `input schema validation failed: …`; the
// server's schema may have changed since the bridge listed it), or a JSON-RPC error that no
// tool handler can have raised — parse error, invalid request, method not found, and
// the invalid-params refusals both SDKs make before dispatch (an unknown tool, an
// invalid _meta). Everything else is an unknown outcome, because it may come after the
// handler ran: -32603 (mcp-go's code for a handler's error), code 0 (the go-sdk's), an
// output that failed its output schema (the go-sdk checks it after the handler), a
// -32602 or any code a go-sdk handler returns itself, server-defined codes, the
// go-sdk client's -32005 for an HTTP 5xx, and the parse-error and invalid-request
// values the client makes itself when it cannot read an answer. Over streamable HTTP,
// an HTTP 4xx (a 429 from a rate limiter, a 401 for an expired token, a 404 for a
// session the server lost when it restarted) is not performed, as idemhttp reads a
// 4xx; so is a refused dial, and a call the client never wrote because its session
// was already closed (it does not reconnect: restart the worker).
//
// Tool activities decode their arguments with numbers as written (json.Number), so a
// long account number reaches the tool, and the gate's comparison, unrounded.
package mcptools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net"
	"net/http"
	"net/http/httptrace"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/internal/attempt"
	"github.com/idemgate/idemgate/internal/secrets"
	"github.com/idemgate/idemgate/witness"
)

// MetaKey is the _meta entry of a tools/call request that carries the idempotency key.
const MetaKey = "io.idemgate/idempotency-key"

// MetaSentSince, in the _meta of a keyed tools/call the gate re-sends relying on the
// server's Dedup (a retry of a destructive write), is the earliest time (RFC 3339,
// minus the gate's clock margin) the key may have left before. A Dedup that started
// after it and holds nothing for the key may have been restarted (its store is in
// memory) since an earlier call ran: it answers CodeOutcomeUnknown and does not run
// the call.
const MetaSentSince = "io.idemgate/sent-since"

// MetaReplayed is set (true) in a result's _meta when Dedup answered from its store.
const MetaReplayed = "io.idemgate/replayed"

// MetaNotPerformed, set (true) in the _meta of a result with isError, says the tool
// certainly did nothing: the gate may run the call again. Without it, a tool error
// is an unknown outcome (the tool may have acted before it failed).
const MetaNotPerformed = "io.idemgate/not-performed"

// JSON-RPC error codes Dedup answers with (implementation-defined server errors).
const (
	// CodeInFlight: a call with the same key is still running.
	CodeInFlight = -32040
	// CodeConflict: the key was used with other arguments.
	CodeConflict = -32041
	// CodeOutcomeUnknown: an earlier call with the key failed after the tool may have
	// acted (a protocol error that does not prove the handler never ran); the call is
	// not run again with that key. The gate reads it as an unknown outcome.
	CodeOutcomeUnknown = -32043
)

// Options configures a Bridge. The zero value is usable.
type Options struct {
	// MaxResultSize is the largest tool result (content and structured content, as
	// JSON) an activity returns; a larger one is an error (the tool acted: the
	// outcome is recorded as unknown). Optional: 0 means interceptor.DefaultMaxResultSize.
	MaxResultSize int
	// DedupWindow, when > 0, relies on the server's deduplication on MetaKey (Dedup)
	// for this long: Apply then lets the gate re-send a destructive call whose outcome
	// is unknown, with the same key, inside the window (interceptor.Options.VendorWindows).
	// It must rest on evidence: New and Dial refuse it (nothing registered) unless the
	// server announces Dedup (CapabilityDedup in its capabilities) with a window at
	// least this long; a server built with another SDK (mark3labs/mcp-go) cannot run
	// Dedup and is refused. Only with it are Dedup's error codes (CodeInFlight,
	// CodeConflict, CodeOutcomeUnknown) read as Dedup's answers; from another server
	// they are its own errors, which may come after the tool acted: unknown outcomes.
	// 0 changes nothing, whatever the server offers (Bridge.DedupOffered says what).
	DedupWindow time.Duration
	// Logger receives the notice that the server's tool list changed. Optional:
	// nil means slog.Default().
	Logger *slog.Logger
}

// Bridge is one MCP server's tools as activities.
type Bridge struct {
	server  string
	session *mcp.ClientSession
	opts    Options
	tools   map[string]*tool // by activity name
	// endpoint is the HTTP transport's URL (Dial), whose credentials errors must not
	// repeat; "" for other transports.
	endpoint string
	// offered is the window the server announces for its Dedup (0: none).
	offered time.Duration
	// lookup: the server's Dedup offers MethodLookup.
	lookup bool
}

type tool struct {
	name     string // the server's tool name
	activity string
	def      *mcp.Tool
	schema   *jsonschema.Resolved // nil: no schema to check
}

// Result is what a tool activity returns.
type Result struct {
	// Content is the result's content list as the server sent it (JSON).
	Content json.RawMessage `json:"content,omitempty"`
	// Text joins the text parts of Content, one per line.
	Text string `json:"text,omitempty"`
	// Structured is the structured content, when the tool returns one.
	Structured json.RawMessage `json:"structured,omitempty"`
	// Replayed is true when the server answered from its deduplication store.
	Replayed bool `json:"replayed,omitempty"`
}

// ActivityName is the activity a server's tool is registered under: "mcp.SERVER.TOOL".
func ActivityName(server, toolName string) string { return "mcp." + server + "." + toolName }

// validName reports why s cannot be part of an activity name ("" when it can).
func validName(s string, dots bool) string {
	if s == "" {
		return "is empty"
	}
	for _, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || dots && r == '.'
		if !ok {
			return fmt.Sprintf("has %q (use letters, digits, _ and -%s)", r, map[bool]string{true: " and .", false: ""}[dots])
		}
	}
	if dots && (strings.HasPrefix(s, ".") || strings.HasSuffix(s, ".") || strings.Contains(s, "..")) {
		return "has an empty dotted segment"
	}
	return ""
}

func checkServer(server string) error {
	if why := validName(server, false); why != "" {
		return fmt.Errorf("idemgate/mcptools: server name %q %s. Next step: name the server with letters, digits, _ or -", server, why)
	}
	return nil
}

// New lists the tools of the server behind session and returns its bridge. server
// names it in activity names (letters, digits, _ and -). It fails, naming the server,
// when the server cannot be reached or a tool's name cannot be an activity name.
func New(ctx context.Context, server string, session *mcp.ClientSession, opts Options) (*Bridge, error) {
	if err := checkServer(server); err != nil {
		return nil, err
	}
	if opts.MaxResultSize < 0 || opts.DedupWindow < 0 {
		return nil, fmt.Errorf("idemgate/mcptools: server %s: MaxResultSize and DedupWindow must not be negative", server)
	}
	offered, why := dedupOffered(session)
	if opts.DedupWindow > 0 && offered < opts.DedupWindow {
		if offered == 0 {
			return nil, fmt.Errorf("idemgate/mcptools: server %s: DedupWindow is %v, but the server does not announce "+
				"Dedup (%s): nothing shows it deduplicates keys, so an unknown outcome re-sent with its key could run "+
				"again. Nothing was registered. Next step: add mcptools.NewDedup(WINDOW).Middleware to the server (a go-sdk "+
				"server; one built with another SDK cannot run it), or leave DedupWindow out (worker: drop --mcp-dedup %s=%v)",
				server, opts.DedupWindow, why, server, opts.DedupWindow)
		}
		return nil, fmt.Errorf("idemgate/mcptools: server %s: DedupWindow is %v, longer than the %v its Dedup "+
			"announces: a re-send after %v would run again. Nothing was registered. Next step: set DedupWindow (worker: "+
			"--mcp-dedup %s=…) to at most %v, or give the server's Dedup a longer window", server, opts.DedupWindow, offered,
			offered, server, offered)
	}
	if opts.MaxResultSize == 0 {
		opts.MaxResultSize = interceptor.DefaultMaxResultSize
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	b := &Bridge{server: server, session: session, opts: opts, tools: map[string]*tool{}, offered: offered,
		lookup: offered > 0 && lookupOffered(session)}
	var errs []error
	for t, err := range session.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("idemgate/mcptools: server %s: listing its tools failed: %w. Nothing was registered. "+
				"Next step: check that the server is running and reachable", server, err)
		}
		if why := validName(t.Name, true); why != "" {
			errs = append(errs, fmt.Errorf("tool %q: its name %s, so it cannot be the activity %q", t.Name, why, ActivityName(server, t.Name)))
			continue
		}
		tl := &tool{name: t.Name, activity: ActivityName(server, t.Name), def: t}
		if t.InputSchema != nil {
			raw, err := json.Marshal(t.InputSchema)
			var s jsonschema.Schema
			if err == nil {
				err = json.Unmarshal(raw, &s)
			}
			if err == nil {
				tl.schema, err = s.Resolve(nil)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("tool %q: its input schema cannot be read: %v", t.Name, err))
				continue
			}
		}
		b.tools[tl.activity] = tl
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("idemgate/mcptools: server %s: %w. Nothing was registered. Next step: rename the tools on "+
			"the server, or leave this server out", server, errors.Join(errs...))
	}
	return b, nil
}

// dedupOffered reads the window the server behind session announces for its Dedup
// (CapabilityDedup in the capabilities of its answer to initialize or
// server/discover); 0 and why when it announces none.
func dedupOffered(session *mcp.ClientSession) (time.Duration, string) {
	init := session.InitializeResult()
	if init == nil || init.Capabilities == nil {
		return 0, "it sent no capabilities"
	}
	v, ok := init.Capabilities.Experimental[CapabilityDedup]
	if !ok {
		return 0, fmt.Sprintf("no capabilities.experimental[%q] in its answer to initialize or server/discover", CapabilityDedup)
	}
	m, _ := v.(map[string]any)
	secs, _ := m["windowSeconds"].(float64)
	if secs > 0 {
		if secs >= float64(math.MaxInt64/int64(time.Second)) {
			return time.Duration(math.MaxInt64), ""
		}
		return time.Duration(secs * float64(time.Second)), ""
	}
	return 0, fmt.Sprintf("its capabilities.experimental[%q] has no positive windowSeconds: %v", CapabilityDedup, v)
}

// lookupOffered reports whether the server behind session announces that its Dedup
// answers MethodLookup.
func lookupOffered(session *mcp.ClientSession) bool {
	init := session.InitializeResult()
	if init == nil || init.Capabilities == nil {
		return false
	}
	m, _ := init.Capabilities.Experimental[CapabilityDedup].(map[string]any)
	v, _ := m["lookup"].(string)
	return v == MethodLookup
}

// DedupOffered is the window the server announces for its Dedup (0: it announces
// none). Options.DedupWindow may be at most this.
func (b *Bridge) DedupOffered() time.Duration { return b.offered }

// Transport is the transport to the MCP server at target: streamable HTTP when
// target is an http:// or https:// URL, else a command run over stdio (target
// split at spaces: no quoting).
func Transport(target string) (mcp.Transport, error) {
	if strings.HasPrefix(target, "http://") || strings.HasPrefix(target, "https://") {
		return &mcp.StreamableClientTransport{Endpoint: target, MaxRetries: -1}, nil
	}
	parts := strings.Fields(target)
	if len(parts) == 0 {
		return nil, errors.New("idemgate/mcptools: no MCP server given: give an http(s) URL or a command")
	}
	return &mcp.CommandTransport{Command: exec.Command(parts[0], parts[1:]...)}, nil
}

// endpointOf is the URL of an HTTP transport, "" for others.
func endpointOf(transport mcp.Transport) string {
	switch t := transport.(type) {
	case *mcp.StreamableClientTransport:
		return t.Endpoint
	case *mcp.SSEClientTransport:
		return t.Endpoint
	}
	return ""
}

// Dial connects to an MCP server over transport (mcp.StreamableClientTransport,
// mcp.CommandTransport, an in-memory transport …) with a client that reports a
// changed tool list (new tools are not registered while the worker runs), and returns
// its bridge. Close the bridge's Session when done.
func Dial(ctx context.Context, server string, transport mcp.Transport, opts Options) (*Bridge, error) {
	if err := checkServer(server); err != nil {
		return nil, err // before anything is started
	}
	var b *Bridge
	var mu sync.Mutex
	client := mcp.NewClient(&mcp.Implementation{Name: "idemgate", Version: "v1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(ctx context.Context, _ *mcp.ToolListChangedRequest) {
			mu.Lock()
			defer mu.Unlock()
			if b != nil {
				b.toolListChanged(ctx)
			}
		},
	})
	if err := EnableLookup(client); err != nil {
		return nil, fmt.Errorf("idemgate/mcptools: server %s: %w", server, err)
	}
	// An HTTP transport's URL may carry credentials (user info, ?access_token=…), and
	// errors from net/url and net/http quote it.
	endpoint := endpointOf(transport)
	cs, err := client.Connect(ctx, transport, nil)
	if err != nil {
		return nil, fmt.Errorf("idemgate/mcptools: server %s cannot be reached: %w. Nothing was registered. Next step: "+
			"check that the server is running and its URL or command", server, secrets.ScrubError(err, endpoint))
	}
	nb, err := New(ctx, server, cs, opts)
	if err != nil {
		cs.Close()
		return nil, secrets.ScrubError(err, endpoint)
	}
	nb.endpoint = endpoint
	mu.Lock()
	b = nb
	mu.Unlock()
	return nb, nil
}

// toolListChanged logs which tools the server added or removed since the bridge
// listed them: new tools are not registered while the worker runs.
func (b *Bridge) toolListChanged(ctx context.Context) {
	now := map[string]bool{}
	for t, err := range b.session.Tools(ctx, nil) {
		if err != nil {
			b.opts.Logger.Warn("idemgate/mcptools: the server changed its tool list and it could not be read again",
				"server", b.server, "error", secrets.ScrubError(err, b.endpoint))
			return
		}
		now[ActivityName(b.server, t.Name)] = true
	}
	var added, removed []string
	for n := range now {
		if b.tools[n] == nil {
			added = append(added, n)
		}
	}
	for n := range b.tools {
		if !now[n] {
			removed = append(removed, n)
		}
	}
	slices.Sort(added)
	slices.Sort(removed)
	b.opts.Logger.Warn("idemgate/mcptools: the server changed its tool list; new tools are NOT registered and removed "+
		"ones fail when called. Next step: restart the worker to register the new list (and review their classes "+
		"with `idemgate census --mcp`)", "server", b.server, "added", added, "removed", removed)
}

// Session is the client session the bridge calls tools through.
func (b *Bridge) Session() *mcp.ClientSession { return b.session }

// Server is the server's name in activity names.
func (b *Bridge) Server() string { return b.server }

// Tools returns the server's tools by activity name.
func (b *Bridge) Tools() map[string]*mcp.Tool {
	m := make(map[string]*mcp.Tool, len(b.tools))
	for n, t := range b.tools {
		m[n] = t.def
	}
	return m
}

// Names returns the activity names, sorted.
func (b *Bridge) Names() []string {
	return slices.Sorted(maps.Keys(b.tools))
}

// Hints returns the tools' annotations as interceptor Hints, by activity name (tools
// whose annotations claim nothing, see HintsOf, are left out).
func (b *Bridge) Hints() map[string]interceptor.Hints {
	m := map[string]interceptor.Hints{}
	for n, t := range b.tools {
		if h, ok := HintsOf(b.server, t.def); ok {
			m[n] = h
		}
	}
	return m
}

// HintsOf turns a tool's annotations into interceptor Hints. Only the fields an
// annotation object carries are claims, read as the MCP spec reads them:
// readOnlyHint true says read; destructiveHint (either value) or idempotentHint true
// say the tool writes, and then destructiveHint defaults to true. A false
// readOnlyHint or idempotentHint claims nothing: it is the default, indistinguishable
// from an absent field once decoded, and go-sdk servers send both on every annotated
// tool. So an empty object (mcp-go's for a tool defined without annotations), a title
// or an openWorldHint alone are no hints. ok is false when there is no claim.
func HintsOf(server string, t *mcp.Tool) (h interceptor.Hints, ok bool) {
	a := t.Annotations
	if a == nil || !a.ReadOnlyHint && a.DestructiveHint == nil && !a.IdempotentHint {
		return h, false
	}
	yes, no := true, false
	h.From = "mcp server " + server
	if a.ReadOnlyHint {
		h.ReadOnly = &yes
		return h, true
	}
	h.ReadOnly = &no
	h.Destructive = &yes
	if a.DestructiveHint != nil && !*a.DestructiveHint {
		h.Destructive = &no
	}
	h.Idempotent = &no
	if a.IdempotentHint {
		h.Idempotent = &yes
	}
	return h, true
}

// Apply adds the bridge's tools to the interceptor's options: their Hints, with
// Options.DedupWindow their VendorWindows, and, when the server's Dedup offers its
// lookup (LookupOffered) and o.Store can settle keys (witness.Settler: every store of
// this module; set it before Apply), the bridge's Witness after any witnesses o
// already names for the tool. Entries already there win.
func (b *Bridge) Apply(o *interceptor.Options) {
	if _, settles := o.Store.(witness.Settler); b.lookup && settles {
		o.Witnesses = maps.Clone(o.Witnesses)
		if o.Witnesses == nil {
			o.Witnesses = map[string][]witness.Witness{}
		}
		w := b.Witness(o.ClockSkew)
		for n := range b.tools {
			o.Witnesses[n] = append(slices.Clip(o.Witnesses[n]), w)
		}
	}
	o.Hints = maps.Clone(o.Hints)
	if o.Hints == nil {
		o.Hints = map[string]interceptor.Hints{}
	}
	for n, h := range b.Hints() {
		if _, ok := o.Hints[n]; !ok {
			o.Hints[n] = h
		}
	}
	if b.opts.DedupWindow > 0 {
		o.VendorWindows = maps.Clone(o.VendorWindows)
		if o.VendorWindows == nil {
			o.VendorWindows = map[string]time.Duration{}
		}
		for n := range b.tools {
			if _, ok := o.VendorWindows[n]; !ok {
				o.VendorWindows[n] = b.opts.DedupWindow
			}
		}
	}
}

// Census classifies the bridge's tools as the gate will: by name, tightened or
// refined by their annotations, with o's Effects and Hints applied (o's Hints win).
func (b *Bridge) Census(o interceptor.Options) interceptor.CensusReport {
	b.Apply(&o)
	return o.Census(b.Names())
}

// Registry is what Register registers on: a worker.Worker, or a test environment.
type Registry interface {
	RegisterActivityWithOptions(a any, options activity.RegisterOptions)
}

// Register registers one activity per tool on r. Each takes the tool's arguments
// (a JSON object) and returns its Result.
func (b *Bridge) Register(r Registry) {
	for _, n := range b.Names() {
		t := b.tools[n]
		r.RegisterActivityWithOptions(func(ctx context.Context, args toolArgs) (*Result, error) {
			return b.call(ctx, t, args)
		}, activity.RegisterOptions{Name: n})
	}
}

// Call calls the tool registered as activityName, as its activity does.
func (b *Bridge) Call(ctx context.Context, activityName string, args map[string]any) (*Result, error) {
	t := b.tools[activityName]
	if t == nil {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("idemgate/mcptools: %s: server %s has no such "+
			"tool (it has %s). Nothing was sent.", activityName, b.server, strings.Join(b.Names(), ", ")),
			"McpUnknownTool", nil)
	}
	return b.call(ctx, t, args)
}

func observe(ctx context.Context, o attempt.Observation) {
	if st, ok := attempt.FromContext(ctx); ok {
		o.Vendor = "mcp"
		st.Observe(o)
	}
}

// CheckArgs checks args against the input schema of the tool registered as
// activityName, as its activity does before sending; the error names the field.
// A planner uses it to refuse a call before it is made.
func (b *Bridge) CheckArgs(activityName string, args map[string]any) error {
	t := b.tools[activityName]
	if t == nil {
		return fmt.Errorf("idemgate/mcptools: server %s has no tool %s", b.server, activityName)
	}
	return t.check(args)
}

func (t *tool) check(args map[string]any) error {
	if t.schema == nil {
		return nil
	}
	if args == nil {
		args = map[string]any{}
	}
	if hasNumber(args) { // the schema validator reads json.Number as a string
		args = floats(args).(map[string]any)
	}
	return t.schema.Validate(args)
}

// toolArgs are a tool activity's arguments as Temporal decodes them: numbers stay as
// written (json.Number), never passing through float64, so an account number
// 12345678901234567 reaches the tool, and the gate's argument hash, unchanged
// (through float64 it would become 12345678901234568).
type toolArgs map[string]any

func (a *toolArgs) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return err
	}
	*a = m
	return nil
}

func hasNumber(v any) bool {
	switch x := v.(type) {
	case json.Number:
		return true
	case map[string]any:
		for _, e := range x {
			if hasNumber(e) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if hasNumber(e) {
				return true
			}
		}
	}
	return false
}

// floats is a copy of v with its json.Numbers as float64, for schema validation
// only (a number out of float64's range stays a json.Number, which fails a numeric
// type check).
func floats(v any) any {
	switch x := v.(type) {
	case json.Number:
		if f, err := x.Float64(); err == nil {
			return f
		}
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = floats(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = floats(e)
		}
		return out
	}
	return v
}

func (b *Bridge) call(ctx context.Context, t *tool, args map[string]any) (*Result, error) {
	if args == nil {
		args = map[string]any{}
	}
	if err := t.check(args); err != nil {
		observe(ctx, attempt.Observation{Outcome: attempt.NotSent, Detail: "arguments do not match the input schema"})
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("idemgate/mcptools: %s: the arguments do "+
			"not match the tool's input schema: %v. Nothing was sent. Next step: fix the arguments (the schema is in "+
			"`idemgate census --mcp`)", t.activity, err), "McpArgumentsInvalid", interceptor.NotCommitted(err))
	}
	p := &mcp.CallToolParams{Name: t.name, Arguments: args}
	if key, ok := interceptor.KeyFromContext(ctx); ok && !readCall(ctx) {
		if why := b.windowPassed(ctx); why != "" {
			// Not NotSent: an earlier attempt may have reached the server; the key stays
			// unknown until a person looks, as idemhttp does for a vendor's window.
			observe(ctx, attempt.Observation{Outcome: attempt.Unknown, Detail: "withheld destructive retry: " + why})
			return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("idemgate/mcptools: %s: the retry was not "+
				"sent: %s. Next step: an earlier attempt may have reached server %s: find out from its owner whether "+
				"the tool acted (key %s), then settle the key (`idemgate resolve`)", t.activity, why, b.server, key),
				"McpWindowPassed", nil)
		}
		p.Meta = mcp.Meta{MetaKey: key}
		if st, ok := attempt.FromContext(ctx); ok && st.Retry && st.RecordSent != nil && !st.FirstClaimed.IsZero() {
			// A re-send relying on the server's Dedup: it must have run since the key
			// may first have left.
			p.Meta[MetaSentSince] = st.FirstClaimed.Add(-2 * st.Skew()).UTC().Format(time.RFC3339Nano)
		}
		if err := b.sending(ctx); err != nil {
			// Every exit the key takes must be in the evidence before it does (a re-send
			// relying on Dedup and the witnesses read it): withheld, as on a store outage.
			// Not marked NotCommitted: the observation says this call sent nothing, and
			// the gate weighs it with the attempt's other exits.
			observe(ctx, attempt.Observation{Outcome: attempt.NotSent, Detail: "withheld: the evidence was not stored"})
			return nil, temporal.NewApplicationError(fmt.Sprintf("idemgate/mcptools: %s: the call was not sent: the "+
				"evidence that key %s leaves for server %s could not be stored in the claim store (%v). Next step: "+
				"Temporal retries the activity; check the claim store if it goes on", t.activity, key, b.server,
				secrets.ScrubError(err, b.endpoint)), "McpNotSent", nil)
		}
	}
	// How many HTTP requests of this call got a connection: a refused dial proves
	// nothing left only if none did (another try may have written it), and an HTTP
	// status answers the call's POST only if it was the only one (the go-sdk's client
	// resumes a broken call stream with a GET, whose refusal fails the call alike).
	var conns atomic.Int32
	traced := httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { conns.Add(1) }})
	res, err := b.session.CallTool(traced, p)
	if err != nil {
		return nil, b.callFailed(ctx, t, err, conns.Load())
	}
	out := &Result{}
	if v, _ := res.Meta[MetaReplayed].(bool); v {
		out.Replayed = true
	}
	if res.IsError {
		text := texts(res.Content)
		if refusedArguments(res) {
			// The server's SDK refused the arguments against the tool's input schema
			// before any handler ran (the schema may have changed since it was listed).
			observe(ctx, attempt.Observation{Outcome: attempt.Rejected, Detail: "arguments refused by the server's input schema"})
			return nil, temporal.NewApplicationError(fmt.Sprintf("idemgate/mcptools: %s: the server refused the "+
				"arguments before running the tool: %s. Next step: the server's input schema may have changed since the "+
				"worker listed it: restart the worker (and review `idemgate census --mcp`)", t.activity, text), "McpRefused")
		}
		if notPerformed(res) {
			observe(ctx, attempt.Observation{Outcome: attempt.Rejected, Detail: "tool error, not performed"})
			return nil, temporal.NewApplicationError(fmt.Sprintf("idemgate/mcptools: %s: the tool failed and says it did "+
				"nothing: %s", t.activity, text), "McpToolError")
		}
		observe(ctx, attempt.Observation{Outcome: attempt.Unknown, Detail: "tool error"})
		return nil, temporal.NewApplicationError(fmt.Sprintf("idemgate/mcptools: %s: the tool failed: %s (it may have "+
			"acted before it failed: the outcome is unknown)", t.activity, text), "McpToolError")
	}
	observe(ctx, attempt.Observation{Outcome: attempt.Committed, Replayed: out.Replayed})
	return b.result(t, res, out)
}

// errTypeResultTooLarge is the error type of a result over Options.MaxResultSize.
const errTypeResultTooLarge = "McpResultTooLarge"

// result fills out, the tool activity's Result, from res, a successful answer: the
// one shape a tool's result takes, whether the call returned it or a witness found
// it in the server's Dedup.
func (b *Bridge) result(t *tool, res *mcp.CallToolResult, out *Result) (*Result, error) {
	var err error
	if out.Content, err = json.Marshal(res.Content); err != nil {
		return nil, fmt.Errorf("idemgate/mcptools: %s: the result cannot be encoded: %w", t.activity, err)
	}
	if res.StructuredContent != nil {
		if out.Structured, err = json.Marshal(res.StructuredContent); err != nil {
			return nil, fmt.Errorf("idemgate/mcptools: %s: the structured result cannot be encoded: %w", t.activity, err)
		}
	}
	out.Text = texts(res.Content)
	if n := len(out.Content) + len(out.Structured) + len(out.Text); n > b.opts.MaxResultSize {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("idemgate/mcptools: %s: the tool acted, but its "+
			"result is %d bytes, over MaxResultSize (%d); it is not returned. Next step: raise Options.MaxResultSize, or "+
			"make the tool return less", t.activity, n, b.opts.MaxResultSize), errTypeResultTooLarge, nil)
	}
	return out, nil
}

// readCall reports whether the gate classified the calling activity as a read: a read
// is never the write the gate guards and runs again on a reset or a re-run, so it
// sends no key, as idemhttp sends none with a GET (a server's Dedup would answer it
// from its store).
func readCall(ctx context.Context) bool {
	st, ok := attempt.FromContext(ctx)
	return ok && st.Effect == interceptor.Read.String()
}

// windowPassed says why a destructive retry (an earlier attempt may have reached
// the server with this key) must not leave now, or "" when the server still
// remembers the key: the gate decided the re-send when the attempt claimed the key,
// the call leaves when the body makes it, so the window is checked again here, by
// the rule idemhttp applies to a vendor's window (attempt.InVendorWindow).
func (b *Bridge) windowPassed(ctx context.Context) string {
	st, ok := attempt.FromContext(ctx)
	if !ok || st.Effect != "destructive" || !st.Retry {
		return ""
	}
	switch w := b.opts.DedupWindow; {
	case w <= 0:
		return "server " + b.server + " does not deduplicate on the key (no Options.DedupWindow), so the retry would reach it as a second call"
	case st.FirstClaimed.IsZero():
		return "the attempt does not say when its key was first claimed, so the server's window cannot be checked"
	case !attempt.InVendorWindow(st.FirstClaimed, time.Now(), w, st.Skew()):
		return fmt.Sprintf("the key was first claimed at %s and server %s remembers keys for %s (a retry is sent only "+
			"until %s before that ends, for clock skew), so it could run the tool again", st.FirstClaimed.UTC().Format(time.RFC3339),
			b.server, w, 2*st.Skew())
	}
	return ""
}

// sending records, before the key leaves in _meta, the evidence a re-send relying on
// the server's Dedup (interceptor.Options.VendorWindows, from DedupWindow) and the
// witnesses rest on; an error means it is not recorded, and the call must not leave.
func (b *Bridge) sending(ctx context.Context) error {
	if st, ok := attempt.FromContext(ctx); ok {
		return st.Sending(ctx, attempt.Sent{Via: "mcp:" + b.server, Host: b.server, Window: b.opts.DedupWindow})
	}
	return nil
}

// callFailed says what a failed tools/call means for the gate; conns is how many HTTP
// requests of the call got a connection (0 over other transports). Its error and
// observations never repeat the credentials of the server's URL (the go-sdk's errors
// quote it).
func (b *Bridge) callFailed(ctx context.Context, t *tool, cause error, conns int32) error {
	err := secrets.ScrubError(cause, b.endpoint) // unwraps to cause: errors.As still reads it
	var werr *jsonrpc.Error
	if errors.As(err, &werr) && !localWireError(werr) {
		msg := secrets.Scrub(werr.Message, b.endpoint)
		// Dedup's codes are implementation-defined server errors that any server may
		// use for its own (a handler's error after it acted): they are read as Dedup's
		// answers only from a server the bridge was told runs Dedup (DedupWindow).
		code := werr.Code
		if b.opts.DedupWindow <= 0 && (code == CodeInFlight || code == CodeConflict || code == CodeOutcomeUnknown) {
			code = 0
		}
		// After the go-sdk's client resumed a broken call stream (more than one HTTP
		// request), an error may be the body of the refused GET, not the server's
		// answer to the call: nothing in it proves the tool did not act.
		resumed := conns > 1
		if resumed && code == CodeConflict {
			code = 0
		}
		switch code {
		case CodeInFlight:
			observe(ctx, attempt.Observation{Outcome: attempt.InFlight, Detail: msg})
			return temporal.NewApplicationError(fmt.Sprintf("idemgate/mcptools: %s: the server is still running the "+
				"call with this key: %s", t.activity, msg), "McpInFlight")
		case CodeConflict:
			observe(ctx, attempt.Observation{Outcome: attempt.Conflict, Detail: msg})
			return temporal.NewNonRetryableApplicationError(fmt.Sprintf("idemgate/mcptools: %s: the server holds this "+
				"key for other arguments: %s", t.activity, msg), "McpConflict", nil)
		case CodeOutcomeUnknown:
			observe(ctx, attempt.Observation{Outcome: attempt.Unknown, Detail: msg})
			return temporal.NewNonRetryableApplicationError(fmt.Sprintf("idemgate/mcptools: %s: the server did not run "+
				"the call again: an earlier call with this key failed after the tool may have acted: %s. Next step: find "+
				"out from the server's owner whether the tool acted, then settle the key (`idemgate resolve`)",
				t.activity, msg), "McpOutcomeUnknown", nil)
		}
		if werr.Code == codeRejectedByTransport && conns == 0 && dialFailed(err) {
			// The go-sdk's streamable client could not connect (refused, no such host)
			// and no try got a connection: the request never left this process.
			observe(ctx, attempt.Observation{Outcome: attempt.NotSent, Detail: "not sent: " + err.Error()})
			return temporal.NewApplicationError(fmt.Sprintf("idemgate/mcptools: %s: server %s could not be reached: "+
				"%v. Nothing was sent", t.activity, b.server, err), "McpNotSent", interceptor.NotCommitted(err))
		}
		if werr.Code == codeRejectedByTransport && conns == 1 && strings.HasSuffix(cause.Error(), ": "+http.StatusText(http.StatusTooManyRequests)) {
			// The go-sdk's streamable client wraps an HTTP 429 (and 5xx, which stay
			// unknown) this way: a rate limit answered before the server took the call,
			// a 4xx as idemhttp reads one — when the POST was the call's only request
			// (a 429 to the GET that resumes a broken stream comes after it was taken).
			observe(ctx, attempt.Observation{Outcome: attempt.Rejected, Status: http.StatusTooManyRequests, Detail: "429 Too Many Requests"})
			return temporal.NewApplicationError(fmt.Sprintf("idemgate/mcptools: %s: server %s answered 429 Too Many "+
				"Requests: the call was not taken", t.activity, b.server), "McpRefused")
		}
		if !resumed && notRun(werr) {
			// The server refused the call before any tool handler ran.
			observe(ctx, attempt.Observation{Outcome: attempt.Rejected, Detail: msg})
			return temporal.NewApplicationError(fmt.Sprintf("idemgate/mcptools: %s: the server refused the call before "+
				"running the tool: %s", t.activity, msg), "McpRefused")
		}
		// Any other protocol error may come after the handler ran (a handler's own
		// error, an output that failed its schema, a server-defined code): unknown.
		observe(ctx, attempt.Observation{Outcome: attempt.Unknown, Detail: fmt.Sprintf("protocol error %d: %s", werr.Code, msg)})
		return temporal.NewApplicationError(fmt.Sprintf("idemgate/mcptools: %s: server %s answered with error %d: %v "+
			"(the tool may have acted before it failed: the outcome is unknown)", t.activity, b.server, werr.Code, err),
			"McpToolError")
	}
	if status, ok := refusedByHTTP(cause); ok && conns == 1 {
		// The server's HTTP layer answered before any tool ran: a 4xx such as 401 (an
		// expired or revoked token), or 404 for a session it no longer has (it
		// restarted). The go-sdk's client then closes the session.
		observe(ctx, attempt.Observation{Outcome: attempt.Rejected, Status: status, Detail: fmt.Sprintf("%d %s", status,
			http.StatusText(status))})
		return temporal.NewApplicationError(fmt.Sprintf("idemgate/mcptools: %s: server %s refused the call before running "+
			"the tool: %v. Next step: check the worker's credentials for the server; after a 404 the server lost the "+
			"session (it restarted): restart the worker to connect again", t.activity, b.server, err), "McpRefused",
			interceptor.NotCommitted(err))
	}
	if closedBeforeSending(cause) {
		observe(ctx, attempt.Observation{Outcome: attempt.NotSent, Detail: "not sent: the session is closed: " + err.Error()})
		return temporal.NewApplicationError(fmt.Sprintf("idemgate/mcptools: %s: the session to server %s is closed, so "+
			"the call was not sent: %v. Next step: restart the worker to connect again (the bridge does not reconnect)",
			t.activity, b.server, err), "McpNotSent", interceptor.NotCommitted(err))
	}
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		observe(ctx, attempt.Observation{Outcome: attempt.Unknown, Detail: err.Error()})
	} else {
		observe(ctx, attempt.Observation{Outcome: attempt.Unknown, Detail: "no answer: " + err.Error()})
	}
	return fmt.Errorf("idemgate/mcptools: %s: no answer from server %s: %w (the call may have reached it: the outcome is unknown)",
		t.activity, b.server, err)
}

// refusedArguments reports whether r is the tool error an SDK answers, before any
// handler runs, for arguments that fail the tool's input schema: the go-sdk's
// (`validating "arguments": …`) and mcp-go's with WithInputSchemaValidation (`input
// schema validation failed: …`). Read by the same rule as notRun: a handler that
// forges that text after acting is read as not having run.
func refusedArguments(r *mcp.CallToolResult) bool {
	if !r.IsError || len(r.Content) != 1 || r.StructuredContent != nil {
		return false
	}
	t, ok := r.Content[0].(*mcp.TextContent)
	return ok && (strings.HasPrefix(t.Text, `validating "arguments": `) || strings.HasPrefix(t.Text, "input schema validation failed: "))
}

// notRun reports whether a JSON-RPC error answer to tools/call proves that no tool
// handler ran: a parse error, an invalid request, an unknown method, or an invalid-
// params refusal of the kind the SDKs raise before dispatch (an unknown tool, an
// invalid _meta). Anything else may come after a handler ran and is an unknown
// outcome: -32603 and code 0 (a handler's error, an output that failed its schema),
// server-defined codes, and -32602 with any other message, since a go-sdk handler
// may return a *jsonrpc.Error with any code after it acted. Dedup reads errors by the
// same rule. The codes are read as the SDKs use them: a handler that returns a parse
// error, an invalid request or an unknown method itself after acting, or forges an
// SDK's unknown-tool message, is read as not having run.
func notRun(werr *jsonrpc.Error) bool {
	if werr == nil || localWireError(werr) {
		return false
	}
	switch werr.Code {
	case jsonrpc.CodeParseError, jsonrpc.CodeInvalidRequest, jsonrpc.CodeMethodNotFound:
		return true
	case jsonrpc.CodeInvalidParams:
		m := werr.Message
		return strings.HasPrefix(m, "unknown tool ") || // go-sdk's Server, before dispatch
			strings.HasPrefix(m, "tool '") && strings.HasSuffix(m, "not found: tool not found") || // mcp-go's
			strings.HasPrefix(m, "invalid _meta field ") || strings.HasPrefix(m, "missing or invalid _meta field ")
	}
	return false
}

// refusedByHTTP reads the go-sdk streamable client's error for a tools/call POST that
// the server answered with a 4xx status and no JSON-RPC body (a 401 from bearer-token
// auth), or with 404 for a session it does not have (ErrSessionMissing): answered
// before any tool ran. The client reports the first only as text ("sending
// \"tools/call\": Unauthorized"). A 429 comes as a JSON-RPC error (see callFailed).
func refusedByHTTP(err error) (status int, ok bool) {
	if errors.Is(err, mcp.ErrSessionMissing) {
		return http.StatusNotFound, true
	}
	msg := err.Error()
	const sending = `sending "tools/call": `
	if strings.Contains(msg, "client is closing") || strings.Contains(msg, "server is closing") {
		return 0, false // read by closedBeforeSending
	}
	for code := 400; code < 500; code++ {
		if text := http.StatusText(code); text != "" && strings.HasSuffix(msg, sending+text) {
			return code, true
		}
	}
	return 0, false
}

// closedBeforeSending reports whether err says the go-sdk's connection was closing or
// broken when the tools/call was about to be written, so it was not written: its
// client answers such a call "connection closed: calling \"tools/call\": client is
// closing: …" (or "server is closing", its write side's check), and only before
// writing (a call already written and then cut off fails with the read error).
func closedBeforeSending(err error) bool {
	if !errors.Is(err, mcp.ErrConnectionClosed) {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, `calling "tools/call": client is closing`) ||
		strings.Contains(msg, `calling "tools/call": server is closing`)
}

// dialFailed reports whether err holds a failed dial or host lookup.
func dialFailed(err error) bool {
	var op *net.OpError
	var dns *net.DNSError
	return errors.As(err, &op) && op.Op == "dial" || errors.As(err, &dns)
}

// codeRejectedByTransport is the go-sdk client's code for a request its transport
// could not deliver or got an HTTP error status for (jsonrpc2.ErrRejected).
const codeRejectedByTransport = -32005

// localSentinels are the go-sdk's own parse-error and invalid-request values. A
// client whose connection cannot read the server's answer (an id of the wrong type,
// a response without one) retires every pending call with one of them: made on this
// side, after the request left, they prove nothing about the tool.
var localSentinels = func() []*jsonrpc.Error {
	var out []*jsonrpc.Error
	var w *jsonrpc.Error
	if _, err := jsonrpc.MakeID(true); errors.As(err, &w) {
		out = append(out, w)
	}
	if _, err := jsonrpc.DecodeMessage([]byte(`{"jsonrpc":"2.0"}`)); errors.As(err, &w) {
		out = append(out, w)
	}
	return out
}()

func localWireError(w *jsonrpc.Error) bool { return slices.Contains(localSentinels, w) }

func texts(cs []mcp.Content) string {
	if len(cs) == 1 { // the common case, without a slice to join
		if t, ok := cs[0].(*mcp.TextContent); ok {
			return t.Text
		}
		return ""
	}
	var parts []string
	for _, c := range cs {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}
