package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/idemgate/idemgate/store"
)

// retentionTimeout bounds an export or a prune: both walk the whole store, in
// pages and batches, and may take minutes on a large one.
const retentionTimeout = 2 * time.Hour

// exportPage is how many receipts export reads at a time.
var exportPage = 1000

// parseBefore reads --before: an RFC 3339 time, a date (midnight UTC), or a
// duration meaning that long ago (2160h: 90 days).
func (c *cli) parseBefore(s string) (time.Time, error) {
	now := c.now()
	var t time.Time
	if s == "" {
		return t, usagef("--before is required: the cut-off, as 2026-09-01, 2026-09-01T00:00:00Z or a duration ago (2160h)")
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return t, usagef("--before %s: a duration means that long ago and must be positive", s)
		}
		t = now.Add(-d)
	} else if t, err = time.Parse(time.RFC3339Nano, s); err != nil {
		if t, err = time.Parse(time.DateOnly, s); err != nil {
			return t, usagef("--before %q: want 2026-09-01, 2026-09-01T00:00:00Z or a duration ago (2160h)", s)
		}
	}
	if t.After(now) {
		return t, usagef("--before %s is in the future: receipts that recent are not old", ts(t))
	}
	return t.UTC(), nil
}

// receiptsSub runs "receipts export" and "receipts prune"; ok is false for the
// plain listing.
func (c *cli) receiptsSub(args []string) (ok bool, err error) {
	if len(args) == 0 {
		return false, nil
	}
	switch args[0] {
	case "export":
		return true, c.receiptsExport(args[1:])
	case "prune":
		return true, c.receiptsPrune(args[1:])
	}
	return false, nil
}

func (c *cli) receiptsExport(args []string) error {
	f := c.newFlags("receipts export", "--before T [--out FILE] [flags]", "Writes every receipt older than T as JSON lines (one receipt a line, oldest first), for\n"+
		"an archive, reading the store a page at a time. `idemgate receipts prune --before T` then removes them\n"+
		"(except those of keys that still have a record).", true)
	before := f.String("before", "", "the cut-off: 2026-09-01, 2026-09-01T00:00:00Z, or a duration ago (2160h)")
	out := f.String("out", "", "write to FILE, created owner-only (0600); an existing file is refused (default: standard output)")
	if err := f.parseNone(args); err != nil {
		return err
	}
	cut, err := c.parseBefore(*before)
	if err != nil {
		return err
	}
	var (
		w    io.Writer = c.stdout
		file *os.File
	)
	if *out != "" {
		// Owner-only: receipts carry the arguments of withheld calls.
		if file, err = os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600); err != nil {
			return fmt.Errorf("create %s: %v. Nothing was exported; name a new file (an archive is never overwritten)", *out, errors.Unwrap(err))
		}
		defer file.Close()
		w = file
	}
	ctx, st, done, err := c.sessionFor(f, retentionTimeout)
	if err != nil {
		return err
	}
	defer done()
	// The horizon: every receipt at or below it is stored now. The export reads
	// through it and prints it for the prune, so a receipt stored later with a
	// time before the cut-off (a read's receipt from the gate's queue, appended
	// after an outage) is neither archived nor removed.
	var through int64
	if hz, ok := st.(store.ReceiptHorizoner); ok {
		if through, err = hz.ReceiptHorizon(ctx); err != nil {
			return fmt.Errorf("export: %w. Nothing was exported", err)
		}
	}
	bw := bufio.NewWriter(w)
	n, err := exportTo(bw, func(f store.ReceiptFilter) (store.ReceiptPage, error) {
		return store.PageReceipts(ctx, st, f)
	}, store.ReceiptFilter{Until: cut, ThroughID: through, Limit: exportPage})
	if err == nil {
		err = bw.Flush()
	}
	if err == nil && file != nil {
		err = file.Sync()
	}
	if err != nil {
		return fmt.Errorf("export stopped after %d receipts: %w. Nothing was removed; the archive is incomplete", n, err)
	}
	prune := fmt.Sprintf("idemgate receipts prune --before %s", cut.Format(time.RFC3339Nano))
	upTo := ""
	if through > 0 {
		prune += fmt.Sprintf(" --through-id %d", through)
		upTo = fmt.Sprintf(" (receipt IDs through %d)", through)
	}
	if file == nil {
		fmt.Fprint(c.stderr, escape(fmt.Sprintf("exported %d receipt(s) older than %s%s. Remove them from the store with `%s --reason WHY`\n",
			n, ts(cut), upTo, prune), false))
		return nil
	}
	if f.json {
		out := map[string]any{"exported": n, "before": cut, "out": *out}
		if through > 0 {
			out["through_id"] = through
		}
		return c.printJSON(out)
	}
	c.printf("exported %d receipt(s) older than %s%s to %s. Remove them from the store with `%s --reason WHY`\n",
		n, ts(cut), upTo, *out, prune)
	return nil
}

// exportTo writes every receipt of the pages page returns, from f's on until one
// is Done, as JSON lines that carry no control character raw, and returns how
// many it wrote.
func exportTo(w io.Writer, page func(f store.ReceiptFilter) (store.ReceiptPage, error), f store.ReceiptFilter) (int, error) {
	var n int
	for {
		p, err := page(f)
		if err != nil {
			return n, err
		}
		for _, r := range p.Receipts {
			b, err := json.Marshal(toReceiptJSON(r))
			if err != nil {
				return n, err
			}
			if _, err := w.Write(append(jsonSafe(b), '\n')); err != nil {
				return n, err
			}
			n++
		}
		if p.Done {
			return n, nil
		}
		f = p.Next
	}
}

func (c *cli) receiptsPrune(args []string) error {
	f := c.newFlags("receipts prune", "--before T --through-id ID --reason WHY [flags]", "Removes the receipts older than T, in batches, and records the prune in one receipt\n"+
		"(decision pruned: cut-off, count, who and why). Kept whatever their age: the receipts of keys that still\n"+
		"have a record, and earlier prunes. Export them first: `idemgate receipts export --before T --out FILE`, then\n"+
		"prune with the --through-id the export printed, so that only what it archived is removed.", true)
	before := f.String("before", "", "the cut-off: 2026-09-01, 2026-09-01T00:00:00Z, or a duration ago (2160h)")
	reason := f.String("reason", "", "why (required): the retention rule, the ticket; it goes into the receipt")
	actor := f.String("actor", "", "who prunes (default: the OS user)")
	batch := f.Int("batch", store.DefaultPruneBatch, "receipts removed per transaction (claims wait for at most one batch)")
	through := f.Int64("through-id", 0, "remove only receipts with an ID at or below this one: the ID the export printed, so that only what it archived goes "+
		"(a read's receipt stored after the export, with a time before the cut-off, stays); 0: every receipt stored when the prune begins")
	if err := f.parseNone(args); err != nil {
		return err
	}
	cut, err := c.parseBefore(*before)
	if err != nil {
		return err
	}
	if strings.TrimSpace(*reason) == "" {
		return usagef("--reason is required: say why (the retention rule, the ticket); it goes into the prune's receipt")
	}
	if *batch <= 0 {
		return usagef("--batch must be positive")
	}
	if *through < 0 {
		return usagef("--through-id must not be negative (0: no bound)")
	}
	ctx, st, done, err := c.sessionFor(f, retentionTimeout)
	if err != nil {
		return err
	}
	defer done()
	pr, ok := st.(store.Pruner)
	if !ok {
		return fmt.Errorf("this store (%T) cannot prune receipts; nothing changed", st)
	}
	p := store.Prune{Before: cut, Actor: c.actor(*actor), Reason: strings.TrimSpace(*reason), Now: c.now(), Batch: *batch, ThroughID: *through}
	n, err := pr.Prune(ctx, p)
	if err != nil {
		return fmt.Errorf("prune stopped after removing %d receipt(s): %w. The prune's receipt records it; run it again to go on", n, err)
	}
	if f.json {
		out := map[string]any{"removed": n, "before": cut, "actor": p.Actor, "reason": p.Reason}
		if p.ThroughID > 0 {
			out["through_id"] = p.ThroughID
		}
		return c.printJSON(out)
	}
	upTo := ""
	if p.ThroughID > 0 {
		upTo = fmt.Sprintf(" with IDs through %d", p.ThroughID)
	} else {
		fmt.Fprintln(c.stderr, "no --through-id: the prune removed every old receipt stored when it began, also any stored after an export "+
			"(a read's receipt, appended late by a worker's queue). To remove only what an export archived, give the --through-id it printed.")
	}
	c.printf("removed %d receipt(s) older than %s%s (kept: those of keys that still have a record, and earlier prunes); "+
		"recorded as a pruned receipt by %s\n", n, ts(cut), upTo, p.Actor)
	return nil
}

// pruneNote is the note a pruned receipt's row shows: what it removed.
func pruneNote(r store.Receipt) string {
	var sum store.PruneSummary
	if r.Decision != store.DecisionPruned || json.Unmarshal(r.Call, &sum) != nil {
		return ""
	}
	if sum.ThroughID > 0 {
		return fmt.Sprintf(" (removed %d receipt(s) before %s, IDs through %d)", sum.Count, ts(sum.Before), sum.ThroughID)
	}
	return fmt.Sprintf(" (removed %d receipt(s) before %s)", sum.Count, ts(sum.Before))
}
