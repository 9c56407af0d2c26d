package operate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/store"
)

// ReceiptLister is the one store method ListReceipts needs (it pages through
// store.ReceiptPager when the store has it).
type ReceiptLister interface {
	Receipts(ctx context.Context, f store.ReceiptFilter) ([]store.Receipt, error)
}

// ReceiptPage is how many receipts ListReceipts reads at a time.
const ReceiptPage = 1000

// ListPages is how many pages that end short of their cap (stopped by their scan
// bound) a listing capped at some number of receipts reads before it stops and
// says where: each page examines at most
// store.DefaultReceiptScan receipts (a bounded time), so a listing whose filter
// few receipts match ends in bounded time too, with "more may follow" and the
// cursor to go on from, rather than walking the whole store.
const ListPages = 10

// Listing is what List found.
type Listing struct {
	// Receipts are the matches, oldest first (see store.ReceiptPager for the order).
	Receipts []store.Receipt
	// More: receipts after these may match (the cap was reached, or the pages ran
	// out before the store's end); Next continues from where the listing stopped.
	More bool
	// Searching: the pages ran out before the cap was reached (the filter matches
	// few of the receipts walked); the store was not read to its end.
	Searching bool
	// Next is the filter (with its cursor) of the next listing.
	Next store.ReceiptFilter
}

// List reads the receipts f matches, oldest first, a bounded page at a time
// (store.PageReceipts), and leaves out the plugin's probe rows
// (interceptor.ProbeActivity) unless probes: at most max of them (0: all, to the
// store's end), and, when max is set, at most ListPages pages that end short.
func List(ctx context.Context, st ReceiptLister, f store.ReceiptFilter, max int, probes bool) (Listing, error) {
	var l Listing
	for short := 0; ; {
		if max > 0 && short == ListPages {
			l.More, l.Searching, l.Next = true, true, f
			return l, nil
		}
		f.Limit = ReceiptPage
		if max > 0 {
			f.Limit = min(ReceiptPage, max-len(l.Receipts))
		}
		p, err := store.PageReceipts(ctx, st, f)
		if err != nil {
			return Listing{}, err
		}
		for _, r := range p.Receipts {
			if probes || r.Activity != interceptor.ProbeActivity {
				l.Receipts = append(l.Receipts, r)
			}
		}
		if len(p.Receipts) < f.Limit {
			short++ // stopped by its scan bound, not by the cap
		}
		f = p.Next
		if p.Done {
			l.Next = f
			return l, nil
		}
		if max > 0 && len(l.Receipts) >= max {
			l.More, l.Next = true, f
			return l, nil
		}
	}
}

// ListReceipts is List's receipts and whether more may follow.
func ListReceipts(ctx context.Context, st ReceiptLister, f store.ReceiptFilter, max int, probes bool) ([]store.Receipt, bool, error) {
	l, err := List(ctx, st, f, max, probes)
	return l.Receipts, l.More, err
}

// Cursor is the text of f's cursor, for a person to pass back (`receipts
// --after`): the ID, or TIME/ID for a listing in time order.
func Cursor(f store.ReceiptFilter) string {
	if f.AfterTime.IsZero() {
		return strconv.FormatInt(f.AfterID, 10)
	}
	return f.AfterTime.UTC().Format(time.RFC3339Nano) + "/" + strconv.FormatInt(f.AfterID, 10)
}

// ParseCursor sets f's cursor from Cursor's text.
func ParseCursor(f *store.ReceiptFilter, s string) error {
	at, id, timed := strings.Cut(s, "/")
	if !timed {
		id = at
	}
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil || n < 0 {
		return fmt.Errorf("cursor %q: want a receipt ID, or TIME/ID, as a listing printed it", s)
	}
	f.AfterID = n
	if timed {
		t, err := time.Parse(time.RFC3339Nano, at)
		if err != nil {
			return fmt.Errorf("cursor %q: want a receipt ID, or TIME/ID, as a listing printed it", s)
		}
		f.AfterTime = t
	}
	return nil
}

// DecisionText is a receipt's decision as shown: "resolved (sent)".
func DecisionText(r store.Receipt) string {
	d := string(r.Decision)
	if r.Resolution != "" {
		d += " (" + r.Resolution + ")"
	}
	return d
}

// KeySummary is the last line of a key's story: how many receipts of each decision
// (in the order they first came), the first and last time, and the key's state now.
// rs must not be empty.
func KeySummary(key string, rs []store.Receipt, rec store.Record, getErr error) string {
	var order []string
	count := map[string]int{}
	first, last := rs[0].Time, rs[0].Time
	for _, r := range rs {
		d := DecisionText(r)
		if count[d] == 0 {
			order = append(order, d)
		}
		count[d]++
		if r.Time.Before(first) {
			first = r.Time
		}
		if r.Time.After(last) {
			last = r.Time
		}
	}
	parts := make([]string, len(order))
	for i, d := range order {
		parts[i] = fmt.Sprintf("%s %d", d, count[d])
	}
	now := "no record (never claimed, or swept after its window)"
	switch {
	case getErr == nil:
		now = string(rec.State)
		if rec.State == store.StateClaimed || rec.State == store.StateUnknown {
			now += " (see `idemgate pending`)"
		}
	case !errors.Is(getErr, store.ErrNotFound):
		now = "unknown: the record could not be read: " + getErr.Error()
	}
	return fmt.Sprintf("key %s: %d receipts from %s to %s: %s; now %s", key, len(rs), TS(first), TS(last), strings.Join(parts, ", "), now)
}

// EffectCell is a receipt's effect as shown: "destructive", or "destructive
// (hint)" / "(override)" when the name did not decide it.
func EffectCell(r store.Receipt) string {
	if r.EffectSource == "" || r.EffectSource == store.EffectByName {
		return r.Effect
	}
	return r.Effect + " (" + r.EffectSource + ")"
}

// CensusItem is one activity of the census (`idemgate census`, the console's
// census page).
type CensusItem struct {
	Name   string `json:"name"`
	Effect string `json:"effect"`
	Verb   string `json:"verb,omitempty"`
	Word   string `json:"word,omitempty"` // the word the decision rests on
	Rule   string `json:"rule"`           // interceptor.Source: verb, phrasal, none, …
	Reason string `json:"reason"`
	Review bool   `json:"review"`
	// Hints is the class the activity's annotations claim (MCP), when any.
	Hints       string `json:"hints,omitempty"`
	Contradicts bool   `json:"contradicts,omitempty"`
}

// CensusItems lists rep's classification of names, in their order, once each.
func CensusItems(rep interceptor.CensusReport, names []string) []CensusItem {
	var items []CensusItem
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			continue
		}
		seen[n] = true
		cl := rep.Effects[n]
		it := CensusItem{Name: n, Effect: cl.Effect.String(), Verb: cl.Verb, Word: cl.Word,
			Rule: cl.Source.String(), Reason: cl.Reason(), Review: cl.Review, Contradicts: cl.Contradicts}
		if cl.Hinted != 0 {
			it.Hints = cl.Hinted.String()
		}
		items = append(items, it)
	}
	return items
}
