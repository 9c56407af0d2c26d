package interceptor

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/idemgate/idemgate/store"
)

// pauseReadTimeout bounds one read of the pauses; a slow store delays at most the
// write that found the cache stale.
const pauseReadTimeout = 5 * time.Second

// pauseCache holds the pauses last read from the store. At most one caller re-reads
// them per Options.PauseRefresh; the others use the last known list meanwhile.
//
// A kill switch that cannot be read keeps the last known pauses: a store error
// neither lifts a pause that was in force nor invents one. That is fail-open only
// for writes that were not paused before — and those need the same store for their
// claim, so while it is down they fail closed anyway (IdempotencyStoreUnavailable).
type pauseCache struct {
	mu      sync.Mutex
	pauses  []store.Pause
	read    time.Time // when the last read was tried (monotonic clock)
	reading bool
	// first is closed when the first read was tried: until then nothing is known,
	// and writes wait for it rather than pass unchecked.
	first     chan struct{}
	firstOnce sync.Once
}

// paused returns the pause that withholds a write of this activity (by the name the
// gate records, or by its activity type) and effect.
func (r *root) paused(ctx context.Context, activityName, activityType string, effect Effect) (store.Pause, bool) {
	pc := &r.pauses
	pc.mu.Lock()
	never := pc.read.IsZero()
	stale := !pc.reading && (never || time.Since(pc.read) >= r.opts.PauseRefresh)
	if stale {
		pc.reading = true
	}
	pc.mu.Unlock()
	if never && !stale {
		select {
		case <-pc.first:
		case <-ctx.Done():
		}
	}
	if stale {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pauseReadTimeout)
		ps, err := r.opts.Store.Pauses(rctx)
		cancel()
		pc.mu.Lock()
		pc.reading, pc.read = false, time.Now()
		if err == nil {
			pc.pauses = ps
		}
		pc.mu.Unlock()
		pc.firstOnce.Do(func() { close(pc.first) })
		if err != nil {
			activity.GetLogger(ctx).Warn("idemgate: pauses not read; keeping the last known ones", "error", err)
		}
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	for _, p := range pc.pauses {
		// A generic tool activity's call is paused by its tool's name or by its
		// activity type (the name an operator sees in Temporal).
		if p.Matches(activityName, effect.String()) || p.Matches(activityType, effect.String()) {
			return p, true
		}
	}
	return store.Pause{}, false
}

// pauseRetry is when a paused write is tried again: after the next refresh.
func (r *root) pauseRetry() time.Duration {
	return max(2*r.opts.PauseRefresh, time.Second)
}

func (c *call) pausedWrite(p store.Pause) error {
	call := c.withheld()
	wait := c.r.pauseRetry()
	lift := "--activity " + p.Activity
	if p.Activity == "" {
		lift = "--effect " + p.Effect
	}
	msg := fmt.Sprintf("idemgate: paused: %s %s key %s withheld: writes of %s were paused by %s at %s (reason: %s). "+
		"Withheld call: %s.", c.effect, c.name, c.key, p.Scope(), p.Actor, p.Time.Format(time.RFC3339), p.Reason, call)
	last := c.lastAttempt(wait)
	if last == "" {
		msg += fmt.Sprintf(" Temporal retries in %s; the write runs once `idemgate resume %s` lifts the pause.", wait, lift)
	} else {
		msg += " This was " + last + fmt.Sprintf(" Next step: once `idemgate resume %s` lifts the pause, run the write again.", lift)
	}
	c.refuse(store.DecisionGated, msg, true)
	// Expected while the pause lasts: benign (no ERROR log, no failure counted),
	// retried after the next refresh of the pauses, when a resume can be seen; loud
	// on the last attempt, which nothing retries.
	return c.expected(msg, ErrTypeWriteGated, last, wait, call)
}
