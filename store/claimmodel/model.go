package claimmodel

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/idemgate/idemgate/store"
)

// Config is one family of scenarios: what kind of write, its windows and leases.
type Config struct {
	Name string
	// Effect is "idempotent-write" (a later attempt takes over an unknown claim) or
	// "destructive".
	Effect string
	// VendorWindow > 0 makes a destructive write go to a vendor that deduplicates on
	// the forwarded key for that long, and names the same window in the gate's
	// Options.VendorWindows: a re-send with the same key is then allowed inside it.
	VendorWindow time.Duration
	// Window is the gate's Options.Window.
	Window time.Duration
	// Leases is each attempt's lease (its StartToClose), from its claim; its length
	// is the number of attempts (at most 3).
	Leases []time.Duration
	// Skews are the clock offsets a worker may have from the true time.
	Skews []time.Duration
	// Overrun is how long past its lease, by its own clock, a zombie attempt that
	// ignores its cancellation may still send.
	Overrun time.Duration
	// Unkeyed: the activity's body calls the vendor without the keyed transport
	// (a plain http.Client), although the gate names a VendorWindow for it: no key
	// leaves, so the vendor cannot deduplicate, nothing records evidence, and no
	// transport checks a retry.
	Unkeyed bool
	// Horizon is how far time runs. Optional: zero means the package's Horizon.
	Horizon time.Duration
	// Retention > 0 models the attempts' workflow: open, it can be reset at any
	// time; it closes at any time, and stays resettable for Retention (the
	// namespace's retention) after. A sweep that asks Temporal then learns whether it
	// can still be reset. Every later attempt may be a reset run of it.
	Retention time.Duration
	// Child: the attempts run in a child workflow whose ID the SDK generates from
	// its parent's run ID (a grandchild, any child without an explicit WorkflowID).
	// Each attempt may be a child that a reset of the root re-created under a new
	// workflow ID (attempt i: child-i) with the same keys and the same root
	// (root-1). Retention then models the root; the children closed long ago and
	// are past retention, so Temporal knows none of their IDs.
	Child bool
	// Witness adds the witnesses of issue 19 (package witness): a reconciler — the
	// gate meeting an unknown record, the plugin's background pass, `idemgate
	// reconcile` — asks a witness about the key's record at any step, on the clock
	// of its worker (any of Skews: witness.Asker reads AskedAt from the gate's
	// clock, not the witness's), and the witness answers truthfully of that moment:
	// "sent" when some request of the write has reached the vendor, else "not sent".
	// The answer is delivered at any later step (or never: a timeout, a lost
	// answer), settling through the real rule (Rules.ApplyResolve with
	// Transition.Witness and AskedAt), with Now read from the same worker's clock.
	// A witness that cannot tell (or errs, or times out) is asked too: it settles
	// nothing.
	Witness bool
	// WitnessByKey: the witness answers by the key alone — a vendor lookup that
	// finds any effect carrying the key, an earlier write's too (a key forgotten and
	// claimed afresh, a WithKey business key used again past its window) — instead
	// of this write's requests only.
	WitnessByKey bool
	// SecondWindow > 0: the write goes to two vendors, each through a keyed
	// transport of its own (atk-wit finding 1): the first deduplicates on the key
	// for VendorWindow (the window Options.VendorWindows names), the second for
	// SecondWindow (shorter). An attempt writes to each once, in either order, and
	// may die between its writes; a write may also be lost on its way (EvSendLost:
	// its evidence recorded, the vendor never reached). With Witness, the witness is
	// the first vendor's lookup (idemhttp.LookupWitness): it tells only when the
	// record's evidence (Rules.Exits) says the key left to that vendor and nowhere
	// else, and then says "sent" when a request reached that vendor, else "not
	// sent"; otherwise it cannot tell.
	SecondWindow time.Duration
	// PersonLooks: the answer the reconciler gets is a person's instead (with
	// Witness): they look the write up at the vendor at one step (EvAsk) and type
	// `idemgate resolve` at a later one (EvDeliver), which settles by a person's
	// rule (Transition.Witness "", Now the true time; store.Resolvable).
	PersonLooks bool
}

// horizon is cfg.Horizon, or Horizon when it is zero, in seconds.
func (cfg Config) horizon() int32 {
	if cfg.Horizon > 0 {
		return dsecs(cfg.Horizon)
	}
	return dsecs(Horizon)
}

// keepMargin is how long past its lease the contract says a claim's record is kept:
// an attempt may overrun its lease (Overrun < keepMargin) and still send.
const keepMargin = 5 * time.Minute

// Configs are the scenario families the default exploration covers: the first
// attempt's lease outlives the window (item 1 of issue 10), the vendor window is
// shorter than the gate's (item 2).
func Configs() []Config {
	base := Config{
		Window:  10 * time.Minute,
		Leases:  []time.Duration{20 * time.Minute, time.Minute, time.Minute},
		Skews:   []time.Duration{-2 * time.Second, 0, 2 * time.Second},
		Overrun: time.Minute,
	}
	idem, destr, keyed, unkeyed := base, base, base, base
	idem.Name, idem.Effect = "idempotent-write", "idempotent-write"
	destr.Name, destr.Effect, destr.Retention = "destructive", "destructive", 15*time.Minute
	keyed.Name, keyed.Effect, keyed.VendorWindow = "destructive-vendor-keyed", "destructive", 5*time.Minute
	// Issue 18 item 12: configuration and wire disagree.
	unkeyed.Name, unkeyed.Effect, unkeyed.VendorWindow, unkeyed.Unkeyed = "destructive-vendor-unkeyed", "destructive", 5*time.Minute, true
	keyed.Retention, unkeyed.Retention = 15*time.Minute, 15*time.Minute
	// Issue 19: witnesses settle the destructive writes whose outcome is unknown.
	// (The child's witness is the destructive one's: the witness's rules read no
	// workflow ID. The idempotent write's unknown outcome is taken over, not asked
	// about, at the gate.)
	destr.Witness, keyed.Witness, unkeyed.Witness = true, true, true
	// The findings F1 and F2 of the issue-18 gate attack: the write of a child
	// re-created by its root's reset.
	child := destr
	child.Name, child.Child, child.Witness = "destructive-child", true, false
	// atk-wit finding 1: a write to two keyed vendors, the first one's lookup as the
	// witness.
	two := keyed
	two.Name, two.SecondWindow, two.Retention = "destructive-two-vendors", 2*time.Minute, 0
	return []Config{idem, destr, keyed, unkeyed, child, two}
}

const maxAttempts = 3

// Violation kinds.
const (
	SentTwice         = "destructive write reached the vendor twice"
	WrongResult       = "stored result returned to a call with other arguments"
	LiveTakenOver     = "claim with a live lease taken over or re-claimed"
	LiveExpired       = "claim with a live lease expired"
	LiveSwept         = "claim with a live lease swept"
	LiveResolved      = "claim with a live lease resolved"
	MaySentForgotten  = "may-have-sent became false without a person"
	FirstClaimedMoved = "first-claimed time moved while an earlier attempt may have sent"
	MarkCleared       = "MayHaveSent mark cleared without a person"
	// UnknownForgotten: a destructive write's record with no known outcome (state
	// unknown, or claimed with its owner gone) was expired or swept. Its attempt may
	// have reached the vendor; only a person's resolve may free the key, or a
	// re-send inside the vendor's window — never the gate's window running out.
	UnknownForgotten = "destructive record with no known outcome forgotten"
	// ResetForgotten: a finished destructive write's record was expired, swept or
	// claimed afresh while its workflow could still be reset (open, or closed within
	// the namespace's retention): the reset run would send it again.
	ResetForgotten = "finished destructive record forgotten while its workflow can be reset"
	// WitnessWrongNotSent: a witness's "not sent" settled the key (released it)
	// although a request of the write has reached the vendor — true when it was
	// asked, no longer when it arrived. The next claim is a fresh one and sends again.
	WitnessWrongNotSent = "witness settlement stored not-sent for a write the vendor performed"
	// PersonWrongNotSent: a person's "not sent" (Config.PersonLooks), true when they
	// looked at the vendor, settled the key after a request of the write reached it;
	// or a person's "not sent" (EvResolveNotSent) settled the key while an abandoned
	// attempt's request was still on its way, and it landed.
	PersonWrongNotSent = "person's resolve stored not-sent for a write the vendor performed"
	// LostWriteDone: the key's record says the write finished (StateCompleted)
	// although no request of it ever reached the vendor.
	LostWriteDone = "write reported done that never reached the vendor"
)

type phase uint8

const (
	idle phase = iota
	running
	// flying: the attempt gave up (EvAbandon) before anything of it had reached
	// the vendor, with a request possibly still on its way: an HTTP client that
	// timed out mid-request, a request the vendor queued. It reaches the vendor
	// (EvSend) at any later step while its clock is short of its lease plus Overrun,
	// or never (atk-op finding 4).
	flying
	done
)

// witnessAsk is a witness's answer on its way: asked about the record of owner
// (an attempt index) at clock at (the asking worker's clock, Skews[skew]), it says
// sent (a request of the write had reached the vendor then) or not sent.
type witnessAsk struct {
	on    bool
	sent  bool
	owner int8
	skew  int8
	at    int32
	// inTime: since the ask, an attempt reached the vendor before its deadline
	// (by its clock), not in its overrun.
	inTime bool
}

type attemptState struct {
	phase phase
	skew  int8 // index into Config.Skews
	sent  bool // a request of it reached a vendor
	// tried: the vendors it wrote to (bit v: vendor v), whether or not the request
	// reached them; reached: those it reached.
	tried, reached uint8
	retry          bool // claimed by a takeover: idemhttp checks the vendor window
	excused        bool // a person said not-sent while it ran, or its key was forgotten since
	notSent        bool // a witness's "not sent" settled the key while it ran
	// personNotSent: a person's "not sent" settled the key while its request was
	// flying (EvResolveNotSent).
	personNotSent bool
	first         int32
	lease         int32
}

// State is one state of the model: the key's record and the world around it.
// Times are seconds from base.
type State struct {
	t     int32
	found bool
	rec   store.Record
	// The workflow (Config.Retention > 0): closed, and when (seconds from base).
	closed   bool
	closedAt int32
	att      [maxAttempts]attemptState
	// The vendors: when each first saw the key (-1: it does not remember it).
	vendorFirst [vendors]int32
	// Ghosts of the checks, for the current epoch (since the key was last legitimately forgotten).
	effects   [vendors]int8 // vendor effects of attempts not excused, per vendor
	seen      [vendors]bool // a request reached that vendor (this epoch)
	sentEpoch bool          // some attempt sent (the vendor saw a request)
	maySent   bool          // some attempt not excused sent
	created   int32         // CreatedAt when maySent turned true (-1: none)
	forgetAt  int32         // the key may be forgotten from then on
	// The witness's answer on its way (Config.Witness). One is enough: answers
	// about one owner's record can settle it once (a settlement moves the record out
	// of claimed or unknown, and every later claim has another owner), and a new ask
	// replaces the one before, which is then never delivered (lost, timed out).
	ask witnessAsk
	// wrongNotSent: a witness's "not sent" settled the key on this path although an
	// attempt reached the vendor after the ask, and only in its overrun — past its
	// deadline by its own clock, inside LeaseMargin (WitnessWrongNotSent, the hole
	// the model finds in the current rules). What follows is that hole's consequence:
	// Explore reports it apart (Violation.AfterWrongNotSent). A wrong "not sent"
	// after a send inside the deadline is another hole and does not set it.
	wrongNotSent bool
	// everSent: some request with the key ever reached the vendor, in any epoch
	// (Config.WitnessByKey).
	everSent bool
}

// EventKind is what happens in one step.
type EventKind uint8

// The events.
const (
	EvClaim EventKind = iota
	EvSend
	EvCrash
	EvRelease
	EvAbandon
	EvComplete
	EvTime
	EvSweep
	EvResolveSent
	EvResolveNotSent
	// EvClose: the workflow closes (Config.Retention > 0).
	EvClose
	// EvSweepTemporal: a sweep that asks Temporal whether the record's workflow can
	// still be reset (Config.Retention > 0).
	EvSweepTemporal
	// EvAsk: a reconciler on a worker with clock skew Skew asks a witness about the
	// record (Config.Witness); the witness answers truthfully of this moment.
	EvAsk
	// EvDeliver: the answer of the last EvAsk arrives and settles through
	// Rules.ApplyResolve with the witness's rules.
	EvDeliver
	// EvCannotTell: a witness that cannot tell (or errs, or times out) is asked: it
	// settles nothing.
	EvCannotTell
	// EvSendLost: an attempt's keyed transport records its evidence and writes the
	// request to Vendor, and the request is lost on its way (Config.SecondWindow):
	// the vendor never reads it, the attempt cannot tell.
	EvSendLost
)

// vendors is how many vendors the model's write may go to (Config.SecondWindow).
const vendors = 2

// Event is one step: Attempt for the attempt's events, Skew (index) for a claim,
// To (seconds) for time passing.
type Event struct {
	Kind    EventKind
	Attempt int8
	Skew    int8
	To      int32
	// Vendor is the vendor an EvSend or EvSendLost writes to (Config.SecondWindow).
	Vendor int8
}

var base = time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)

func at(s int32) time.Time        { return base.Add(time.Duration(s) * time.Second) }
func secs(t time.Time) int32      { return int32(t.Sub(base) / time.Second) }
func dsecs(d time.Duration) int32 { return int32(d / time.Second) }

// model is one configuration under one set of rules.
type model struct {
	cfg    Config
	rules  Rules
	key    string
	owners [maxAttempts]string
	runs   [maxAttempts]string
	skews  []int32
	maxSk  int32
	slack  int32 // 2×the largest skew: how early a key may be forgotten by a clock ahead
}

func newModel(cfg Config, r Rules, key string) *model {
	if r.SweepAsks == nil { // rules built without it: one workflow, its own root
		r.SweepAsks = store.ResetBy
	}
	if r.Exits == nil { // rules built without it: the evidence as store.Exits reads it
		r.Exits = store.Exits
	}
	m := &model{cfg: cfg, rules: r, key: key}
	for i := range maxAttempts {
		m.owners[i] = fmt.Sprintf("a%d", i+1)
		m.runs[i] = fmt.Sprintf("run-%d", i+1)
	}
	for _, s := range cfg.Skews {
		m.skews = append(m.skews, dsecs(s))
		m.maxSk = max(m.maxSk, dsecs(s))
	}
	m.slack = 2 * m.maxSk
	return m
}

// skew is the gate's Options.ClockSkew in the model: the largest offset of a worker clock.
func (m *model) skew() time.Duration { return time.Duration(m.maxSk) * time.Second }

func (m *model) initial() State {
	return State{vendorFirst: [vendors]int32{-1, -1}, created: -1}
}

var args = []byte(`{"amount":4200}`)

// claim is attempt i's Begin at its clock. The lease it stores is its deadline plus
// 2×the largest skew, as the gate claims (interceptor.Options.ClockSkew): the owner's
// clock may run behind and the next worker's ahead. The attempt itself runs until its
// deadline (a.lease) by its own clock.
func (m *model) claim(i int, clock int32, hash string) store.Claim {
	c := store.Claim{
		Key: m.key, Activity: "ChargeCard", Effect: m.cfg.Effect, ArgsHash: hash, Args: args,
		Owner: m.owners[i], Lease: at(clock + dsecs(m.cfg.Leases[i]) + m.slack), Window: m.cfg.Window,
		TakeOver: m.cfg.Effect == "idempotent-write", WorkflowID: m.rootID(), RunID: m.runs[i],
		Attempt: int32(i + 1), Now: at(clock),
	}
	if m.cfg.Child {
		c.WorkflowID, c.RootWorkflowID = fmt.Sprintf("child-%d", i+1), m.rootID()
	}
	return c
}

// rootID is the workflow ID of the workflow a reset of which re-creates the call:
// the attempts' own (wf-1), or their root's (Config.Child).
func (m *model) rootID() string {
	if m.cfg.Child {
		return "root-1"
	}
	return "wf-1"
}

func (m *model) transition(owner string, clock int32, d store.Decision) store.Transition {
	return store.Transition{
		Key: m.key, Owner: owner, Now: at(clock), Window: m.cfg.Window,
		Receipt: store.Receipt{Key: m.key, Activity: "ChargeCard", Effect: m.cfg.Effect, Decision: d, ArgsHash: "h1"},
	}
}

// owner returns the index of the attempt owning the record, or -1.
func (m *model) owner(s *State) int {
	for i, o := range m.owners {
		if s.rec.Owner == o {
			return i
		}
	}
	return -1
}

// live reports whether the record is a claim whose owner runs inside its own
// deadline (by its own clock).
func (m *model) live(s *State) bool {
	if !s.found || s.rec.State != store.StateClaimed {
		return false
	}
	o := m.owner(s)
	return o >= 0 && s.att[o].phase == running && s.t+m.skews[s.att[o].skew] < s.att[o].lease
}

// events lists the events possible in s, in a fixed order.
func (m *model) events(s *State, horizon int32) []Event {
	var evs []Event
	for i := range m.cfg.Leases {
		a := s.att[i]
		switch a.phase {
		case idle:
			if i == 0 || s.att[i-1].phase != idle {
				for k := range m.skews {
					evs = append(evs, Event{Kind: EvClaim, Attempt: int8(i), Skew: int8(k)})
				}
			}
		case running:
			for v := range m.nVendors() {
				if a.tried&(1<<v) == 0 && m.maySend(s, i, v) {
					evs = append(evs, Event{Kind: EvSend, Attempt: int8(i), Vendor: int8(v)})
					if m.cfg.SecondWindow > 0 {
						evs = append(evs, Event{Kind: EvSendLost, Attempt: int8(i), Vendor: int8(v)})
					}
				}
			}
			evs = append(evs, Event{Kind: EvCrash, Attempt: int8(i)}, Event{Kind: EvAbandon, Attempt: int8(i)})
			if a.reached == m.allVendors() {
				evs = append(evs, Event{Kind: EvComplete, Attempt: int8(i)})
			} else if a.tried == 0 {
				evs = append(evs, Event{Kind: EvRelease, Attempt: int8(i)})
			}
		case flying:
			for v := range m.nVendors() {
				if m.maySend(s, i, v) {
					evs = append(evs, Event{Kind: EvSend, Attempt: int8(i), Vendor: int8(v)})
				}
			}
		}
	}
	for _, to := range m.times(s, horizon) {
		evs = append(evs, Event{Kind: EvTime, To: to})
	}
	if m.cfg.Retention > 0 && !s.closed {
		evs = append(evs, Event{Kind: EvClose})
	}
	if s.found {
		evs = append(evs, Event{Kind: EvSweep})
		if m.cfg.Retention > 0 {
			evs = append(evs, Event{Kind: EvSweepTemporal})
		}
		if st := s.rec.State; st == store.StateClaimed || st == store.StateUnknown {
			if s.sentEpoch {
				evs = append(evs, Event{Kind: EvResolveSent})
			} else {
				evs = append(evs, Event{Kind: EvResolveNotSent})
			}
			if m.cfg.Witness {
				for k := range m.skews {
					evs = append(evs, Event{Kind: EvAsk, Skew: int8(k)})
				}
				evs = append(evs, Event{Kind: EvCannotTell})
			}
		}
	}
	if m.askLive(s) {
		evs = append(evs, Event{Kind: EvDeliver})
	}
	return evs
}

// askLive reports whether the witness's answer on its way can still settle the
// record: it is about the record's owner, still claimed or unknown. Once the record
// moved on (settled, released, forgotten, claimed by another attempt) it never
// can: owners are per attempt, and an attempt claims once.
func (m *model) askLive(s *State) bool {
	if !s.ask.on || !s.found || m.owner(s) != int(s.ask.owner) {
		return false
	}
	return s.rec.State == store.StateClaimed || s.rec.State == store.StateUnknown
}

// maySend: a running attempt sends until its lease plus the overrun (by its clock);
// a retry of a destructive write to vendor v only while its keyed transport
// (idemhttp, the MCP bridge) allows it: inside that vendor's window.
func (m *model) maySend(s *State, i, v int) bool {
	a := s.att[i]
	clock := s.t + m.skews[a.skew]
	if clock >= a.lease+dsecs(m.cfg.Overrun) {
		return false
	}
	if a.retry && m.cfg.Effect == "destructive" && !m.cfg.Unkeyed {
		return m.cfg.VendorWindow > 0 && m.rules.Resend(at(a.first), at(clock), m.window(v), m.skew())
	}
	return true
}

// nVendors is how many vendors the write goes to: two with Config.SecondWindow.
func (m *model) nVendors() int {
	if m.cfg.SecondWindow > 0 {
		return 2
	}
	return 1
}

// allVendors is the bit set of every vendor the write goes to.
func (m *model) allVendors() uint8 { return 1<<m.nVendors() - 1 }

// window is how long vendor v deduplicates on the key.
func (m *model) window(v int) time.Duration {
	if v == 1 {
		return m.cfg.SecondWindow
	}
	return m.cfg.VendorWindow
}

// times are the true times worth moving to: each boundary of a rule, as each worker
// clock sees it.
func (m *model) times(s *State, horizon int32) []int32 {
	var bs []int32
	if s.found {
		r := &s.rec
		l := secs(r.Lease)
		bs = append(bs, l, l+dsecs(keepMargin), secs(r.ExpiresAt))
		for v := range m.nVendors() {
			if vw := m.window(v); vw > 0 {
				c := secs(r.CreatedAt)
				bs = append(bs, c+dsecs(vw), c+dsecs(vw-m.rules.ResendMargin(m.skew())))
			}
		}
	}
	for i := range m.cfg.Leases {
		if a := s.att[i]; a.phase == running || a.phase == flying {
			bs = append(bs, a.lease, a.lease+dsecs(m.cfg.Overrun))
			for v := range m.nVendors() {
				if vw := m.window(v); vw > 0 && a.retry {
					bs = append(bs, a.first+dsecs(vw), a.first+dsecs(vw-m.rules.ResendMargin(m.skew())))
				}
			}
		}
	}
	var out []int32
	for _, b := range bs {
		for _, sk := range m.skews {
			if t := b - sk; t > s.t && t <= horizon {
				out = append(out, t)
			}
		}
	}
	for v := range m.nVendors() {
		if f := s.vendorFirst[v]; f >= 0 {
			if t := f + dsecs(m.window(v)); t > s.t && t <= horizon {
				out = append(out, t)
			}
		}
	}
	if s.closed {
		if t := s.closedAt + dsecs(m.cfg.Retention); t > s.t && t <= horizon {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Op is one store call of a step, with what the rules say it returns and leaves.
type Op struct {
	Kind       OpKind
	Claim      store.Claim      // Begin
	Transition store.Transition // Complete, Release, Abandon, Resolve
	To         store.State      // Resolve
	Now        time.Time        // Sweep
	// Sent is RecordSent's evidence (its key and owner in Transition).
	Sent store.Sent
	// Outcome is Begin's outcome; Err is nil or store.ErrNotOwner (Complete, Release,
	// Abandon, Resolve, RecordSent).
	Outcome store.Outcome
	Err     error
	// Found and Record: the key's record after the call.
	Found  bool
	Record store.Record
}

// OpKind names the store call.
type OpKind string

// The store calls.
const (
	OpBegin    OpKind = "Begin"
	OpComplete OpKind = "Complete"
	OpRelease  OpKind = "Release"
	OpAbandon  OpKind = "Abandon"
	OpSweep    OpKind = "Sweep"
	OpResolve  OpKind = "Resolve"
	OpSent     OpKind = "RecordSent"
)

// sent is the evidence the model's keyed transport to vendor v records.
func (m *model) sent(v int) store.Sent {
	if v == 1 {
		return store.Sent{Via: "idemhttp:second", Host: "second.example", Window: m.cfg.SecondWindow}
	}
	return store.Sent{Via: "idemhttp:vendor", Host: "vendor.example", Window: m.cfg.VendorWindow}
}

// stepper collects what a step did: violations, and, when asked, the store calls
// and a description.
type stepper struct {
	violations []string
	ops        *[]Op
	say        *[]string
}

func (p *stepper) violate(kind string) { p.violations = append(p.violations, kind) }

func (p *stepper) op(o Op, s *State) {
	if p.ops != nil {
		o.Found, o.Record = s.found, s.rec
		*p.ops = append(*p.ops, o)
	}
}

func (p *stepper) sayf(format string, a ...any) {
	if p.say != nil {
		*p.say = append(*p.say, fmt.Sprintf(format, a...))
	}
}

// step applies e to s and checks every invariant.
func (m *model) step(s State, e Event, p *stepper) State {
	prev := s
	i := int(e.Attempt)
	person := false // a person or a witness settled the key
	reset := false
	switch e.Kind {
	case EvClaim:
		clock := s.t + m.skews[e.Skew]
		c := m.claim(i, clock, "h1")
		out, next, write := m.rules.Decide(s.rec, s.found, c)
		if write {
			s.rec, s.found = next, true
		}
		p.op(Op{Kind: OpBegin, Claim: c, Outcome: out}, &s)
		if w, ok := m.rules.ResendWindow(s.rec, m.cfg.VendorWindow); out == store.OutcomeUnknown && m.cfg.VendorWindow > 0 &&
			ok && m.rules.Resend(s.rec.CreatedAt, c.Now, w, m.skew()) {
			c.TakeOver = true
			out, next, write = m.rules.Decide(s.rec, s.found, c)
			if write {
				s.rec, s.found = next, true
			}
			p.op(Op{Kind: OpBegin, Claim: c, Outcome: out}, &s)
		}
		p.sayf("a%d (clock %+ds) Begin: %s", i+1, m.skews[e.Skew], out)
		if out == store.OutcomeCompleted && (next.ArgsHash != c.ArgsHash || next.Key != c.Key) {
			p.violate(WrongResult)
		}
		a := &s.att[i]
		a.phase, a.skew = done, e.Skew
		if out == store.OutcomeClaimed || out == store.OutcomeTakenOver {
			if m.live(&prev) {
				p.violate(LiveTakenOver)
			}
			if out == store.OutcomeClaimed && prev.found && unknownOutcome(prev.rec) {
				p.violate(UnknownForgotten)
			}
			if out == store.OutcomeClaimed && prev.found && m.resetHeld(&prev) {
				p.violate(ResetForgotten)
			}
			if out == store.OutcomeClaimed && s.t >= s.forgetAt-m.slack {
				reset = true
				s.effects, s.seen, s.sentEpoch, s.maySent, s.created = [vendors]int8{}, [vendors]bool{}, false, false, -1
				for j := range s.att {
					s.att[j].excused = true
				}
			}
			a.phase, a.excused = running, false
			a.first, a.lease, a.retry = secs(next.CreatedAt), secs(c.Lease)-m.slack, out == store.OutcomeTakenOver
			if out == store.OutcomeClaimed {
				// A fresh claim starts the key's memory anew: over a released record
				// nothing was sent (else a check failed before), over a forgotten one
				// the epoch began again above.
				s.forgetAt = 0
			}
			s.forgetAt = max(s.forgetAt, s.t+dsecs(m.cfg.Window), a.lease+dsecs(keepMargin))
		}
	case EvSend, EvSendLost:
		a := &s.att[i]
		v := int(e.Vendor)
		if m.cfg.VendorWindow > 0 && !m.cfg.Unkeyed {
			// The keyed transport records the evidence, then writes the request.
			err := store.ErrNotOwner
			if s.found {
				var next store.Record
				var changed bool
				if next, changed, err = m.rules.ApplySent(s.rec, m.owners[i], m.sent(v)); changed {
					s.rec = next
				}
			}
			p.op(Op{Kind: OpSent, Transition: store.Transition{Key: m.key, Owner: m.owners[i]}, Sent: m.sent(v), Err: err}, &s)
		}
		a.tried |= 1 << v
		if a.phase == flying {
			a.phase = done // its one request landed
		}
		if e.Kind == EvSendLost {
			p.sayf("a%d writes to vendor %d; the request is lost on its way", i+1, v+1)
			break
		}
		late := s.t+m.skews[a.skew] >= a.lease
		if a.notSent {
			// A witness's "not sent" settled the key while this attempt ran.
			p.violate(m.wrongNotSent())
			s.wrongNotSent = s.wrongNotSent || late
		}
		if a.personNotSent {
			// A person's "not sent" settled the key while this attempt's request flew.
			p.violate(PersonWrongNotSent)
		}
		if !late && s.ask.on {
			s.ask.inTime = true
		}
		a.sent, s.sentEpoch, s.everSent = true, true, true
		a.reached |= 1 << v
		s.seen[v] = true
		if !a.excused && !s.maySent {
			s.maySent, s.created = true, -1
			if s.found {
				s.created = secs(s.rec.CreatedAt)
			}
		}
		effect := true
		if m.cfg.VendorWindow > 0 && !m.cfg.Unkeyed {
			if f := s.vendorFirst[v]; f >= 0 && s.t < f+dsecs(m.window(v)) {
				effect = false
			} else {
				s.vendorFirst[v] = s.t
			}
		}
		if effect && !a.excused {
			s.effects[v]++
		}
		if m.nVendors() > 1 {
			p.sayf("a%d sends to vendor %d (vendor effect: %v)", i+1, v+1, effect)
		} else {
			p.sayf("a%d sends (vendor effect: %v)", i+1, effect)
		}
	case EvCrash:
		s.att[i].phase = done
		p.sayf("a%d crashes", i+1)
	case EvRelease, EvAbandon, EvComplete:
		a := &s.att[i]
		a.phase = done
		clock := s.t + m.skews[a.skew]
		to, kind, d := store.StateReleased, OpRelease, store.DecisionReleased
		switch e.Kind {
		case EvAbandon:
			to, kind, d = store.StateUnknown, OpAbandon, store.DecisionUnknown
			if a.tried == 0 {
				a.phase = flying
			}
		case EvComplete:
			to, kind, d = store.StateCompleted, OpComplete, store.DecisionRan
		}
		t := m.transition(m.owners[i], clock, d)
		if to == store.StateCompleted {
			t.Result = []byte(`{"id":"ch_` + m.owners[i] + `"}`)
		}
		err := store.ErrNotOwner
		if s.found {
			var next store.Record
			if next, err = m.rules.Apply(s.rec, to, t); err == nil {
				s.rec = next
				if to == store.StateCompleted {
					m.completed(&s, i)
				}
			}
		}
		p.op(Op{Kind: kind, Transition: t, Err: err}, &s)
		p.sayf("a%d %s: %v", i+1, kind, errText(err))
	case EvTime:
		s.t = e.To
		p.sayf("time passes to +%ds", e.To)
	case EvClose:
		s.closed, s.closedAt = true, s.t
		p.sayf("the workflow closes")
	case EvSweep, EvSweepTemporal:
		now := at(s.t + m.maxSk)
		forget := m.rules.Expired(s.rec, now)
		what := "Sweep"
		if e.Kind == EvSweepTemporal {
			// Temporal knows the root (Config.Retention); a child's own ID it no longer
			// knows (Config.Child: closed and past retention).
			asked := m.rules.SweepAsks(s.rec)
			resettable := slices.Contains(asked, m.rootID()) && m.resettable(&s)
			forget = m.rules.Forgettable(s.rec, now, resettable)
			what = fmt.Sprintf("Sweep asking Temporal about %q (resettable: %v)", asked, resettable)
		}
		if forget {
			if m.live(&s) {
				p.violate(LiveSwept)
			}
			if unknownOutcome(s.rec) {
				p.violate(UnknownForgotten)
			}
			if m.resetHeld(&s) {
				p.violate(ResetForgotten)
			}
			s.found, s.rec = false, store.Record{}
		}
		if e.Kind == EvSweep {
			p.op(Op{Kind: OpSweep, Now: now}, &s)
		}
		p.sayf("%s (clock %+ds): record kept %v", what, m.maxSk, s.found)
	case EvResolveSent, EvResolveNotSent:
		to, d := store.StateCompleted, store.DecisionResolved
		if e.Kind == EvResolveNotSent {
			to = store.StateReleased
		}
		t := m.transition(s.rec.Owner, s.t, d)
		if to == store.StateCompleted {
			t.Result = []byte(`{"id":"ch_person"}`)
		}
		next, err := m.rules.ApplyResolve(s.rec, to, t)
		if err == nil {
			if m.live(&s) {
				p.violate(LiveResolved)
			}
			s.rec = next
			person = true
			if to == store.StateCompleted {
				m.completed(&s, -1)
			} else {
				owner := m.owner(&prev)
				for j := range s.att {
					switch ph := s.att[j].phase; {
					case ph == flying && j == owner:
						// Not excused: the person was right when they looked, but the
						// owner's request was still on its way, and the rule let the
						// "not sent" count before it could no longer land.
						s.att[j].personNotSent = true
					case ph == running || ph == flying:
						s.att[j].excused = true
					}
				}
				s.maySent, s.created = false, -1
			}
		}
		p.op(Op{Kind: OpResolve, Transition: t, To: to, Err: err}, &s)
		p.sayf("a person resolves %s: %v", to, errText(err))
	case EvAsk:
		clock := s.t + m.skews[e.Skew]
		sent := s.sentEpoch || m.cfg.WitnessByKey && s.everSent
		if m.cfg.SecondWindow > 0 {
			// The first vendor's lookup: it tells only for a key that left to it and
			// nowhere else (idemhttp.LookupWitness on the record's evidence).
			if !m.lookupTells(s.rec) {
				p.sayf("the first vendor's lookup (clock %+ds) cannot tell: the evidence names another way out", m.skews[e.Skew])
				break
			}
			sent = s.seen[0]
		}
		s.ask = witnessAsk{on: true, sent: sent, owner: int8(m.owner(&s)), skew: e.Skew, at: clock}
		who := "a reconciler (clock %+ds) asks the witness"
		if m.cfg.PersonLooks {
			who = "a person (looking at clock %+ds) looks"
		}
		p.sayf(who+" about a%d's record: %s", m.skews[e.Skew], s.ask.owner+1, verdict(s.ask.sent))
	case EvCannotTell:
		p.sayf("a witness that cannot tell is asked: nothing settled")
	case EvDeliver:
		a := s.ask
		s.ask = witnessAsk{}
		to, resolution := store.StateReleased, store.ResolvedNotSent
		if a.sent {
			to, resolution = store.StateCompleted, store.ResolvedSent
		}
		clock := s.t + m.skews[a.skew]
		t := m.transition(m.owners[a.owner], clock, store.DecisionResolved)
		t.Witness, t.AskedAt = witnessName, at(a.at)
		t.Receipt.Actor, t.Receipt.Resolution = "witness:"+witnessName, resolution
		who := "the witness's answer"
		if m.cfg.PersonLooks {
			t.Now, t.Witness, t.AskedAt, t.Receipt.Actor = at(s.t), "", time.Time{}, "person"
			who = "the person who looked"
		}
		if to == store.StateCompleted {
			t.Result = []byte(`{"id":"ch_found_by_witness"}`)
		}
		next, err := m.rules.ApplyResolve(s.rec, to, t)
		if err == nil {
			if m.live(&s) {
				p.violate(LiveResolved)
			}
			s.rec = next
			person = true
			if to == store.StateCompleted {
				m.completed(&s, -1)
			} else {
				// No excuse, unlike a person's: the witness was right when asked, and
				// the rule must not let its answer count while an attempt could still
				// reach the vendor after it — now (the answer arrived late) or later
				// (an attempt still running, or its request still flying, sends: EvSend).
				if s.sentEpoch {
					p.violate(m.wrongNotSent())
					s.wrongNotSent = s.wrongNotSent || !a.inTime
				}
				for j := range s.att {
					if ph := s.att[j].phase; ph == running || ph == flying {
						s.att[j].notSent = true
					}
				}
			}
		}
		p.op(Op{Kind: OpResolve, Transition: t, To: to, Err: err}, &s)
		p.sayf("%s (asked at %+ds by its clock) arrives (clock %+ds): resolve %s: %v", who, a.at, m.skews[a.skew], to, errText(err))
	}
	m.check(&prev, &s, person, reset, p)
	return s
}

// completed sets when a key completed at s.t may be forgotten: its window from now,
// and not before every attempt still running is past its lease and margin.
func (m *model) completed(s *State, by int) {
	s.forgetAt = s.t + dsecs(m.cfg.Window)
	for i, a := range s.att {
		// The completing attempt counts too: its completion may never reach Temporal
		// (a crash right after the store's commit), and Temporal retries the activity
		// once that attempt's lease passed — the stored result must still answer it.
		if a.phase == running || a.phase == flying || i == by {
			s.forgetAt = max(s.forgetAt, a.lease+dsecs(keepMargin))
		}
	}
}

// wrongNotSent is the violation of a wrong "not sent" by the model's reconciler.
func (m *model) wrongNotSent() string {
	if m.cfg.PersonLooks {
		return PersonWrongNotSent
	}
	return WitnessWrongNotSent
}

// witnessName names the model's witness (Transition.Witness).
const witnessName = "vendor-lookup"

func verdict(sent bool) string {
	if sent {
		return "sent"
	}
	return "not sent"
}

func errText(err error) string {
	if err == nil {
		return "ok"
	}
	if errors.Is(err, store.ErrNotOwner) {
		return "not owner"
	}
	return err.Error()
}

// check runs the invariants on the state reached.
func (m *model) check(prev, s *State, person, reset bool, p *stepper) {
	if m.cfg.Effect == "destructive" && slices.ContainsFunc(s.effects[:], func(n int8) bool { return n > 1 }) {
		p.violate(SentTwice)
	}
	probe := m.claim(0, s.t, "h2")
	probe.Owner = "probe"
	if out, rec, _ := m.rules.Decide(s.rec, s.found, probe); out == store.OutcomeCompleted && rec.ArgsHash != probe.ArgsHash {
		p.violate(WrongResult)
	}
	if m.live(s) && m.rules.Expired(s.rec, at(s.t+m.maxSk)) {
		p.violate(LiveExpired)
	}
	if s.maySent && s.t < s.forgetAt-m.slack && (!s.found || s.rec.State == store.StateReleased) {
		p.violate(MaySentForgotten)
	}
	if s.maySent && s.found && s.created >= 0 && secs(s.rec.CreatedAt) != s.created {
		p.violate(FirstClaimedMoved)
	}
	if prev.found && s.found && !person && !reset && m.rules.MayHaveSent(prev.rec) && !m.rules.MayHaveSent(s.rec) {
		p.violate(MarkCleared)
	}
	if s.found && s.rec.State == store.StateCompleted && !s.sentEpoch {
		p.violate(LostWriteDone)
	}
}

// resettable reports whether the workflow can still be reset: open, or closed
// within the retention (by Temporal's clock: true time).
func (m *model) resettable(s *State) bool {
	return m.cfg.Retention > 0 && (!s.closed || s.t < s.closedAt+dsecs(m.cfg.Retention))
}

// resetHeld: s's record is a finished destructive write of the workflow, and the
// workflow can still be reset — a reset run would send the key again were the
// record forgotten.
func (m *model) resetHeld(s *State) bool {
	return s.found && s.rec.Effect == "destructive" && s.rec.State == store.StateCompleted && m.resettable(s)
}

// unknownOutcome: r is a destructive write's record whose outcome nobody knows —
// unknown, or claimed (its owner running or gone). A fresh claim over it, or a
// sweep of it, forgets that its attempt may have reached the vendor. Written out
// here, not store.UnknownOutcome: the model checks the rules, it does not borrow them.
func unknownOutcome(r store.Record) bool {
	return r.Effect == "destructive" && (r.State == store.StateUnknown || r.State == store.StateClaimed)
}

// lookupTells reports whether the first vendor's lookup (Config.SecondWindow with
// Witness) answers for r's write: r's evidence (Rules.Exits) names that vendor and
// no other way out, and no claim that recorded none.
func (m *model) lookupTells(r store.Record) bool {
	exits, silent := m.rules.Exits(r)
	if len(exits) == 0 || len(silent) > 0 {
		return false
	}
	for _, e := range exits {
		if e.Via != m.sent(0).Via {
			return false
		}
	}
	return true
}
