// Package witness settles the writes whose outcome nobody knows without a person,
// where someone else already knows the answer.
//
// A destructive write whose attempt ended without proof (a crash, a timeout, a
// dropped connection) blocks its key: the gate refuses to send it again. Before a
// person is asked, witnesses are, in order:
//
//  1. Temporal itself: if the attempt's completion reached Temporal (the store lost
//     it: the process died after answering, an async completion by the plain
//     client), its result is in the workflow's history (interceptor.TemporalWitness).
//  2. The vendor: an MCP server running Dedup (mcptools), an idemhttp profile whose
//     vendor offers a lookup by key, or a function the user registers per activity
//     type or tool (Func).
//  3. A person (`idemgate resolve`), only where no witness can tell — with what the
//     witnesses said.
//
// The rules (store.Settleable, model-checked in store/claimmodel): a witness's
// "sent" stores the result it found once the owning attempt is gone; its "not
// sent" counts only when it was asked at or after the owner's lease plus
// store.LeaseMargin (store.NotSentFrom: before then, the attempt may still reach the
// vendor after the answer); a witness that errs, times out or cannot tell settles
// nothing. Every settlement is a receipt
// (store.DecisionResolved) whose Actor names the witness ("witness:temporal") and
// whose Reason is its evidence.
//
// The gate asks the witnesses when it meets an unknown record (bounded by
// interceptor.Options.WitnessTimeout, then the ordinary refusal), the plugin asks
// them in the background for pending keys, and `idemgate reconcile [--dry-run]`
// asks them from the command line.
package witness

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	commonpb "go.temporal.io/api/common/v1"

	"github.com/idemgate/idemgate/store"
)

// Verdict is what a witness says of a write.
type Verdict uint8

const (
	// CannotTell: the witness does not know. Settles nothing.
	CannotTell Verdict = iota
	// Sent: the write happened; Answer carries its result.
	Sent
	// NotSent: the write did not happen under this key — by no attempt since the
	// record was first claimed (Query.Record.CreatedAt), not only the one that holds
	// the claim: the settlement releases the key and forgets that any earlier
	// attempt may have sent (see the package doc for when it counts).
	NotSent
)

func (v Verdict) String() string {
	switch v {
	case CannotTell:
		return "cannot tell"
	case Sent:
		return "sent"
	case NotSent:
		return "not sent"
	}
	return fmt.Sprintf("Verdict(%d)", uint8(v))
}

// Query is what a witness is asked about: the record of a key whose outcome is
// unknown, as the store holds it.
type Query struct {
	// Record is the key's record: Key, Activity (the tool's name for a generic
	// tool activity), Args (the canonical JSON of the call), WorkflowID and RunID of
	// the attempt that holds the claim, CreatedAt (when the first attempt that may
	// have reached the vendor claimed it), Lease, Sent (the evidence that the key
	// left through a keyed transport).
	Record store.Record
	// Namespace is the Temporal namespace of the key's workflow ("" when unknown).
	Namespace string
	// Now is when the witness is asked.
	Now time.Time
}

// Answer is a witness's answer.
type Answer struct {
	Verdict Verdict
	// Result is, for Sent, the write's result as the activity would have returned
	// it; it is encoded with the gate's data converter and returned to the next
	// attempt. Ignored when Payloads is set.
	Result any
	// Payloads is, for Sent, the result already encoded as Temporal payloads (as a
	// workflow's history holds it).
	Payloads *commonpb.Payloads
	// NoResult: Sent, but the witness cannot give the result: the key settles as
	// sent with its result not stored, and the next attempt is refused with
	// IdempotencyResultNotStored (never run again).
	NoResult bool
	// Evidence says what the witness saw ("history event 12: ActivityTaskCompleted",
	// "GET /v1/charges?idempotency_key=…: 1 charge ch_123"): the settlement's
	// receipt carries it.
	Evidence string
}

// Witness answers whether a write whose outcome is unknown happened.
// Implementations must answer only what they know: a wrong "not sent" makes the
// write run twice.
type Witness interface {
	// Name names the witness in receipts ("witness:" + Name) and messages. It
	// must not be empty: the store tells a witness's settlement from a person's by
	// it, and Asker.Ask does not ask an unnamed witness.
	Name() string
	// Ask answers for q. An error settles nothing. When the gate asks, ctx is the
	// asking attempt's activity context, which may belong to another workflow than
	// the record's (a business key of WithKey, a reset run): answer about q.Record
	// (its Key, WorkflowID, RunID), never about activity.GetInfo(ctx).
	Ask(ctx context.Context, q Query) (Answer, error)
}

// Func makes a Witness of a function, named name: the way a user registers a
// witness for an activity type or tool (interceptor.Options.Witnesses).
func Func(name string, ask func(ctx context.Context, q Query) (Answer, error)) Witness {
	return funcWitness{name: name, ask: ask}
}

type funcWitness struct {
	name string
	ask  func(ctx context.Context, q Query) (Answer, error)
}

func (f funcWitness) Name() string                                     { return f.name }
func (f funcWitness) Ask(ctx context.Context, q Query) (Answer, error) { return f.ask(ctx, q) }

// Said is one witness's answer to one query, or its error.
type Said struct {
	Witness string
	Answer  Answer
	Err     error
	// Early: an answer that does not count yet: a "not sent" asked before the
	// owner's lease plus store.LeaseMargin, or a "sent" while the owner may still be
	// running (it stores its own outcome).
	Early bool
	// CountsFrom is, for an early "not sent", when a "not sent" first counts
	// (store.NotSentFrom).
	CountsFrom time.Time
}

// quoteLimit bounds each answer's error or evidence where a refusal quotes it (the
// message goes to Temporal and into a receipt).
const quoteLimit = 1 << 10

// clip cuts s to quoteLimit bytes (on a rune boundary), saying how much was left out.
func clip(s string) string {
	if len(s) <= quoteLimit {
		return s
	}
	cut := quoteLimit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d more bytes)", s[:cut], len(s)-cut)
}

// String says what the witness answered, quoting at most 1 KiB of its error or
// evidence.
func (s Said) String() string {
	switch {
	case s.Err != nil:
		return fmt.Sprintf("%s: error: %s", s.Witness, clip(s.Err.Error()))
	case s.Early && s.Answer.Verdict == NotSent:
		return fmt.Sprintf("%s: not sent, but asked before %s (the attempt's lease plus the margin for late "+
			"requests), so it does not count yet", s.Witness, s.CountsFrom.UTC().Format(time.RFC3339))
	case s.Early:
		return fmt.Sprintf("%s: sent, but the attempt may still be running and store its own outcome", s.Witness)
	case s.Answer.Evidence != "":
		return fmt.Sprintf("%s: %s (%s)", s.Witness, s.Answer.Verdict, clip(s.Answer.Evidence))
	}
	return fmt.Sprintf("%s: %s", s.Witness, s.Answer.Verdict)
}

// Report is what asking the witnesses about one key came to.
type Report struct {
	Key string
	// Settled: a witness settled the key (or, in a dry run, would have).
	Settled bool
	// By names the witness that settled it, Verdict its answer.
	By      string
	Verdict Verdict
	// Said lists every witness asked, in order, with its answer.
	Said []Said
	// Moved: the record changed while the witnesses were asked (another worker, a
	// person or the attempt itself settled it): nothing was settled here.
	Moved bool
}

// Summary is one line: who settled the key, or what every witness said.
func (r Report) Summary() string {
	if r.Moved {
		return "the record changed while the witnesses were asked; nothing settled here"
	}
	if r.Settled {
		return fmt.Sprintf("settled %s by witness %s", r.Verdict, r.By)
	}
	if len(r.Said) == 0 {
		return "no witness can tell"
	}
	parts := make([]string, len(r.Said))
	for i, s := range r.Said {
		parts[i] = s.String()
	}
	return "no witness could tell: " + strings.Join(parts, "; ")
}

// Settler is what a witness settlement needs of a store: Resolve a record with the
// witness's rules (store.Settleable; store.Operator has it).
type Settler interface {
	Resolve(ctx context.Context, t store.Transition, to store.State) error
}

// Encoder encodes a witness's Result as the gate stores results
// (interceptor.EncodeResult with the worker's data converter).
type Encoder func(v any) ([]byte, error)

// Asker asks witnesses about records and settles them.
type Asker struct {
	// Store settles.
	Store Settler
	// Encode encodes results. Required when a witness answers Sent with a Result.
	Encode Encoder
	// Window is how long a settled result is remembered (the gate's Options.Window).
	Window time.Duration
	// Timeout bounds each witness's answer. 0: no bound beyond ctx. Ask stops
	// waiting for a witness at the bound (or when ctx is done) even when the witness
	// ignores its ctx; such a witness's goroutine is left to end by itself.
	Timeout time.Duration
	// MaxResultSize is the largest encoded result stored, as the gate's
	// Options.MaxResultSize: a larger one settles the key as sent with its result not
	// stored (a repeat is refused with IdempotencyResultNotStored). 0: no bound.
	MaxResultSize int
	// Now is the clock. nil: time.Now.
	Now func() time.Time
	// Namespace goes into every Query.
	Namespace string
}

// Ask asks ws in order about rec and settles rec by the first witness that can
// tell, unless dryRun. It never settles on an error, a timeout or CannotTell, and
// never on a "not sent" asked before store.NotSentFrom(rec).
func (a Asker) Ask(ctx context.Context, rec store.Record, ws []Witness, dryRun bool) (Report, error) {
	now := time.Now
	if a.Now != nil {
		now = a.Now
	}
	rep := Report{Key: rec.Key}
	for _, w := range ws {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		name := w.Name()
		if strings.TrimSpace(name) == "" {
			// The store tells a witness from a person by the name (store.Transition.Witness
			// ""): an unnamed witness would settle by a person's rules, without the lease.
			rep.Said = append(rep.Said, Said{Witness: "(unnamed)", Err: errors.New("the witness has no name, so it is not " +
				"asked: a settlement names its witness. Next step: give it a name (witness.Func(name, ...))")})
			continue
		}
		asked := now()
		ans, err := a.ask(ctx, w, Query{Record: rec, Namespace: a.Namespace, Now: asked})
		said := Said{Witness: name, Answer: ans, Err: err}
		if err == nil && (ans.Verdict == Sent || ans.Verdict == NotSent) {
			to := store.StateReleased
			if ans.Verdict == Sent {
				to = store.StateCompleted
			}
			said.Early = !store.Settleable(rec, to, store.Transition{Now: now(), Witness: name, AskedAt: asked})
			if said.Early && to == store.StateReleased {
				said.CountsFrom = store.NotSentFrom(rec)
			}
		}
		rep.Said = append(rep.Said, said)
		if err != nil || said.Early || ans.Verdict != Sent && ans.Verdict != NotSent {
			continue
		}
		rep.By, rep.Verdict = name, ans.Verdict
		if dryRun {
			rep.Settled = true
			return rep, nil
		}
		err = a.settle(ctx, rec, name, asked, ans)
		switch {
		case err == nil:
			rep.Settled = true
			return rep, nil
		case errors.Is(err, store.ErrNotOwner):
			rep.By, rep.Verdict, rep.Moved = "", CannotTell, true
			return rep, nil
		}
		return rep, err
	}
	return rep, nil
}

func (a Asker) ask(ctx context.Context, w Witness, q Query) (Answer, error) {
	if a.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, a.Timeout)
		defer cancel()
	}
	type answer struct {
		ans Answer
		err error
	}
	// The witness answers in its own goroutine: one that ignores ctx must not hold
	// the caller (the gate's attempt) past the bound. Its late answer is dropped.
	got := make(chan answer, 1)
	go func() {
		var g answer
		defer func() {
			if p := recover(); p != nil {
				g = answer{err: fmt.Errorf("the witness panicked: %v", p)}
			}
			got <- g
		}()
		g.ans, g.err = w.Ask(ctx, q)
	}()
	select {
	case g := <-got:
		if g.err == nil && ctx.Err() != nil {
			// An answer that came after the bound is not trusted more than a late one.
			return Answer{}, a.late(ctx)
		}
		return g.ans, g.err
	case <-ctx.Done():
		return Answer{}, a.late(ctx)
	}
}

// late is the error of a witness that did not answer within the bound.
func (a Asker) late(ctx context.Context) error {
	if a.Timeout > 0 {
		return fmt.Errorf("no answer within %s: %w", a.Timeout, ctx.Err())
	}
	return fmt.Errorf("no answer: %w", ctx.Err())
}

// settle resolves rec by the witness's answer: store.Settleable decides whether
// it may, atomically with the record's current owner.
func (a Asker) settle(ctx context.Context, rec store.Record, name string, asked time.Time, ans Answer) error {
	now := time.Now
	if a.Now != nil {
		now = a.Now
	}
	t := store.Transition{Key: rec.Key, Owner: rec.Owner, Now: now(), Window: a.Window, Witness: name, AskedAt: asked}
	t.Receipt = store.Receipt{Time: t.Now, Key: rec.Key, Activity: rec.Activity, Effect: rec.Effect,
		Decision: store.DecisionResolved, ArgsHash: rec.ArgsHash, WorkflowID: rec.WorkflowID, RunID: rec.RunID,
		Attempt: rec.Attempt, Actor: "witness:" + name, Reason: ans.Evidence}
	to := store.StateReleased
	t.Receipt.Resolution = store.ResolvedNotSent
	if ans.Verdict == Sent {
		to = store.StateCompleted
		t.Receipt.Resolution = store.ResolvedSent
		data, err := a.result(ans)
		if err != nil {
			return fmt.Errorf("idemgate/witness: %s said %s sent, but its result cannot be encoded: %w", name, rec.Key, err)
		}
		if a.MaxResultSize > 0 && len(data) > a.MaxResultSize {
			data = nil // as the gate: over the limit, settled as sent without its result
		}
		t.Result, t.ResultOmitted = data, data == nil
		if data != nil {
			t.Receipt.ResultRef = ResultRef(data)
		}
	}
	return a.Store.Resolve(ctx, t, to)
}

func (a Asker) result(ans Answer) (data []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			data, err = nil, fmt.Errorf("the encoder panicked: %v", p)
		}
	}()
	switch {
	case ans.NoResult:
		return nil, nil
	case ans.Payloads != nil:
		return marshalPayloads(ans.Payloads)
	case a.Encode == nil:
		return nil, errors.New("no encoder for the result (Asker.Encode)")
	}
	return a.Encode(ans.Result)
}
