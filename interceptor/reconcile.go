package interceptor

import (
	"context"
	"sync"
	"time"

	"github.com/idemgate/idemgate/store"
)

// DefaultReconcileEvery is how often the plugin asks the witnesses about pending
// keys when PluginOptions.ReconcileEvery is 0.
const DefaultReconcileEvery = 30 * time.Second

// reconcilePage bounds the pending records one round of the reconciler asks about;
// reconcileReach bounds how far down the pending list it reads past the keys it
// is backing off from; reconcileMaxDelay bounds a key's backoff.
const (
	reconcilePage     = 100
	reconcileReach    = 1000
	reconcileMaxDelay = time.Hour
)

// reconcileState is what one reconciler remembers between rounds: when to ask
// again about a key no witness could tell (by key and owner: a record that
// changed is asked at once), so that keys nobody can tell neither cost a history
// read every round nor keep the keys behind them from being asked.
type reconcileState struct {
	page  int
	every time.Duration
	later map[string]reconcileBackoff
}

type reconcileBackoff struct {
	at    time.Time
	delay time.Duration
}

// reconcilerRun is one background reconciler: stop cancels it and waits for it.
type reconcilerRun struct {
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

func (r *reconcilerRun) stop() {
	r.once.Do(r.cancel)
	<-r.done
}

// startReconciler starts the background reconciler unless it runs, is disabled, or
// the store cannot list pending keys or settle them.
func (pl *Plugin) startReconciler() {
	if pl.p.ReconcileEvery < 0 {
		return
	}
	if _, ok := pl.gate.opts.Store.(store.Operator); !ok {
		return
	}
	if _, ok := pl.gate.asker(""); !ok {
		return
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if pl.reconciling != nil || pl.running == 0 {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	run := &reconcilerRun{cancel: cancel, done: make(chan struct{})}
	pl.reconciling = run
	go func() {
		defer close(run.done)
		t := time.NewTicker(pl.p.ReconcileEvery)
		defer t.Stop()
		state := &reconcileState{page: reconcilePage, every: pl.p.ReconcileEvery}
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			pl.gate.reconcile(ctx, state, pl.logger())
		}
	}()
}

// reconcile asks the witnesses about one page of pending keys and settles those
// a witness can tell. A witness's "sent" counts once the owner is gone, so it
// lists what blocks at now (store.Listed) and asks about those whose owner is gone
// (store.OwnerGone: a refused live claim is listed for people, not asked about);
// store.Settleable decides. A
// key no witness could tell is asked again after a backoff (doubling from the
// round's interval up to an hour), and the keys behind it are reached meanwhile.
func (r *root) reconcile(ctx context.Context, st *reconcileState, l interface {
	Info(string, ...any)
	Warn(string, ...any)
}) {
	op := r.opts.Store.(store.Operator)
	now := r.opts.Now()
	waiting := 0
	for _, b := range st.later {
		if now.Before(b.at) {
			waiting++
		}
	}
	recs, err := op.Pending(ctx, now, min(st.page+waiting, max(st.page, reconcileReach)))
	if err != nil {
		if ctx.Err() == nil {
			l.Warn("idemgate: the reconciler could not list the pending keys", "error", err)
		}
		return
	}
	hs, haveClient := r.capturedHistory()
	later := make(map[string]reconcileBackoff, len(st.later))
	asked := 0
	for _, rec := range recs {
		if ctx.Err() != nil {
			return
		}
		id := rec.Key + "\x00" + rec.Owner
		if b, ok := st.later[id]; ok && now.Before(b.at) {
			later[id] = b
			continue
		}
		if rec.Activity == ProbeActivity || asked >= st.page || !store.OwnerGone(rec, now) {
			continue
		}
		wctx := ctx
		if haveClient {
			wctx = withHistory(ctx, hs)
		}
		ws := r.witnessesFor(wctx, rec.Activity)
		if len(ws) == 0 {
			continue
		}
		asked++
		a, _ := r.asker(hs.ns)
		rep, err := a.Ask(wctx, rec, ws, false)
		switch {
		case err != nil:
			if ctx.Err() == nil {
				l.Warn("idemgate: the reconciler could not settle a pending key", "key", rec.Key, "activity", rec.Activity,
					"error", err)
			}
		case rep.Settled:
			l.Info("idemgate: the reconciler settled a pending key: "+rep.Summary(), "key", rec.Key,
				"activity", rec.Activity, "workflowID", rec.WorkflowID)
			continue
		case rep.Moved:
			continue
		}
		d := st.every
		if b, ok := st.later[id]; ok {
			d = min(2*b.delay, reconcileMaxDelay)
		}
		later[id] = reconcileBackoff{at: now.Add(d), delay: d}
	}
	st.later = later
}
