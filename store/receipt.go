package store

import "time"

// Decision is what the gate decided for one attempt. The strings are stored and
// shown by the CLI; they are part of the contract.
type Decision string

const (
	// DecisionRan: a read ran, or a write ran and its result was stored.
	DecisionRan Decision = "ran"
	// DecisionClaimed: a write claimed its key and is about to run.
	DecisionClaimed Decision = "claimed"
	// DecisionTakenOver: an idempotent write took over a claim whose owner was gone.
	DecisionTakenOver Decision = "taken-over"
	// DecisionResent: a destructive write whose outcome was unknown is sent again
	// with the same key, because the vendor deduplicates on it inside its window
	// (interceptor.Options.VendorWindows, on the evidence in Record.Sent): the
	// vendor's deduplication is the witness. Actor is "witness:vendor-dedup",
	// Reason the evidence and the window. It follows the same attempt's
	// DecisionTakenOver; the re-send's own outcome follows it.
	DecisionResent Decision = "resent"
	// DecisionReplayed: a finished write was repeated; the stored result was returned.
	DecisionReplayed Decision = "replayed"
	// DecisionRefusedInFlight: refused because an earlier attempt may still be running
	// or may have reached the outside world.
	DecisionRefusedInFlight Decision = "refused-in-flight"
	// DecisionRefusedConflict: refused because the key was used with other arguments.
	DecisionRefusedConflict Decision = "refused-conflict"
	// DecisionGated: refused by the rerun policy or a pause; the call was withheld.
	DecisionGated Decision = "gated"
	// DecisionReleased: the attempt failed definitely; the claim was released.
	DecisionReleased Decision = "released"
	// DecisionUnknown: the attempt ended without proof either way; the claim stays.
	DecisionUnknown Decision = "unknown"
	// DecisionHandedOff: the write's activity returned activity.ErrResultPending and
	// handed its completion to other code (interceptor.CompleteAsync); the claim stays
	// with the attempt until that code stores the outcome or the attempt's deadline passes.
	DecisionHandedOff Decision = "handed-off"
	// DecisionResolved: a person or reconciler settled an unknown outcome; the
	// receipt's Resolution says which way.
	DecisionResolved Decision = "resolved"
	// DecisionPaused and DecisionResumed: a person paused or resumed writes of an
	// activity or an effect class (the receipt's Activity or Effect).
	DecisionPaused  Decision = "paused"
	DecisionResumed Decision = "resumed"
	// DecisionPruned: a person removed the receipts older than a cut-off (see
	// Pruner); the receipt's Call holds the cut-off and the count (PruneSummary),
	// Actor and Reason who and why. A prune never removes such a receipt.
	DecisionPruned Decision = "pruned"
)

// Resolutions a DecisionResolved receipt carries.
const (
	// ResolvedSent: the write happened; its result is stored (StateCompleted).
	ResolvedSent = "sent"
	// ResolvedNotSent: the write did not happen; the claim is released (StateReleased).
	ResolvedNotSent = "not-sent"
)

// Decisions lists every decision a store keeps, for validating filters.
var Decisions = []Decision{DecisionRan, DecisionClaimed, DecisionTakenOver, DecisionResent, DecisionReplayed,
	DecisionRefusedInFlight, DecisionRefusedConflict, DecisionGated, DecisionReleased, DecisionUnknown,
	DecisionHandedOff, DecisionResolved, DecisionPaused, DecisionResumed, DecisionPruned}

// Receipt is one append-only line of evidence.
type Receipt struct {
	// ID is assigned by the store, increasing in append order.
	ID       int64
	Time     time.Time
	Key      string
	Activity string
	Effect   string
	Decision Decision
	ArgsHash string
	// Call is the canonical JSON of the arguments, set when a call was withheld
	// (on a DecisionPruned receipt: the prune's PruneSummary as JSON).
	Call       []byte
	WorkflowID string
	RunID      string
	Attempt    int32
	// ResultRef names the stored result (a digest), when there is one.
	ResultRef string
	Error     string
	// Actor and Reason are set when a person resolved an outcome, paused or resumed.
	Actor  string
	Reason string
	// Resolution is ResolvedSent or ResolvedNotSent on a DecisionResolved receipt.
	Resolution string
	// EffectSource says what decided Effect: EffectByName (the activity's or tool's
	// name, read by the classifier's grammar), EffectByHint (the activity's hints,
	// e.g. an MCP server's annotations) or EffectByOverride (Options.Effects in the
	// worker's code). "" on receipts written before it was recorded and on receipts
	// with no class of their own (pause, resume, resolve, prune).
	EffectSource string
}

// What decided a receipt's Effect (Receipt.EffectSource, Claim.EffectSource). The
// strings are stored and shown by the CLI; they are part of the contract.
const (
	// EffectByName: the classifier read the class from the activity's (or tool's) name.
	EffectByName = "name"
	// EffectByHint: the activity's hints (an untrusted claim, such as an MCP
	// server's annotations) raised the name's class or gave a name with no known
	// verb its class.
	EffectByHint = "hint"
	// EffectByOverride: Options.Effects set the class in the worker's code.
	EffectByOverride = "override"
)

// ReceiptFilter selects receipts; zero fields match everything.
type ReceiptFilter struct {
	Key        string
	WorkflowID string
	Activity   string
	Decision   Decision
	// Since and Until bound Time (inclusive, exclusive).
	Since time.Time
	Until time.Time
	// AfterID keeps only receipts with an ID above it: the cursor for paging
	// through a large store (pass the last ID of the page before, with Limit).
	AfterID int64
	// Limit caps the number returned (0: no cap).
	Limit int
}

// Match reports whether r passes the filter. Backends that filter in memory use it.
func (f ReceiptFilter) Match(r Receipt) bool {
	return r.ID > f.AfterID &&
		(f.Key == "" || r.Key == f.Key) &&
		(f.WorkflowID == "" || r.WorkflowID == f.WorkflowID) &&
		(f.Activity == "" || r.Activity == f.Activity) &&
		(f.Decision == "" || r.Decision == f.Decision) &&
		(f.Since.IsZero() || !r.Time.Before(f.Since)) &&
		(f.Until.IsZero() || r.Time.Before(f.Until))
}
