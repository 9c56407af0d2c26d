package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/idemgate/idemgate/internal/operate"
	"github.com/idemgate/idemgate/store"
)

// pauseJSON is a pause as --json prints it.
type pauseJSON struct {
	Activity string    `json:"activity,omitempty"`
	Effect   string    `json:"effect,omitempty"`
	Actor    string    `json:"actor"`
	Reason   string    `json:"reason"`
	Time     time.Time `json:"time"`
}

func (c *cli) pauseFlags(name, about string, args []string) (*flags, store.Pause, error) {
	f := c.newFlags(name, "--activity NAME | --effect destructive|idempotent-write [flags]", about, true)
	act := f.String("activity", "", "the activity type")
	eff := f.String("effect", "", "every activity of this class: destructive or idempotent-write")
	reason := f.String("reason", "", "why; every refused write quotes it")
	actor := f.String("actor", "", "who (default: the OS user)")
	pos, err := f.parse(args)
	if err != nil {
		return nil, store.Pause{}, err
	}
	if len(pos) > 0 {
		return nil, store.Pause{}, usagef("unexpected argument %q: name what with --activity NAME or --effect CLASS", pos[0])
	}
	if (*act == "") == (*eff == "") {
		return nil, store.Pause{}, usagef("name exactly one of --activity NAME and --effect destructive|idempotent-write")
	}
	if *eff != "" {
		if !operate.PausableEffect(*eff) {
			return nil, store.Pause{}, usagef("--effect %q: use destructive or idempotent-write (reads are never paused)", *eff)
		}
	}
	return f, store.Pause{Activity: *act, Effect: *eff, Actor: c.actor(*actor), Reason: strings.TrimSpace(*reason), Time: c.now()}, nil
}

func (c *cli) pause(args []string) error {
	f, p, err := c.pauseFlags("pause", "Stops every worker from running the writes of an activity or an effect class, within\n"+
		"the workers' Options.PauseRefresh (2 s by default), without a restart. Refused writes fail with a\n"+
		"retryable WriteGated that says who paused, when and why. Reads are never paused.", args)
	if err != nil {
		return err
	}
	if p.Activity != "" {
		if operate.ReadsByName(p.Activity) {
			fmt.Fprint(c.stderr, escape(fmt.Sprintf("note: %s reads as a read by its name; reads are never paused — unless the workers' "+
				"Options.Effects makes it a write, this pause changes nothing\n", p.Activity), false))
		}
	}
	ctx, st, done, err := c.session(f)
	if err != nil {
		return err
	}
	defer done()
	if p.Activity != "" && !operate.ReadsByName(p.Activity) {
		// Before the pause: its own receipt names the activity.
		note, err := operate.UnnamedActivityNote(ctx, st, p.Activity, p.Time)
		if err != nil {
			return err
		}
		if note != "" {
			fmt.Fprint(c.stderr, escape("note: "+note+"\n", false))
		}
	}
	if err := operate.Pause(ctx, st, p); err != nil {
		return err
	}
	if f.json {
		return c.printJSON(pauseJSON(p))
	}
	c.printf("paused writes of %s (by %s: %s). Workers refuse them within their pause refresh (2 s by "+
		"default). Lift it with `idemgate resume %s`.\n", p.Scope(), p.Actor, dash(p.Reason), scopeFlag(p))
	return nil
}

func scopeFlag(p store.Pause) string {
	if p.Activity != "" {
		return "--activity " + p.Activity
	}
	return "--effect " + p.Effect
}

func (c *cli) resume(args []string) error {
	f, p, err := c.pauseFlags("resume", "Lifts a pause: workers run the writes again within their pause refresh.", args)
	if err != nil {
		return err
	}
	ctx, st, done, err := c.session(f)
	if err != nil {
		return err
	}
	defer done()
	if err := operate.Resume(ctx, st, p); err != nil {
		return err
	}
	if f.json {
		return c.printJSON(pauseJSON(p))
	}
	c.printf("resumed writes of %s (by %s). Workers run them again within their pause refresh.\n", p.Scope(), p.Actor)
	return nil
}

func (c *cli) pauses(args []string) error {
	f := c.newFlags("pauses", "[flags]", "Lists the pauses in force.", true)
	if err := f.parseNone(args); err != nil {
		return err
	}
	ctx, st, done, err := c.session(f)
	if err != nil {
		return err
	}
	defer done()
	ps, err := st.Pauses(ctx)
	if err != nil {
		return err
	}
	if f.json {
		out := make([]pauseJSON, 0, len(ps))
		for _, p := range ps {
			out = append(out, pauseJSON(p))
		}
		return c.printJSON(out)
	}
	if len(ps) == 0 {
		fmt.Fprintln(c.stdout, "nothing is paused")
		return nil
	}
	tw := c.table()
	row(tw, "PAUSED", "SINCE", "BY", "REASON")
	for _, p := range ps {
		row(tw, p.Scope(), ts(p.Time), p.Actor, p.Reason)
	}
	return tw.Flush()
}
