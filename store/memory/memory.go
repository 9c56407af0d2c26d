// Package memory is an in-process store.Store for tests and examples. It dies with
// the process: a claim that dies with the worker is exactly the duplicate idemgate
// exists to prevent, so production workers use store/sqlite or store/postgres.
package memory

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/idemgate/idemgate/store"
)

// Store keeps records and receipts in maps guarded by one mutex.
type Store struct {
	mu       sync.Mutex
	records  map[string]store.Record
	receipts []store.Receipt
	fail     error
}

var _ store.Store = (*Store)(nil)

// New returns an empty store.
func New() *Store {
	return &Store{records: make(map[string]store.Record)}
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
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	existing, found := s.records[t.Key]
	if !found {
		return store.ErrNotOwner
	}
	next, err := store.Apply(existing, to, t)
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
	r.ID = int64(len(s.receipts) + 1)
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

// Sweep removes up to limit expired records.
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
		if !now.Before(r.ExpiresAt) {
			delete(s.records, k)
			n++
		}
	}
	return n, nil
}

func clone(r store.Record) store.Record {
	r.Args = slices.Clone(r.Args)
	r.Result = slices.Clone(r.Result)
	return r
}
