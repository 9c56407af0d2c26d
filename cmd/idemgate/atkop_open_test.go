//go:build atkop

package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/store"
)

// Open finding (docs/review/atk-op.md, finding 5): `pending` says it lists "the
// writes that wait on a witness or a person", but store.Blocking ignores the
// effect: an idempotent write whose owner is gone is listed (for its whole window,
// 24 h by default) although the gate never refuses it — the next attempt takes the
// claim over (Claim.TakeOver) and runs it again with the same key. Noise that a
// person may "resolve", and that hides the keys that do wait on them.
func TestAtkOpIdempotentOwnerGoneIsNotPending(t *testing.T) {
	b := backends(t)[0]
	st := openStore(t, b)
	ctx := context.Background()
	now := time.Now()
	const key = "key-idempotent-gone-1"
	c := store.Claim{Key: key, Activity: "UpsertContact", Effect: "idempotent-write", ArgsHash: "h", Args: testArgs,
		Owner: "o", Lease: now.Add(-time.Minute), Window: 24 * time.Hour, WorkflowID: "wf-upsert", RunID: "run", Attempt: 1,
		Now: now.Add(-10 * time.Minute)}
	if o, _, err := st.Begin(ctx, c); err != nil || o != store.OutcomeClaimed {
		t.Fatalf("seed: %v %v", o, err)
	}
	for _, r := range decodeJSON[[]recordJSON](t, ok(t, "pending", "--store", b.spec, "--json")) {
		if r.Key == key {
			t.Errorf("pending lists an idempotent write whose owner is gone, which nobody needs to settle: %+v", r)
		}
	}
}
