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
		"whose workflows Temporal no longer has (closed and past the namespace's retention).", true)
	limit := f.Int("limit", 0, "remove at most N (0: all that expired), and ask Temporal about at most N held records")
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
	for _, r := range recs {
		known := false
		for _, id := range store.ResetBy(r) {
			_, err := tc.DescribeWorkflowExecution(ctx, id, "")
			var nf *serviceerror.NotFound
			if errors.As(err, &nf) {
				continue
			}
			if err != nil {
				return forgotten, held, fmt.Errorf("ask Temporal about workflow %s (key %s of workflow %s): %w. The record is kept", id, r.Key, r.WorkflowID, err)
			}
			known = true
			break
		}
		if known {
			held++
			continue
		}
		gone, err := hs.Forget(ctx, r, now)
		if err != nil {
			return forgotten, held, err
		}
		if gone {
			forgotten++
		}
	}
	return forgotten, held, nil
}
