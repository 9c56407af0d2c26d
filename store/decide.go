package store

import (
	"context"
	"fmt"
	"time"
)

// LeaseMargin is the slack allowed past a claim's lease for workers whose clocks run
// behind: until Lease+LeaseMargin by the store's callers' clocks, the owner may still
// be sending. A claim is not expired, swept or resolved by a person before then, and
// a record is kept at least that long. (Pending lists it from its lease on: see
// Blocking.)
const LeaseMargin = 5 * time.Minute

// Expired reports whether r is forgotten at now: a later Begin treats it as absent
// and Sweep removes it. That is from r.ExpiresAt on, with two exceptions, whatever
// the window:
//   - a claim whose lease (plus LeaseMargin) has not passed: its attempt may still
//     be running and must be able to store its outcome;
//   - a destructive write whose outcome nobody knows (StateUnknown, or StateClaimed
//     with its owner gone): its attempt may have reached the vendor, so the key
//     stays blocked until a person resolves it (ApplyResolve) — forgetting it
//     would let a later attempt send again;
//   - a finished destructive write of a workflow (ResetHeld): Temporal can reset a
//     running workflow at any time and a closed one within its namespace's
//     retention, and the reset run sends the same key again. It is kept while its
//     workflow can still be reset: only Temporal's word that it cannot ends that
//     (Forgettable), never time alone. (Begin still lets another workflow's claim
//     of the key past the window start a new write: see Decide.)
func Expired(r Record, now time.Time) bool {
	if r.State == StateClaimed && now.Before(r.Lease.Add(LeaseMargin)) {
		return false
	}
	if UnknownOutcome(r) || ResetHeld(r) {
		return false
	}
	return !now.Before(r.ExpiresAt)
}

// ResetHeld reports whether r is a finished destructive write of a workflow
// (StateCompleted, a workflow ID: not a standalone activity), which Expired keeps
// past its window while the workflow can still be reset.
func ResetHeld(r Record) bool {
	return r.Effect == EffectDestructive && r.State == StateCompleted && r.WorkflowID != ""
}

// Forgettable reports whether a sweep that asked Temporal about r's root workflow
// (Root(r): the workflow whose reset can re-create r's call) may forget r at now: r
// is Expired, or it is ResetHeld, past its window, and Temporal answered that no run
// of Root(r) can be reset any more (resettable false: no run of that workflow ID is
// open or closed within the namespace's retention). Without an answer from
// Temporal, pass resettable true: the record is kept.
func Forgettable(r Record, now time.Time, resettable bool) bool {
	if Expired(r, now) {
		return true
	}
	return ResetHeld(r) && !resettable && !now.Before(r.ExpiresAt)
}

// Root is the workflow ID whose reset can re-create r's call: r.RootWorkflowID, or
// r.WorkflowID when the record has no root (written before the root was recorded).
func Root(r Record) string {
	if r.RootWorkflowID != "" {
		return r.RootWorkflowID
	}
	return r.WorkflowID
}

// ResetBy lists the workflow IDs whose reset can send r's key again: Root(r), and
// r's own workflow ID when that is another (a child can outlive its root and be reset
// itself). A sweep forgets a ResetHeld record past its window only when Temporal has
// no run of any of them (Forgettable with resettable false).
func ResetBy(r Record) []string {
	root := Root(r)
	if r.WorkflowID == "" || r.WorkflowID == root {
		return []string{root}
	}
	return []string{root, r.WorkflowID}
}

// PastWindowForOther reports whether a claim c treats the ResetHeld record r as
// absent: r's window passed and c comes from another workflow chain (a business key
// of WithKey used again: past the window, a new write). A claim from r's own
// workflow ID, or from a workflow of the same root (Root: a child re-created under a
// new SDK-generated workflow ID by a reset of its parent or grandparent), is a reset
// (or a re-run) of the execution that sent it, and gets the stored result. A record
// or claim without a root compares by its workflow ID; a claim is another chain's
// only when both its workflow ID and its root differ from the record's.
func PastWindowForOther(r Record, c Claim) bool {
	if !ResetHeld(r) || c.Now.Before(r.ExpiresAt) || c.WorkflowID == r.WorkflowID {
		return false
	}
	croot := c.RootWorkflowID
	if croot == "" {
		croot = c.WorkflowID
	}
	return croot != Root(r)
}

// EffectDestructive is the Effect string of a destructive write (interceptor.Destructive).
const EffectDestructive = "destructive"

// UnknownOutcome reports whether r is a destructive write's record whose outcome
// nobody knows: StateUnknown, or StateClaimed (its owner running, or gone). Such a
// record never expires (see Expired).
func UnknownOutcome(r Record) bool {
	return r.Effect == EffectDestructive && (r.State == StateUnknown || r.State == StateClaimed)
}

// Expires is the ExpiresAt that Begin gives a record c claims or takes over: c.Window
// from c.Now, and never before c.Lease+LeaseMargin (a takeover also never lowers the
// record's earlier ExpiresAt).
func (c Claim) Expires() time.Time {
	e := c.Now.Add(c.Window)
	if l := c.Lease.Add(LeaseMargin); l.After(e) {
		e = l
	}
	return e
}

// Decide is the claim rule every backend applies inside its atomic step, so all
// backends agree cell by cell. Given the existing record (found=false when there is
// none) and a claim, it returns the outcome, the record as it must be stored after
// Begin, and whether it must be written. When write is true, the backend stores next
// and appends ClaimReceipt(c, outcome) in the same commit.
func Decide(existing Record, found bool, c Claim) (outcome Outcome, next Record, write bool) {
	expired := found && (Expired(existing, c.Now) || PastWindowForOther(existing, c))
	if !found || expired || existing.State == StateReleased {
		next = fresh(c)
		if found && !expired {
			// A re-claim after a definite failure counts the claims, but starts the
			// clock anew: the earlier attempts certainly reached nobody (a released
			// record never has MayHaveSent; see ReleasedState).
			next.Claims = existing.Claims + 1
		}
		return OutcomeClaimed, next, true
	}
	if existing.ArgsHash != c.ArgsHash {
		return OutcomeConflict, existing, false
	}
	switch existing.State {
	case StateCompleted:
		return OutcomeCompleted, existing, false
	case StateClaimed:
		if c.Now.Before(existing.Lease) {
			return OutcomeInFlight, existing, false
		}
	}
	// Owner gone (lease passed, or the owner said it ended without proof): outcome unknown.
	if !c.TakeOver {
		return OutcomeUnknown, existing, false
	}
	next = existing
	next.State = StateClaimed
	next.Owner = c.Owner
	next.Lease = c.Lease
	next.WorkflowID, next.RunID, next.RootWorkflowID, next.Attempt = c.WorkflowID, c.RunID, c.RootWorkflowID, c.Attempt
	next.Claims = existing.Claims + 1
	next.UpdatedAt = c.Now
	// The evidence of every owner before is kept, each tagged with its claim, and a
	// blank for the outgoing claim if it recorded none (keptSent): the record stands
	// for every attempt since CreatedAt, and a re-send or a witness must see every
	// exit the key took (ResendWindow, Exits). The new owner records its own.
	next.Sent = keptSent(existing)
	// The owner before may have reached the vendor: remember it, keep CreatedAt
	// (the vendor's window started then), and keep the record while this attempt
	// may run.
	next.MayHaveSent = true
	if e := c.Expires(); e.After(next.ExpiresAt) {
		next.ExpiresAt = e
	}
	return OutcomeTakenOver, next, true
}

func fresh(c Claim) Record {
	return Record{
		Key:            c.Key,
		Activity:       c.Activity,
		Effect:         c.Effect,
		ArgsHash:       c.ArgsHash,
		Args:           c.Args,
		State:          StateClaimed,
		Owner:          c.Owner,
		Lease:          c.Lease,
		WorkflowID:     c.WorkflowID,
		RunID:          c.RunID,
		Attempt:        c.Attempt,
		Claims:         1,
		RootWorkflowID: c.RootWorkflowID,
		CreatedAt:      c.Now,
		UpdatedAt:      c.Now,
		ExpiresAt:      c.Expires(),
	}
}

// ClaimReceipt is the receipt Begin appends when it claims or takes over.
func ClaimReceipt(c Claim, o Outcome) Receipt {
	d := DecisionClaimed
	if o == OutcomeTakenOver {
		d = DecisionTakenOver
	}
	return Receipt{
		Time:         c.Now,
		Key:          c.Key,
		Activity:     c.Activity,
		Effect:       c.Effect,
		Decision:     d,
		ArgsHash:     c.ArgsHash,
		WorkflowID:   c.WorkflowID,
		RunID:        c.RunID,
		Attempt:      c.Attempt,
		EffectSource: c.EffectSource,
	}
}

// Apply is the transition rule for Complete (to StateCompleted), Release (to
// ReleasedState of the record) and Abandon (to StateUnknown): it checks ownership
// and returns the record as it must be stored, or ErrNotOwner. Backends that run
// the check in SQL must match it: the owner must match and the state must be
// StateClaimed.
func Apply(existing Record, to State, t Transition) (Record, error) {
	if existing.Owner != t.Owner || existing.State != StateClaimed {
		return existing, ErrNotOwner
	}
	if to == StateReleased {
		to = ReleasedState(existing)
	}
	next := moved(existing, to, t)
	if to == StateUnknown {
		next.MayHaveSent = true
	}
	return next, nil
}

// ReleasedState is the state a Release of r leaves: StateReleased, the key free
// again, unless an earlier attempt may have reached the vendor (r.MayHaveSent).
// Then this attempt's definite failure proves nothing about the earlier one, and
// the record becomes StateUnknown until a person resolves it.
func ReleasedState(r Record) State {
	if r.MayHaveSent {
		return StateUnknown
	}
	return StateReleased
}

// moved is the record after an allowed transition to state to: a completed record
// keeps the result until t.Now+t.Window, and at least as long as its claim was kept.
func moved(existing Record, to State, t Transition) Record {
	next := existing
	next.State = to
	next.UpdatedAt = t.Now
	if to == StateCompleted {
		next.Result = t.Result
		next.ResultOmitted = t.ResultOmitted
		// Kept for the window from now, and never less than the claim was: until the
		// completing attempt's lease (plus LeaseMargin) has passed, its completion may
		// not have reached Temporal (a crash right after this commit), and Temporal's
		// retry, which comes once that lease passed, must find the stored result.
		next.ExpiresAt = t.Now.Add(t.Window)
		if existing.ExpiresAt.After(next.ExpiresAt) {
			next.ExpiresAt = existing.ExpiresAt
		}
	}
	return next
}

// ReceiptWithTime returns the receipt to append, with a zero time filled from the
// transition's clock and an empty key from the transition.
func (t Transition) ReceiptWithTime() Receipt {
	r := t.Receipt
	if r.Time.IsZero() {
		r.Time = t.Now
	}
	if r.Key == "" {
		r.Key = t.Key
	}
	return r
}

// Resolvable reports whether a person may settle r at now as sent: the owner ended
// without proof (StateUnknown), or it held the claim past its lease plus LeaseMargin
// (StateClaimed; before then a worker whose clock runs behind may still be
// sending). ApplyResolve of a person (no Transition.Witness) needs it; ResolvableFrom
// says from when. A person's "not sent" needs more: NotSentResolvable.
func Resolvable(r Record, now time.Time) bool {
	return r.State == StateUnknown || r.State == StateClaimed && !now.Before(r.Lease.Add(LeaseMargin))
}

// ResolvableFrom is when a person may settle r as sent (Resolvable): r's lease plus
// LeaseMargin for a claim, the zero time for an unknown record (at once). As not
// sent: NotSentFrom.
func ResolvableFrom(r Record) time.Time {
	if r.State == StateClaimed {
		return r.Lease.Add(LeaseMargin)
	}
	return time.Time{}
}

// NotSentResolvable reports whether a person may settle r at now as not sent: it is
// Resolvable, and now is at or after NotSentFrom(r) — the owner's lease plus
// LeaseMargin, for an unknown record too. An attempt that gave up without proof
// may have written a request just before, which lands later (an HTTP client that
// timed out mid-request, a vendor that queued it): a look at the vendor before then
// can miss it, and a "not sent" resting on it sends the write twice (atk-op finding
// 4; claimmodel's TestPersonNotSentOnAnAbandonedKeyWaitsForTheMargin). It is the
// witness's rule (Settleable), with the person's own clock for when they looked.
func NotSentResolvable(r Record, now time.Time) bool {
	return Resolvable(r, now) && !now.Before(NotSentFrom(r))
}

// OwnerGone reports whether r's outcome is open with its owner gone at now: the
// owner ended without proof (StateUnknown), or its lease passed (StateClaimed; no
// LeaseMargin: by now the attempt's deadline has passed on the owner's own clock
// too, and Temporal has scheduled or refused the next attempt). A witness may settle
// such a record (Settleable); a person waits for Resolvable.
func OwnerGone(r Record, now time.Time) bool {
	return r.State == StateUnknown || r.State == StateClaimed && !now.Before(r.Lease)
}

// Blocking reports whether r blocks its key at now with an unknown outcome: its
// owner is gone (OwnerGone) and it is not Expired. A destructive write with such a
// record is refused until a witness or a person settles it. Pending lists these at
// once, before a person may resolve them (ResolvableFrom).
func Blocking(r Record, now time.Time) bool {
	return OwnerGone(r, now) && !Expired(r, now)
}

// RefusedWhileRunning reports whether Pending lists r at now although its owner may
// still be running: a destructive claim whose lease has not passed, on which an
// attempt has already been refused (refused: see RefusedSinceClaim). Such an attempt
// has made its workflow wait, or fail when it was not retryable, so an operator
// must see the key before its owner is gone.
func RefusedWhileRunning(r Record, now time.Time, refused bool) bool {
	return refused && r.Effect == EffectDestructive && r.State == StateClaimed && now.Before(r.Lease)
}

// Listed is the rule of Operator.Pending: r blocks its key (Blocking), or an attempt
// was refused on its live claim (RefusedWhileRunning). refused is RefusedSinceClaim
// of the key's receipts.
func Listed(r Record, now time.Time, refused bool) bool {
	return Blocking(r, now) || RefusedWhileRunning(r, now, refused)
}

// RefusedSinceClaim reports whether the receipts of one key, in append order, show
// an attempt refused (DecisionRefusedInFlight) after the key's last claim or takeover
// (DecisionClaimed, DecisionTakenOver): an attempt met the current claim and was
// refused. Receipt IDs, not times, order them: times come from the clocks of
// different workers. Backends that look in SQL must match it (the latest of those
// three decisions is a refusal).
func RefusedSinceClaim(rs []Receipt) bool {
	for i := len(rs) - 1; i >= 0; i-- {
		switch rs[i].Decision {
		case DecisionRefusedInFlight:
			return true
		case DecisionClaimed, DecisionTakenOver:
			return false
		}
	}
	return false
}

// ApplyResolve is the rule of Resolve: a Settleable record of owner t.Owner moves
// to StateCompleted (with t.Result, remembered until t.Now+t.Window) or
// StateReleased. Only a release ("not sent") clears MayHaveSent. Unlike Blocking it
// does not look at the window: an operator may still settle a record the next Begin
// would forget. Anything else is ErrNotOwner. Backends that run the check in SQL
// must match it.
func ApplyResolve(existing Record, to State, t Transition) (Record, error) {
	if to != StateCompleted && to != StateReleased {
		return existing, fmt.Errorf("idemgate/store: resolve to %q: want %q or %q", to, StateCompleted, StateReleased)
	}
	if existing.Owner != t.Owner || !Settleable(existing, to, t) {
		return existing, ErrNotOwner
	}
	next := moved(existing, to, t)
	if to == StateReleased {
		next.MayHaveSent = false
	}
	return next, nil
}

// Settleable reports whether Resolve may move r to to for t:
//   - a person (t.Witness ""): r is Resolvable at t.Now (the owner ended, or its
//     lease plus LeaseMargin passed), and for "not sent" NotSentResolvable (the
//     owner's lease plus LeaseMargin passed, for an unknown record too);
//   - a witness: the owner is gone (StateUnknown, or StateClaimed with its lease
//     passed at t.Now); and for "not sent" (StateReleased) the witness was asked at
//     or after r's lease plus LeaseMargin (t.AskedAt): an answer from before then
//     is true of its moment only, and the attempt may still reach the vendor after
//     it — a request written just before the deadline lands later, a worker whose
//     clock runs behind sends past the lease, for up to LeaseMargin (the claim model
//     finds the second charge with the lease alone: claimmodel's
//     TestWitnessNotSentInsideTheMargin). Every attempt before the owner had an
//     earlier lease, so the owner's covers them all.
func Settleable(r Record, to State, t Transition) bool {
	if t.Witness == "" {
		if to == StateReleased {
			return NotSentResolvable(r, t.Now)
		}
		return Resolvable(r, t.Now)
	}
	if !OwnerGone(r, t.Now) {
		return false
	}
	return to != StateReleased || !t.AskedAt.IsZero() && !t.AskedAt.Before(NotSentFrom(r))
}

// NotSentFrom is the earliest time a witness's "not sent" about r counts when it
// was asked (Settleable): r's lease plus LeaseMargin.
func NotSentFrom(r Record) time.Time { return r.Lease.Add(LeaseMargin) }

// PauseReceipt is the receipt Pause (DecisionPaused) and Resume (DecisionResumed) append.
func PauseReceipt(p Pause, d Decision) Receipt {
	return Receipt{Time: p.Time, Activity: p.Activity, Effect: p.Effect, Decision: d, Actor: p.Actor, Reason: p.Reason}
}

// HeldSweeper is implemented by stores that can forget the finished destructive
// writes kept while their workflow can be reset (ResetHeld): a sweep asks Temporal
// about each one's workflows (ResetBy) and forgets only those Temporal says can no
// longer be reset (`idemgate sweep --temporal-address`). store/memory, store/sqlite and
// store/postgres implement it. Every method is safe for concurrent use.
type HeldSweeper interface {
	// Held lists at most limit (<= 0: all) ResetHeld records whose window passed at
	// now (ExpiresAt at or before now), oldest ExpiresAt first (then by key).
	Held(ctx context.Context, now time.Time, limit int) ([]Record, error)
	// Forget removes r's key's record when it is still r — the same owner, completed,
	// ResetHeld, its window passed at now — for a sweep that heard from Temporal that
	// none of ResetBy(r) can be reset any more (Forgettable(r, now, false)). It reports
	// whether it removed it; receipts are kept.
	Forget(ctx context.Context, r Record, now time.Time) (bool, error)
}
