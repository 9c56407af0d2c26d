package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/internal/operate"
	"github.com/idemgate/idemgate/store"
)

// receiptJSON is a receipt as --json prints it.
type receiptJSON struct {
	ID         int64           `json:"id"`
	Time       time.Time       `json:"time"`
	Key        string          `json:"key"`
	Activity   string          `json:"activity"`
	Effect     string          `json:"effect"`
	Decision   string          `json:"decision"`
	ArgsHash   string          `json:"args_hash,omitempty"`
	Call       json.RawMessage `json:"call,omitempty"`
	WorkflowID string          `json:"workflow_id,omitempty"`
	RunID      string          `json:"run_id,omitempty"`
	Attempt    int32           `json:"attempt,omitempty"`
	ResultRef  string          `json:"result_ref,omitempty"`
	Error      string          `json:"error,omitempty"`
	Actor      string          `json:"actor,omitempty"`
	Reason     string          `json:"reason,omitempty"`
	Resolution string          `json:"resolution,omitempty"`
	// EffectSource is what decided Effect: name, hint or override ("" on older
	// receipts and on those with no class of their own).
	EffectSource string `json:"effect_source,omitempty"`
}

func toReceiptJSON(r store.Receipt) receiptJSON {
	j := receiptJSON{ID: r.ID, Time: r.Time.UTC(), Key: r.Key, Activity: r.Activity, Effect: r.Effect,
		Decision: string(r.Decision), ArgsHash: r.ArgsHash, WorkflowID: r.WorkflowID, RunID: r.RunID, Attempt: r.Attempt,
		ResultRef: r.ResultRef, Error: r.Error, Actor: r.Actor, Reason: r.Reason, Resolution: r.Resolution,
		EffectSource: r.EffectSource}
	if json.Valid(r.Call) {
		j.Call = r.Call
	}
	return j
}

func (c *cli) receipts(args []string) error {
	if sub, err := c.receiptsSub(args); sub {
		return err
	}
	f := c.newFlags("receipts", "[flags] | export --before T | prune --before T --through-id ID --reason WHY", "Lists the append-only receipts, oldest first: in the order they were stored (on PostgreSQL, with --since\n"+
		"and no --key, --workflow or rare --decision: by time), a read's receipt at its read's time among them.\n"+
		"A read's receipt is stored in a batch up to the flush interval after its read (longer while the store\n"+
		"was unreachable), so a page ordered by storing shows it where its batch was stored: a read older than a\n"+
		"page's receipts may be on a later page.\n"+
		"A store of millions of receipts is read a bounded page at a time: when a filter matches few of them\n"+
		"(--activity alone), the listing stops after some pages and says \"more may follow\" with --after CURSOR\n"+
		"to go on from.\n"+
		"With --key: the key's whole story, oldest first, and a summary line (receipts per decision, first and last\n"+
		"time, the key's state now); with --key and --limit N, the newest N of it.\n"+
		"The plugin's store checks at worker start (activity "+interceptor.ProbeActivity+", two per start) are left out\n"+
		"unless --probes or --activity "+interceptor.ProbeActivity+".\n"+
		"`idemgate receipts export --help` and `idemgate receipts prune --help`: archive and remove old receipts.", true)
	key := f.String("key", "", "only this key, its whole story (the stored key; with --namespace and --activity, a business key)")
	ns := f.String("namespace", "", "with --key and --activity: --key is the business key given to interceptor.WithKey in this Temporal namespace")
	wf := f.String("workflow", "", "only this workflow ID")
	act := f.String("activity", "", "only this activity type")
	since := f.Duration("since", 0, "only receipts of the last DURATION (e.g. 1h, 30m)")
	decision := f.String("decision", "", "only this decision: "+decisionList())
	limit := f.Int("limit", 100, "show at most N receipts (0: all); with --key, the newest N (default: all of them)")
	scan := f.Int("scan", store.DefaultReceiptScan, "receipts one page examines at most (a filter that few match ends a page early; a listing reads at most "+strconv.Itoa(operate.ListPages)+" such pages)")
	after := f.String("after", "", "continue a listing where the last one stopped: the CURSOR it printed (\"more may follow: --after CURSOR\")")
	probes := f.Bool("probes", false, "include the plugin's store checks at worker start (activity "+interceptor.ProbeActivity+")")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 && (pos[0] == "export" || pos[0] == "prune") {
		return usagef("put %q first: `idemgate receipts %s --before T ...`", pos[0], pos[0])
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q: filter with --key, --workflow, --activity, --since, --decision", pos[0])
	}
	if *since < 0 || *limit < 0 {
		return usagef("--since and --limit must not be negative")
	}
	if *scan <= 0 {
		return usagef("--scan must be positive")
	}
	if *decision != "" && !slices.Contains(store.Decisions, store.Decision(*decision)) {
		return usagef("unknown decision %q: use one of %s", *decision, decisionList())
	}
	k, err := businessKey(*key, *ns, *act)
	if err != nil {
		return err
	}
	limitSet := false
	f.Visit(func(fl *flag.Flag) { limitSet = limitSet || fl.Name == "limit" })
	filter := store.ReceiptFilter{Key: k, WorkflowID: *wf, Activity: *act, Decision: store.Decision(*decision), Scan: *scan}
	if *since > 0 {
		filter.Since = c.now().Add(-*since)
	}
	if *after != "" {
		if k != "" {
			return usagef("--after continues a listing; with --key the whole story is read (use --limit for its newest receipts)")
		}
		if err := operate.ParseCursor(&filter, *after); err != nil {
			return usagef("--after: %v", err)
		}
	}
	withProbes := *probes || *act == interceptor.ProbeActivity
	ctx, st, done, err := c.session(f)
	if err != nil {
		return err
	}
	defer done()
	var (
		rs, story []store.Receipt
		more      bool
		listing   operate.Listing
	)
	if k != "" {
		// A key's story is read whole: its resolution comes last, and a cap on the
		// oldest rows would cut it off.
		if story, _, err = listReceipts(ctx, st, filter, 0, withProbes); err != nil {
			return err
		}
		// The newest N of the story as it is listed (a read at its time), not the
		// last N stored.
		rs = store.ReadsAtTheirTime(story)
		if limitSet && *limit > 0 && len(rs) > *limit {
			rs, more = rs[len(rs)-*limit:], true
		}
	} else {
		if listing, err = operate.List(ctx, st, filter, *limit, withProbes); err != nil {
			return err
		}
		rs, more = listing.Receipts, listing.More
	}
	if k == "" {
		// Read receipts are appended in batches after their reads: list them at their time.
		rs = store.ReadsAtTheirTime(rs)
	}
	if f.json {
		out := make([]receiptJSON, 0, len(rs))
		for _, r := range rs {
			out = append(out, toReceiptJSON(r))
		}
		if k == "" && more {
			c.moreMayFollow(listing, len(rs))
		}
		return c.printJSON(out)
	}
	if len(rs) == 0 {
		if more {
			c.moreMayFollow(listing, 0)
			return nil
		}
		fmt.Fprintln(c.stdout, "no receipts match")
		return nil
	}
	tw := c.table()
	row(tw, "TIME", "KEY", "ACTIVITY", "EFFECT", "WORKFLOW/RUN", "ATTEMPT", "DECISION", "ARGS HASH", "RESULT", "NOTE")
	for _, r := range rs {
		d := operate.DecisionText(r)
		note := r.Error
		if r.Actor != "" || r.Reason != "" {
			note = strings.TrimSpace(fmt.Sprintf("by %s: %s %s", dash(r.Actor), r.Reason, note))
		}
		note += pruneNote(r)
		run := "-"
		if r.WorkflowID != "" {
			run = r.WorkflowID + "/" + clip(r.RunID, 8)
		}
		attempt := "-"
		if r.Attempt > 0 {
			attempt = fmt.Sprint(r.Attempt)
		}
		row(tw, ts(r.Time), r.Key, r.Activity, effectCell(r), run, attempt, d, clip(r.ArgsHash, 12), r.ResultRef, clip(note, 100))
	}
	tw.Flush()
	switch {
	case k != "":
		rec, gerr := st.Get(ctx, k)
		fmt.Fprintln(c.stdout, "\n"+escape(keySummary(k, story, rec, gerr), false))
		if more {
			fmt.Fprintf(c.stderr, "showing the newest %d of the key's %d receipts; drop --limit to see them all\n", len(rs), len(story))
		}
	case more:
		c.moreMayFollow(listing, len(rs))
	}
	return nil
}

// moreMayFollow tells, on standard error, that a listing of n receipts stopped
// before the store's end, and how to go on.
func (c *cli) moreMayFollow(l operate.Listing, n int) {
	cur := operate.Cursor(l.Next)
	if l.Searching {
		fmt.Fprintf(c.stderr, "showing %d receipt(s): the filter matches few of the receipts read so far, and the listing stopped "+
			"after %d bounded pages (the store was not read to its end). More may follow: --after %s goes on from there; "+
			"--since, --key or --workflow narrow it\n", n, operate.ListPages, cur)
		return
	}
	fmt.Fprintf(c.stderr, "showing the first %d receipts. More may follow: --after %s goes on from there; "+
		"narrow with --since, --key, --workflow or raise --limit\n", n, cur)
}

// listReceipts is operate.ListReceipts.
func listReceipts(ctx context.Context, st operate.ReceiptLister, f store.ReceiptFilter, max int, probes bool) ([]store.Receipt, bool, error) {
	return operate.ListReceipts(ctx, st, f, max, probes)
}

func keySummary(key string, rs []store.Receipt, rec store.Record, getErr error) string {
	return operate.KeySummary(key, rs, rec, getErr)
}

func effectCell(r store.Receipt) string { return operate.EffectCell(r) }

func decisionList() string {
	var s []string
	for _, d := range store.Decisions {
		s = append(s, string(d))
	}
	return strings.Join(s, ", ")
}
