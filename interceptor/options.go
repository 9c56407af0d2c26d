package interceptor

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/converter"

	"github.com/idemgate/idemgate/internal/attempt"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/witness"
)

// Scope says which workflow runs share minted keys.
type Scope uint8

const (
	// ScopeExecution (the default): keys are distinct per workflow execution — stable
	// across activity retries, worker restarts, replay and workflow reset, distinct
	// across separate executions and continue-as-new runs.
	ScopeExecution Scope = iota
	// ScopeWorkflowID: keys are shared by every run with the same workflow ID, so a
	// workflow retry or a manual re-run with the same ID does not repeat a finished
	// write. Continue-as-new runs still get distinct keys.
	ScopeWorkflowID
)

func (s Scope) String() string {
	switch s {
	case ScopeExecution:
		return "execution"
	case ScopeWorkflowID:
		return "workflow-id"
	}
	return fmt.Sprintf("Scope(%d)", uint8(s))
}

// Defaults.
const (
	DefaultWindow        = 24 * time.Hour
	DefaultMaxResultSize = 1 << 20
	DefaultPauseRefresh  = 2 * time.Second
	// DefaultWitnessTimeout bounds each witness's answer at the gate.
	DefaultWitnessTimeout = 5 * time.Second
	// DefaultClockSkew is the largest clock offset assumed between two workers when
	// Options.ClockSkew is 0.
	DefaultClockSkew = attempt.DefaultClockSkew
	// defaultLease is the lease of an attempt that has no deadline (never the case for
	// activities Temporal schedules; kept as a guard).
	defaultLease = 10 * time.Minute
)

// Options configures the interceptor. The zero value of every field but Store is a
// safe default; the package documentation tells how the fields work together.
type Options struct {
	// Store remembers claims, results and receipts. Required: New fails without it.
	// Use store/sqlite (one machine) or store/postgres (many); store/memory only in tests.
	Store store.Gate

	// Effects overrides the name-based classification for the named activities, both
	// ways: mark a misread name Read, or a harmless-looking one Destructive.
	// Optional: nil classifies every activity by its name alone.
	Effects map[string]Effect

	// Hints are untrusted effect claims (MCP annotations, API descriptions) by activity
	// name: they may raise a name's class and classify a name with no known verb; they
	// never lower a verb-list match, and lower a flagged name only down to the most
	// severe verb in it (see Hints). Effects overrides both. Optional: nil uses names
	// alone.
	Hints map[string]Hints

	// ToolNames names generic tool-calling activities (one activity type that calls
	// many tools) and the argument fields that name the tool, which then stands in
	// for the activity type everywhere. Optional: nil means none.
	ToolNames map[string]ToolName

	// IdentifyingFields names, per activity, the argument fields that identify the
	// record it writes: calls with the same values are one write (see Keys in the
	// package doc). Optional: nil keys by WithKey or the call's occurrence.
	IdentifyingFields map[string][]string

	// Window is how long a finished write is remembered: a repeat inside it returns
	// the stored result, after it the write is new — except a finished destructive
	// write, which its own workflow's repeats (a reset) get while the workflow can
	// still be reset (see `idemgate sweep`). Optional: 0 means 24 hours.
	Window time.Duration

	// Scope says which runs share minted keys. Optional: the zero value is ScopeExecution.
	Scope Scope

	// VendorWindows names activities whose every side effect goes to a vendor that
	// deduplicates on the forwarded key, with its window: their unknown-outcome retries
	// re-send inside it instead of being refused — when the claim holds the evidence,
	// recorded by idemhttp or the MCP bridge before the key left, that it went out
	// through them (and never past the shortest window that evidence names). Each such
	// re-send is receipted "resent", by the witness "vendor-dedup". Optional: nil
	// refuses every such retry.
	VendorWindows map[string]time.Duration

	// DataConverter encodes stored results, which a repeat returns as they are: give
	// it the worker client's converter, codec included. Optional: nil means
	// converter.GetDefaultDataConverter().
	DataConverter converter.DataConverter

	// MaxResultSize is the largest encoded result stored; a repeat of a write whose
	// result was larger is refused (IdempotencyResultNotStored), not run again.
	// Optional: 0 means 1 MiB.
	MaxResultSize int

	// SkipReadReceipts stops the gate from appending a receipt for every read.
	// Optional: false records reads too (a store error never stops a read). Under
	// the store's default durability (store.DurabilityClaim: the SQLite and
	// PostgreSQL stores' default) a read writes nothing on its path: its receipt is
	// queued and appended in a batch within 100 ms, off the path, so a crash of the
	// process can lose the receipts of the reads of its last 100 ms (never a claim or
	// a write's receipt); see ReadReceiptQueue and Flush. Under
	// store.DurabilityStrict, and with a store that does not report its durability
	// (store.DurabilityReporter: the memory store, a wrapper), each read appends its
	// receipt before it returns.
	SkipReadReceipts bool

	// ReadReceiptQueue bounds the read receipts queued for their batch. A read that
	// finds the queue full waits for room (back-pressure, counted in
	// MetricReadReceiptsWaited) until its context ends; its receipt is dropped,
	// logged and counted (MetricReadReceiptsDropped) only then, or when the store
	// does not take the queue's batches. Optional: 0 means 4096. Negative is invalid.
	ReadReceiptQueue int

	// HoldUnknown, when > 0, makes a destructive write whose earlier outcome is
	// unknown wait for its settlement instead of failing: when no witness can tell,
	// the refusal is retryable after this delay (at least until the earlier
	// attempt's lease passed), in Temporal's benign error category, and once a
	// witness or a person (`idemgate resolve`) settles the key the next attempt
	// returns the stored result or runs — the workflow goes on by itself. Every
	// refusal is an attempt: give such activities a retry policy without
	// MaximumAttempts, bounded by ScheduleToClose (see Outcomes in the package doc).
	// Optional: 0 refuses for good once the witnesses cannot tell.
	HoldUnknown time.Duration

	// Witnesses are asked, in order, whether a write whose outcome is unknown
	// happened, before the gate refuses it (and, with the plugin, in the background
	// for every pending key): by activity type, or tool name under ToolNames; the
	// entry "" is asked for every write. Temporal's own history is always asked
	// first (see package witness). Every witness needs a name (receipts and the
	// store's rules tell a witness from a person by it), and the Store must be able
	// to settle (have Resolve: memory, sqlite, postgres do); New refuses otherwise.
	// A witness's result is stored within MaxResultSize, as the gate's own. A
	// destructive write with witnesses has its keyed transport record that the key
	// left (store.Record.Sent), as with VendorWindows: a vendor's witness answers
	// only for keys that left to it. Optional: nil asks Temporal only.
	Witnesses map[string][]witness.Witness

	// WitnessTimeout bounds each witness's answer when the gate asks (the gate then
	// refuses as usual), also for a witness that ignores its ctx: the gate stops
	// waiting for it. Optional: 0 means 5 seconds. Negative is invalid.
	WitnessTimeout time.Duration

	// PauseRefresh is how often the gate re-reads the pauses (`idemgate pause`) from
	// the store. Optional: 0 means 2 seconds. Negative is invalid.
	PauseRefresh time.Duration

	// ClockSkew is the largest clock offset between any two workers (and a vendor); a
	// claim is held until its attempt's deadline plus twice this, and a re-send under
	// VendorWindows or an idemhttp Profile.Window stops twice this before the vendor's
	// window ends (see Clocks in the package doc).
	// Optional: 0 means 2 seconds. Negative is invalid.
	ClockSkew time.Duration

	// Now is the clock. Optional: nil means time.Now.
	Now func() time.Time

	// Observer is called once per gate decision (see Decision), e.g. to put it on
	// the activity's trace span (contrib/otel). Optional: nil observes nothing.
	Observer Observer
}

func (o Options) withDefaults() (Options, error) {
	var errs []error
	if o.Store == nil {
		errs = append(errs, errors.New("Options.Store is nil: writes need a durable claim store — "+
			"open one with sqlite.Open(ctx, path) or postgres.Open(ctx, dsn) (memory.New() in tests)"))
	}
	for name, e := range o.Effects {
		if !e.valid() {
			errs = append(errs, fmt.Errorf("Options.Effects[%q] = %d is not an Effect: use interceptor.Read, IdempotentWrite or Destructive", name, e))
		}
	}
	for name, fields := range o.IdentifyingFields {
		if len(fields) == 0 || slices.Contains(fields, "") {
			errs = append(errs, fmt.Errorf("Options.IdentifyingFields[%q] = %q: list at least one non-empty field name", name, fields))
		}
	}
	for name, tn := range o.ToolNames {
		if len(tn.Fields) == 0 || slices.Contains(tn.Fields, "") {
			errs = append(errs, fmt.Errorf("Options.ToolNames[%q].Fields = %q: list the argument fields that name the tool", name, tn.Fields))
		}
	}
	for name, w := range o.VendorWindows {
		if w <= 0 {
			errs = append(errs, fmt.Errorf("Options.VendorWindows[%q] = %v: give the vendor's deduplication window (> 0)", name, w))
		}
	}
	if o.Window < 0 {
		errs = append(errs, fmt.Errorf("Options.Window = %v is negative: use 0 for the default (24h)", o.Window))
	}
	if o.MaxResultSize < 0 {
		errs = append(errs, fmt.Errorf("Options.MaxResultSize = %d is negative: use 0 for the default (1 MiB)", o.MaxResultSize))
	}
	if o.HoldUnknown < 0 {
		errs = append(errs, fmt.Errorf("Options.HoldUnknown = %v is negative: use 0 to refuse for good, or the retry delay (> 0)", o.HoldUnknown))
	}
	for name, ws := range o.Witnesses {
		for i, w := range ws {
			if w == nil {
				errs = append(errs, fmt.Errorf("Options.Witnesses[%q][%d] is nil: remove it, or give a witness (witness.Func)", name, i))
			} else if strings.TrimSpace(w.Name()) == "" {
				// The store tells a witness from a person by its name: an unnamed one would
				// settle by a person's rules.
				errs = append(errs, fmt.Errorf("Options.Witnesses[%q][%d] has no name: settlements name their witness; "+
					"give it one (witness.Func(name, ...))", name, i))
			}
		}
	}
	if _, ok := o.Store.(witness.Settler); !ok && o.Store != nil && len(o.Witnesses) > 0 {
		errs = append(errs, fmt.Errorf("Options.Witnesses is set, but the store (%T) cannot settle a key (it has no "+
			"Resolve method): the witnesses would never be asked. Next step: pass the store itself (memory, sqlite, "+
			"postgres), or make the wrapper forward Resolve", o.Store))
	}
	if o.ReadReceiptQueue < 0 {
		errs = append(errs, fmt.Errorf("Options.ReadReceiptQueue = %d is negative: use 0 for the default (%d)", o.ReadReceiptQueue, DefaultReadReceiptQueue))
	}
	if o.WitnessTimeout < 0 {
		errs = append(errs, fmt.Errorf("Options.WitnessTimeout = %v is negative: use 0 for the default (5s)", o.WitnessTimeout))
	}
	if o.PauseRefresh < 0 {
		errs = append(errs, fmt.Errorf("Options.PauseRefresh = %v is negative: use 0 for the default (2s)", o.PauseRefresh))
	}
	if o.ClockSkew < 0 {
		errs = append(errs, fmt.Errorf("Options.ClockSkew = %v is negative: use 0 for the default (2s), or your fleet's clock bound", o.ClockSkew))
	}
	if o.Scope > ScopeWorkflowID {
		errs = append(errs, fmt.Errorf("Options.Scope = %d: use ScopeExecution or ScopeWorkflowID", o.Scope))
	}
	if len(errs) > 0 {
		return o, fmt.Errorf("idemgate: invalid options: %w", errors.Join(errs...))
	}
	if o.Window == 0 {
		o.Window = DefaultWindow
	}
	if o.MaxResultSize == 0 {
		o.MaxResultSize = DefaultMaxResultSize
	}
	if o.ClockSkew == 0 {
		o.ClockSkew = DefaultClockSkew
	}
	if o.PauseRefresh == 0 {
		o.PauseRefresh = DefaultPauseRefresh
	}
	if o.WitnessTimeout == 0 {
		o.WitnessTimeout = DefaultWitnessTimeout
	}
	if o.ReadReceiptQueue == 0 {
		o.ReadReceiptQueue = DefaultReadReceiptQueue
	}
	if o.DataConverter == nil {
		o.DataConverter = converter.GetDefaultDataConverter()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o, nil
}
