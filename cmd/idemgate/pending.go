package main

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/internal/operate"
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
	// MayHaveSent: the write may have reached the vendor — its body began, or its
	// key may have left. True for every pending record: a claim is taken before the
	// body runs, and a pending record's outcome is not known. (Before 19 it meant
	// EarlierMayHaveSent, and was false for a first attempt killed mid-charge.)
	MayHaveSent bool `json:"may_have_sent"`
	// EarlierMayHaveSent: an attempt before the current owner's may have reached the
	// vendor (store.Record.MayHaveSent: an abandoned attempt, or a takeover).
	EarlierMayHaveSent bool `json:"earlier_attempt_may_have_sent"`
	// MayStillRunUntil is the owner's lease when it has not passed: the claim is
	// listed because an attempt was refused on it, and its owner may still be
	// running (and sending) until then.
	MayStillRunUntil time.Time `json:"may_still_run_until,omitzero"`
	// ResolvableFrom is when `idemgate resolve` accepts the key (the lease plus
	// store.LeaseMargin, for workers whose clocks run behind); omitted when it
	// accepts it now.
	ResolvableFrom time.Time `json:"resolvable_from,omitzero"`
	// NotSentFrom is when `idemgate resolve --not-sent` accepts the key
	// (store.NotSentFrom: the lease plus store.LeaseMargin, for an unknown record
	// too: a request the attempt wrote before it gave up may still land until then);
	// omitted when it accepts it now. --sent is accepted from ResolvableFrom.
	NotSentFrom time.Time `json:"not_sent_from,omitzero"`
	Owner       string    `json:"owner"`
	Lease       time.Time `json:"lease"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
	ExpiresAt   time.Time `json:"expires_at"`
	// Sent is the evidence that the current owner's key left through a keyed
	// transport (store.Record.Sent): a vendor-window re-send rests on it.
	Sent []store.Sent `json:"sent,omitempty"`
}

func mayHaveSent(r store.Record) bool                        { return operate.MayHaveSent(r) }
func resolvableFrom(r store.Record, now time.Time) time.Time { return operate.ResolvableFrom(r, now) }
func withheldCall(r store.Record) string                     { return operate.WithheldCall(r) }
func notSentFrom(r store.Record, now time.Time) time.Time    { return operate.NotSentFrom(r, now) }

func (c *cli) pending(args []string) error {
	f := c.newFlags("pending", "[flags]", "Lists the writes that wait on a witness or a person, oldest first, with the withheld call:\n"+
		"  - a claim whose owner is gone with the outcome unknown: it ended without proof (state unknown), or\n"+
		"    its lease (the attempt's deadline plus twice the clock skew) passed; listed from that moment on;\n"+
		"  - a destructive claim whose lease still runs but on which an attempt was already refused: its owner\n"+
		"    may still be running (and sending) until the lease.\n"+
		"`idemgate resolve` accepts a claim from its lease plus "+store.LeaseMargin.String()+" (workers whose clocks run behind may\n"+
		"still send until then); an unknown key --sent at once and --not-sent from the same time (a request the\n"+
		"attempt wrote before it gave up may still land until then). RESOLVE FROM, resolvable_from and not_sent_from say when.\n"+
		"Look a key up at the vendor only from then on: a look before can miss a request still on its way.\n"+
		"--json: may_have_sent is true when the write may have reached the vendor (its body began or its key\n"+
		"may have left): for every pending record. earlier_attempt_may_have_sent: an attempt before the current\n"+
		"owner's may have (an abandoned attempt, or a takeover). Never read may_have_sent false as leave to\n"+
		"resolve --not-sent: check with the vendor. The plugin's store checks at worker start (activity "+interceptor.ProbeActivity+")\n"+
		"are left out unless --probes.", true)
	limit := f.Int("limit", 0, "show at most N (0: all)")
	probes := f.Bool("probes", false, "include the plugin's store checks at worker start (activity "+interceptor.ProbeActivity+")")
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
	rs, err := operate.Pending(ctx, st, now, *limit, *probes)
	if err != nil {
		return err
	}
	if f.json {
		out := make([]recordJSON, 0, len(rs))
		for _, r := range rs {
			j := recordJSON{Key: r.Key, Activity: r.Activity, Effect: r.Effect, State: string(r.State), Call: withheldCall(r),
				ArgsHash: r.ArgsHash, WorkflowID: r.WorkflowID, RunID: r.RunID, Attempt: r.Attempt, Claims: r.Claims,
				MayHaveSent: mayHaveSent(r), EarlierMayHaveSent: r.MayHaveSent, ResolvableFrom: resolvableFrom(r, now),
				NotSentFrom: notSentFrom(r, now),
				Owner:       r.Owner, Lease: r.Lease.UTC(), CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(), ExpiresAt: r.ExpiresAt.UTC(),
				Sent: r.Sent}
			if !store.OwnerGone(r, now) {
				j.MayStillRunUntil = r.Lease.UTC()
			}
			if json.Valid(r.Args) {
				j.Args = r.Args
			}
			out = append(out, j)
		}
		return c.printJSON(out)
	}
	if len(rs) == 0 {
		fmt.Fprintln(c.stdout, "nothing pending: no write waits on a witness or a person (no claim whose owner is gone "+
			"with the outcome unknown, none refused while its owner runs)")
		return nil
	}
	tw := c.table()
	row(tw, "SINCE", "AGE", "KEY", "ACTIVITY", "EFFECT", "STATE", "RESOLVE FROM", "WORKFLOW/RUN", "ATTEMPT", "WITHHELD CALL")
	for _, r := range rs {
		state := string(r.State)
		if r.State == store.StateClaimed {
			if store.OwnerGone(r, now) {
				state = "claimed, owner gone: lease passed " + ts(r.Lease)
			} else {
				state = "claimed, an attempt was refused; the owner may still be running until " + ts(r.Lease)
			}
			if r.MayHaveSent { // an unknown record always may have: say it where it adds something
				state += ", taken over from an attempt that may have sent"
			}
		}
		from := "now"
		if t := resolvableFrom(r, now); !t.IsZero() {
			from = ts(t)
		}
		if t := notSentFrom(r, now); !t.IsZero() && resolvableFrom(r, now).IsZero() {
			// An unknown record: --sent now, --not-sent once a request the attempt wrote
			// before it gave up can no longer land.
			from = "sent: now; not sent: " + ts(t)
		}
		row(tw, ts(r.CreatedAt), now.Sub(r.CreatedAt).Round(time.Second).String(), r.Key, r.Activity, r.Effect, state, from,
			r.WorkflowID+"/"+clip(r.RunID, 8), fmt.Sprint(r.Attempt), withheldCall(r))
	}
	tw.Flush()
	fmt.Fprintln(c.stdout, "\nEach may have reached the vendor: look each up at the vendor from its RESOLVE FROM on, not before "+
		"(a look before can miss a request still on its way), then: "+
		"idemgate resolve KEY --sent --result FILE --reason WHY   or   idemgate resolve KEY --not-sent --reason WHY")
	return nil
}
