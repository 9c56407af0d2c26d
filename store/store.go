package store

import (
	"context"
	"errors"
	"time"
)

// Sentinel errors every backend returns (possibly wrapped) so callers can use errors.Is.
var (
	// ErrNotFound: no record for that key.
	ErrNotFound = errors.New("idemgate/store: no record for this key")
	// ErrNotOwner: the caller's owner token is not the claim's current owner, or the
	// record is not in a state the transition may leave. A zombie attempt gets this
	// when it tries to complete or release a claim another attempt has taken over.
	ErrNotOwner = errors.New("idemgate/store: not the current owner of this claim")
	// ErrUnavailable marks errors that mean the store could not be reached or did
	// not answer in time. The gate fails writes closed (retryable) on any store error;
	// backends wrap their connection and lock errors with it so operators can tell an
	// outage from a bug.
	ErrUnavailable = errors.New("idemgate/store: store unavailable")
	// ErrClosed marks the errors of a store its owner closed (Close): nothing this
	// process asks of it will be answered again. It comes with ErrUnavailable. The
	// gate's background give-backs end on it instead of retrying for as long as the
	// process lives.
	ErrClosed = errors.New("idemgate/store: the store is closed")
)

// State is where a claim stands.
type State string

const (
	// StateClaimed: an attempt holds the claim and may still be running until its lease passes.
	StateClaimed State = "claimed"
	// StateUnknown: the owning attempt ended without proof either way (timeout, dropped
	// connection, unmarked error, panic). The side effect may have happened.
	StateUnknown State = "unknown"
	// StateCompleted: the write finished and its result is stored.
	StateCompleted State = "completed"
	// StateReleased: the write definitely did not happen; the next attempt may run.
	StateReleased State = "released"
)

// Outcome is what Begin found and did.
type Outcome string

const (
	// OutcomeClaimed: no live record (none, released, or past its window): the caller now owns a new claim.
	OutcomeClaimed Outcome = "claimed"
	// OutcomeTakenOver: the earlier owner is gone with the outcome unknown and the claim
	// asked to take over: the caller now owns it and runs again with the same key.
	OutcomeTakenOver Outcome = "taken-over"
	// OutcomeCompleted: a finished write with the same arguments; Record holds its result.
	OutcomeCompleted Outcome = "completed"
	// OutcomeConflict: a live record with a different args hash.
	OutcomeConflict Outcome = "conflict"
	// OutcomeInFlight: another attempt holds the claim and its lease has not passed.
	OutcomeInFlight Outcome = "in-flight"
	// OutcomeUnknown: the earlier owner is gone with the outcome unknown and the claim
	// did not ask to take over. Nothing was changed.
	OutcomeUnknown Outcome = "unknown"
)

// Record is the stored state of one key.
type Record struct {
	Key      string
	Activity string
	Effect   string
	ArgsHash string
	// Args is the canonical JSON of the arguments: the exact call, printed when a
	// write is withheld.
	Args  []byte
	State State
	// Owner is the fencing token of the attempt that holds (or last held) the claim.
	Owner string
	// Lease is when the owning attempt's deadline passes; until then it may be running.
	Lease time.Time
	// Result is the encoded result (a Temporal payload) of a completed write.
	Result []byte
	// ResultOmitted: completed, but the result was over the size limit and not stored.
	ResultOmitted bool
	// WorkflowID and RunID are the workflow execution of the attempt that holds (or
	// last held) the claim: the activity's own workflow.
	WorkflowID string
	RunID      string
	// RootWorkflowID is the workflow ID of the root of that workflow's chain (the
	// workflow itself when it has no parent): the execution whose reset can re-create
	// the call with the same key, under a child workflow ID of its own (see
	// PastWindowForOther, Root). Empty in records written before schema 9 (SQLite) /
	// 10 (PostgreSQL) and from headers of older workflow workers.
	RootWorkflowID string
	Attempt        int32
	// Claims counts how often the key was claimed in this window (first claim, takeovers, re-claims after release).
	Claims int
	// MayHaveSent: an earlier attempt may have reached the vendor. Abandon and a
	// takeover set it; it is never cleared but by a person's Resolve to
	// StateReleased ("not sent"). While it holds, a Release leaves StateUnknown
	// (see ReleasedState) and CreatedAt does not move.
	MayHaveSent bool
	// CreatedAt is when the claim began that may have reached the outside world
	// (the start of a vendor's deduplication window): a takeover keeps it; a
	// re-claim after a release starts anew.
	CreatedAt time.Time
	UpdatedAt time.Time
	// ExpiresAt is when the record is forgotten (see Expired): a later Begin treats
	// it as absent and Sweep removes it. Never before Lease+LeaseMargin of a claim.
	ExpiresAt time.Time
	// Sent is the evidence, recorded by the keyed transports of the claims since
	// CreatedAt, each tagged with its claim (Sent.Owner), that the key left to a
	// vendor that deduplicates on it (see ApplySent, Exits, ResendWindow). A fresh
	// claim starts with none; a takeover keeps it, with a blank for a claim that
	// recorded none.
	Sent []Sent
}

// Claim asks Begin for ownership of a key.
type Claim struct {
	Key      string
	Activity string
	Effect   string
	// EffectSource is what decided Effect (see Receipt.EffectSource); the claim's
	// receipt carries it.
	EffectSource string
	ArgsHash     string
	Args         []byte
	// Owner is a fencing token unique to this attempt.
	Owner string
	// Lease is this attempt's deadline.
	Lease time.Time
	// Window is how long the record is remembered from Now (and, after Complete,
	// from completion), and at least until Lease+LeaseMargin (see Claim.Expires).
	Window time.Duration
	// TakeOver: when the earlier owner is gone with the outcome unknown, take the claim
	// (idempotent writes) instead of reporting OutcomeUnknown (destructive ones).
	TakeOver   bool
	WorkflowID string
	RunID      string
	// RootWorkflowID is the workflow ID of the root of the claiming workflow's chain
	// (Record.RootWorkflowID): "" when unknown (an older workflow worker), and for
	// a standalone activity.
	RootWorkflowID string
	Attempt        int32
	// Now is the caller's clock; stores never read their own, so tests can move time.
	Now time.Time
}

// Transition moves an owned claim to its next state. Receipt is appended in the same
// atomic step: no receipt, no transition.
type Transition struct {
	Key   string
	Owner string
	Now   time.Time
	// Result and ResultOmitted are for Complete.
	Result        []byte
	ResultOmitted bool
	// Window is for Complete: the result is remembered until Now+Window.
	Window  time.Duration
	Receipt Receipt
	// Witness names the witness that settles the record, for Resolve: "" for a
	// person (the Receipt's Actor). A witness's settlement follows its own rules (see
	// ApplyResolve): "sent" once the owner is gone, "not sent" only when it was
	// asked (AskedAt) at or after the owner's lease.
	Witness string
	// AskedAt is when the witness was asked, for Resolve by a witness: its answer
	// describes the world from then on, and a "not sent" asked before the owner's
	// lease passed proves nothing (the attempt may still reach the vendor after).
	AskedAt time.Time
}

// Pause is a kill switch kept in the store: every gate that reads it refuses the
// writes it matches (reads are never paused). Exactly one of Activity and Effect is
// set: one activity type, or every activity of one effect class.
type Pause struct {
	// Activity pauses the writes of this activity type.
	Activity string
	// Effect pauses every write of this class ("destructive", "idempotent-write").
	Effect string
	// Actor is who paused, Reason why, Time when; the gate's refusal quotes them.
	Actor  string
	Reason string
	Time   time.Time
}

// Valid reports whether exactly one of Activity and Effect is set.
func (p Pause) Valid() error {
	if (p.Activity == "") == (p.Effect == "") {
		return errors.New("idemgate/store: a pause names exactly one of an activity and an effect")
	}
	return nil
}

// Matches reports whether p pauses a write of this activity and effect.
func (p Pause) Matches(activity, effect string) bool {
	if p.Activity != "" {
		return p.Activity == activity
	}
	return p.Effect == effect
}

// Scope names what p pauses: "activity ChargeCard" or "effect destructive".
func (p Pause) Scope() string {
	if p.Activity != "" {
		return "activity " + p.Activity
	}
	return "effect " + p.Effect
}

// Gate is what a worker needs to gate activities: claim a key, move its claim,
// read its record, append receipts and read the pauses. A backend written only for
// workers (or a test double) implements Gate; storetest.RunGate checks it. Every
// method is safe for concurrent use by many goroutines (and, for durable backends,
// many processes).
//
// Begin is the atomic claim: of all concurrent Begins on one key with no live record,
// exactly one gets OutcomeClaimed. When Begin claims or takes over, it appends a
// receipt (DecisionClaimed or DecisionTakenOver) in the same atomic step.
//
// Complete, Release and Abandon succeed only for the current owner of a claim in
// StateClaimed, and return ErrNotOwner otherwise.
type Gate interface {
	Begin(ctx context.Context, c Claim) (Outcome, Record, error)
	// Complete stores the result: StateCompleted.
	Complete(ctx context.Context, t Transition) error
	// Release records a definite failure of this attempt: StateReleased, the next
	// Begin claims anew; or StateUnknown when an earlier attempt may have reached the
	// vendor (Record.MayHaveSent, see ReleasedState).
	Release(ctx context.Context, t Transition) error
	// Abandon records that the owner ended with the outcome unknown: StateUnknown,
	// MayHaveSent.
	Abandon(ctx context.Context, t Transition) error
	// Get returns the record of a key, or ErrNotFound.
	Get(ctx context.Context, key string) (Record, error)
	// Append adds a receipt. Receipts are never changed or removed.
	Append(ctx context.Context, r Receipt) error
	// Pauses lists the pauses in force, oldest first.
	Pauses(ctx context.Context) ([]Pause, error)
	// RecordSent adds evidence s, tagged with owner (s.Owner), to the record of key
	// for its current owner, once per claim (see ApplySent): a keyed transport
	// calls it just before the key leaves. It is
	// committed before it returns, but need not be synced: losing it only makes a
	// later re-send be refused. ErrNotOwner when owner no longer holds the claim.
	RecordSent(ctx context.Context, key, owner string, s Sent) error
	// Identity names this store: created once and kept in the store, the same for
	// every worker that opens it (a memory store: one per instance). Workflow
	// workers send it beside the key, and an activity worker on another store
	// refuses the key rather than claim it a second time elsewhere.
	Identity() string
}

// Operator is what a person or a tool needs to inspect and settle keys: read
// records and receipts, list and resolve the keys that block, pause and resume
// writes, sweep expired records. Every method is safe for concurrent use.
//
// Resolve succeeds only for the current owner of a Resolvable claim, and returns
// ErrNotOwner otherwise.
type Operator interface {
	// Get returns the record of a key, or ErrNotFound.
	Get(ctx context.Context, key string) (Record, error)
	// Receipts lists receipts matching f, oldest first.
	Receipts(ctx context.Context, f ReceiptFilter) ([]Receipt, error)
	// Sweep removes at most limit records that are Expired at now and reports how
	// many it removed. Receipts are kept.
	Sweep(ctx context.Context, now time.Time, limit int) (int, error)

	// Pending lists at most limit (<= 0: all) records that need a witness or a
	// person at now (see Listed): those that block their key (Blocking: the owner is
	// gone — ended without proof, or its lease passed — and nobody knows whether its
	// write happened), and the destructive claims still within their lease on which
	// an attempt was already refused (RefusedWhileRunning, read from the key's
	// receipts: RefusedSinceClaim). Oldest CreatedAt first (then by key). A person
	// may resolve a listed record from ResolvableFrom on; a witness once OwnerGone.
	Pending(ctx context.Context, now time.Time, limit int) ([]Record, error)
	// Resolve settles a Resolvable record of owner t.Owner for a person or reconciler:
	// to StateCompleted (the write happened; t.Result is returned to the next
	// attempt, remembered until t.Now+t.Window) or StateReleased (it did not; the
	// next attempt runs, and MayHaveSent is cleared). See ApplyResolve. t.Receipt (DecisionResolved) is appended
	// in the same atomic step. ErrNotOwner when the owner changed or the record does
	// not block (a live claim, a completed or released one); ErrNotFound when there is
	// no record.
	Resolve(ctx context.Context, t Transition, to State) error

	// Pause stores p (replacing an earlier pause of the same scope) and appends its
	// receipt (PauseReceipt, DecisionPaused) in the same atomic step.
	Pause(ctx context.Context, p Pause) error
	// Resume removes the pause of p's scope (p.Activity or p.Effect) and appends its
	// receipt (DecisionResumed, with p's Actor, Reason and Time) in the same atomic
	// step. ErrNotFound when that scope is not paused.
	Resume(ctx context.Context, p Pause) error
	// Pauses lists the pauses in force, oldest first.
	Pauses(ctx context.Context) ([]Pause, error)
}

// Store is a whole backend: what workers need to gate and what operators need to
// inspect and resolve. store/memory, store/sqlite and store/postgres implement it;
// storetest.Run checks it.
type Store interface {
	Gate
	Operator
}
