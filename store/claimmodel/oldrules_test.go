package claimmodel

import (
	"fmt"
	"time"

	"github.com/idemgate/idemgate/store"
)

// oldRules are the claim rules before issue 10 (store/decide.go at 0f4bdd8 and the
// gate's vendor-window check of then), copied so the model can show it finds their
// holes.
func oldRules() Rules {
	return Rules{
		Decide:       oldDecide,
		Apply:        oldApply,
		ApplyResolve: oldApplyResolve,
		Blocking:     oldBlocking,
		Expired:      func(r store.Record, now time.Time) bool { return !now.Before(r.ExpiresAt) },
		Forgettable:  func(r store.Record, now time.Time, _ bool) bool { return !now.Before(r.ExpiresAt) },
		Resend:       func(first, now time.Time, w, _ time.Duration) bool { return now.Before(first.Add(w)) },
		ResendMargin: func(time.Duration) time.Duration { return 0 },
		MayHaveSent:  func(store.Record) bool { return false },
		ApplySent:    noEvidence,
		ResendWindow: trustTheWindow,
	}
}

func oldDecide(existing store.Record, found bool, c store.Claim) (outcome store.Outcome, next store.Record, write bool) {
	if !found || !c.Now.Before(existing.ExpiresAt) || existing.State == store.StateReleased {
		next = oldFresh(c)
		if found && existing.State == store.StateReleased && c.Now.Before(existing.ExpiresAt) {
			next.Claims = existing.Claims + 1
		}
		return store.OutcomeClaimed, next, true
	}
	if existing.ArgsHash != c.ArgsHash {
		return store.OutcomeConflict, existing, false
	}
	switch existing.State {
	case store.StateCompleted:
		return store.OutcomeCompleted, existing, false
	case store.StateClaimed:
		if c.Now.Before(existing.Lease) {
			return store.OutcomeInFlight, existing, false
		}
	}
	if !c.TakeOver {
		return store.OutcomeUnknown, existing, false
	}
	next = existing
	next.State = store.StateClaimed
	next.Owner = c.Owner
	next.Lease = c.Lease
	next.WorkflowID, next.RunID, next.Attempt = c.WorkflowID, c.RunID, c.Attempt
	next.Claims = existing.Claims + 1
	next.UpdatedAt = c.Now
	return store.OutcomeTakenOver, next, true
}

func oldFresh(c store.Claim) store.Record {
	return store.Record{
		Key: c.Key, Activity: c.Activity, Effect: c.Effect, ArgsHash: c.ArgsHash, Args: c.Args,
		State: store.StateClaimed, Owner: c.Owner, Lease: c.Lease,
		WorkflowID: c.WorkflowID, RunID: c.RunID, Attempt: c.Attempt, Claims: 1,
		CreatedAt: c.Now, UpdatedAt: c.Now, ExpiresAt: c.Now.Add(c.Window),
	}
}

func oldApply(existing store.Record, to store.State, t store.Transition) (store.Record, error) {
	if existing.Owner != t.Owner || existing.State != store.StateClaimed {
		return existing, store.ErrNotOwner
	}
	return oldMoved(existing, to, t), nil
}

func oldMoved(existing store.Record, to store.State, t store.Transition) store.Record {
	next := existing
	next.State = to
	next.UpdatedAt = t.Now
	if to == store.StateCompleted {
		next.Result = t.Result
		next.ResultOmitted = t.ResultOmitted
		next.ExpiresAt = t.Now.Add(t.Window)
	}
	return next
}

func oldBlocking(r store.Record, now time.Time) bool {
	if !now.Before(r.ExpiresAt) {
		return false
	}
	return r.State == store.StateUnknown || r.State == store.StateClaimed && !now.Before(r.Lease)
}

func oldApplyResolve(existing store.Record, to store.State, t store.Transition) (store.Record, error) {
	if to != store.StateCompleted && to != store.StateReleased {
		return existing, fmt.Errorf("idemgate/store: resolve to %q", to)
	}
	if existing.Owner != t.Owner ||
		!(existing.State == store.StateUnknown || existing.State == store.StateClaimed && !t.Now.Before(existing.Lease)) {
		return existing, store.ErrNotOwner
	}
	return oldMoved(existing, to, t), nil
}

// rulesBeforeUnknownKept are the current rules but for store.Expired as it was
// before a destructive record with no known outcome was kept past its window
// (session 16): it expired at ExpiresAt like any finished record.
func rulesBeforeUnknownKept() Rules {
	r := Current()
	expired := func(rec store.Record, now time.Time) bool {
		if rec.State == store.StateClaimed && now.Before(rec.Lease.Add(store.LeaseMargin)) {
			return false
		}
		return !now.Before(rec.ExpiresAt)
	}
	r.Expired = expired
	r.Forgettable = func(rec store.Record, now time.Time, _ bool) bool { return expired(rec, now) }
	r.Decide = func(existing store.Record, found bool, c store.Claim) (store.Outcome, store.Record, bool) {
		if found && expired(existing, c.Now) {
			return store.Decide(store.Record{}, false, c) // what Decide did over an expired record
		}
		return store.Decide(existing, found, c)
	}
	r.Blocking = func(rec store.Record, now time.Time) bool { return store.Resolvable(rec, now) && !expired(rec, now) }
	return r
}

// rulesBeforeCompletionKept are the current rules but for a completion as it was
// before session 16: the record was kept for the window from its completion only,
// even when the completing attempt's lease ran longer (and, as then, a finished
// destructive record expired: rulesBeforeResetHeld).
func rulesBeforeCompletionKept() Rules {
	r := rulesBeforeResetHeld() // before issue 18 too: a finished destructive record expired

	early := func(apply func(store.Record, store.State, store.Transition) (store.Record, error)) func(store.Record, store.State, store.Transition) (store.Record, error) {
		return func(existing store.Record, to store.State, t store.Transition) (store.Record, error) {
			next, err := apply(existing, to, t)
			if err == nil && next.State == store.StateCompleted {
				next.ExpiresAt = t.Now.Add(t.Window)
			}
			return next, err
		}
	}
	r.Apply, r.ApplyResolve = early(store.Apply), early(store.ApplyResolve)
	return r
}

// noEvidence and trustTheWindow are the rules before issue 18 item 12: nothing
// recorded that the key left through a keyed transport, and a re-send trusted the
// configured vendor window alone.
func noEvidence(existing store.Record, _ string, _ store.Sent) (store.Record, bool, error) {
	return existing, false, nil
}

func trustTheWindow(_ store.Record, w time.Duration) (time.Duration, bool) { return w, true }

// rulesBeforeEvidence are the current rules but for the re-send, which trusts the
// configuration.
func rulesBeforeEvidence() Rules {
	r := Current()
	r.ApplySent, r.ResendWindow = noEvidence, trustTheWindow
	return r
}

// rulesBeforeResetHeld are the current rules but for store.Expired as it was before
// issue 18 (item 14): a finished destructive write expired at ExpiresAt like any
// finished record, while its workflow could still be reset.
func rulesBeforeResetHeld() Rules {
	r := Current()
	expired := func(rec store.Record, now time.Time) bool {
		if rec.State == store.StateClaimed && now.Before(rec.Lease.Add(store.LeaseMargin)) {
			return false
		}
		if store.UnknownOutcome(rec) {
			return false
		}
		return !now.Before(rec.ExpiresAt)
	}
	r.Expired = expired
	r.Forgettable = func(rec store.Record, now time.Time, _ bool) bool { return expired(rec, now) }
	r.Decide = func(existing store.Record, found bool, c store.Claim) (store.Outcome, store.Record, bool) {
		if found && expired(existing, c.Now) {
			return store.Decide(store.Record{}, false, c)
		}
		return store.Decide(existing, found, c)
	}
	r.Blocking = func(rec store.Record, now time.Time) bool { return store.Resolvable(rec, now) && !expired(rec, now) }
	return r
}

// rulesBeforeRoot are the rules of item 14 of issue 18, before the record carried
// its root workflow ID (findings F1 and F2 of the gate attack): a claim past the
// window from another workflow ID was a new write, and a sweep asked Temporal about
// the record's own workflow ID.
func rulesBeforeRoot() Rules {
	r := Current()
	r.Decide = func(existing store.Record, found bool, c store.Claim) (store.Outcome, store.Record, bool) {
		existing.RootWorkflowID, c.RootWorkflowID = "", ""
		return store.Decide(existing, found, c)
	}
	r.SweepAsks = func(rec store.Record) []string { return []string{rec.WorkflowID} }
	return r
}

// rulesWitnessAnyTime are the current rules but for a witness's "not sent", which
// counts whenever it was asked (as if AskedAt were always past the owner's lease plus the margin):
// only the owner's being gone at delivery is checked.
func rulesWitnessAnyTime() Rules {
	r := Current()
	r.ApplyResolve = func(existing store.Record, to store.State, t store.Transition) (store.Record, error) {
		if t.Witness != "" {
			t.AskedAt = store.NotSentFrom(existing)
		}
		return store.ApplyResolve(existing, to, t)
	}
	return r
}

// rulesWitnessAskedAtDelivery are the current rules but for the time a witness's
// "not sent" is judged by: when it arrives (Transition.Now), not when it was asked.
func rulesWitnessAskedAtDelivery() Rules {
	r := Current()
	r.ApplyResolve = func(existing store.Record, to store.State, t store.Transition) (store.Record, error) {
		if t.Witness != "" {
			t.AskedAt = t.Now
		}
		return store.ApplyResolve(existing, to, t)
	}
	return r
}
