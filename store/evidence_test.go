package store_test

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/idemgate/idemgate/store"
)

// takeover is Decide's takeover of r by owner at now (r's owner gone).
func takeover(t *testing.T, r store.Record, owner string, now time.Time) store.Record {
	t.Helper()
	c := store.Claim{Key: r.Key, ArgsHash: r.ArgsHash, Effect: r.Effect, Owner: owner, Lease: now.Add(time.Minute),
		Window: time.Hour, TakeOver: true, Now: now}
	o, next, write := store.Decide(r, true, c)
	if o != store.OutcomeTakenOver || !write {
		t.Fatalf("Decide = %q, %v; want a takeover", o, write)
	}
	return next
}

func sent(t *testing.T, r store.Record, owner string, s store.Sent) store.Record {
	t.Helper()
	next, _, err := store.ApplySent(r, owner, s)
	if err != nil {
		t.Fatal(err)
	}
	return next
}

func abandoned(r store.Record) store.Record {
	r.State, r.MayHaveSent = store.StateUnknown, true
	return r
}

// A re-send relying on the vendors' windows needs evidence from every claim since
// the key's first: a takeover of a claim that recorded none (its attempt may have
// sent without the keyed transport, or not at all) leaves a blank, and no later
// claim's evidence makes up for it — the rule the takeover's reset of the evidence
// gave before, kept now that the evidence of the claims before is kept (a plain
// union of the evidence would lose it).
func TestResendWindowNeedsEveryClaimsEvidence(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	p := store.Sent{Via: "idemhttp:p", Host: "p.example", Window: 24 * time.Hour}
	first := store.Record{Key: "k", ArgsHash: "h", Effect: store.EffectDestructive, State: store.StateClaimed, Owner: "a1",
		Lease: t0.Add(time.Minute), CreatedAt: t0, ExpiresAt: t0.Add(time.Hour), Claims: 1}

	silent := takeover(t, abandoned(first), "a2", t0.Add(time.Minute))
	if want := []store.Sent{{Owner: "a1"}}; !reflect.DeepEqual(silent.Sent, want) {
		t.Fatalf("a takeover of a claim without evidence keeps %v, want the blank %v", silent.Sent, want)
	}
	r := abandoned(sent(t, silent, "a2", p))
	if w, ok := store.ResendWindow(r, 48*time.Hour); ok {
		t.Fatalf("ResendWindow = %s on %v: attempt 1 recorded nothing, and may have sent without the key", w, r.Sent)
	}
	if _, silentOwners := store.Exits(r); !reflect.DeepEqual(silentOwners, []string{"a1"}) {
		t.Fatalf("Exits: silent %v, want [a1]", silentOwners)
	}

	// The current claim must have recorded its own: a takeover's owner that died
	// before its keyed transport recorded anything leaves the record short too.
	r = abandoned(sent(t, first, "a1", p))
	r = abandoned(takeover(t, r, "a2", t0.Add(time.Minute)))
	if w, ok := store.ResendWindow(r, 48*time.Hour); ok {
		t.Fatalf("ResendWindow = %s on %v: attempt 2 recorded nothing", w, r.Sent)
	}
	r = takeover(t, r, "a3", t0.Add(2*time.Minute))
	if want := []store.Sent{{Via: p.Via, Host: p.Host, Window: p.Window, Owner: "a1"}, {Owner: "a2"}}; !reflect.DeepEqual(r.Sent, want) {
		t.Fatalf("the second takeover keeps %v, want %v", r.Sent, want)
	}
	if w, ok := store.ResendWindow(abandoned(sent(t, r, "a3", p)), 48*time.Hour); ok {
		t.Fatalf("ResendWindow = %s: attempt 2's blank was lost", w)
	}

	// Every claim recorded its exits: the shortest window of them all.
	q := store.Sent{Via: "mcp:q", Host: "q.example", Window: time.Hour}
	r = abandoned(sent(t, sent(t, first, "a1", p), "a1", q))
	r = abandoned(sent(t, takeover(t, r, "a2", t0.Add(time.Minute)), "a2", p))
	if w, ok := store.ResendWindow(r, 48*time.Hour); !ok || w != time.Hour {
		t.Fatalf("ResendWindow = %s, %v on %v; want q's hour", w, ok, r.Sent)
	}
}

// Evidence is recorded once per claim: the same exit recorded again by the same
// claim changes nothing, by another claim it joins with that claim's tag.
func TestApplySentOncePerClaim(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	p := store.Sent{Via: "idemhttp:p", Host: "p.example", Window: 24 * time.Hour}
	r := store.Record{Key: "k", ArgsHash: "h", Effect: store.EffectDestructive, State: store.StateClaimed, Owner: "a1",
		Lease: t0.Add(time.Minute), CreatedAt: t0, ExpiresAt: t0.Add(time.Hour), Claims: 1}
	r = sent(t, r, "a1", p)
	if _, changed, err := store.ApplySent(r, "a1", p); changed || err != nil {
		t.Fatalf("the same evidence again: changed %v, %v", changed, err)
	}
	r = takeover(t, abandoned(r), "a2", t0.Add(time.Minute))
	next, changed, err := store.ApplySent(r, "a2", p)
	if !changed || err != nil || len(next.Sent) != 2 || next.Sent[1].Owner != "a2" {
		t.Fatalf("another claim's evidence of the same exit: changed %v, %v, %v", changed, err, next.Sent)
	}
	if _, _, err := store.ApplySent(next, "a1", p); err != store.ErrNotOwner {
		t.Fatalf("the owner taken over records evidence: %v", err)
	}
	if got := store.ClaimSent(next); len(got) != 1 || got[0].Owner != "a2" {
		t.Fatalf("ClaimSent = %v, want a2's", got)
	}
}

// Evidence stored by an older version has no claim tag: it counts as the record's
// current claim's (what the takeovers of then, which emptied it, left), and a
// takeover tags it with the owner it takes over from.
func TestUntaggedEvidenceIsTheCurrentClaims(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	old, err := store.DecodeSent(`[{"via":"idemhttp:p","host":"p.example","window":86400000000000}]`)
	if err != nil {
		t.Fatal(err)
	}
	r := store.Record{Key: "k", ArgsHash: "h", Effect: store.EffectDestructive, State: store.StateUnknown, Owner: "a1",
		Lease: t0.Add(time.Minute), CreatedAt: t0, ExpiresAt: t0.Add(time.Hour), Claims: 2, MayHaveSent: true, Sent: old}
	if w, ok := store.ResendWindow(r, 48*time.Hour); !ok || w != 24*time.Hour {
		t.Fatalf("ResendWindow = %s, %v on an older version's evidence; want p's 24h", w, ok)
	}
	r.State = store.StateClaimed
	if _, changed, _ := store.ApplySent(r, "a1", store.Sent{Via: "idemhttp:p", Host: "p.example", Window: 24 * time.Hour}); changed {
		t.Fatal("the current claim's untagged evidence recorded again")
	}
	r.State = store.StateUnknown
	r = takeover(t, r, "a2", t0.Add(time.Minute))
	if len(r.Sent) != 1 || r.Sent[0].Owner != "a1" {
		t.Fatalf("the takeover keeps %v, want the evidence tagged a1", r.Sent)
	}
	if w, ok := store.ResendWindow(abandoned(r), 48*time.Hour); ok {
		t.Fatalf("ResendWindow = %s: attempt 2 recorded nothing, and a1's evidence counts as its", w)
	}
	b, _ := json.Marshal(r.Sent)
	if back, err := store.DecodeSent(string(b)); err != nil || !reflect.DeepEqual(back, r.Sent) {
		t.Fatalf("the tag does not survive JSON: %s -> %v, %v", b, back, err)
	}
}
