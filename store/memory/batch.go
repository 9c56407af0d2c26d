package memory

import (
	"context"

	"github.com/idemgate/idemgate/store"
)

var _ store.ReceiptBatcher = (*Store)(nil)

// AppendReceipts adds rs in order, all under one lock: all or none.
func (s *Store) AppendReceipts(ctx context.Context, rs []store.Receipt) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	for _, r := range rs {
		s.appendLocked(r)
	}
	return nil
}
