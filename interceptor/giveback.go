package interceptor

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/idemgate/idemgate/store"
)

// Backoff of a give-back retried while the store does not answer.
const (
	giveBackFirstDelay = 50 * time.Millisecond
	giveBackMaxDelay   = 5 * time.Second
)

// giveBack hands this attempt's own claim back (owner-checked Release, or Abandon when
// an earlier attempt may have sent) once the gate knows the body did not run. Left
// undone, the claim would turn into an unknown outcome when its lease passed and a
// destructive write would be refused for good with nothing sent. The first try is made
// here; while the store does not answer (an outage, not ErrNotOwner or ErrNotFound) it
// is retried with backoff in the background until it answers or the lease passes, so
// the activity returns at once.
func (c *call) giveBack(op func(context.Context, store.Transition) error, d store.Decision, cause error) {
	err := c.transition(op, d, nil, false, cause)
	if answered(err) {
		return
	}
	activity.GetLogger(c.ctx).Warn("idemgate: could not give the claim back; retrying in the background until its lease passes",
		"activity", c.name, "key", c.key, "decision", string(d), "error", err)
	id := c.r.inflight.add(c.lease) // the store stays open for it (PluginOptions.CloseStore)
	go func() {
		defer c.r.inflight.done(id)
		delay := giveBackFirstDelay
		for c.r.opts.Now().Before(c.lease) {
			time.Sleep(delay)
			delay = min(2*delay, giveBackMaxDelay)
			if err = c.transition(op, d, nil, false, cause); answered(err) {
				return
			}
		}
		activity.GetLogger(c.ctx).Warn("idemgate: the claim was not given back before its lease passed; it stays as an unknown outcome",
			"activity", c.name, "key", c.key, "decision", string(d), "error", err)
	}()
}

// answered reports whether the store answered a transition: it was stored, or the
// claim is not this attempt's (another owns it, or the claim never committed).
func answered(err error) bool {
	return err == nil || errors.Is(err, store.ErrNotOwner) || errors.Is(err, store.ErrNotFound)
}
