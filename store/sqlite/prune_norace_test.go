//go:build !race

package sqlite_test

// TestPruneLetsOtherWritersIn measures lock hand-over between two writers against a
// one-second busy timeout over a 240,000-receipt prune. Under the race detector the
// pure-Go engine runs many times slower, which changes the timing it asserts and
// takes minutes; the plain run (scripts/test.sh, first pass) always runs it.

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/sqlite"
)

// A prune run from another process (here: another Store on the same file, with
// its own write connection) must not starve a worker's claims: between its
// batches it leaves the lock free long enough for a waiting writer's busy handler
// to find it, so no claim reaches its busy timeout however long the prune runs.
func TestPruneLetsOtherWritersIn(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "idemgate.db")
	worker := open(t, path, sqlite.Options{BusyTimeout: time.Second})
	operator := open(t, path, sqlite.Options{})
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// Long enough that, done back to back, the batches would hold the lock well
	// past the worker's busy timeout.
	const n = 240000
	old := t0.Add(-48 * time.Hour).UnixMicro()
	// IDs as the store gives them (schema version 10): the time in microseconds.
	if _, err := db.Exec(`INSERT INTO idemgate_receipts (id, time, key, activity, effect, decision, args_hash, call, workflow_id,
		run_id, attempt, result_ref, error, actor, reason, resolution)
		WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i < ?)
		SELECT ?2 + i, ?2 + i, 'gone-' || i, 'ChargeCard', 'destructive', 'ran', 'h', NULL, 'wf', 'run', 1, '', '', '', '', '' FROM s`,
		n-1, old); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var (
		wg       sync.WaitGroup
		claims   int
		slowest  time.Duration
		claimErr error
	)
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			start := time.Now()
			if _, _, err := worker.Begin(ctx, claim(fmt.Sprintf("beside-%d", i), "o")); err != nil {
				claimErr = err
				return
			}
			claims++
			slowest = max(slowest, time.Since(start))
			// A worker's pace: between two claims it runs the activity. (A
			// writer that never lets go of the lock starves any other process,
			// a prune as much as another worker.)
			time.Sleep(5 * time.Millisecond)
		}
	})
	removed, err := operator.Prune(ctx, store.Prune{Before: t0.Add(-time.Hour), Now: t0, Reason: "test", Batch: 6000})
	close(done)
	wg.Wait()
	if err != nil || removed != n {
		t.Fatalf("Prune = %d, %v; want %d", removed, err, n)
	}
	if claimErr != nil {
		t.Fatalf("a claim beside the prune failed after %d claims (slowest %v): %v", claims, slowest, claimErr)
	}
	// The property is that no claim reached its busy timeout (above) while the prune
	// ran longer than it. How long the slowest waited depends on the machine's load
	// (a bound of 500 ms failed at load average 20 on the code before and after
	// schema 10), so it is logged, not asserted.
	if claims == 0 {
		t.Fatal("no claim went through beside the prune")
	}
	t.Logf("%d claims beside the prune, slowest %v", claims, slowest)
}
