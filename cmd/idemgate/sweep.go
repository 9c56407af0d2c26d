package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"

	"github.com/idemgate/idemgate/store"
)

func (c *cli) sweep(args []string) error {
	f := c.newFlags("sweep", "[flags]", "Removes the records past their window once (receipts are kept) and reports how many. "+
		"A finished destructive write is kept past its window while its workflow can still be reset (a reset run would "+
		"send it again); with --temporal-address and --namespace the sweep asks Temporal about each one's root workflow "+
		"(the first of its parent-child chain, whose reset re-creates the children) and its own workflow, and forgets those "+
		"whose workflows Temporal no longer has (closed and past the namespace's retention); it believes Temporal only in a "+
		"namespace where Temporal shows a run this store recorded.", true)
	limit := f.Int("limit", 0, "remove at most N (0: all that expired), and forget at most N held records (passing over those whose workflow Temporal still has)")
	address := f.String("temporal-address", "", "Temporal frontend host:port to ask whether the workflows of finished destructive writes past their window can still be reset")
	namespace := f.String("namespace", "", "with --temporal-address: the Temporal namespace the workers of this store run in (required: a wrong one would make every workflow look gone)")
	if err := f.parseNone(args); err != nil {
		return err
	}
	if *limit < 0 {
		return usagef("--limit must not be negative")
	}
	if (*address == "") != (*namespace == "") {
		return usagef("--temporal-address and --namespace go together: the sweep asks that namespace whether each held record's workflow can still be reset")
	}
	ctx, st, done, err := c.session(f)
	if err != nil {
		return err
	}
	defer done()
	now := c.now()
	n, err := st.Sweep(ctx, now, *limit)
	if err != nil {
		return fmt.Errorf("sweep (removed %d before the error): %w", n, err)
	}
	forgotten, held, err := c.sweepHeld(ctx, st, *address, *namespace, now, *limit)
	if err != nil {
		return fmt.Errorf("sweep (removed %d expired and %d held record(s) before the error): %w", n, forgotten, err)
	}
	if f.json {
		return c.printJSON(map[string]any{"removed": n, "forgotten": forgotten, "held": held, "now": now.UTC(), "limit": *limit})
	}
	fmt.Fprintf(c.stdout, "removed %d expired record(s) (expired at or before %s); their receipts are kept\n", n, ts(now))
	switch {
	case *address != "":
		fmt.Fprintf(c.stdout, "forgot %d finished destructive record(s) whose workflow Temporal (%s, namespace %s) no longer has; "+
			"kept %d whose workflow can still be reset\n", forgotten, *address, *namespace, held)
	case held > 0:
		fmt.Fprintf(c.stdout, "kept %d finished destructive record(s) past their window: their workflows may still be reset "+
			"and would send them again. Next step: pass --temporal-address and --namespace to forget those Temporal no longer has\n", held)
	}
	return nil
}

// sweepHeld forgets the held records (store.ResetHeld, past their window) whose
// workflows Temporal no longer has, and counts the others. Without an address it
// only counts them: without Temporal's word a record is kept. Temporal is asked
// about the record's root workflow (store.Root: the first workflow of its
// parent-child chain, whose reset re-creates a child under a new SDK-generated ID
// with the same keys) and, when that is another, about the record's own workflow
// (which may outlive its root and be reset itself): the record is forgotten only
// when Temporal has neither. Temporal is asked by workflow ID, not by the recorded
// run: a reset makes a new run of the same ID, and any run of it still known to
// Temporal may be reset again.
//
// A NotFound is believed only from a namespace that Temporal shows holds this
// store's workflows (see namespaceHolds): asked in any other namespace — the
// server's temporal-system, another environment's — every workflow looks gone.
//
// With limit > 0 it forgets at most limit records, reading the held records limit
// at a time (oldest first) and passing over those whose workflow Temporal still
// has: the oldest held records of long-running workflows must not stop every later
// sweep from reaching the records behind them. Each record is asked about at most
// once per sweep.
func (c *cli) sweepHeld(ctx context.Context, st store.Store, address, namespace string, now time.Time, limit int) (forgotten, held int, err error) {
	hs, ok := st.(store.HeldSweeper)
	if !ok {
		return 0, 0, nil
	}
	recs, err := hs.Held(ctx, now, limit)
	if err != nil {
		return 0, 0, err
	}
	if address == "" || len(recs) == 0 {
		return 0, len(recs), nil
	}
	tc, err := client.DialContext(ctx, client.Options{HostPort: address, Namespace: namespace, Logger: log.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		return 0, len(recs), fmt.Errorf("cannot reach Temporal at %s: %w. Nothing held was forgotten. Next step: check --temporal-address", address, err)
	}
	defer tc.Close()
	// A namespace that does not exist would make every workflow look gone.
	if _, err := tc.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: namespace}); err != nil {
		return 0, len(recs), fmt.Errorf("the namespace %q is not known to Temporal at %s: %w. Nothing held was forgotten. Next step: pass the namespace the workers run in", namespace, address, err)
	}
	sw := &heldSweep{st: st, hs: hs, tc: tc, address: address, namespace: namespace, now: now, asked: map[string]bool{}}
	for page := limit; ; page *= 2 {
		if err := sw.page(ctx, recs, limit); err != nil {
			return sw.forgotten, sw.held, err
		}
		if limit <= 0 || sw.forgotten >= limit || len(recs) < page {
			return sw.forgotten, sw.held, nil
		}
		// The records forgotten left the list; those kept stay at its head. Twice
		// the page reaches past them (each read at most twice the one before: the
		// rows read stay proportional to the held records).
		if recs, err = hs.Held(ctx, now, page*2); err != nil {
			return sw.forgotten, sw.held, err
		}
	}
}

// heldSweep is one sweep's pass over the held records.
type heldSweep struct {
	st                 store.Store
	hs                 store.HeldSweeper
	tc                 client.Client
	address, namespace string
	now                time.Time
	// asked holds the records (key and owner) Temporal was asked about.
	asked map[string]bool
	// confirmed is true once Temporal showed a run this store recorded in the namespace.
	confirmed       bool
	forgotten, held int
	probed          int
	sameIDOtherRun  []store.Record
}

// page asks Temporal about the records of recs not asked about yet and forgets, up
// to limit (<= 0: no limit) in all, those whose workflow it no longer has.
func (sw *heldSweep) page(ctx context.Context, recs []store.Record, limit int) error {
	var gone []store.Record
	for _, r := range recs {
		id := r.Key + "\x00" + r.Owner
		if sw.asked[id] {
			continue
		}
		sw.asked[id] = true
		known := false
		for _, wf := range store.ResetBy(r) {
			d, err := sw.tc.DescribeWorkflowExecution(ctx, wf, "")
			var nf *serviceerror.NotFound
			if errors.As(err, &nf) {
				continue
			}
			if err != nil {
				return fmt.Errorf("ask Temporal about workflow %s (key %s of workflow %s): %w. The record is kept", wf, r.Key, r.WorkflowID, err)
			}
			known = true
			if wf == r.WorkflowID && r.RunID != "" {
				if d.GetWorkflowExecutionInfo().GetExecution().GetRunId() == r.RunID {
					sw.confirmed = true
				} else {
					sw.sameIDOtherRun = append(sw.sameIDOtherRun, r)
				}
			}
			break
		}
		if known {
			sw.held++
		} else {
			gone = append(gone, r)
		}
	}
	if len(gone) == 0 {
		return nil
	}
	if !sw.confirmed {
		ok, err := sw.namespaceHolds(ctx)
		if err != nil {
			return err
		}
		if !ok {
			sw.held += len(gone)
			return fmt.Errorf("no run this store recorded is shown by Temporal at %s in namespace %q (asked about %d): "+
				"the workflows of %d held record(s) look gone, but so would every workflow in a namespace the workers do not run in. "+
				"Nothing held was forgotten. Next step: pass the namespace the workers of this store run in; if it is, sweep "+
				"again once a workflow of theirs has run a gated activity (its run is then shown)",
				sw.address, sw.namespace, sw.probed, len(gone))
		}
	}
	for _, r := range gone {
		if limit > 0 && sw.forgotten >= limit {
			return nil
		}
		ok, err := sw.hs.Forget(ctx, r, sw.now)
		if err != nil {
			return err
		}
		if ok {
			sw.forgotten++
		}
	}
	return nil
}

// maxProbes bounds the runs a sweep asks Temporal about to confirm the namespace.
const maxProbes = 32

// namespaceHolds reports whether Temporal shows, in the namespace asked, a run this
// store recorded: a held record's own run (its workflow ID now runs another), or the
// run of a recent receipt. Run IDs are UUIDs the server made, so a namespace that has
// one of them is where the workers of this store run; the server's own namespaces
// and another environment's have none. Without one, a NotFound says nothing and
// nothing is forgotten: a needless keep, never a wrong forget. (A store whose
// workers run in several namespaces cannot tell them apart: the records do not name
// their namespace.)
func (sw *heldSweep) namespaceHolds(ctx context.Context) (bool, error) {
	seen := map[string]bool{}
	try := func(wf, run string) (bool, error) {
		if wf == "" || run == "" || seen[wf+"\x00"+run] || sw.probed >= maxProbes {
			return false, nil
		}
		seen[wf+"\x00"+run] = true
		sw.probed++
		_, err := sw.tc.DescribeWorkflowExecution(ctx, wf, run)
		var nf *serviceerror.NotFound
		var bad *serviceerror.InvalidArgument // a run ID that is not the server's (not a UUID)
		switch {
		case errors.As(err, &nf) || errors.As(err, &bad):
			return false, nil
		case err != nil:
			return false, fmt.Errorf("ask Temporal about run %s of workflow %s: %w. Nothing held was forgotten", run, wf, err)
		}
		return true, nil
	}
	for _, r := range sw.sameIDOtherRun {
		if ok, err := try(r.WorkflowID, r.RunID); ok || err != nil {
			sw.confirmed = ok
			return ok, err
		}
	}
	sw.sameIDOtherRun = nil
	// Receipts are listed oldest first: look at the last hour first, then further back.
	for _, back := range []time.Duration{time.Hour, 24 * time.Hour, 7 * 24 * time.Hour, 30 * 24 * time.Hour} {
		// One bounded page (store.ReceiptPager): on PostgreSQL a plain receipt
		// query by time walked the table from its first receipt.
		p, err := store.PageReceipts(ctx, sw.st, store.ReceiptFilter{Since: sw.now.Add(-back), Limit: 200})
		if err != nil {
			return false, err
		}
		rs := p.Receipts
		for i := len(rs) - 1; i >= 0 && sw.probed < maxProbes; i-- {
			if ok, err := try(rs[i].WorkflowID, rs[i].RunID); ok || err != nil {
				sw.confirmed = ok
				return ok, err
			}
		}
	}
	return false, nil
}
