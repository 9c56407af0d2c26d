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
		WriteScreen(d.out, c)
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

// WriteScreen prints c as its short screen: what happened, what would have happened
// without the gate, what the gate did, and the counts against what they should be.
// A note that failed is printed too, so a count that is off says why.
func WriteScreen(w io.Writer, c Check) {
	fmt.Fprintf(w, "\n%s\n", c.Scenario)
	if c.Story != "" {
		fmt.Fprintf(w, "   %s\n", c.Story)
	}
	if c.Without != "" {
		fmt.Fprintf(w, "   without idemgate: %s\n", c.Without)
	}
	for _, g := range c.Gate {
		fmt.Fprintf(w, "   %s\n", g)
	}
	mark := "ok  "
	if !c.OK {
		mark = "FAIL"
	}
	var cs []string
	for _, n := range c.Counts {
		cs = append(cs, n.String())
	}
	fmt.Fprintf(w, "   %s %s\n", mark, orString(strings.Join(cs, " · "), "(no counts)"))
	for _, n := range c.Notes {
		if strings.HasPrefix(n, "FAILED") {
			fmt.Fprintf(w, "   %s\n", n)
		}
	}
}

// WriteSummary prints the table of every scenario (without idemgate, with idemgate),
// the verdict and where to look further.
func (r Report) WriteSummary(w io.Writer) {
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tWITHOUT IDEMGATE\tWITH IDEMGATE")
	for _, c := range r.Checks {
		with := c.WithShort
		if !c.OK {
			with = "FAIL: " + with
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", orString(c.Short, c.Scenario), c.WithoutShort, with)
	}
	_ = tw.Flush()
	if r.OK {
		fmt.Fprintln(w, "Every count is as expected: no write reached a vendor twice where it must not.")
	} else {
		fmt.Fprintln(w, "Some counts are NOT as expected (see the FAIL lines above).")
	}
	fmt.Fprintf(w, "Look further: -v shows every gate decision and the receipts; go run ./cmd/idemgate receipts --store %s\n", r.Store)
}

// WriteTables prints the receipt table and the vendor counts (the -v output's end).
// A destructive write that ran on a later attempt says what let it run: a re-send
// inside the vendor's dedup window, or a key settled by a witness or a person.
func (r Report) WriteTables(w io.Writer) {
	fmt.Fprintln(w, "\nReceipts (append-only, from the store):")
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  WORKFLOW\tKEY\tACTIVITY\tEFFECT\tATTEMPT\tDECISION")
	resent := map[string]string{} // key → the witness that let the re-send go
	for _, rc := range r.Receipts {
		wf := rc.WorkflowID
		if len(wf) > 28 {
			wf = wf[:28]
		}
		dec := string(rc.Decision)
		if rc.Actor != "" {
			dec += " by " + rc.Actor
		}
		if rc.Decision == store.DecisionResent {
			resent[rc.Key] = orString(rc.Actor, "the vendor's dedup")
		}
		if rc.Decision == store.DecisionRan && rc.Attempt > 1 && rc.Effect == "destructive" {
			if by, ok := resent[rc.Key]; ok {
				dec += " (the re-send, same key: " + by + " answers from its own store)"
			}
		}
		fmt.Fprintf(tw, "  %s\t%.8s\t%s\t%s\t%d\t%s\n", wf, rc.Key, rc.Activity, rc.Effect, rc.Attempt, dec)
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "\nVendor side effects (all scenarios):")
	tw = tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  VENDOR\tEFFECTS\tANSWERED FROM ITS OWN STORE\tONE KEY, SEVERAL EFFECTS")
	for _, v := range r.Vendors {
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%s\n", v.Vendor, v.Effects, v.Replays, v.repeats())
	}
	_ = tw.Flush()
}

// repeats names the keys v performed more than once: expected for an idempotent
// write re-run with its key (the record converges), a failure anywhere else.
func (v VendorCount) repeats() string {
	if len(v.Duplicates) == 0 {
		return "-"
	}
	s := strings.Join(v.Duplicates, ", ")
	if idempotentVendor[v.Vendor] {
		return s + " (an upsert re-run with its key: one record)"
	}
	return s + " (DOUBLED)"
}

// idempotentVendor: the vendors whose writes are idempotent (an upsert by e-mail).
var idempotentVendor = map[string]bool{"crm": true}

// WriteJSON prints the report as JSON.
func (r Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
