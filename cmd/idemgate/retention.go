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
	bw := bufio.NewWriter(w)
	n, err := exportTo(bw, func(after int64) ([]store.Receipt, error) {
		return st.Receipts(ctx, store.ReceiptFilter{Until: cut, AfterID: after, Limit: exportPage})
	})
	if err == nil {
		err = bw.Flush()
	}
	if err == nil && file != nil {
		err = file.Sync()
	}
	if err != nil {
		return fmt.Errorf("export stopped after %d receipts: %w. Nothing was removed; the archive is incomplete", n, err)
	}
	if file == nil {
		fmt.Fprint(c.stderr, escape(fmt.Sprintf("exported %d receipt(s) older than %s\n", n, ts(cut)), false))
		return nil
	}
	if f.json {
		return c.printJSON(map[string]any{"exported": n, "before": cut, "out": *out})
	}
	c.printf("exported %d receipt(s) older than %s to %s. Remove them from the store with "+
		"`idemgate receipts prune --before %s --reason WHY`\n", n, ts(cut), *out, cut.Format(time.RFC3339Nano))
	return nil
}

// exportTo writes every receipt page returns, from the first on, as JSON lines
// that carry no control character raw, and returns how many it wrote.
func exportTo(w io.Writer, page func(after int64) ([]store.Receipt, error)) (int, error) {
	var (
		n     int
		after int64
	)
	for {
		rs, err := page(after)
		if err != nil || len(rs) == 0 {
			return n, err
		}
		for _, r := range rs {
			b, err := json.Marshal(toReceiptJSON(r))
			if err != nil {
				return n, err
			}
			if _, err := w.Write(append(jsonSafe(b), '\n')); err != nil {
				return n, err
			}
			n++
		}
		after = rs[len(rs)-1].ID
	}
}

func (c *cli) receiptsPrune(args []string) error {
	f := c.newFlags("receipts prune", "--before T --reason WHY [flags]", "Removes the receipts older than T, in batches, and records the prune in one receipt\n"+
		"(decision pruned: cut-off, count, who and why). Kept whatever their age: the receipts of keys that still\n"+
		"have a record, and earlier prunes. Export them first: `idemgate receipts export --before T --out FILE`.", true)
	before := f.String("before", "", "the cut-off: 2026-09-01, 2026-09-01T00:00:00Z, or a duration ago (2160h)")
	reason := f.String("reason", "", "why (required): the retention rule, the ticket; it goes into the receipt")
	actor := f.String("actor", "", "who prunes (default: the OS user)")
	batch := f.Int("batch", store.DefaultPruneBatch, "receipts removed per transaction (claims wait for at most one batch)")
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
	ctx, st, done, err := c.sessionFor(f, retentionTimeout)
	if err != nil {
		return err
	}
	defer done()
	pr, ok := st.(store.Pruner)
	if !ok {
		return fmt.Errorf("this store (%T) cannot prune receipts; nothing changed", st)
	}
	p := store.Prune{Before: cut, Actor: c.actor(*actor), Reason: strings.TrimSpace(*reason), Now: c.now(), Batch: *batch}
	n, err := pr.Prune(ctx, p)
	if err != nil {
		return fmt.Errorf("prune stopped after removing %d receipt(s): %w. The prune's receipt records it; run it again to go on", n, err)
	}
	if f.json {
		return c.printJSON(map[string]any{"removed": n, "before": cut, "actor": p.Actor, "reason": p.Reason})
	}
	c.printf("removed %d receipt(s) older than %s (kept: those of keys that still have a record, and earlier prunes); "+
		"recorded as a pruned receipt by %s\n", n, ts(cut), p.Actor)
	return nil
}

// pruneNote is the note a pruned receipt's row shows: what it removed.
func pruneNote(r store.Receipt) string {
	var sum store.PruneSummary
	if r.Decision != store.DecisionPruned || json.Unmarshal(r.Call, &sum) != nil {
		return ""
	}
	return fmt.Sprintf(" (removed %d receipt(s) before %s)", sum.Count, ts(sum.Before))
}
