// Package operate is the operator's side of the store that the CLI (cmd/idemgate)
// and the web console (package console) share: one code path for each action —
// settle a pending key, pause and resume writes — and for what they show (the
// pending list, a key's story, the census). An action taken from the console is
// exactly the store call and receipt of the same command, with the console user as
// the actor.
package operate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/store"
)

// TS formats a time as the CLI prints it: RFC 3339 in UTC, "-" when zero.
func TS(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// Dash is s, or "-" when it is empty, as the CLI prints an empty field.
func Dash(s string) string { return dash(s) }

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Pending is `idemgate pending`'s list: the records that wait on a witness or a
// person at now, oldest first, at most limit (0: all), without the plugin's store
// checks (interceptor.ProbeActivity) unless probes.
func Pending(ctx context.Context, st store.Operator, now time.Time, limit int, probes bool) ([]store.Record, error) {
	if probes || limit <= 0 {
		rs, err := st.Pending(ctx, now, limit)
		if err != nil || probes {
			return rs, err
		}
		return slices.DeleteFunc(rs, isProbe), nil
	}
	// Probes are left out below, and the limit counts the rest: ask for a few more
	// than limit, and for more again only when probes took their place. Never every
	// pending record (a console reloads this page every few seconds).
	for n := limit + 8; ; n *= 2 {
		rs, err := st.Pending(ctx, now, n)
		if err != nil {
			return nil, err
		}
		full := len(rs) == n
		rs = slices.DeleteFunc(rs, isProbe)
		if len(rs) >= limit || !full {
			return rs[:min(len(rs), limit)], nil
		}
	}
}

func isProbe(r store.Record) bool { return r.Activity == interceptor.ProbeActivity }

// MayHaveSent says whether r's write may have reached the vendor: its claim was
// taken (the body may have begun), or an earlier attempt may have sent.
func MayHaveSent(r store.Record) bool {
	return r.State == store.StateClaimed || r.State == store.StateUnknown || r.MayHaveSent
}

// ResolvableFrom is store.ResolvableFrom, zero when a person may resolve r at now.
func ResolvableFrom(r store.Record, now time.Time) time.Time {
	if store.Resolvable(r, now) {
		return time.Time{}
	}
	return store.ResolvableFrom(r).UTC()
}

// NotSentFrom is store.NotSentFrom, zero when a person may resolve r as not sent at now.
func NotSentFrom(r store.Record, now time.Time) time.Time {
	if store.NotSentResolvable(r, now) {
		return time.Time{}
	}
	return store.NotSentFrom(r).UTC()
}

// WithheldCall is the call the gate withholds for r, printed as the gate prints it.
func WithheldCall(r store.Record) string {
	return interceptor.WithheldCall{Activity: r.Activity, Key: r.Key, Effect: r.Effect, Args: r.Args}.String()
}

// Resolvable says, in the operator's words, why a record cannot be resolved as
// sent (sent) or not sent.
func Resolvable(r store.Record, now time.Time, sent bool) error {
	switch {
	case r.State == store.StateCompleted:
		return fmt.Errorf("key %s is already completed (%s, attempt %d of workflow %s): nothing to resolve, nothing changed. "+
			"Its history: `idemgate receipts --key %s`", r.Key, TS(r.UpdatedAt), r.Attempt, r.WorkflowID, r.Key)
	case r.State == store.StateReleased:
		return fmt.Errorf("key %s is already released (%s): the next attempt runs the write; nothing changed. "+
			"Its history: `idemgate receipts --key %s`", r.Key, TS(r.UpdatedAt), r.Key)
	case r.State == store.StateClaimed && !store.Resolvable(r, now):
		// Until the lease plus store.LeaseMargin: a worker whose clock runs behind may still send.
		from := store.ResolvableFrom(r)
		owner := fmt.Sprintf("its lease (the attempt's deadline plus twice the clock skew) passed at %s", TS(r.Lease))
		if now.Before(r.Lease) {
			owner = fmt.Sprintf("it may still be running until its lease (the attempt's deadline plus twice the clock skew) at %s", TS(r.Lease))
		}
		// The look at the vendor must come from then on too: one before can miss the
		// attempt's late request, and a --not-sent typed later would still be let
		// through (claimmodel's TestPersonWhoLookedEarlySettlesWrong).
		return fmt.Errorf("key %s is claimed by attempt %d of workflow %s: %s. A worker whose clock runs behind may "+
			"still send until %s after the lease, so a person may resolve this key from %s (in %s): the lease plus %s. "+
			"Nothing changed. Next step: look the write up at the vendor at or after %s, not before (a look before then "+
			"can miss the attempt's request still on its way, and a --not-sent resting on it sends the write twice), "+
			"then run this resolve again",
			r.Key, r.Attempt, r.WorkflowID, owner, store.LeaseMargin, TS(from), from.Sub(now).Round(time.Second),
			store.LeaseMargin, TS(from))
	case r.State != store.StateUnknown && r.State != store.StateClaimed:
		return fmt.Errorf("key %s is in state %q, which resolve does not know; nothing changed", r.Key, r.State)
	case !sent && !store.NotSentResolvable(r, now):
		// An unknown record: the attempt gave up without proof, but a request it wrote
		// just before may still land until its lease plus the margin (atk-op finding 4).
		from := store.NotSentFrom(r)
		return fmt.Errorf("key %s: attempt %d of workflow %s ended without proof of whether %s reached the vendor, and a "+
			"request it wrote just before may still land until %s (its lease, %s, plus %s). --sent may be given now (when "+
			"the vendor shows the write); --not-sent only from %s (in %s). Nothing changed. Next step: look the write up "+
			"at the vendor at or after %s, not before (a look before then can miss the request still on its way, and a "+
			"--not-sent resting on it sends the write twice), then run this resolve again",
			r.Key, r.Attempt, r.WorkflowID, r.Activity, TS(from), TS(r.Lease), store.LeaseMargin, TS(from),
			from.Sub(now).Round(time.Second), TS(from))
	}
	return nil
}

// Settle is one settlement of a pending key by a person: `idemgate resolve` and
// the console's settle form.
type Settle struct {
	Key string
	// Sent: the write happened and Result (compact JSON; "null" for an activity that
	// returns only an error) is what the next attempt returns. Otherwise the claim
	// is released and the next attempt runs the write once more.
	Sent   bool
	Result []byte
	// Actor is who settles, Reason why (required): both go into the receipt.
	Actor, Reason string
	// Window is how long a stored result is remembered (the worker's Options.Window).
	Window time.Duration
	Now    time.Time
	// Check, when set, sees the record before anything moves and may refuse it (the
	// console: the record is still the one the person confirmed).
	Check func(store.Record) error
}

// Settled is what a settlement did.
type Settled struct {
	Record     store.Record // the record before
	Receipt    store.Receipt
	To         store.State
	Resolution string
}

// Resolve settles s.Key, owner-checked: it reads the record, refuses one that is
// not Resolvable at s.Now, and moves it with its DecisionResolved receipt in one
// store call (store.Operator.Resolve).
func Resolve(ctx context.Context, st store.Operator, s Settle) (Settled, error) {
	key := s.Key
	if strings.TrimSpace(s.Reason) == "" {
		return Settled{}, fmt.Errorf("key %s: a reason is required (what the vendor's dashboard shows, the ticket); nothing changed", key)
	}
	if s.Window <= 0 {
		s.Window = interceptor.DefaultWindow
	}
	rec, err := st.Get(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		return Settled{}, fmt.Errorf("no record for key %s: it was never claimed, or swept after its window. Nothing changed. "+
			"Check the key with `idemgate pending` or `idemgate receipts --key %s`", key, key)
	}
	if err != nil {
		return Settled{}, err
	}
	now := s.Now
	if err := Resolvable(rec, now, s.Sent); err != nil {
		return Settled{}, err
	}
	if s.Check != nil {
		if err := s.Check(rec); err != nil {
			return Settled{}, err
		}
	}
	to, resolution := store.StateReleased, store.ResolvedNotSent
	t := store.Transition{Key: key, Owner: rec.Owner, Now: now, Window: s.Window}
	t.Receipt = store.Receipt{Time: now, Key: key, Activity: rec.Activity, Effect: rec.Effect, Decision: store.DecisionResolved,
		ArgsHash: rec.ArgsHash, WorkflowID: rec.WorkflowID, RunID: rec.RunID, Attempt: rec.Attempt,
		Actor: s.Actor, Reason: strings.TrimSpace(s.Reason)}
	if s.Sent {
		to, resolution = store.StateCompleted, store.ResolvedSent
		var v any // nil for JSON null: exactly what the gate stores for a nil result
		if string(s.Result) != "null" {
			v = json.RawMessage(s.Result)
		}
		if t.Result, t.Receipt.ResultRef, err = interceptor.EncodeResult(nil, v); err != nil {
			return Settled{}, fmt.Errorf("encode the result: %v. Nothing changed", err)
		}
	}
	t.Receipt.Resolution = resolution
	if err := st.Resolve(ctx, t, to); err != nil {
		if errors.Is(err, store.ErrNotOwner) || errors.Is(err, store.ErrNotFound) {
			now, _ := st.Get(ctx, key)
			return Settled{}, fmt.Errorf("key %s changed while it was being resolved (now %s, attempt %d); nothing changed. "+
				"Look again with `idemgate receipts --key %s`", key, dash(string(now.State)), now.Attempt, key)
		}
		return Settled{}, err
	}
	return Settled{Record: rec, Receipt: t.Receipt, To: to, Resolution: resolution}, nil
}

// PausableEffect reports whether effect names a class a pause may name:
// destructive or idempotent-write (reads are never paused).
func PausableEffect(effect string) bool {
	e, err := interceptor.ParseEffect(effect)
	return err == nil && e != interceptor.Read
}

// ReadsByName reports whether activity reads as a read by its name: a pause of it
// changes nothing unless the workers' Options.Effects makes it a write.
func ReadsByName(activity string) bool {
	return interceptor.Classify(activity).Effect == interceptor.Read
}

// Pause stores p with its receipt (store.Operator.Pause).
func Pause(ctx context.Context, st store.Operator, p store.Pause) error {
	if err := p.Valid(); err != nil {
		return err
	}
	return st.Pause(ctx, p)
}

// UnnamedActivityNote is a note for a pause of activity that no receipt names
// (a typo: ChargeCrad for ChargeCard; names are case-sensitive), with the names the
// receipts of the last week carry that are close to it, or "" when a receipt names
// it. Such a pause is stored all the same (a pause may come before the first run).
func UnnamedActivityNote(ctx context.Context, st store.Operator, activity string, now time.Time) (string, error) {
	// Bounded pages (List): the activity is not indexed, and a store of millions
	// of receipts is not walked to its end for a note.
	week := now.Add(-7 * 24 * time.Hour)
	searching := false
	for _, f := range []store.ReceiptFilter{{Activity: activity}, {Activity: activity, Since: week}} {
		named, err := List(ctx, st, f, 50, true)
		if err != nil {
			return "", err
		}
		for _, r := range named.Receipts {
			if r.Effect != "" { // a gate's receipt, not a pause's or resume's
				return "", nil
			}
		}
		if !named.Searching {
			break // read to the store's end: none
		}
		searching = true
	}
	rs, _, err := ListReceipts(ctx, st, store.ReceiptFilter{Since: week}, 20000, true)
	if err != nil {
		return "", err
	}
	seen := map[string]bool{}
	var close, all []string
	for _, r := range rs {
		if r.Activity == "" || r.Effect == "" || seen[r.Activity] || r.Activity == interceptor.ProbeActivity {
			continue
		}
		seen[r.Activity] = true
		all = append(all, r.Activity)
		if strings.EqualFold(r.Activity, activity) || editDistance(strings.ToLower(r.Activity), strings.ToLower(activity)) <= 2 {
			close = append(close, r.Activity)
		}
	}
	read := "no receipt names"
	if searching {
		read = fmt.Sprintf("no receipt read (the store's oldest and the last week's first, %d of each) names", ListPages*store.DefaultReceiptScan)
	}
	note := fmt.Sprintf("%s the activity %s (names are case-sensitive): if it is misspelt, this pause stops nothing "+
		"that runs. Next step: resume it and pause the name the workers register", read, activity)
	switch {
	case len(close) > 0:
		slices.Sort(close)
		note += fmt.Sprintf("; close to it in the receipts of the last week: %s", strings.Join(close, ", "))
	case len(all) > 0:
		slices.Sort(all)
		if len(all) > 12 {
			all = append(all[:12], "…")
		}
		note += fmt.Sprintf("; the receipts of the last week name: %s", strings.Join(all, ", "))
	}
	return note, nil
}

// editDistance is the Levenshtein distance of a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// Resume lifts the pause of p's scope with its receipt (store.Operator.Resume).
func Resume(ctx context.Context, st store.Operator, p store.Pause) error {
	if err := p.Valid(); err != nil {
		return err
	}
	if err := st.Resume(ctx, p); errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%s is not paused; nothing changed. See what is: `idemgate pauses`", p.Scope())
	} else if err != nil {
		return err
	}
	return nil
}
