package main

import (
	"fmt"
	"log/slog"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/witness"
)

// reconcileTimeout bounds a whole reconcile run (each witness answer is bounded
// by --witness-timeout).
const reconcileTimeout = 10 * time.Minute

// saidJSON is one witness's answer as --json prints it.
type saidJSON struct {
	Witness  string `json:"witness"`
	Verdict  string `json:"verdict"`
	Evidence string `json:"evidence,omitempty"`
	Error    string `json:"error,omitempty"`
	// Early: the answer does not count yet (see witness.Said).
	Early bool `json:"early,omitempty"`
}

// reconciledJSON is one pending key's outcome as --json prints it.
type reconciledJSON struct {
	Key        string     `json:"key"`
	Activity   string     `json:"activity"`
	WorkflowID string     `json:"workflow_id"`
	RunID      string     `json:"run_id"`
	Said       []saidJSON `json:"said"`
	// Settled: a witness settled the key (with --dry-run: would have).
	Settled bool   `json:"settled"`
	By      string `json:"by,omitempty"`
	Verdict string `json:"verdict,omitempty"`
	// Moved: the record changed while the witnesses were asked.
	Moved   bool   `json:"moved,omitempty"`
	Summary string `json:"summary"`
	// Error: the key could not be asked about (or settled).
	Error string `json:"error,omitempty"`
}

func (c *cli) reconcile(args []string) error {
	f := c.newFlags("reconcile", "[flags]", "Asks Temporal's history about every pending key (see `idemgate pending`; a key counts "+
		"once its attempt's lease passed) and settles those it can tell: a key whose activity completed in its workflow's "+
		"history is settled as sent with the result Temporal holds (receipt actor \"witness:temporal\", the event named in "+
		"its reason), so the next attempt returns that result. A failed, timed-out or still open activity, or a history "+
		"Temporal no longer has, cannot tell: the key stays pending for a person (`idemgate resolve`). Keys built from "+
		"Options.IdentifyingFields or a tool's name (Options.ToolNames) are not recognised here: the workers' own "+
		"reconciler (PluginOptions.ReconcileEvery) knows their options. Exits 1 when a key could not be asked (Temporal "+
		"or the store did not answer).", true)
	limit := f.Int("limit", 0, "ask about at most N pending keys, oldest first (0: all)")
	address := f.String("temporal-address", "", "Temporal frontend host:port (required)")
	namespace := f.String("namespace", "", "the Temporal namespace the workers of this store run in (required)")
	dryRun := f.Bool("dry-run", false, "print what each witness says and what would be settled; settle nothing")
	window := f.Duration("window", interceptor.DefaultWindow, "how long a settled result is remembered (the workers' Options.Window)")
	timeout := f.Duration("witness-timeout", interceptor.DefaultWitnessTimeout, "bound on each witness's answer")
	if err := f.parseNone(args); err != nil {
		return err
	}
	switch {
	case *limit < 0:
		return usagef("--limit must not be negative")
	case *address == "" || *namespace == "":
		return usagef("--temporal-address and --namespace are required: reconcile reads each pending key's workflow history from Temporal")
	case *window <= 0:
		return usagef("--window must be positive")
	case *timeout <= 0:
		return usagef("--witness-timeout must be positive")
	}
	ctx, st, done, err := c.sessionFor(f, reconcileTimeout)
	if err != nil {
		return err
	}
	defer done()
	tc, err := client.DialContext(ctx, client.Options{HostPort: *address, Namespace: *namespace,
		Logger: log.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		return fmt.Errorf("cannot reach Temporal at %s: %w. Nothing was settled. Next step: check --temporal-address", *address, err)
	}
	defer tc.Close()
	if _, err := tc.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: *namespace}); err != nil {
		return fmt.Errorf("the namespace %q is not known to Temporal at %s: %w. Nothing was settled. Next step: pass the namespace the workers run in", *namespace, *address, err)
	}
	now := c.now()
	// A witness's answer counts once the owner is gone (store.Settleable); Pending
	// also lists live claims an attempt was refused on (store.Listed): not asked about.
	listed, err := st.Pending(ctx, now, *limit)
	if err != nil {
		return err
	}
	recs := listed[:0]
	for _, r := range listed {
		if store.OwnerGone(r, now) {
			recs = append(recs, r)
		}
	}
	dc := converter.GetDefaultDataConverter()
	a := witness.Asker{Store: st, Window: *window, Timeout: *timeout, Namespace: *namespace, Now: c.now,
		Encode: func(v any) ([]byte, error) {
			data, _, err := interceptor.EncodeResult(dc, v)
			return data, err
		}}
	ws := []witness.Witness{interceptor.TemporalWitness(tc, *namespace, interceptor.Options{})}
	out := make([]reconciledJSON, 0, len(recs))
	failed := 0
	for _, rec := range recs {
		if rec.Activity == "idemgate.probe" {
			continue
		}
		rep, err := a.Ask(ctx, rec, ws, *dryRun)
		j := reconciledJSON{Key: rec.Key, Activity: rec.Activity, WorkflowID: rec.WorkflowID, RunID: rec.RunID,
			Settled: rep.Settled, By: rep.By, Moved: rep.Moved, Summary: rep.Summary()}
		if rep.Settled {
			j.Verdict = rep.Verdict.String()
		}
		asked := err == nil
		for _, s := range rep.Said {
			sj := saidJSON{Witness: s.Witness, Verdict: s.Answer.Verdict.String(), Evidence: s.Answer.Evidence, Early: s.Early}
			if s.Err != nil {
				sj.Error, sj.Verdict = s.Err.Error(), "error"
				asked = false
			}
			j.Said = append(j.Said, sj)
		}
		if err != nil {
			j.Error = err.Error()
		}
		if !asked && !rep.Settled {
			failed++
		}
		out = append(out, j)
	}
	if f.json {
		if err := c.printJSON(map[string]any{"dry_run": *dryRun, "now": now.UTC(), "keys": out}); err != nil {
			return err
		}
	} else {
		c.printReconciled(out, *dryRun)
	}
	if failed > 0 {
		return fmt.Errorf("%d key(s) could not be asked (see above) and stay pending. Next step: check that "+
			"Temporal at %s answers, and run reconcile again", failed, *address)
	}
	return nil
}

func (c *cli) printReconciled(out []reconciledJSON, dryRun bool) {
	if len(out) == 0 {
		fmt.Fprintln(c.stdout, "nothing pending whose attempt's lease has passed: nothing to reconcile")
		return
	}
	settled := 0
	for _, j := range out {
		fmt.Fprintf(c.stdout, "%s  %s  workflow %s run %s\n", escape(j.Key, false), escape(j.Activity, false),
			escape(j.WorkflowID, false), escape(j.RunID, false))
		for _, s := range j.Said {
			line := s.Verdict
			switch {
			case s.Error != "":
				line = "error: " + s.Error
			case s.Early:
				line += " (does not count yet: the attempt may still be running)"
			}
			if s.Evidence != "" && s.Error == "" {
				line += ": " + s.Evidence
			}
			fmt.Fprintf(c.stdout, "  witness %s: %s\n", escape(s.Witness, false), escape(line, false))
		}
		switch {
		case j.Error != "":
			fmt.Fprintf(c.stdout, "  not settled: %s\n", escape(j.Error, false))
		case j.Settled && dryRun:
			settled++
			fmt.Fprintf(c.stdout, "  would settle: %s by witness %s (dry run: nothing changed)\n", j.Verdict, escape(j.By, false))
		case j.Settled:
			settled++
			fmt.Fprintf(c.stdout, "  settled: %s by witness %s\n", j.Verdict, escape(j.By, false))
		case j.Moved:
			fmt.Fprintf(c.stdout, "  not settled: %s\n", j.Summary)
		default:
			fmt.Fprintf(c.stdout, "  not settled: cannot tell; it stays pending. Next step: `idemgate resolve --key %s` once you know\n", escape(j.Key, false))
		}
	}
	verb := "settled"
	if dryRun {
		verb = "would settle"
	}
	fmt.Fprintf(c.stdout, "%d pending key(s) asked about; %s %d\n", len(out), verb, settled)
}
