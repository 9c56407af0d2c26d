package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/idemgate/idemgate/integration/soak/soakwf"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/vendorsim"
)

// The kinds of violation the checker reports (Violation.Kind).
const (
	// KindDestructiveTwice: a destructive call's effect happened more than once, or
	// its key was taken over and sent again without the vendor's dedup as witness.
	KindDestructiveTwice = "destructive-twice"
	// KindIdempotentTwoKeys: one idempotent call was claimed or sent under two keys.
	KindIdempotentTwoKeys = "idempotent-two-keys"
	// KindEffects: a completed workflow's call did not have the effect its outcome
	// says (done but no effect, or a result that is not the vendor's record), or is
	// missing from the result; or a vendor effect names no call of the workload.
	KindEffects = "effects-differ"
	// KindRefusal: a refusal without its withheld call (this call, under a key that
	// is not another call's) or without a reason.
	KindRefusal = "refusal-incomplete"
	// KindReceiptLost: a vendor effect without a claim receipt for its key, or a call
	// reported done without the receipt of its completion; or receipts and records
	// that misstate the effects (a completion whose record is still pending, a key
	// settled as sent with no effect, a destructive key released though performed).
	KindReceiptLost = "receipt-lost"
	// KindReplayOtherArgs: a stored result returned to a call with other arguments,
	// or a replay that returned another result than its key's stored one.
	KindReplayOtherArgs = "replay-other-args"
	// KindPendingSettleable: a record still blocks its key although a witness could
	// have settled it (its activity has a witness, the owner is gone past NotSentFrom).
	KindPendingSettleable = "pending-settleable"
	// KindUpdateDiffers: the client got an update call's outcome as done, and the
	// completed workflow's result lists that call otherwise (not done, or done with a
	// result naming another of the vendor's records): a reset re-ran the update's call
	// and it did not get the stored result.
	KindUpdateDiffers = "update-differs"
)

// Kinds lists every kind, in the order Check looks.
var Kinds = []string{KindDestructiveTwice, KindIdempotentTwoKeys, KindEffects, KindRefusal, KindReceiptLost,
	KindReplayOtherArgs, KindPendingSettleable, KindUpdateDiffers}

// Run is the last run of one workflow ID, as Temporal reports it.
type Run struct {
	WorkflowID string
	RunID      string
	// Status is "completed", "failed", "terminated", "timed-out", "canceled",
	// "continued-as-new" or "running".
	Status string
	// Result is the completed run's result (nil otherwise).
	Result *soakwf.Result
}

// Input is everything the checker reads: what the workload asked, what the vendors
// did, what the store recorded and what Temporal says the workflows returned.
type Input struct {
	Seed     uint64
	Calls    []soakwf.Call
	Ledger   []vendorsim.Entry
	Receipts []store.Receipt
	Records  []store.Record
	Runs     []Run
	// Updates are the outcomes the client got for the calls it made by updates (one
	// per answer: after a reset it may get a call's outcome again).
	Updates []Update
	// Witnessed names the activities that have a witness (a vendor lookup by key).
	Witnessed map[string]bool
	// Now is when the records were read; Grace is how long past NotSentFrom a
	// witnessed record may still block (the retry that asks the witness, the operator's
	// round).
	Now   time.Time
	Grace time.Duration
}

// Violation is one broken invariant, with the history that shows it.
type Violation struct {
	Kind   string
	Token  string
	Key    string
	Detail string
	// History is the minimal history of the call: its receipts and ledger entries.
	History string
}

func (v Violation) String() string {
	return fmt.Sprintf("%s: call %s key %s: %s\n%s", v.Kind, orDash(v.Token), orDash(v.Key), v.Detail, v.History)
}

// Report prints the violations with the seed that replays the run.
func Report(seed uint64, vs []Violation) string {
	if len(vs) == 0 {
		return fmt.Sprintf("seed %d: no violations\n", seed)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d: %d violations (replay: go run ./integration/soak -seed %d)\n", seed, len(vs), seed)
	for _, v := range vs {
		b.WriteString(v.String())
		b.WriteString("\n")
	}
	return b.String()
}

// CountByKind counts violations per kind.
func CountByKind(vs []Violation) map[string]int {
	m := map[string]int{}
	for _, v := range vs {
		m[v.Kind]++
	}
	return m
}

var tokenRE = regexp.MustCompile(`tk-[0-9a-z]+-[0-9]+`)

// tokenIn returns the call token found in b ("" for none).
func tokenIn(b ...[]byte) string {
	for _, x := range b {
		if t := tokenRE.Find(x); t != nil {
			return string(t)
		}
	}
	return ""
}

// view indexes the input.
type view struct {
	in        Input
	calls     map[string]soakwf.Call
	effects   map[string][]vendorsim.Entry // by token
	receipts  map[string][]store.Receipt   // by key, in ID order
	records   map[string]store.Record      // by key
	keys      map[string]map[string]bool   // token → keys it was claimed or sent under
	tokenOf   map[string]string            // key → token
	byKeyLine map[string][]vendorsim.Entry // keyed ledger entries by key
}

func index(in Input) *view {
	v := &view{in: in, calls: map[string]soakwf.Call{}, effects: map[string][]vendorsim.Entry{},
		receipts: map[string][]store.Receipt{}, records: map[string]store.Record{}, keys: map[string]map[string]bool{},
		tokenOf: map[string]string{}, byKeyLine: map[string][]vendorsim.Entry{}}
	for _, c := range in.Calls {
		v.calls[c.Token] = c
	}
	addKey := func(tok, key string) {
		if tok == "" || key == "" {
			return
		}
		if v.keys[tok] == nil {
			v.keys[tok] = map[string]bool{}
		}
		v.keys[tok][key] = true
		v.tokenOf[key] = tok
	}
	for _, e := range in.Ledger {
		tok := tokenIn([]byte(e.Path), e.Body)
		v.effects[tok] = append(v.effects[tok], e)
		if e.Keyed {
			v.byKeyLine[e.Key] = append(v.byKeyLine[e.Key], e)
			addKey(tok, e.Key)
		}
	}
	rs := slices.Clone(in.Receipts)
	slices.SortStableFunc(rs, func(a, b store.Receipt) int { return int(a.ID - b.ID) })
	for _, r := range rs {
		if r.Key == "" {
			continue
		}
		v.receipts[r.Key] = append(v.receipts[r.Key], r)
		addKey(tokenIn(r.Call), r.Key)
	}
	for _, r := range in.Records {
		v.records[r.Key] = r
		addKey(tokenIn(r.Args), r.Key)
	}
	// A refusal's withheld call names the key its call was given: a key of the call
	// too, so an idempotent write withheld under a key the store never gave it counts
	// as under two keys. Into keys only: tokenOf stays the word of the store and the
	// vendors, against which the refusal's key is checked (refusal-incomplete); and
	// not another call's key, whose receipts would then count as this call's.
	for _, o := range v.outcomes() {
		f := o.Refusal
		if f == nil || f.Call == nil || f.Call.Key == "" || o.Token == "" || tokenIn(f.Call.Args) != o.Token {
			continue
		}
		if t := v.tokenOf[f.Call.Key]; t == "" || t == o.Token {
			if v.keys[o.Token] == nil {
				v.keys[o.Token] = map[string]bool{}
			}
			v.keys[o.Token][f.Call.Key] = true
		}
	}
	return v
}

func (v *view) sortedKeys(tok string) []string { return slices.Sorted(maps.Keys(v.keys[tok])) }

// history prints the call, the receipts of its keys and its ledger entries.
func (v *view) history(tok string, keys ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  seed %d\n", v.in.Seed)
	if c, ok := v.calls[tok]; ok {
		fmt.Fprintf(&b, "  call %s: %s (%s) %s\n", tok, c.Tool, c.Effect, c.Args)
	} else {
		fmt.Fprintf(&b, "  call %s: not among the workload's calls\n", orDash(tok))
	}
	ks := slices.Clone(keys)
	for _, k := range v.sortedKeys(tok) {
		if !slices.Contains(ks, k) {
			ks = append(ks, k)
		}
	}
	for _, k := range ks {
		if r, ok := v.records[k]; ok {
			fmt.Fprintf(&b, "  record %s: %s %s state=%s attempt=%d owner=%.8s lease=%s mayHaveSent=%v args=%.12s\n", k, r.Activity,
				r.Effect, r.State, r.Attempt, r.Owner, r.Lease.UTC().Format(time.RFC3339Nano), r.MayHaveSent, r.ArgsHash)
		}
		for _, r := range v.receipts[k] {
			fmt.Fprintf(&b, "  receipt #%d %s %s %s wf=%s run=%.8s attempt=%d args=%.12s", r.ID, r.Time.UTC().Format("15:04:05.000"),
				r.Key, r.Decision, r.WorkflowID, r.RunID, r.Attempt, r.ArgsHash)
			if r.Actor != "" || r.Resolution != "" {
				fmt.Fprintf(&b, " by %s (%s)", r.Actor, r.Resolution)
			}
			if r.Error != "" {
				fmt.Fprintf(&b, " error=%.120q", r.Error)
			}
			b.WriteString("\n")
		}
	}
	for _, e := range v.effects[tok] {
		fmt.Fprintf(&b, "  ledger %s #%d %s key=%s record=%s %s\n", e.Vendor, e.Seq, e.Time.UTC().Format("15:04:05.000"), e.Key, e.RecordID, e.Body)
	}
	for _, u := range v.in.Updates {
		if u.Outcome.Token == tok {
			fmt.Fprintf(&b, "  update of %s answered: %s\n", u.WorkflowID, outcomeString(u.Outcome))
		}
	}
	for _, r := range v.in.Runs {
		if r.Result == nil || workflowOf(r.WorkflowID) != workflowOf(tok) {
			continue
		}
		for _, o := range r.Result.Calls {
			if o.Token == tok {
				fmt.Fprintf(&b, "  workflow %s run %.8s (%s) lists: %s\n", r.WorkflowID, r.RunID, r.Status, outcomeString(o))
			}
		}
	}
	return b.String()
}

// Check checks every invariant and returns the violations, ordered by kind.
func Check(in Input) []Violation {
	v := index(in)
	var out []Violation
	bad := func(kind, tok, key, format string, args ...any) {
		out = append(out, Violation{Kind: kind, Token: tok, Key: key, Detail: fmt.Sprintf(format, args...), History: v.history(tok, key)})
	}
	toks := slices.Sorted(maps.Keys(v.calls))

	// No destructive effect twice for one call (or for one key).
	for _, tok := range toks {
		c := v.calls[tok]
		if c.Effect == "destructive" && len(v.effects[tok]) > 1 {
			bad(KindDestructiveTwice, tok, "", "%s performed %d times", c.Tool, len(v.effects[tok]))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(v.byKeyLine)) {
		es := v.byKeyLine[k]
		if len(es) > 1 {
			tok := v.tokenOf[k]
			if c, ok := v.calls[tok]; !ok || c.Effect == "destructive" {
				bad(KindDestructiveTwice, tok, k, "the vendor %s performed key %s %d times", es[0].Vendor, k, len(es))
			}
		}
	}

	// A destructive call's key is taken over (its unknown outcome sent again) only
	// with the vendor's deduplication as witness: the same attempt's resent receipt.
	// Without it the gate sent a destructive write again on no evidence — a second
	// send that a keyed vendor or the MCP server's Dedup keeps out of the ledger (a
	// gate that takes a destructive write for an idempotent one: atk-check finding
	// 14). Only when that attempt went on to run (ran, handed off, released): a
	// takeover whose resent receipt could not be stored, or whose reply was lost (then
	// given back as unknown), does not run.
	for _, k := range slices.Sorted(maps.Keys(v.receipts)) {
		tok := v.tokenOf[k]
		if c, ok := v.calls[tok]; !ok || c.Effect != "destructive" {
			continue
		}
		rs := v.receipts[k]
		for i, r := range rs {
			if r.Decision != store.DecisionTakenOver {
				continue
			}
			resent, ran := false, false
			for _, x := range rs[i+1:] {
				if x.WorkflowID != r.WorkflowID || x.RunID != r.RunID || x.Attempt != r.Attempt {
					continue
				}
				switch x.Decision {
				case store.DecisionResent:
					resent = true
				case store.DecisionRan, store.DecisionHandedOff, store.DecisionReleased:
					ran = true
				}
			}
			if ran && !resent {
				bad(KindDestructiveTwice, tok, k, "receipt #%d took over the key (attempt %d) and the attempt ran, without the vendor's "+
					"deduplication as witness (no resent receipt): the destructive write was sent again", r.ID, r.Attempt)
			}
		}
	}

	// Every effect names a call of the workload. The invariants above and below look
	// at the workload's calls only, so an effect no call asked for (a call the harness
	// did not record, a request that lost its token) would pass unseen — sent twice or
	// without a claim receipt (atk-check finding 5).
	for _, tok := range slices.Sorted(maps.Keys(v.effects)) {
		if _, ok := v.calls[tok]; ok {
			continue
		}
		for _, e := range v.effects[tok] {
			bad(KindEffects, tok, e.Key, "the vendor %s performed effect #%d (%s, record %s), which names no call of the workload",
				e.Vendor, e.Seq, e.Path, orDash(e.RecordID))
		}
	}

	// No idempotent write under two keys.
	for _, tok := range toks {
		c := v.calls[tok]
		if c.Effect == "idempotent-write" && len(v.keys[tok]) > 1 {
			bad(KindIdempotentTwoKeys, tok, "", "%s claimed or sent under %d keys: %s", c.Tool, len(v.keys[tok]), strings.Join(v.sortedKeys(tok), ", "))
		}
	}

	// Every completed workflow's effects exactly as its calls say.
	want := map[string][]soakwf.Call{}
	for _, c := range in.Calls {
		wf := workflowOf(c.Token)
		want[wf] = append(want[wf], c)
	}
	for _, r := range in.Runs {
		if r.Status != "completed" || r.Result == nil {
			continue
		}
		got := map[string]soakwf.Outcome{}
		for _, o := range r.Result.Calls {
			got[o.Token] = o
		}
		for _, c := range want[workflowOf(r.WorkflowID)] {
			o, ok := got[c.Token]
			if !ok {
				bad(KindEffects, c.Token, "", "workflow %s completed without an outcome for the call", r.WorkflowID)
				continue
			}
			es := v.effects[c.Token]
			switch {
			case !o.Done || c.Effect == "read":
			case len(es) == 0:
				bad(KindEffects, c.Token, "", "%s reported done (result %s), but the vendor has no effect of it", c.Tool, o.Result)
			case !resultNamesAnEffect(o.Result, es):
				bad(KindEffects, c.Token, "", "%s reported done with result %s, which names none of the vendor's records for it", c.Tool, o.Result)
			}
		}
	}

	// A call the client got done from its update had its effect, as a workflow's would.
	for _, u := range in.Updates {
		o := u.Outcome
		c, ok := v.calls[o.Token]
		if !ok || !o.Done || c.Effect == "read" {
			continue
		}
		es := v.effects[o.Token]
		switch {
		case len(es) == 0:
			bad(KindEffects, o.Token, "", "%s: its update answered done (result %s), but the vendor has no effect of it", c.Tool, o.Result)
		case !resultNamesAnEffect(o.Result, es):
			bad(KindEffects, o.Token, "", "%s: its update answered done with result %s, which names none of the vendor's records for it", c.Tool, o.Result)
		}
	}

	// Every refusal with its withheld call and a reason.
	for _, o := range v.outcomes() {
		f := o.Refusal
		if f == nil {
			continue
		}
		switch {
		case strings.TrimSpace(f.Message) == "":
			bad(KindRefusal, o.Token, "", "%s refused (%s) without a reason", o.Tool, f.Type)
		case f.Call == nil:
			bad(KindRefusal, o.Token, "", "%s refused (%s) without its withheld call: %s", o.Tool, f.Type, f.Message)
		// The withheld call's arguments name this call's token, not one it is a prefix
		// of (tk-w1-1 of tk-w1-12: atk-check finding 2).
		case f.Call.Activity != o.Tool || tokenIn(f.Call.Args) != o.Token || f.Call.Key == "":
			bad(KindRefusal, o.Token, f.Call.Key, "%s refused (%s) with another call withheld: %s", o.Tool, f.Type, f.Call)
		// Its key is not another call's: releasing or settling the key it names would
		// act on that call's write (atk-check finding 3).
		case v.tokenOf[f.Call.Key] != "" && v.tokenOf[f.Call.Key] != o.Token:
			bad(KindRefusal, o.Token, f.Call.Key, "%s refused (%s) naming key %s, which is call %s's: %s", o.Tool, f.Type,
				f.Call.Key, v.tokenOf[f.Call.Key], f.Call)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(v.receipts)) {
		for _, r := range v.receipts[k] {
			switch r.Decision {
			// Every in-flight refusal names the call it withholds, retried or not (soak
			// finding 2): its receipt carries it, like a gated one's (atk-check finding 1).
			case store.DecisionGated, store.DecisionRefusedInFlight:
				if len(r.Call) == 0 || r.Error == "" {
					bad(KindRefusal, v.tokenOf[k], k, "receipt #%d (%s) without its withheld call or reason", r.ID, r.Decision)
				}
			case store.DecisionRefusedConflict:
				if r.Error == "" {
					bad(KindRefusal, v.tokenOf[k], k, "receipt #%d (%s) without a reason", r.ID, r.Decision)
				}
			}
		}
	}

	// No write's receipt lost: every effect has a claim receipt for its key, and every
	// write reported done has the receipt of its completion.
	claimed := func(k string) bool {
		for _, r := range v.receipts[k] {
			if r.Decision == store.DecisionClaimed || r.Decision == store.DecisionTakenOver {
				return true
			}
		}
		return false
	}
	completed := func(k string) bool {
		for _, r := range v.receipts[k] {
			if r.Decision == store.DecisionRan || r.Decision == store.DecisionResolved && r.Resolution == store.ResolvedSent {
				return true
			}
		}
		return false
	}
	for _, tok := range toks {
		c := v.calls[tok]
		if c.Effect == "read" {
			continue
		}
		for _, e := range v.effects[tok] {
			if e.Keyed {
				if !claimed(e.Key) {
					bad(KindReceiptLost, tok, e.Key, "%s effect #%d under key %s has no claim receipt", e.Vendor, e.Seq, e.Key)
				}
				continue
			}
			if !slices.ContainsFunc(v.sortedKeys(tok), claimed) {
				bad(KindReceiptLost, tok, "", "%s effect #%d of %s has no claim receipt under any key of the call", e.Vendor, e.Seq, c.Tool)
			}
		}
	}
	for _, o := range v.outcomes() {
		c, ok := v.calls[o.Token]
		if !ok || !o.Done || c.Effect == "read" {
			continue
		}
		if !slices.ContainsFunc(v.sortedKeys(o.Token), completed) {
			bad(KindReceiptLost, o.Token, "", "%s reported done, but no key of the call has a receipt of its completion (ran, or resolved as sent)", c.Tool)
		}
	}

	// The receipts and records tell the truth about the effects (atk-check findings 6–8):
	// a key whose last word is its completion has a completed record (a store that
	// appends the receipt but forgets the record's completion leaves the key pending:
	// for an activity without a witness nothing else sees it); a key settled as sent
	// has an effect of its call; a destructive key the store ended not sent (released)
	// was not performed under that key (a keyed effect under it, or an unkeyed one of a
	// call with no other key). The fault matrix checks the last two per step
	// (integration/faults/matrix.go).
	for _, k := range slices.Sorted(maps.Keys(v.records)) {
		rec, tok := v.records[k], v.tokenOf[k]
		var last *store.Receipt
		for i, r := range v.receipts[k] {
			if settles(r.Decision) {
				last = &v.receipts[k][i]
			}
		}
		switch {
		case rec.Effect == "read":
		case last != nil && (last.Decision == store.DecisionRan || last.Decision == store.DecisionResolved && last.Resolution == store.ResolvedSent) &&
			rec.State != store.StateCompleted:
			bad(KindReceiptLost, tok, k, "receipt #%d (%s) is the key's last word, but its record is %s: the store lost the record's completion",
				last.ID, last.Decision, rec.State)
		case rec.Effect == "destructive" && rec.State == store.StateReleased && slices.ContainsFunc(v.effects[tok], func(e vendorsim.Entry) bool {
			return e.Keyed && e.Key == k || !e.Keyed && len(v.keys[tok]) == 1
		}):
			bad(KindReceiptLost, tok, k, "the store ended the key released (not sent), but the vendor performed it")
		}
	}
	for _, k := range slices.Sorted(maps.Keys(v.receipts)) {
		for _, r := range v.receipts[k] {
			if r.Decision == store.DecisionResolved && r.Resolution == store.ResolvedSent && len(v.effects[v.tokenOf[k]]) == 0 {
				bad(KindReceiptLost, v.tokenOf[k], k, "receipt #%d settled the key as sent (by %s), but the vendor has no effect of the call",
					r.ID, orDash(r.Actor))
			}
		}
	}

	// No stored result returned to a call with other arguments.
	// Nor a result other than the key's stored one: a replay's ResultRef (the digest
	// of what it returned) is that of the key's completion since its last claim, when
	// both name one (atk-check finding 12: a store that answers a key with another
	// key's record; the args hash alone does not show it).
	for _, k := range slices.Sorted(maps.Keys(v.receipts)) {
		hash, ref := "", ""
		for _, r := range v.receipts[k] {
			switch r.Decision {
			case store.DecisionClaimed, store.DecisionTakenOver:
				hash, ref = r.ArgsHash, ""
			case store.DecisionRan, store.DecisionResolved:
				if r.Decision == store.DecisionRan || r.Resolution == store.ResolvedSent {
					ref = r.ResultRef
				}
			case store.DecisionReplayed:
				if ref != "" && r.ResultRef != "" && r.ResultRef != ref {
					bad(KindReplayOtherArgs, v.tokenOf[k], k, "receipt #%d returned result %s, but the key's stored result is %s",
						r.ID, r.ResultRef, ref)
				}
				if hash == "" {
					if rec, ok := v.records[k]; ok {
						hash = rec.ArgsHash
					}
				}
				if r.ArgsHash != hash {
					bad(KindReplayOtherArgs, v.tokenOf[k], k, "receipt #%d replayed the result of args %.12s to a call with args %.12s", r.ID, hash, r.ArgsHash)
				}
			}
		}
	}

	// Nothing pending that a witness could have settled.
	for _, k := range slices.Sorted(maps.Keys(v.records)) {
		r := v.records[k]
		if !in.Witnessed[r.Activity] || !store.UnknownOutcome(r) || !store.Blocking(r, in.Now) {
			continue
		}
		if from := store.NotSentFrom(r).Add(in.Grace); in.Now.After(from) {
			bad(KindPendingSettleable, v.tokenOf[k], k, "%s still blocks its key at %s, %s past the time a witness's answer counts (%s)",
				r.Activity, in.Now.UTC().Format(time.RFC3339), in.Now.Sub(store.NotSentFrom(r)).Round(time.Second),
				store.NotSentFrom(r).UTC().Format(time.RFC3339))
		}
	}

	// An update's outcome the client got done is the one the completed workflow lists.
	listed := map[string]soakwf.Outcome{}
	for _, r := range in.Runs {
		if r.Status != "completed" || r.Result == nil {
			continue
		}
		for _, o := range r.Result.Calls {
			listed[o.Token] = o
		}
	}
	for _, u := range in.Updates {
		got := u.Outcome
		o, ok := listed[got.Token]
		if !got.Done || !ok {
			continue // not done, or no completed workflow (a missing outcome is effects-differ's)
		}
		c := v.calls[got.Token]
		switch {
		case !o.Done && o.TimedOut && o.Refusal == nil && (c.Effect == "read" || v.completed(got.Token)):
			// The workflow's run asked again (a reset re-ran the update's call) and
			// Temporal's time for the call ran out before the gate answered: no other
			// outcome, and the stored one stands (the key's record is completed, so any
			// later attempt gets it; a read stores none). A reset that leaves the activity pending keeps its
			// first scheduling time, so a reset 20 minutes on has no ScheduleToClose
			// left (the first one-hour runs: 8 calls in 10,668 workflows).
		case !o.Done:
			bad(KindUpdateDiffers, got.Token, "", "%s: the client's update got it done (result %s), the workflow lists it not done: %s",
				c.Tool, got.Result, outcomeString(o))
		case c.Effect != "read" && !sameRecords(got.Result, o.Result, v.effects[got.Token]):
			bad(KindUpdateDiffers, got.Token, "", "%s: the client's update got result %s, the workflow lists result %s: not the same record",
				c.Tool, got.Result, o.Result)
		}
	}

	slices.SortStableFunc(out, func(a, b Violation) int { return slices.Index(Kinds, a.Kind) - slices.Index(Kinds, b.Kind) })
	return out
}

// completed reports whether every key of the call tok is claimed or sent under
// has a completed record (and there is one): its stored outcome stands.
func (v *view) completed(tok string) bool {
	if len(v.keys[tok]) == 0 {
		return false
	}
	for k := range v.keys[tok] {
		if r, ok := v.records[k]; !ok || r.State != store.StateCompleted {
			return false
		}
	}
	return true
}

// outcomes are every outcome reported: the runs' results' and the updates' the
// client got.
func (v *view) outcomes() []soakwf.Outcome {
	var out []soakwf.Outcome
	for _, r := range v.in.Runs {
		if r.Result != nil {
			out = append(out, r.Result.Calls...)
		}
	}
	for _, u := range v.in.Updates {
		out = append(out, u.Outcome)
	}
	return out
}

// settles: the decision changes where the key's outcome stands (a claim, a
// completion, a release, an unknown outcome, a settlement, a hand-off, a re-send);
// refusals and replays leave it.
func settles(d store.Decision) bool {
	switch d {
	case store.DecisionClaimed, store.DecisionTakenOver, store.DecisionRan, store.DecisionReleased, store.DecisionUnknown,
		store.DecisionResolved, store.DecisionHandedOff, store.DecisionResent:
		return true
	}
	return false
}

// sameRecords: every ledger record a names, b names too, and the other way round.
func sameRecords(a, b json.RawMessage, es []vendorsim.Entry) bool {
	for _, e := range es {
		if e.RecordID == "" {
			continue
		}
		q := []byte(`"` + e.RecordID + `"`)
		if bytes.Contains(a, q) != bytes.Contains(b, q) {
			return false
		}
	}
	return true
}

func outcomeString(o soakwf.Outcome) string {
	switch {
	case o.Done:
		return "done " + string(o.Result)
	case o.Refusal != nil:
		return fmt.Sprintf("refused (%s): %.200s", o.Refusal.Type, o.Refusal.Message)
	default:
		return fmt.Sprintf("failed: %.200s", o.Err)
	}
}

// resultNamesAnEffect: the result names a record one of the effects produced (or
// changed).
func resultNamesAnEffect(result json.RawMessage, es []vendorsim.Entry) bool {
	for _, e := range es {
		if e.RecordID != "" && bytes.Contains(result, []byte(`"`+e.RecordID+`"`)) {
			return true
		}
	}
	return false
}

// workflowOf is the workflow part of a token or workflow ID: "tk-<wf>-<i>" and
// "soak-<wf>" both give "<wf>".
func workflowOf(s string) string {
	if rest, ok := strings.CutPrefix(s, "tk-"); ok {
		if i := strings.LastIndexByte(rest, '-'); i >= 0 {
			return rest[:i]
		}
		return rest
	}
	return strings.TrimPrefix(s, "soak-")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
