package claimmodel

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/idemgate/idemgate/store"
)

// Horizon is how far the model lets time run: past every lease, margin and window
// of Configs.
const Horizon = 40 * time.Minute

// Result is what one exploration found.
type Result struct {
	Config      string
	Depth       int
	States      int
	Transitions int
	// Violations holds the shortest counterexample of each kind found (breadth first).
	Violations []Violation
}

// Violation is a broken invariant and the steps that break it.
type Violation struct {
	Kind  string
	Steps []string
	// AfterWrongNotSent: the path settled the key by a witness's wrong "not sent"
	// (WitnessWrongNotSent, at this step or before): the violation is that hole or
	// its consequence. Explore keeps the shortest counterexample of each kind with and
	// without one, so a known wrong "not sent" hides no other hole.
	AfterWrongNotSent bool
}

func (v Violation) String() string {
	return v.Kind + ":\n\t" + strings.Join(v.Steps, "\n\t")
}

// stateKey is the canonical encoding of a State: what the rules and the checks can
// still tell apart. Fields that no rule reads (UpdatedAt, the stored result, the
// attempt's workflow identity) are left out; values that can no longer matter
// (the vendor's memory of a key it forgot, a finished attempt's lease) are zeroed.
type stateKey struct {
	t          int32
	found, may bool
	// The record's evidence, by vendor (bit v: the model's vendor v): recorded by
	// the current claim (sentCur), by the claims before it (sentOld); blank: a claim
	// before recorded none.
	sentCur, sentOld        uint8
	blank                   bool
	st                      uint8
	owner, claims           int8
	lease, created, expires int32
	att                     [maxAttempts]attemptState
	vendorFirst             [vendors]int32
	effects                 [vendors]int8
	seen                    [vendors]bool
	sentEpoch, maySent      bool
	ghostCreated, forgetAt  int32
	closed                  bool
	closedAt                int32 // -1: closed and past the retention
	ask                     witnessAsk
	wrongNotSent            bool
	everSent                bool
}

// encoded and ignored are the Record fields the key keeps and leaves out. A field
// in neither panics at start-up: a new field of store.Record must be placed here.
var (
	encoded = []string{"State", "Owner", "Lease", "CreatedAt", "ExpiresAt", "Claims", "MayHaveSent", "Sent"}
	// Constant for one key in the model, read by no rule, or set with the owner by
	// every claim (WorkflowID, RunID: the owner's attempt's; RootWorkflowID is
	// constant).
	ignored = []string{"Key", "Activity", "Effect", "ArgsHash", "Args", "Result", "ResultOmitted",
		"WorkflowID", "RunID", "RootWorkflowID", "Attempt", "UpdatedAt"}
)

func init() {
	rt := reflect.TypeFor[store.Record]()
	for i := range rt.NumField() {
		if n := rt.Field(i).Name; !slices.Contains(encoded, n) && !slices.Contains(ignored, n) {
			panic("idemgate/store/claimmodel: store.Record has a field " + n + " the model does not encode; add it to the canonical key")
		}
	}
}

func stateCode(st store.State) uint8 {
	switch st {
	case store.StateClaimed:
		return 1
	case store.StateUnknown:
		return 2
	case store.StateCompleted:
		return 3
	case store.StateReleased:
		return 4
	}
	return 0
}

func (m *model) canonical(s *State) stateKey {
	k := stateKey{t: s.t, found: s.found, vendorFirst: s.vendorFirst, effects: s.effects, seen: s.seen,
		sentEpoch: s.sentEpoch, maySent: s.maySent, ghostCreated: s.created, forgetAt: s.forgetAt,
		wrongNotSent: s.wrongNotSent}
	if s.found {
		r := &s.rec
		k.st, k.owner, k.claims, k.may = stateCode(r.State), int8(m.owner(s)), int8(r.Claims), m.rules.MayHaveSent(*r)
		k.lease, k.created, k.expires = secs(r.Lease), secs(r.CreatedAt), secs(r.ExpiresAt)
		for _, e := range r.Sent {
			switch {
			case e.Blank():
				k.blank = true
			case e.Owner == "" || e.Owner == r.Owner:
				k.sentCur |= m.vendorBit(e)
			default:
				k.sentOld |= m.vendorBit(e)
			}
		}
	}
	for v := range m.nVendors() {
		if f := k.vendorFirst[v]; f >= 0 && s.t >= f+dsecs(m.window(v)) {
			k.vendorFirst[v] = -1
		}
	}
	if s.t >= k.forgetAt-m.slack {
		k.forgetAt = 0
	}
	if s.closed {
		k.closed, k.closedAt = true, s.closedAt
		if !m.resettable(s) {
			k.closedAt = -1
		}
	}
	if m.askLive(s) {
		k.ask = s.ask
	}
	if m.cfg.WitnessByKey {
		k.everSent = s.everSent
	}
	for i, a := range s.att {
		if a.phase == done {
			a = attemptState{phase: done, sent: a.sent, excused: a.excused}
		}
		k.att[i] = a
	}
	return k
}

type node struct {
	parent int32
	ev     Event
}

// Explore explores cfg under r breadth first up to depth steps and returns the
// states and transitions it visited and the shortest counterexample of each kind of
// violation by each kind of step that causes it.
func Explore(cfg Config, r Rules, depth int) Result {
	m := newModel(cfg, r, "model-key")
	horizon := cfg.horizon()
	res := Result{Config: cfg.Name, Depth: depth}
	s0 := m.initial()
	visited := map[stateKey]int32{m.canonical(&s0): 0}
	nodes := []node{{parent: -1}}
	type item struct {
		s  State
		id int32
	}
	frontier := []item{{s0, 0}}
	type seenKey struct {
		kind  string
		ev    EventKind
		after bool
	}
	seen := map[seenKey]bool{}
	for d := 0; d < depth && len(frontier) > 0; d++ {
		var next []item
		for _, it := range frontier {
			for _, e := range m.events(&it.s, horizon) {
				res.Transitions++
				var p stepper
				s := m.step(it.s, e, &p)
				for _, v := range p.violations {
					if sk := (seenKey{v, e.Kind, s.wrongNotSent}); !seen[sk] {
						seen[sk] = true
						res.Violations = append(res.Violations, Violation{Kind: v, Steps: m.describe(append(path(nodes, it.id), e)),
							AfterWrongNotSent: s.wrongNotSent})
					}
				}
				k := m.canonical(&s)
				if _, ok := visited[k]; ok {
					continue
				}
				id := int32(len(nodes))
				visited[k] = id
				nodes = append(nodes, node{parent: it.id, ev: e})
				next = append(next, item{s, id})
			}
		}
		frontier = next
	}
	res.States = len(nodes)
	return res
}

func path(nodes []node, id int32) []Event {
	var evs []Event
	for ; id > 0; id = nodes[id].parent {
		evs = append(evs, nodes[id].ev)
	}
	slices.Reverse(evs)
	return evs
}

// describe replays evs and says what each step did, with the violations it caused.
func (m *model) describe(evs []Event) []string {
	var out []string
	s := m.initial()
	for _, e := range evs {
		var say []string
		p := stepper{say: &say}
		s = m.step(s, e, &p)
		line := fmt.Sprintf("t=+%ds %s", s.t, strings.Join(say, "; "))
		if len(p.violations) > 0 {
			line += " => " + strings.Join(p.violations, ", ")
		}
		out = append(out, line)
	}
	return out
}

// Sequence is one random walk of the model as store calls: replay the Ops in order
// on an empty key; after the last, Pending at Now lists the key iff Pending.
type Sequence struct {
	Config  string
	Ops     []Op
	Now     time.Time
	Pending bool
}

// Sequences returns n random walks of at most depth steps over every configuration
// of Configs under the current rules, from a deterministic seed. Walk i uses the
// key keyOf(i). Walks that break an invariant end before the breaking step; each
// ends with a Begin of the same key with other arguments.
func Sequences(n, depth int, seed uint64, keyOf func(i int) string) []Sequence {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	cfgs := Configs()
	out := make([]Sequence, 0, n)
	for i := range n {
		m := newModel(cfgs[i%len(cfgs)], Current(), keyOf(i))
		s := m.initial()
		horizon := m.cfg.horizon()
		var ops []Op
		for range depth {
			// A sweep that asks Temporal is no store call the backends replay.
			evs := slices.DeleteFunc(m.events(&s, horizon), func(e Event) bool { return e.Kind == EvSweepTemporal })
			if len(evs) == 0 {
				break
			}
			var stepOps []Op
			p := stepper{ops: &stepOps}
			next := m.step(s, evs[rng.IntN(len(evs))], &p)
			if len(p.violations) > 0 {
				break
			}
			s, ops = next, append(ops, stepOps...)
		}
		// Last, a call with other arguments: a conflict, or a fresh claim where the key is free.
		probe := m.claim(0, s.t, "h2")
		probe.Owner, probe.RunID = "other-args", "run-other"
		o, next, write := m.rules.Decide(s.rec, s.found, probe)
		if write {
			s.rec, s.found = next, true
		}
		ops = append(ops, Op{Kind: OpBegin, Claim: probe, Outcome: o, Found: s.found, Record: s.rec})
		out = append(out, Sequence{Config: m.cfg.Name, Ops: ops, Now: at(s.t),
			Pending: s.found && m.rules.Blocking(s.rec, at(s.t))})
	}
	return out
}

// vendorBit is the bit of the model's vendor that evidence e names.
func (m *model) vendorBit(e store.Sent) uint8 {
	for v := range m.nVendors() {
		if e.Via == m.sent(v).Via {
			return 1 << v
		}
	}
	panic("idemgate/store/claimmodel: evidence of no vendor of the model: " + e.String())
}
