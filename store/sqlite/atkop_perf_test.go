//go:build atkop

package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/sqlite"
)

// TestAtkOpPendingWithManyLiveClaims measures Pending over 100k live destructive
// claims (none refused, none listed) with one claim receipt each: the refused-live
// branch runs a receipts lookup per live claim. Run with -tags atkop -v.
func TestAtkOpPendingWithManyLiveClaims(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "perf.db")
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := time.Now()
	const n = 100000
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		k := fmt.Sprintf("key-%08d", i)
		created := now.Add(-time.Duration(n-i) * time.Millisecond).UnixMicro()
		if _, err := tx.Exec(`INSERT INTO idemgate_records (key, activity, effect, args_hash, args, state, owner, lease, result,
			result_omitted, workflow_id, run_id, attempt, claims, created_at, updated_at, expires_at, may_have_sent, sent, root_workflow_id)
			VALUES (?, 'ChargeCard', 'destructive', 'h', NULL, 'claimed', 'o', ?, NULL, 0, 'wf', 'run', 1, 1, ?, ?, ?, 0, '', '')`,
			k, now.Add(time.Hour).UnixMicro(), created, created, now.Add(24*time.Hour).UnixMicro()); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(`INSERT INTO idemgate_receipts (time, key, activity, effect, decision, args_hash, call, workflow_id,
			run_id, attempt, result_ref, error, actor, reason, resolution, effect_source)
			VALUES (?, ?, 'ChargeCard', 'destructive', 'claimed', 'h', NULL, 'wf', 'run', 1, '', '', '', '', '', '')`, created, k); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	s, err = sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, limit := range []int{0, 10} {
		start := time.Now()
		rs, err := s.Pending(ctx, now, limit)
		t.Logf("Pending(limit %d) over %d live claims: %d listed in %s", limit, n, len(rs), time.Since(start))
		if err != nil {
			t.Fatal(err)
		}
	}
	_ = store.LeaseMargin
}
