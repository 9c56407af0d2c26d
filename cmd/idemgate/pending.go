package main

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/store"
)

// recordJSON is a pending record as --json prints it.
type recordJSON struct {
	Key        string          `json:"key"`
	Activity   string          `json:"activity"`
	Effect     string          `json:"effect"`
	State      string          `json:"state"`
	Args       json.RawMessage `json:"args"`
	Call       string          `json:"call"`
	ArgsHash   string          `json:"args_hash"`
	WorkflowID string          `json:"workflow_id"`
	RunID      string          `json:"run_id"`
	Attempt    int32           `json:"attempt"`
	Claims     int             `json:"claims"`
	// MayHaveSent: an attempt before the current owner's may have reached the vendor.
	MayHaveSent bool      `json:"may_have_sent"`
	Owner       string    `json:"owner"`
	Lease       time.Time `json:"lease"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
	ExpiresAt   time.Time `json:"expires_at"`
	// Sent is the evidence that the current owner's key left through a keyed
	// transport (store.Record.Sent): a vendor-window re-send rests on it.
	Sent []store.Sent `json:"sent,omitempty"`
}

// withheldCall is the call the gate withholds for r, printed as the gate prints it.
func withheldCall(r store.Record) string {
	return interceptor.WithheldCall{Activity: r.Activity, Key: r.Key, Effect: r.Effect, Args: r.Args}.String()
}

func (c *cli) pending(args []string) error {
	f := c.newFlags("pending", "[flags]", "Lists every claim whose outcome is unknown and that blocks its key\n"+
		"(state unknown, or claimed with its lease passed), oldest first, with the withheld call.", true)
	limit := f.Int("limit", 0, "show at most N (0: all)")
	if err := f.parseNone(args); err != nil {
		return err
	}
	if *limit < 0 {
		return usagef("--limit must not be negative")
	}
	ctx, st, done, err := c.session(f)
	if err != nil {
		return err
	}
	defer done()
	now := c.now()
	rs, err := st.Pending(ctx, now, *limit)
	if err != nil {
		return err
	}
	if f.json {
		out := make([]recordJSON, 0, len(rs))
		for _, r := range rs {
			j := recordJSON{Key: r.Key, Activity: r.Activity, Effect: r.Effect, State: string(r.State), Call: withheldCall(r),
				ArgsHash: r.ArgsHash, WorkflowID: r.WorkflowID, RunID: r.RunID, Attempt: r.Attempt, Claims: r.Claims,
				MayHaveSent: r.MayHaveSent, Owner: r.Owner, Lease: r.Lease.UTC(), CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(), ExpiresAt: r.ExpiresAt.UTC(),
				Sent: r.Sent}
			if json.Valid(r.Args) {
				j.Args = r.Args
			}
			out = append(out, j)
		}
		return c.printJSON(out)
	}
	if len(rs) == 0 {
		fmt.Fprintln(c.stdout, "nothing pending: no claim with an unknown outcome blocks its key")
		return nil
	}
	tw := c.table()
	row(tw, "SINCE", "AGE", "KEY", "ACTIVITY", "EFFECT", "STATE", "WORKFLOW/RUN", "ATTEMPT", "WITHHELD CALL")
	for _, r := range rs {
		state := string(r.State)
		if r.State == store.StateClaimed {
			state = "claimed, lease passed " + ts(r.Lease)
			if r.MayHaveSent { // an unknown record always may have: say it where it adds something
				state += ", taken over from an attempt that may have sent"
			}
		}
		row(tw, ts(r.CreatedAt), now.Sub(r.CreatedAt).Round(time.Second).String(), r.Key, r.Activity, r.Effect, state,
			r.WorkflowID+"/"+clip(r.RunID, 8), fmt.Sprint(r.Attempt), withheldCall(r))
	}
	tw.Flush()
	fmt.Fprintln(c.stdout, "\nCheck each with the vendor, then: idemgate resolve KEY --sent --result FILE --reason WHY"+
		"   or   idemgate resolve KEY --not-sent --reason WHY")
	return nil
}
