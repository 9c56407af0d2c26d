//go:build atkop

package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/store"
)

// Open finding (docs/review/atk-op.md, finding 4): a person may resolve an
// abandoned (unknown) record --not-sent at once, while the same "not sent" from a
// witness counts only when asked at or after the owner's lease plus LeaseMargin
// (store.NotSentFrom, store.Settleable). A request the attempt wrote just before it
// gave up can land at the vendor after the person looked. `pending` shows RESOLVE
// FROM "now" for such a key and `resolve --not-sent` takes it; both should wait for
// NotSentFrom (or the model should say why a person's early look is safe here).
func TestAtkOpPersonNotSentOnAbandonedBeforeNotSentFrom(t *testing.T) {
	b := backends(t)[0]
	st := openStore(t, b)
	now := time.Now()
	const key = "key-abandoned-early-01"
	lease := now.Add(time.Minute) // the attempt gave up at once; its lease still runs
	seed(t, st, key, "wf-abandoned", now.Add(-2*time.Second), lease, "abandon")
	rec, err := st.Get(context.Background(), key)
	if err != nil || rec.State != store.StateUnknown {
		t.Fatalf("seed: %+v %v", rec, err)
	}
	// A witness's "not sent", asked now, does not count.
	w := store.Transition{Key: key, Owner: rec.Owner, Now: now, Witness: "lookup", AskedAt: now}
	if store.Settleable(rec, store.StateReleased, w) {
		t.Fatalf("a witness's early not-sent counts; the premise changed")
	}
	res := idem(t, "resolve", key, "--store", b.spec, "--not-sent", "--reason", "nothing at the vendor yet")
	if res.code == 0 {
		t.Errorf("resolve --not-sent of an abandoned key before %s (its lease plus %s, when a witness's not-sent "+
			"first counts) was accepted:\n%s", ts(store.NotSentFrom(rec)), store.LeaseMargin, res)
	} else if !strings.Contains(res.stderr, ts(store.NotSentFrom(rec))) {
		t.Errorf("the refusal does not say from when: %s", res)
	}
}

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
