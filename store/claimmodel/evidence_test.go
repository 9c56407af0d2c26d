package claimmodel

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/store"
)

// rulesBeforeKeptEvidence are the current rules but for the takeover's evidence as
// it was before atk-wit finding 1: a takeover emptied the record's evidence
// ("Evidence is per owner"), so the record named only its last owner's exits.
func rulesBeforeKeptEvidence() Rules {
	r := Current()
	r.Decide = func(existing store.Record, found bool, c store.Claim) (store.Outcome, store.Record, bool) {
		o, next, write := store.Decide(existing, found, c)
		if o == store.OutcomeTakenOver {
			next.Sent = nil
		}
		return o, next, write
	}
	return r
}

func twoVendors(t *testing.T) Config {
	t.Helper()
	for _, c := range Configs() {
		if c.SecondWindow > 0 {
			return c
		}
	}
	t.Fatal("no configuration with two vendors in Configs")
	return Config{}
}

// replay runs evs in cfg under r from the initial state: the violations each step
// caused, and what the steps did. An event the model does not offer at its step
// ends the replay with a line that says so.
func replay(cfg Config, r Rules, evs []Event) (kinds []string, lines []string) {
	m := newModel(cfg, r, "k")
	s := m.initial()
	for _, e := range evs {
		if !slices.Contains(m.events(&s, cfg.horizon()), e) {
			return kinds, append(lines, fmt.Sprintf("event %+v not possible", e))
		}
		var say []string
		p := stepper{say: &say}
		s = m.step(s, e, &p)
		kinds = append(kinds, p.violations...)
		lines = append(lines, fmt.Sprintf("t=+%ds %s %v", s.t, strings.Join(say, "; "), p.violations))
	}
	return kinds, lines
}

// atk-wit finding 1 in the model: an activity writes to two keyed vendors (the
// first deduplicates for 5 min, the second for 2); attempt 1 reaches the second and
// dies; attempt 2 re-sends inside both windows, its request to the first is lost on
// the way, and it dies. On the rules before the fix the takeover emptied the
// evidence, so the record named the first vendor only: that vendor's lookup, which
// holds nothing, said "not sent" for the whole write, the key was released, and
// attempt 3 claimed it afresh and reached the second vendor a second time. The
// current rules keep attempt 1's evidence: the lookup cannot tell, and the key
// stays unknown.
func TestExploreFindsTheTakeoverThatDroppedTheEvidence(t *testing.T) {
	cfg := twoVendors(t)
	lease := dsecs(cfg.Leases[1]) + 2*2 // attempt 2's lease from its claim, as stored (deadline + 2×skew)
	steps := []Event{
		{Kind: EvClaim, Attempt: 0, Skew: 1},
		{Kind: EvSend, Attempt: 0, Vendor: 1},
		{Kind: EvAbandon, Attempt: 0},
		{Kind: EvClaim, Attempt: 1, Skew: 1}, // re-sent inside both windows: taken over
		{Kind: EvSendLost, Attempt: 1, Vendor: 0},
		{Kind: EvAbandon, Attempt: 1},
		{Kind: EvTime, To: lease + dsecs(store.LeaseMargin) + 2}, // the lookup's "not sent" counts from here
		{Kind: EvAsk, Skew: 1},
		{Kind: EvDeliver},
		{Kind: EvClaim, Attempt: 2, Skew: 1},
		{Kind: EvSend, Attempt: 2, Vendor: 1},
	}
	kinds, lines := replay(cfg, rulesBeforeKeptEvidence(), steps)
	if !slices.Contains(kinds, WitnessWrongNotSent) || !slices.Contains(kinds, SentTwice) {
		t.Fatalf("rules before the kept evidence: violations %q, want %q and %q; steps:\n%s", kinds,
			WitnessWrongNotSent, SentTwice, strings.Join(lines, "\n"))
	}
	t.Logf("rules before the kept evidence:\n%s", strings.Join(lines, "\n"))
	kinds, lines = replay(cfg, Current(), steps[:8])
	if len(kinds) != 0 || !strings.Contains(lines[7], "cannot tell") {
		t.Fatalf("current rules: violations %q, want none and a lookup that cannot tell; steps:\n%s", kinds, strings.Join(lines, "\n"))
	}
	// Nothing settled it: attempt 3 meets the unknown outcome, past the second
	// vendor's window, and is refused (Begin: unknown), not re-sent.
	kinds, lines = replay(cfg, Current(), append(slices.Clone(steps[:8]), Event{Kind: EvClaim, Attempt: 2, Skew: 1}))
	if len(kinds) != 0 || !strings.Contains(lines[8], "Begin: unknown") {
		t.Fatalf("current rules: attempt 3 was not refused; violations %q; steps:\n%s", kinds, strings.Join(lines, "\n"))
	}
}

// The re-send side of the same hole: after attempt 2 reached the first vendor only,
// the record of the rules before named only it, so a re-send was allowed on its
// 5 min although the key had reached the second vendor, whose 2 min had passed
// (store.ResendWindow). Here the second vendor's keyed transport withholds the retry
// past its own window (idemhttp and the MCP bridge check it), so no second effect
// follows; the current rules refuse the re-send at the gate.
func TestResendWindowCountsTheEarlierClaimsVendors(t *testing.T) {
	cfg := twoVendors(t)
	steps := []Event{
		{Kind: EvClaim, Attempt: 0, Skew: 1},
		{Kind: EvSend, Attempt: 0, Vendor: 0},
		{Kind: EvSend, Attempt: 0, Vendor: 1},
		{Kind: EvAbandon, Attempt: 0},
		{Kind: EvClaim, Attempt: 1, Skew: 1},
		{Kind: EvSend, Attempt: 1, Vendor: 0},
		{Kind: EvAbandon, Attempt: 1},
		{Kind: EvTime, To: dsecs(cfg.SecondWindow) + 2}, // past the second vendor's window by the slowest clock
		{Kind: EvClaim, Attempt: 2, Skew: 1},
	}
	_, lines := replay(cfg, rulesBeforeKeptEvidence(), steps)
	if last := lines[len(lines)-1]; !strings.Contains(last, "taken-over") {
		t.Fatalf("rules before the kept evidence: attempt 3 was not re-sent; steps:\n%s", strings.Join(lines, "\n"))
	}
	kinds, lines := replay(cfg, Current(), steps)
	if last := lines[len(lines)-1]; len(kinds) != 0 || !strings.Contains(last, "Begin: unknown") {
		t.Fatalf("current rules: violations %q, attempt 3 not refused; steps:\n%s", kinds, strings.Join(lines, "\n"))
	}
}

// The exploration finds the same hole on its own: the rules before the fix, the
// two-vendor configuration with every clock right (one skew, to keep the search
// small), explored ten steps deep, store a lookup's "not sent" for a write that
// reached the second vendor, on a path through a takeover and a lost request to
// the first vendor, and then reach the second vendor a second time; the current
// rules explore the same space clean.
func TestExploreFindsTheDroppedEvidence(t *testing.T) {
	cfg := twoVendors(t)
	cfg.Skews = []time.Duration{0}
	const d = 10
	old := Explore(cfg, rulesBeforeKeptEvidence(), d)
	find := func(kind string) *Violation {
		for i, v := range old.Violations {
			steps := strings.Join(v.Steps, "\n")
			if v.Kind == kind && strings.Contains(steps, "taken-over") && strings.Contains(steps, "lost on its way") {
				return &old.Violations[i]
			}
		}
		return nil
	}
	for _, kind := range []string{WitnessWrongNotSent, SentTwice} {
		v := find(kind)
		if v == nil {
			t.Fatalf("rules before the kept evidence, depth %d: no %q through a takeover; found %v", d, kind, old.Violations)
		}
		t.Logf("rules before the kept evidence: %s", v)
	}
	t.Logf("rules before the kept evidence: depth %d, %d states, %d transitions", d, old.States, old.Transitions)
	cur := Explore(cfg, Current(), d)
	for _, v := range unexplained(cur.Violations) {
		t.Errorf("current rules: %s", v)
	}
	t.Logf("current rules: depth %d, %d states, %d transitions", d, cur.States, cur.Transitions)
}
