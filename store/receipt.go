package store

import (
	"context"
	"time"
)

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
//
// Listing receipts at scale (issue 21: 10 million receipts, a page in 200 ms).
// The receipts are indexed by key, by workflow ID and (the rare decisions: all
// but claimed and ran) by decision, and found by time through their IDs (SQLite:
// a receipt's ID is at least its time in microseconds) or a time index
// (PostgreSQL). The activity is not indexed, on purpose: every claim and
// completion would write one B-tree more (TestStepsWriteFewBTrees in
// store/sqlite counts them). A filter that no index selects (Activity alone, or
// with Since or Until) is served by a walk, so Receipts, which returns every
// match, walks the whole store when few receipts match. Operator listings use
// ReceiptPage instead (ReceiptPager, PageReceipts): one page examines at most
// Scan receipts and says where it stopped, so a page costs the same whether
// every receipt matches or none does, and a listing that found nothing yet says
// so ("more may follow") with the cursor to go on from.
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
	// AfterTime, set only from a ReceiptPage's Next, continues a listing in time
	// order (PostgreSQL's pages with Since and no key, workflow or rare decision):
	// with it, only receipts after (AfterTime, AfterID) in (Time, ID) order match.
	AfterTime time.Time
	// ThroughID keeps only receipts with an ID at or below it (0: no bound): an
	// export's upper end (ReceiptHorizon), so that what it archived is exactly
	// what a prune through the same ID may remove (Prune.ThroughID).
	ThroughID int64
	// Limit caps the number returned (0: no cap; a ReceiptPage's default is
	// DefaultReceiptPage).
	Limit int
	// Scan bounds how many receipts one ReceiptPage examines: the receipts it
	// walks in its order, those of the key, the workflow or the rare decision
	// when the filter names one, else those of the time range or of the whole
	// store (0: DefaultReceiptScan). Receipts ignores it.
	Scan int
}

// DefaultReceiptPage is a ReceiptPage's Limit when the filter has none, and
// DefaultReceiptScan its Scan: about 20 ms of walking on SQLite's pure-Go
// engine, well inside the 200 ms a page may take.
const (
	DefaultReceiptPage = 1000
	DefaultReceiptScan = 20000
)

// PageLimit is f.Limit, or DefaultReceiptPage when it is not positive.
func (f ReceiptFilter) PageLimit() int {
	if f.Limit <= 0 {
		return DefaultReceiptPage
	}
	return f.Limit
}

// ScanLimit is f.Scan, or DefaultReceiptScan when it is not positive.
func (f ReceiptFilter) ScanLimit() int {
	if f.Scan <= 0 {
		return DefaultReceiptScan
	}
	return f.Scan
}

// Match reports whether r passes the filter. Backends that filter in memory use it.
func (f ReceiptFilter) Match(r Receipt) bool {
	return f.After(r) && (f.ThroughID <= 0 || r.ID <= f.ThroughID) &&
		(f.Key == "" || r.Key == f.Key) &&
		(f.WorkflowID == "" || r.WorkflowID == f.WorkflowID) &&
		(f.Activity == "" || r.Activity == f.Activity) &&
		(f.Decision == "" || r.Decision == f.Decision) &&
		(f.Since.IsZero() || !r.Time.Before(f.Since)) &&
		(f.Until.IsZero() || r.Time.Before(f.Until))
}

// After reports whether r comes after f's cursor: its ID above AfterID, or, with
// AfterTime, (r.Time, r.ID) after (AfterTime, AfterID).
func (f ReceiptFilter) After(r Receipt) bool {
	if f.AfterTime.IsZero() {
		return r.ID > f.AfterID
	}
	return r.Time.After(f.AfterTime) || r.Time.Equal(f.AfterTime) && r.ID > f.AfterID
}

// ReceiptPage is one page of a listing (ReceiptPager).
type ReceiptPage struct {
	// Receipts are the matches, at most the filter's PageLimit, oldest first: by
	// ID (append order), or by (Time, ID) where Next.AfterTime is set.
	Receipts []Receipt
	// Done: no receipt after this page matches (as of the page's read).
	Done bool
	// Next is the filter of the next page: the same filter with its cursor
	// (AfterID, AfterTime) where this page stopped, after its last match or after
	// the last receipt it examined.
	Next ReceiptFilter
}

// ReceiptPager lists receipts a bounded page at a time: a page returns up to
// f.PageLimit() matches and examines at most f.ScanLimit() receipts (see
// ReceiptFilter.Scan), so it may end with fewer matches, even none, and Done
// false: more may follow from Next. The page is ordered by ID, except on
// PostgreSQL when the filter has Since and no Key, WorkflowID or rare Decision:
// then by (Time, ID), through the time index (PostgreSQL's IDs come from a
// sequence and do not follow time). store/memory, store/sqlite and
// store/postgres implement it.
type ReceiptPager interface {
	ReceiptPage(ctx context.Context, f ReceiptFilter) (ReceiptPage, error)
}

// ReceiptLister is the Operator method PageReceipts falls back to.
type ReceiptLister interface {
	Receipts(ctx context.Context, f ReceiptFilter) ([]Receipt, error)
}

// PageReceipts is one page of f from st: st's ReceiptPage when it is a
// ReceiptPager, else one call of Receipts with f's PageLimit (unbounded: a store
// without pages walks what its Receipts walks).
func PageReceipts(ctx context.Context, st ReceiptLister, f ReceiptFilter) (ReceiptPage, error) {
	if p, ok := st.(ReceiptPager); ok {
		return p.ReceiptPage(ctx, f)
	}
	g := f
	g.Limit = f.PageLimit()
	rs, err := st.Receipts(ctx, g)
	if err != nil {
		return ReceiptPage{}, err
	}
	next := f
	if len(rs) > 0 {
		next.AfterID = rs[len(rs)-1].ID
	}
	return ReceiptPage{Receipts: rs, Done: len(rs) < g.Limit, Next: next}, nil
}

// ReceiptHorizoner is a store that can say up to which ID its receipts are
// settled: every receipt with an ID at or below the horizon that will ever be
// stored is stored (and visible) when ReceiptHorizon returns. An export reads up
// to it and a prune removes through it (Prune.ThroughID), so a receipt stored
// later — a read's receipt appended late by the gate's queue, or on PostgreSQL a
// transaction that took its ID from the sequence before the export and commits
// after — is never removed unarchived. store/memory, store/sqlite and
// store/postgres implement it.
type ReceiptHorizoner interface {
	ReceiptHorizon(ctx context.Context) (int64, error)
}
