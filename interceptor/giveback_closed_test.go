package interceptor_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/sqlite"
)

// countingSQLite counts Release calls and fails them while down.
type countingSQLite struct {
	*sqlite.Store
	down     atomic.Bool
	releases atomic.Int32
}

func (s *countingSQLite) Release(ctx context.Context, t store.Transition) error {
	s.releases.Add(1)
	if s.down.Load() {
		return errOutage
	}
	return s.Store.Release(ctx, t)
}

// A gate built with interceptor.New (no plugin) whose store the program closes at
// shutdown (w.Stop(); st.Close(), as docs/worker.md shows): a give-back still retrying
// must end, not retry against the closed store for as long as the process lives.
func TestGiveBackEndsWhenTheStoreIsClosed(t *testing.T) {
	h := newHarness(t)
	logs := &warnings{}
	h.suite.SetLogger(logs)
	sq, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	cs := &countingSQLite{Store: sq}
	cs.down.Store(true)
	h.store = nil
	h.opts.Store = cs
	h.tools.fail = func(ctx context.Context) (error, bool) {
		return interceptor.NotCommitted(fmt.Errorf("card network rejected the request")), false
	}
	if _, err := h.run("wf-closed", call{Activity: "ChargeCard", Key: bizKey, Charge: charge, MaxAttempts: 1}); err == nil {
		t.Fatal("the definite failure did not reach the workflow")
	}
	if err := sq.Close(); err != nil {
		t.Fatal(err)
	}
	cs.down.Store(false) // every try now meets the closed store
	deadline := time.Now().Add(30 * time.Second)
	for !logs.has("the store was closed before the outcome was stored") {
		if time.Now().After(deadline) {
			t.Fatalf("the give-back still retries 30s after the store was closed (%d tries so far): it never ends", cs.releases.Load())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// warnings is a log.Logger that keeps the Warn messages.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) Debug(string, ...any) {}
func (w *warnings) Info(string, ...any)  {}
func (w *warnings) Error(string, ...any) {}
func (w *warnings) Warn(msg string, _ ...any) {
	w.mu.Lock()
	w.msgs = append(w.msgs, msg)
	w.mu.Unlock()
}

func (w *warnings) has(part string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, m := range w.msgs {
		if strings.Contains(m, part) {
			return true
		}
	}
	return false
}
