// Package memory is an in-process store.Store for tests and examples. It dies with
// the process: a claim that dies with the worker is exactly the duplicate idemgate
// exists to prevent, so production workers use store/sqlite or store/postgres.
package memory

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/idemgate/idemgate/store"
)

// Store keeps records and receipts in maps guarded by one mutex.
type Store struct {
	mu       sync.Mutex
	records  map[string]store.Record
	receipts []store.Receipt
	pauses   []store.Pause
	fail     error
	lastID   int64 // IDs only grow, also past a prune
	id       string
}

var (
	_ store.Store            = (*Store)(nil)
	_ store.Pruner           = (*Store)(nil)
	_ store.ReceiptPager     = (*Store)(nil)
	_ store.ReceiptHorizoner = (*Store)(nil)
)

// New returns an empty store.
func New() *Store {
	return &Store{records: make(map[string]store.Record), id: "memory-" + uuid.NewString()}
}

// Identity names this instance: two memory stores are two stores.
func (s *Store) Identity() string { return s.id }

// RecordSent adds evidence to the record of key for its owner; see store.ApplySent.
func (s *Store) RecordSent(_ context.Context, key, owner string, e store.Sent) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	existing, found := s.records[key]
	if !found {
		return store.ErrNotOwner
	}
	next, changed, err := store.ApplySent(existing, owner, e)
	if changed {
		s.records[key] = next
	}
	return err
}

// FailWith makes every later call return err (nil heals the store). Tests use it to
// show that writes fail closed while the store is down.
func (s *Store) FailWith(err error) {
	s.mu.Lock()
	s.fail = err
	s.mu.Unlock()
}

// Begin claims c.Key atomically; see store.Decide.
func (s *Store) Begin(_ context.Context, c store.Claim) (store.Outcome, store.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return "", store.Record{}, s.fail
	}
	existing, found := s.records[c.Key]
	outcome, next, write := store.Decide(existing, found, c)
	if write {
		next.Args = slices.Clone(next.Args)
		s.records[c.Key] = next
		s.appendLocked(store.ClaimReceipt(c, outcome))
	}
	return outcome, clone(next), nil
}

// Complete stores the result of the owner's write.
func (s *Store) Complete(_ context.Context, t store.Transition) error {
	return s.transition(store.StateCompleted, t)
}

// Release records a definite failure.
func (s *Store) Release(_ context.Context, t store.Transition) error {
	return s.transition(store.StateReleased, t)
}

// Abandon records an unknown outcome.
func (s *Store) Abandon(_ context.Context, t store.Transition) error {
	return s.transition(store.StateUnknown, t)
}

func (s *Store) transition(to store.State, t store.Transition) error {
	return s.move(t, store.ErrNotOwner, func(r store.Record) (store.Record, error) { return store.Apply(r, to, t) })
}

// move applies rule to t.Key's record and appends t's receipt, in one locked step;
// missing is the error for a key with no record.
func (s *Store) move(t store.Transition, missing error, rule func(store.Record) (store.Record, error)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	existing, found := s.records[t.Key]
	if !found {
		return missing
	}
	next, err := rule(existing)
	if err != nil {
		return err
	}
	next.Result = slices.Clone(next.Result)
	s.records[t.Key] = next
	s.appendLocked(t.ReceiptWithTime())
	return nil
}

// Get returns a copy of the record for key.
func (s *Store) Get(_ context.Context, key string) (store.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return store.Record{}, s.fail
	}
	r, ok := s.records[key]
	if !ok {
		return store.Record{}, store.ErrNotFound
	}
	return clone(r), nil
}

// Append adds a receipt.
func (s *Store) Append(_ context.Context, r store.Receipt) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	s.appendLocked(r)
	return nil
}

func (s *Store) appendLocked(r store.Receipt) {
	s.lastID++
	r.ID = s.lastID
	r.Call = slices.Clone(r.Call)
	s.receipts = append(s.receipts, r)
}

// Receipts returns copies of the matching receipts, oldest first.
func (s *Store) Receipts(_ context.Context, f store.ReceiptFilter) ([]store.Receipt, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return nil, s.fail
	}
	var out []store.Receipt
	for _, r := range s.receipts {
		if f.Match(r) {
			r.Call = slices.Clone(r.Call)
			out = append(out, r)
			if f.Limit > 0 && len(out) == f.Limit {
				break
			}
		}
	}
	return out, nil
}

// ReceiptPage lists one bounded page of f (store.ReceiptPager), in ID order,
// examining at most f.ScanLimit() receipts after the cursor: those of f's key,
// workflow or decision when it names one, else every one.
func (s *Store) ReceiptPage(_ context.Context, f store.ReceiptFilter) (store.ReceiptPage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return store.ReceiptPage{}, s.fail
	}
	limit, scan := f.PageLimit(), f.ScanLimit()
	f.AfterTime = time.Time{}
	drives := func(r store.Receipt) bool {
		switch {
		case f.Key != "":
			return r.Key == f.Key
		case f.WorkflowID != "":
			return r.WorkflowID == f.WorkflowID
		case f.Decision != "":
			return r.Decision == f.Decision
		}
		return true
	}
	var out []store.Receipt
	next, examined := f, 0
	for _, r := range s.receipts {
		if r.ID <= f.AfterID || !drives(r) {
			continue
		}
		if f.ThroughID > 0 && r.ID > f.ThroughID {
			break
		}
		examined++
		next.AfterID = r.ID
		if f.Match(r) {
			r.Call = slices.Clone(r.Call)
			out = append(out, r)
			if len(out) == limit {
				return store.ReceiptPage{Receipts: out, Next: next}, nil
			}
		}
		if examined == scan {
			return store.ReceiptPage{Receipts: out, Next: next}, nil
		}
	}
	return store.ReceiptPage{Receipts: out, Done: true, Next: next}, nil
}

// ReceiptHorizon is the last receipt ID (store.ReceiptHorizoner).
func (s *Store) ReceiptHorizon(context.Context) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return 0, s.fail
	}
	return s.lastID, nil
}

// Prune removes the receipts store.Prunable by p and appends the prune's
// receipt, in one locked step (the memory store has no transactions to bound).
func (s *Store) Prune(_ context.Context, p store.Prune) (int, error) {
	if err := p.Valid(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return 0, s.fail
	}
	n := len(s.receipts)
	s.receipts = slices.DeleteFunc(s.receipts, func(r store.Receipt) bool {
		_, found := s.records[r.Key]
		return store.Prunable(r, p, found)
	})
	removed := n - len(s.receipts)
	s.appendLocked(store.PruneReceipt(p, int64(removed)))
	return removed, nil
}

// Sweep removes up to limit expired records (store.Expired).
func (s *Store) Sweep(_ context.Context, now time.Time, limit int) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return 0, s.fail
	}
	n := 0
	for k, r := range s.records {
		if limit > 0 && n >= limit {
			break
		}
		if store.Expired(r, now) {
			delete(s.records, k)
			n++
		}
	}
	return n, nil
}

// Held lists the finished destructive writes kept past their window while their
// workflow can be reset (store.HeldSweeper).
func (s *Store) Held(_ context.Context, now time.Time, limit int) ([]store.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return nil, s.fail
	}
	var out []store.Record
	for _, r := range s.records {
		if store.ResetHeld(r) && !now.Before(r.ExpiresAt) {
			out = append(out, clone(r))
		}
	}
	slices.SortFunc(out, func(a, b store.Record) int {
		if c := a.ExpiresAt.Compare(b.ExpiresAt); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// Forget removes a held record Temporal says can no longer be reset (store.HeldSweeper).
func (s *Store) Forget(_ context.Context, r store.Record, now time.Time) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return false, s.fail
	}
	cur, ok := s.records[r.Key]
	if !ok || cur.Owner != r.Owner || !store.ResetHeld(cur) || !store.Forgettable(cur, now, false) {
		return false, nil
	}
	delete(s.records, r.Key)
	return true, nil
}

// Pending lists the records store.Listed names, oldest first.
func (s *Store) Pending(_ context.Context, now time.Time, limit int) ([]store.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return nil, s.fail
	}
	var out []store.Record
	for _, r := range s.records {
		if store.Blocking(r, now) || store.RefusedWhileRunning(r, now, true) && s.refusedSinceClaim(r.Key) {
			out = append(out, clone(r))
		}
	}
	slices.SortFunc(out, func(a, b store.Record) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// refusedSinceClaim is store.RefusedSinceClaim of key's receipts, read newest first.
func (s *Store) refusedSinceClaim(key string) bool {
	for i := len(s.receipts) - 1; i >= 0; i-- {
		if r := s.receipts[i]; r.Key == key {
			switch r.Decision {
			case store.DecisionRefusedInFlight:
				return true
			case store.DecisionClaimed, store.DecisionTakenOver:
				return false
			}
		}
	}
	return false
}

// Resolve settles a blocking record; see store.ApplyResolve.
func (s *Store) Resolve(_ context.Context, t store.Transition, to store.State) error {
	return s.move(t, store.ErrNotFound, func(r store.Record) (store.Record, error) { return store.ApplyResolve(r, to, t) })
}

// Pause stores p, replacing a pause of the same scope.
func (s *Store) Pause(_ context.Context, p store.Pause) error {
	if err := p.Valid(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	s.pauses = slices.DeleteFunc(s.pauses, func(q store.Pause) bool { return q.Activity == p.Activity && q.Effect == p.Effect })
	s.pauses = append(s.pauses, p)
	s.appendLocked(store.PauseReceipt(p, store.DecisionPaused))
	return nil
}

// Resume removes the pause of p's scope.
func (s *Store) Resume(_ context.Context, p store.Pause) error {
	if err := p.Valid(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	n := len(s.pauses)
	s.pauses = slices.DeleteFunc(s.pauses, func(q store.Pause) bool { return q.Activity == p.Activity && q.Effect == p.Effect })
	if len(s.pauses) == n {
		return store.ErrNotFound
	}
	s.appendLocked(store.PauseReceipt(p, store.DecisionResumed))
	return nil
}

// Pauses lists the pauses in force, oldest first.
func (s *Store) Pauses(_ context.Context) ([]store.Pause, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return nil, s.fail
	}
	out := slices.Clone(s.pauses)
	slices.SortStableFunc(out, func(a, b store.Pause) int { return a.Time.Compare(b.Time) })
	return out, nil
}

func clone(r store.Record) store.Record {
	r.Args = slices.Clone(r.Args)
	r.Result = slices.Clone(r.Result)
	r.Sent = slices.Clone(r.Sent)
	return r
}
