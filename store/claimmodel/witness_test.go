package claimmodel

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/store"
)

// witnessConfigs are the configurations of Configs with witnesses.
func witnessConfigs(t *testing.T) []Config {
	var out []Config
	for _, c := range Configs() {
		if c.Witness {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		t.Fatal("no configuration of Configs has a witness")
	}
	return out
}

// rulesWitnessAfterTheMargin are the current rules but for a witness's "not sent",
// which counts only when it was asked at or after the owner's lease plus
// store.LeaseMargin — the bound until which the contract says an owner may still be
// sending (DESIGN.md, Time: never resolved before its lease plus the margin). The
// proposed fix of the hole witnessNotSentHole.
func rulesWitnessAfterTheMargin() Rules {
	r := Current()
	r.ApplyResolve = func(existing store.Record, to store.State, t store.Transition) (store.Record, error) {
		if t.Witness != "" && to == store.StateReleased && t.AskedAt.Before(existing.Lease.Add(store.LeaseMargin)) {
			return existing, store.ErrNotOwner
		}
		return store.ApplyResolve(existing, to, t)
	}
	return r
}

// rulesWitnessAtTheLease are the rules issue 19 first wrote: a witness's "not sent"
// counted when asked at or after the owner's lease, without LeaseMargin. (The
// current rule with AskedAt moved on by the margin.)
func rulesWitnessAtTheLease() Rules {
	r := Current()
	r.ApplyResolve = func(existing store.Record, to store.State, t store.Transition) (store.Record, error) {
		if t.Witness != "" && to == store.StateReleased && !t.AskedAt.IsZero() && !t.AskedAt.Before(existing.Lease) {
			t.AskedAt = t.AskedAt.Add(store.LeaseMargin)
		}
		return store.ApplyResolve(existing, to, t)
	}
	return r
}

// runSteps replays evs on cfg under r and returns the violations and what each step
// did; an event the model does not offer at its point ends the run.
func runSteps(cfg Config, r Rules, evs []Event) (kinds, lines []string) {
	m := newModel(cfg, r, "k")
	s := m.initial()
	for _, e := range evs {
		if !slices.Contains(m.events(&s, cfg.horizon()), e) {
			lines = append(lines, fmt.Sprintf("event %+v not possible", e))
			return kinds, lines
		}
		var say []string
		p := stepper{say: &say}
		s = m.step(s, e, &p)
		kinds = append(kinds, p.violations...)
		lines = append(lines, fmt.Sprintf("t=+%ds %s => %q", s.t, strings.Join(say, "; "), p.violations))
	}
	return kinds, lines
}

// The hole the model finds in store.Settleable (issue 19): attempt 1 claims a
// destructive write; at its lease a reconciler asks the vendor, who has seen
// nothing; attempt 1, a zombie past its deadline (or its request, written just
// before it), reaches the vendor a moment later, inside LeaseMargin; the "not
// sent" arrives and releases the key; attempt 2 claims it afresh and charges again.
// The current rule lets the "not sent" count; the rule with the margin refuses it
// and the key stays blocked until a later ask (which says "sent") or a person.
func TestWitnessNotSentInsideTheMargin(t *testing.T) {
	var cfg Config
	for _, c := range Configs() {
		if c.Name == "destructive" {
			cfg = c
		}
	}
	lease := dsecs(cfg.Leases[0]) + 2*dsecs(cfg.Skews[len(cfg.Skews)-1]) // a1's stored lease, claimed on the true clock
	steps := []Event{
		{Kind: EvClaim, Attempt: 0, Skew: 1},
		{Kind: EvTime, To: lease},
		{Kind: EvAsk, Skew: 1},
		{Kind: EvSend, Attempt: 0},
		{Kind: EvDeliver},
		{Kind: EvClaim, Attempt: 1, Skew: 1},
		{Kind: EvSend, Attempt: 1},
	}
	kinds, lines := runSteps(cfg, Current(), steps)
	if witnessNotSentHole {
		if !slices.Contains(kinds, WitnessWrongNotSent) || !slices.Contains(kinds, SentTwice) {
			t.Errorf("current rules: violations %q, want %q and %q; steps:\n%s", kinds, WitnessWrongNotSent, SentTwice, strings.Join(lines, "\n"))
		} else {
			t.Logf("current rules (known hole):\n%s", strings.Join(lines, "\n"))
		}
	} else if len(kinds) != 0 {
		t.Errorf("current rules: violations %q; steps:\n%s", kinds, strings.Join(lines, "\n"))
	}
	// The rule before it (a "not sent" counted from the lease) lets it through.
	if kinds, lines := runSteps(cfg, rulesWitnessAtTheLease(), steps); !slices.Contains(kinds, WitnessWrongNotSent) ||
		!slices.Contains(kinds, SentTwice) {
		t.Errorf("rule at the lease: violations %q, want %q and %q; steps:\n%s", kinds, WitnessWrongNotSent, SentTwice, strings.Join(lines, "\n"))
	}
	// With the margin the answer is refused (the a2 claim then finds the key
	// blocked and is refused, so it never sends: the run ends there).
	kinds, lines = runSteps(cfg, rulesWitnessAfterTheMargin(), steps[:5])
	if len(kinds) != 0 || !strings.Contains(lines[4], "not owner") {
		t.Errorf("rules with the margin: violations %q; steps:\n%s", kinds, strings.Join(lines, "\n"))
	}
}

// The rule with the margin holds everywhere the model's witness goes: no violation
// of any kind.
func TestExploreWitnessAfterTheMargin(t *testing.T) {
	d := depth(t)
	for _, cfg := range witnessConfigs(t) {
		res := Explore(cfg, rulesWitnessAfterTheMargin(), d)
		t.Logf("%s: depth %d, %d states, %d transitions", cfg.Name, d, res.States, res.Transitions)
		for _, v := range res.Violations {
			t.Errorf("%s: rules with the margin: %s", cfg.Name, v)
		}
	}
}

// The hole is the overrun and nothing else: with attempts that never reach the
// vendor past their deadline (Overrun 0), the current rules hold with witnesses.
func TestExploreWitnessWithoutOverrun(t *testing.T) {
	d := depth(t)
	for _, cfg := range witnessConfigs(t) {
		cfg.Name, cfg.Overrun = cfg.Name+"-no-overrun", 0
		res := Explore(cfg, Current(), d)
		t.Logf("%s: depth %d, %d states, %d transitions", cfg.Name, d, res.States, res.Transitions)
		for _, v := range res.Violations {
			t.Errorf("%s: %s", cfg.Name, v)
		}
	}
}

// A witness that cannot tell settles nothing, and an answer never delivered (lost,
// timed out) leaves the key as it was: still blocked.
func TestWitnessThatCannotTellSettlesNothing(t *testing.T) {
	cfg := witnessConfigs(t)[0]
	m := newModel(cfg, Current(), "k")
	s := m.initial()
	for _, e := range []Event{{Kind: EvClaim, Attempt: 0, Skew: 1}, {Kind: EvSend, Attempt: 0}, {Kind: EvAbandon, Attempt: 0}} {
		s = m.step(s, e, &stepper{})
	}
	before := m.canonical(&s)
	var ops []Op
	p := stepper{ops: &ops}
	after := m.step(s, Event{Kind: EvCannotTell}, &p)
	if len(ops) != 0 || m.canonical(&after) != before || len(p.violations) != 0 {
		t.Fatalf("a witness that cannot tell: store calls %v, state changed %v, violations %q", ops, m.canonical(&after) != before, p.violations)
	}
	asked := m.step(s, Event{Kind: EvAsk, Skew: 1}, &stepper{})
	if !m.askLive(&asked) {
		t.Fatal("an answer on its way is not live")
	}
	// A second ask replaces the first; time passes; nothing settles by itself.
	asked = m.step(asked, Event{Kind: EvAsk, Skew: 0}, &stepper{})
	asked = m.step(asked, Event{Kind: EvTime, To: secs(asked.rec.Lease) + dsecs(store.LeaseMargin)}, &stepper{})
	if asked.rec.State != store.StateUnknown || !Current().Blocking(asked.rec, at(asked.t)) {
		t.Fatalf("an answer not delivered: record %+v, want it unknown and blocking", asked.rec)
	}
}

// witnessConfig is a small destructive write with a witness whose attempts stop at
// their deadline (Overrun 0): the current rules hold on it, so what the old rules
// find is theirs alone.
func witnessConfig() Config {
	return Config{
		Name: "destructive-witness-small", Effect: "destructive", Witness: true,
		Window:  10 * time.Minute,
		Leases:  []time.Duration{2 * time.Minute, time.Minute},
		Skews:   []time.Duration{-2 * time.Second, 2 * time.Second},
		Horizon: 20 * time.Minute,
	}
}

// Rules without the asked-at bound let a "not sent" true of its moment count after
// the attempt reached the vendor: the explorer finds the wrong "not sent" and the
// second charge that follows (a fresh claim of the released key sends again).
// Two such rules: one that lets a "not sent" asked before the lease count, one that
// checks the time of delivery instead of the time of asking.
func TestExploreFindsTheEarlyNotSent(t *testing.T) {
	cfg := witnessConfig()
	const d = 7 // claim, ask, send, abandon, deliver, claim, send
	variants := []struct {
		name  string
		rules Rules
	}{
		{"a not-sent asked before the lease counts", rulesWitnessAnyTime()},
		{"AskedAt read at delivery", rulesWitnessAskedAtDelivery()},
	}
	for _, v := range variants {
		res := Explore(cfg, v.rules, d)
		var wrong, twice *Violation
		for i, x := range res.Violations {
			switch {
			case x.Kind == WitnessWrongNotSent && wrong == nil:
				wrong = &res.Violations[i]
			case x.Kind == SentTwice && twice == nil:
				twice = &res.Violations[i]
			}
		}
		if wrong == nil || twice == nil {
			t.Errorf("%s, depth %d: want %q and %q; found %v", v.name, d, WitnessWrongNotSent, SentTwice, res.Violations)
			continue
		}
		t.Logf("%s: %s", v.name, twice)
	}
	res := Explore(cfg, Current(), d)
	t.Logf("current rules: depth %d, %d states, %d transitions", d, res.States, res.Transitions)
	for _, v := range res.Violations {
		t.Errorf("current rules: %s", v)
	}
}

// The random walks that package storetest replays through every backend carry the
// witness's settlements, accepted and refused, to either state: the backends' SQL
// mirrors of store.Settleable are held to the model's answers.
func TestSequencesCarryWitnessSettlements(t *testing.T) {
	// The numbers storetest uses (modelSequences of the plain run, modelDepth, modelSeed).
	seqs := Sequences(2000, 12, 10, func(i int) string { return fmt.Sprint("k", i) })
	count := map[string]int{}
	for _, s := range seqs {
		for _, op := range s.Ops {
			if op.Kind != OpResolve || op.Transition.Witness == "" {
				continue
			}
			if op.Transition.AskedAt.IsZero() {
				t.Fatalf("%s: a witness's Resolve without AskedAt: %+v", s.Config, op.Transition)
			}
			count[fmt.Sprintf("%s %v", op.To, errText(op.Err))]++
		}
	}
	t.Logf("witness settlements in the walks: %v", count)
	for _, want := range []string{"completed ok", "completed not owner", "released ok", "released not owner"} {
		if count[want] == 0 {
			t.Errorf("no witness settlement %q in the walks: %v", want, count)
		}
	}
}

// A witness that answers by the key alone (a vendor lookup that finds any effect
// carrying the key) settles a new write of a key used before as sent with the
// earlier write's result: attempt 1 charges and completes; its workflow closes and
// its retention passes, a sweep that asked Temporal forgets the record; attempt 2
// claims the key afresh (a new write by design), its outcome turns unknown before
// it sent, and the lookup finds attempt 1's charge. The write is reported done and
// never happened. A witness must count only this write's effects — those since the
// record's CreatedAt (witness.Query.Record), with room for clock skew — as the
// model's witness does.
func TestWitnessByKeyReportsALostWriteDone(t *testing.T) {
	var cfg Config
	for _, c := range Configs() {
		if c.Name == "destructive" {
			cfg = c
		}
	}
	forget := dsecs(cfg.Leases[0]) + 2*dsecs(cfg.Skews[len(cfg.Skews)-1]) + dsecs(store.LeaseMargin) - dsecs(cfg.Skews[len(cfg.Skews)-1])
	steps := []Event{
		{Kind: EvClaim, Attempt: 0, Skew: 1},
		{Kind: EvSend, Attempt: 0},
		{Kind: EvComplete, Attempt: 0},
		{Kind: EvClose},
		{Kind: EvTime, To: forget},
		{Kind: EvSweepTemporal},
		{Kind: EvClaim, Attempt: 1, Skew: 1},
		{Kind: EvAbandon, Attempt: 1},
		{Kind: EvAsk, Skew: 1},
		{Kind: EvDeliver},
	}
	byKey := cfg
	byKey.WitnessByKey = true
	kinds, lines := runSteps(byKey, Current(), steps)
	if !slices.Contains(kinds, LostWriteDone) {
		t.Fatalf("a witness by key: violations %q, want %q; steps:\n%s", kinds, LostWriteDone, strings.Join(lines, "\n"))
	}
	t.Logf("a witness by key:\n%s", strings.Join(lines, "\n"))
	kinds, lines = runSteps(cfg, Current(), steps)
	if len(kinds) != 0 || !strings.Contains(lines[len(lines)-1], "not owner") {
		t.Fatalf("a witness of this write: violations %q, want its early not-sent refused; steps:\n%s", kinds, strings.Join(lines, "\n"))
	}
}

// The witness hole's family: a person is a witness whose answer arrives late too.
// `idemgate pending` lists a blocked key before its lease plus LeaseMargin has
// passed (issue 19: "may still be running until T"); a person who looks the write
// up at the vendor then, sees nothing, and types `resolve --not-sent` once the
// margin has passed is let through by store.Resolvable, which checks when they
// typed, not when they looked — and attempt 1's late request landed in between.
// Attempt 2 then claims the released key and charges again. (The model reports the
// wrong "not sent": its checks count attempt 2's claim, past attempt 1's lease plus
// the margin, as a new write — the key's epoch begins again — so the second charge
// itself is not counted twice.) The store cannot know when a person looked: the
// CLI must tell them to look only after the lease plus the margin (the model's
// person, in Configs, looks and resolves in one step).
func TestPersonWhoLookedEarlySettlesWrong(t *testing.T) {
	var cfg Config
	for _, c := range Configs() {
		if c.Name == "destructive" {
			cfg = c
		}
	}
	cfg.PersonLooks = true
	lease := dsecs(cfg.Leases[0]) + 2*dsecs(cfg.Skews[len(cfg.Skews)-1])
	steps := []Event{
		{Kind: EvClaim, Attempt: 0, Skew: 1},
		{Kind: EvTime, To: lease},
		{Kind: EvAsk, Skew: 1},
		{Kind: EvSend, Attempt: 0},
		{Kind: EvTime, To: lease + dsecs(store.LeaseMargin)},
		{Kind: EvDeliver},
		{Kind: EvClaim, Attempt: 1, Skew: 1},
		{Kind: EvSend, Attempt: 1},
	}
	kinds, lines := runSteps(cfg, Current(), steps)
	if !slices.Contains(kinds, PersonWrongNotSent) || !strings.Contains(lines[len(lines)-1], "a2 sends (vendor effect: true)") {
		t.Fatalf("violations %q, want %q and a2's charge; steps:\n%s", kinds, PersonWrongNotSent, strings.Join(lines, "\n"))
	}
	t.Logf("a person who looked before the margin passed:\n%s", strings.Join(lines, "\n"))
}

// rulesPersonNotSentAtOnce are the rules before atk-op finding 4: a person's "not
// sent" counted at once on a record whose owner ended without proof
// (StateUnknown), and from the lease plus LeaseMargin on a claim.
func rulesPersonNotSentAtOnce() Rules {
	r := Current()
	r.ApplyResolve = func(existing store.Record, to store.State, t store.Transition) (store.Record, error) {
		if t.Witness == "" && existing.State == store.StateUnknown && existing.Owner == t.Owner {
			t.Now = latest(t.Now, existing.Lease.Add(store.LeaseMargin))
		}
		return store.ApplyResolve(existing, to, t)
	}
	return r
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// atk-op finding 4: an attempt that gave up (its outcome unknown) may have a request
// still on its way. A person who looks at once sees nothing and says "not sent"; the
// request lands; the next attempt charges again. The person's "not sent" must wait,
// like a witness's, for the owner's lease plus LeaseMargin.
func TestPersonNotSentOnAnAbandonedKeyWaitsForTheMargin(t *testing.T) {
	var cfg Config
	for _, c := range Configs() {
		if c.Name == "destructive" {
			cfg = c
		}
	}
	steps := []Event{
		{Kind: EvClaim, Attempt: 0, Skew: 1},
		{Kind: EvAbandon, Attempt: 0},
		{Kind: EvResolveNotSent},
		{Kind: EvSend, Attempt: 0},
		{Kind: EvClaim, Attempt: 1, Skew: 1},
		{Kind: EvSend, Attempt: 1},
	}
	kinds, lines := runSteps(cfg, rulesPersonNotSentAtOnce(), steps)
	if !slices.Contains(kinds, PersonWrongNotSent) || !slices.Contains(kinds, SentTwice) {
		t.Errorf("the old rule: violations %q, want %q and %q; steps:\n%s", kinds, PersonWrongNotSent, SentTwice, strings.Join(lines, "\n"))
	}
	// Today's rule refuses the early "not sent": the key stays blocked, a2's claim is refused.
	kinds, lines = runSteps(cfg, Current(), steps[:3])
	if len(kinds) != 0 || !strings.Contains(lines[2], "not owner") {
		t.Errorf("today's rule: violations %q, want the resolve refused; steps:\n%s", kinds, strings.Join(lines, "\n"))
	}
	// From the lease plus the margin it counts, and the flying request can no longer land.
	lease := dsecs(cfg.Leases[0]) + 2*dsecs(cfg.Skews[len(cfg.Skews)-1])
	late := []Event{steps[0], steps[1], {Kind: EvTime, To: lease + dsecs(store.LeaseMargin)}, {Kind: EvResolveNotSent},
		{Kind: EvClaim, Attempt: 1, Skew: 1}, {Kind: EvSend, Attempt: 1}}
	kinds, lines = runSteps(cfg, Current(), late)
	if len(kinds) != 0 || !strings.Contains(lines[3], "resolves released: ok") || !strings.Contains(lines[5], "a2 sends") {
		t.Errorf("today's rule after the margin: violations %q; steps:\n%s", kinds, strings.Join(lines, "\n"))
	}
}

// The exploration finds atk-op finding 4 by itself under the old rule, and nothing
// under today's (TestExplore).
func TestExplorePersonNotSentAtOnceFindsTheHole(t *testing.T) {
	var cfg Config
	for _, c := range Configs() {
		if c.Name == "destructive" {
			cfg = c
		}
	}
	// Six steps reach the second charge (claim, abandon, resolve, the flying request
	// lands, claim, send): at least that deep, under the race detector too.
	res := Explore(cfg, rulesPersonNotSentAtOnce(), max(depth(t), 6))
	var kinds []string
	for _, v := range res.Violations {
		kinds = append(kinds, v.Kind)
	}
	if !slices.Contains(kinds, PersonWrongNotSent) || !slices.Contains(kinds, SentTwice) {
		t.Fatalf("old rule: violations %q, want %q and %q", kinds, PersonWrongNotSent, SentTwice)
	}
}
