package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memory"
)

// atk-wit finding 1 (fixed): a takeover dropped the evidence of the owners before
// it (Decide: "Evidence is per owner", next.Sent = nil; PostgreSQL's idemgate_begin
// emptied sent), but kept MayHaveSent and CreatedAt: the record stood for every
// attempt since CreatedAt, while its evidence named only the last owner's exits. An
// activity that writes to two keyed vendors, P (deduplicates 24 h) and Q (1 h):
// attempt 1 sends to both and dies; attempt 2 re-sends inside both windows
// (Options.VendorWindows), reaches P and dies before Q. The record named P only, so
// ResendWindow answered P's 24 h: attempt 3, two hours later, re-sent, and Q, whose
// window had passed, acted a second time. The same record made P's authoritative
// lookup (idemhttp.LookupWitness) answer for "the key left through P and nothing
// else", and its "not sent" released the key though Q got it. Now a takeover keeps
// every claim's evidence, tagged with its claim, and ResendWindow takes the shortest
// window of all of them.
func TestAtkWitTakeoverKeepsEarlierEvidence(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	t0 := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	p := store.Sent{Via: "idemhttp:p", Host: "p.example", Window: 24 * time.Hour}
	q := store.Sent{Via: "idemhttp:q", Host: "q.example", Window: time.Hour}
	claim := func(owner string, now time.Time) store.Claim {
		return store.Claim{Key: "k", Activity: "Pay", Effect: store.EffectDestructive, ArgsHash: "h", Owner: owner,
			Lease: now.Add(time.Minute), Window: 48 * time.Hour, TakeOver: true, Now: now, Attempt: 1}
	}
	if o, _, err := s.Begin(ctx, claim("a1", t0)); err != nil || o != store.OutcomeClaimed {
		t.Fatalf("first claim: %v %v", o, err)
	}
	for _, e := range []store.Sent{p, q} {
		if err := s.RecordSent(ctx, "k", "a1", e); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Abandon(ctx, store.Transition{Key: "k", Owner: "a1", Now: t0.Add(time.Second),
		Receipt: store.Receipt{Key: "k", Decision: store.DecisionUnknown}}); err != nil {
		t.Fatal(err)
	}
	t1 := t0.Add(30 * time.Minute)
	if o, _, err := s.Begin(ctx, claim("a2", t1)); err != nil || o != store.OutcomeTakenOver {
		t.Fatalf("takeover: %v %v", o, err)
	}
	if err := s.RecordSent(ctx, "k", "a2", p); err != nil {
		t.Fatal(err)
	}
	if err := s.Abandon(ctx, store.Transition{Key: "k", Owner: "a2", Now: t1.Add(time.Second),
		Receipt: store.Receipt{Key: "k", Decision: store.DecisionUnknown}}); err != nil {
		t.Fatal(err)
	}
	rec, err := s.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	w, ok := store.ResendWindow(rec, 24*time.Hour)
	if !ok || w > q.Window {
		t.Errorf("after a takeover the record's evidence is %v: ResendWindow allows a re-send for %s from %s, but the "+
			"key left to %s (window %s) under attempt 1 of the same record: a re-send after %s makes q act twice",
			rec.Sent, w, rec.CreatedAt.Format(time.RFC3339), q.Host, q.Window, rec.CreatedAt.Add(q.Window).Format(time.RFC3339))
	}
	if !ok || w != q.Window {
		t.Errorf("ResendWindow = %s, %v; want q's window, %s: every claim recorded its exits", w, ok, q.Window)
	}
}
