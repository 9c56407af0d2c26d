package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/idemgate/idemgate/internal/storeopen"
	"github.com/idemgate/idemgate/store"
)

// VendorCount is one vendor's tally.
type VendorCount struct {
	Vendor     string   `json:"vendor"`
	Effects    int      `json:"effects"`
	Replays    int      `json:"replays"`
	Duplicates []string `json:"duplicates"`
}

// Report is everything the demo did.
type Report struct {
	Census   string          `json:"census"`
	Store    string          `json:"store"` // redacted: never the password
	Temporal string          `json:"temporal"`
	Checks   []Check         `json:"checks"`
	Events   []Event         `json:"events"`
	Receipts []store.Receipt `json:"receipts"`
	Vendors  []VendorCount   `json:"vendors"`
	OK       bool            `json:"ok"`
}

// Run runs the eight scenarios in order and reports. The error is for what stopped
// the demo from running; a scenario whose counts are wrong shows in Report.OK.
func (d *Demo) Run(ctx context.Context) (Report, error) {
	r := Report{Census: d.census.String(), Store: storeopen.Redact(d.cfg.Store), Temporal: d.cfg.TemporalAddress, OK: true}
	if r.Temporal == "" {
		r.Temporal = "in-process (go.temporal.io/server/temporaltest)"
	}
	d.say("%s", r.Census)
	add := func(c Check, err error) error {
		if err != nil {
			c.OK = false
			c.Notes = append(c.Notes, "FAILED: "+err.Error())
		}
		r.Checks = append(r.Checks, c)
		r.OK = r.OK && c.OK
		for _, n := range c.Notes {
			d.say("   %s", n)
		}
		return err
	}
	c, jobID, runID, err := d.Normal(ctx)
	if add(c, err) != nil {
		return d.finish(ctx, r), err
	}
	for _, tool := range []string{"ChargeCard", "UpsertContact"} {
		c, err := d.CrashAfterVendor(ctx, tool)
		if add(c, err) != nil {
			return d.finish(ctx, r), err
		}
	}
	c, err = d.ResetPastCharge(ctx, jobID, runID)
	if add(c, err) != nil {
		return d.finish(ctx, r), err
	}
	c, err = d.Rerun(ctx)
	if add(c, err) != nil {
		return d.finish(ctx, r), err
	}
	c, err = d.MCPClasses(ctx)
	if add(c, err) != nil {
		return d.finish(ctx, r), err
	}
	c, err = d.CrashAfterMCPTool(ctx)
	if add(c, err) != nil {
		return d.finish(ctx, r), err
	}
	c, err = d.PersonSettles(ctx)
	_ = add(c, err)
	return d.finish(ctx, r), err
}

func (d *Demo) finish(ctx context.Context, r Report) Report {
	d.flushReads(ctx)
	seen := map[string]bool{}
	for _, c := range r.Checks {
		for _, id := range c.Jobs {
			if seen[id] {
				continue
			}
			seen[id] = true
			rs, err := d.Store.Receipts(ctx, store.ReceiptFilter{WorkflowID: id})
			if err == nil {
				r.Receipts = append(r.Receipts, rs...)
			}
		}
	}
	for _, v := range d.World.Vendors() {
		r.Vendors = append(r.Vendors, VendorCount{Vendor: v.Name, Effects: v.Total(), Replays: v.Replays(), Duplicates: v.Duplicates()})
	}
	r.Vendors = append(r.Vendors, d.Shop.count())
	r.Events = d.Events()
	return r
}

// WriteTables prints the receipt table, the vendor counts and the verdicts.
func (r Report) WriteTables(w io.Writer) {
	fmt.Fprintln(w, "\nReceipts (append-only, from the store):")
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  WORKFLOW\tKEY\tACTIVITY\tEFFECT\tATTEMPT\tDECISION")
	for _, rc := range r.Receipts {
		wf := rc.WorkflowID
		if len(wf) > 28 {
			wf = wf[:28]
		}
		dec := string(rc.Decision)
		if rc.Actor != "" {
			dec += " by " + rc.Actor
		}
		fmt.Fprintf(tw, "  %s\t%.8s\t%s\t%s\t%d\t%s\n", wf, rc.Key, rc.Activity, rc.Effect, rc.Attempt, dec)
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "\nVendor side effects:")
	tw = tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  VENDOR\tEFFECTS\tANSWERED FROM ITS OWN STORE\tDUPLICATED KEYS")
	for _, v := range r.Vendors {
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%s\n", v.Vendor, v.Effects, v.Replays, orString(strings.Join(v.Duplicates, ", "), "-"))
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
	for _, c := range r.Checks {
		mark := "ok  "
		if !c.OK {
			mark = "FAIL"
		}
		fmt.Fprintf(w, "%s %s\n", mark, c.Scenario)
	}
	if r.OK {
		fmt.Fprintln(w, "\nEvery count is as expected: no write reached a vendor twice where it must not.")
	} else {
		fmt.Fprintln(w, "\nSome counts are NOT as expected (see FAILED lines above).")
	}
	fmt.Fprintf(w, "Look around: go run ./cmd/idemgate receipts --store %s\n", r.Store)
}

// WriteJSON prints the report as JSON.
func (r Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
