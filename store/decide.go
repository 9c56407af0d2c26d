package store

import (
	"fmt"
	"time"
)

// Decide is the claim rule every backend applies inside its atomic step, so all
// backends agree cell by cell. Given the existing record (found=false when there is
// none) and a claim, it returns the outcome, the record as it must be stored after
// Begin, and whether it must be written. When write is true, the backend stores next
// and appends ClaimReceipt(c, outcome) in the same commit.
func Decide(existing Record, found bool, c Claim) (outcome Outcome, next Record, write bool) {
	if !found || !c.Now.Before(existing.ExpiresAt) || existing.State == StateReleased {
		next = fresh(c)
		if found && existing.State == StateReleased && c.Now.Before(existing.ExpiresAt) {
			// A re-claim after a definite failure counts the claims, but starts the
			// clock anew: the earlier attempts certainly reached nobody.
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
	next.WorkflowID, next.RunID, next.Attempt = c.WorkflowID, c.RunID, c.Attempt
	next.Claims = existing.Claims + 1
	next.UpdatedAt = c.Now
	return OutcomeTakenOver, next, true
}

func fresh(c Claim) Record {
	return Record{
		Key:        c.Key,
		Activity:   c.Activity,
		Effect:     c.Effect,
		ArgsHash:   c.ArgsHash,
		Args:       c.Args,
		State:      StateClaimed,
		Owner:      c.Owner,
		Lease:      c.Lease,
		WorkflowID: c.WorkflowID,
		RunID:      c.RunID,
		Attempt:    c.Attempt,
		Claims:     1,
		CreatedAt:  c.Now,
		UpdatedAt:  c.Now,
		ExpiresAt:  c.Now.Add(c.Window),
	}
}

// ClaimReceipt is the receipt Begin appends when it claims or takes over.
func ClaimReceipt(c Claim, o Outcome) Receipt {
	d := DecisionClaimed
	if o == OutcomeTakenOver {
		d = DecisionTakenOver
	}
	return Receipt{
		Time:       c.Now,
		Key:        c.Key,
		Activity:   c.Activity,
		Effect:     c.Effect,
		Decision:   d,
		ArgsHash:   c.ArgsHash,
		WorkflowID: c.WorkflowID,
		RunID:      c.RunID,
		Attempt:    c.Attempt,
	}
}

// Apply is the transition rule for Complete (to StateCompleted), Release (to
// StateReleased) and Abandon (to StateUnknown): it checks ownership and returns the
// record as it must be stored, or ErrNotOwner. Backends that run the check in SQL
// must match it: the owner must match and the state must be StateClaimed.
func Apply(existing Record, to State, t Transition) (Record, error) {
	if existing.Owner != t.Owner || existing.State != StateClaimed {
		return existing, ErrNotOwner
	}
	return moved(existing, to, t), nil
}

// moved is the record after an allowed transition to state to: a completed record
// keeps the result until t.Now+t.Window.
func moved(existing Record, to State, t Transition) Record {
	next := existing
	next.State = to
	next.UpdatedAt = t.Now
	if to == StateCompleted {
		next.Result = t.Result
		next.ResultOmitted = t.ResultOmitted
		next.ExpiresAt = t.Now.Add(t.Window)
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

// Blocking reports whether r blocks its key at now with an unknown outcome: the
// owner ended without proof (StateUnknown) or its lease passed while it held the
// claim (StateClaimed), and the record is inside its window. A destructive write
// with such a record is refused until a person resolves it. Pending lists these.
func Blocking(r Record, now time.Time) bool {
	if !now.Before(r.ExpiresAt) {
		return false
	}
	return r.State == StateUnknown || r.State == StateClaimed && !now.Before(r.Lease)
}

// ApplyResolve is the rule of Resolve: a record of owner t.Owner in StateUnknown,
// or in StateClaimed with its lease passed at t.Now, moves to StateCompleted (with
// t.Result, remembered until t.Now+t.Window) or StateReleased. Unlike Blocking it
// does not look at the window: an operator may still settle a record the next Begin
// would forget. Anything else is ErrNotOwner. Backends that run the check in SQL
// must match it.
func ApplyResolve(existing Record, to State, t Transition) (Record, error) {
	if to != StateCompleted && to != StateReleased {
		return existing, fmt.Errorf("idemgate/store: resolve to %q: want %q or %q", to, StateCompleted, StateReleased)
	}
	if existing.Owner != t.Owner ||
		!(existing.State == StateUnknown || existing.State == StateClaimed && !t.Now.Before(existing.Lease)) {
		return existing, ErrNotOwner
	}
	return moved(existing, to, t), nil
}

// PauseReceipt is the receipt Pause (DecisionPaused) and Resume (DecisionResumed) append.
func PauseReceipt(p Pause, d Decision) Receipt {
	return Receipt{Time: p.Time, Activity: p.Activity, Effect: p.Effect, Decision: d, Actor: p.Actor, Reason: p.Reason}
}
