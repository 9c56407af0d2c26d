package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/postgres"
)

// After Close every call fails with store.ErrClosed (and store.ErrUnavailable), so
// the gate's background give-backs end instead of retrying for the process's life.
func TestClosedStoreSaysSo(t *testing.T) {
	s := open(t, dsn(t), postgres.Options{})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	err := s.Release(context.Background(), store.Transition{Key: "k-closed-0001", Owner: "o", Now: time.Now()})
	if !errors.Is(err, store.ErrClosed) || !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Release after Close = %v; want ErrClosed and ErrUnavailable", err)
	}
}
