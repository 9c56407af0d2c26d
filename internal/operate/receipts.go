package operate

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/store"
)

// ReceiptLister is the one store method ListReceipts needs.
type ReceiptLister interface {
	Receipts(ctx context.Context, f store.ReceiptFilter) ([]store.Receipt, error)
}

// ReceiptPage is how many receipts ListReceipts reads at a time.
const ReceiptPage = 1000

// ListReceipts reads the receipts f matches, oldest first, paging by receipt ID,
// and leaves out the plugin's probe rows (interceptor.ProbeActivity) unless probes:
// at most max (0: all), and whether more matched.
func ListReceipts(ctx context.Context, st ReceiptLister, f store.ReceiptFilter, max int, probes bool) ([]store.Receipt, bool, error) {
	var out []store.Receipt
	for {
		f.Limit = ReceiptPage
		rs, err := st.Receipts(ctx, f)
		if err != nil {
			return nil, false, err
		}
		for _, r := range rs {
			if !probes && r.Activity == interceptor.ProbeActivity {
				continue
			}
			if max > 0 && len(out) == max {
				return out, true, nil
			}
			out = append(out, r)
		}
		if len(rs) < ReceiptPage {
			return out, false, nil
		}
		f.AfterID = rs[len(rs)-1].ID
	}
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
