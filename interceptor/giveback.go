package interceptor

import (
	"context"
	"errors"
	"sync"
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
// is retried with backoff in the background, so the activity returns at once.
//
// The retries go on past the attempt's lease, for as long as the process lives (or
// until root.stopGiveBacks, before a plugin closes the store): the transition is
// owner-checked, so a late give-back cannot touch a claim another attempt has taken
// since, and "not sent" stays true however long the store was down. Stopping at the
// lease turned a definite failure into a permanent refusal whenever an outage
// outlasted it.
func (c *call) giveBack(op func(context.Context, store.Transition) error, d store.Decision, cause error) {
	err := c.transition(op, d, nil, false, cause)
	if answered(err) {
		return
	}
	activity.GetLogger(c.ctx).Warn("idemgate: could not give the claim back; retrying in the background until the store answers",
		"activity", c.name, "key", c.key, "decision", string(d), "error", err)
	c.keepTrying(op, d, nil, false, cause, err)
}

// completeLater stores a result the body returned while the store did not answer
// Complete (err, the first try's error): the vendor acted, and the result is known
// to this process only. The activity still fails (no receipt, no success) and
// Temporal retries it; the retries of Complete go on in the background as a
// give-back's do, so the retry finds the stored result instead of a claim whose
// outcome nobody knows — a destructive write refused for a person. Owner-checked:
// a Complete whose first reply was lost after it committed answers ErrNotOwner.
func (c *call) completeLater(data []byte, omitted bool, err error) {
	activity.GetLogger(c.ctx).Warn("idemgate: the result could not be stored; retrying in the background until the store answers",
		"activity", c.name, "key", c.key, "error", err)
	c.keepTrying(c.r.opts.Store.Complete, store.DecisionRan, data, omitted, nil, err)
}

// keepTrying retries an owner-checked transition in the background, with bounded
// backoff, until the store answers or the gate stops (see giveBack); err is the
// last try's error.
func (c *call) keepTrying(op func(context.Context, store.Transition) error, d store.Decision, result []byte, omitted bool, cause, err error) {
	stop := c.r.giveBacks.stopped()
	if errors.Is(err, store.ErrClosed) {
		closedUnder(c, d, err)
		return
	}
	id := c.r.inflight.add(c.lease) // the store stays open for it (PluginOptions.CloseStore)
	// While it waits out its backoff, a retry of the write may meet the claim this
	// give-back settles, its lease passed: that retry settles it first (giveBacks.settle)
	// rather than refuse an unknown outcome this process knows.
	pid := c.r.giveBacks.register(c.key, c.owner, func() error { return c.transition(op, d, result, omitted, cause) })
	go func() {
		defer c.r.inflight.done(id)
		defer c.r.giveBacks.unregister(pid)
		delay := giveBackFirstDelay
		for {
			select {
			case <-stop:
				activity.GetLogger(c.ctx).Warn("idemgate: the gate stopped before the outcome was stored; the claim stays and turns into an unknown outcome when its lease passes",
					"activity", c.name, "key", c.key, "decision", string(d), "error", err)
				return
			case <-time.After(delay):
			}
			delay = min(2*delay, giveBackMaxDelay)
			if err = c.transition(op, d, result, omitted, cause); answered(err) {
				return
			}
			if errors.Is(err, store.ErrClosed) {
				closedUnder(c, d, err)
				return
			}
		}
	}()
}

// closedUnder ends a give-back whose store its owner closed: no later try can be
// answered, so retrying would only last as long as the process.
func closedUnder(c *call, d store.Decision, err error) {
	activity.GetLogger(c.ctx).Warn("idemgate: the store was closed before the outcome was stored; the claim stays and turns into an unknown outcome when its lease passes",
		"activity", c.name, "key", c.key, "decision", string(d), "error", err)
}

// giveBacks ends the background give-backs of one gate, and knows those still
// retrying, by key and owner.
type giveBacks struct {
	once, endOnce sync.Once
	stop          chan struct{}

	mu      sync.Mutex
	next    uint64
	pending map[uint64]pendingGiveBack
}

// pendingGiveBack is one give-back retrying in the background: its claim (key,
// owner) and one owner-checked try of its transition.
type pendingGiveBack struct {
	key, owner string
	try        func() error
}

func (g *giveBacks) register(key, owner string, try func() error) uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.pending == nil {
		g.pending = map[uint64]pendingGiveBack{}
	}
	g.next++
	g.pending[g.next] = pendingGiveBack{key: key, owner: owner, try: try}
	return g.next
}

func (g *giveBacks) unregister(id uint64) {
	g.mu.Lock()
	delete(g.pending, id)
	g.mu.Unlock()
}

// settle makes one try, now, of the give-back of this process that still retries
// for the claim of key by owner, and reports whether the store answered it (stored,
// or the claim is not that owner's any more). false: no such give-back here, or the
// store did not answer, or the gate stopped.
func (g *giveBacks) settle(key, owner string) bool {
	g.mu.Lock()
	var try func() error
	for _, p := range g.pending {
		if p.key == key && p.owner == owner {
			try = p.try
			break
		}
	}
	g.mu.Unlock()
	if try == nil {
		return false
	}
	select {
	case <-g.stopped():
		return false
	default:
	}
	return answered(try())
}

func (g *giveBacks) stopped() <-chan struct{} {
	g.once.Do(func() { g.stop = make(chan struct{}) })
	return g.stop
}

// end stops every background give-back; they make no further try.
func (g *giveBacks) end() {
	g.stopped()
	g.endOnce.Do(func() { close(g.stop) })
}

// answered reports whether the store answered a transition: it was stored, or the
// claim is not this attempt's (another owns it, or the claim never committed).
func answered(err error) bool {
	return err == nil || errors.Is(err, store.ErrNotOwner) || errors.Is(err, store.ErrNotFound)
}
