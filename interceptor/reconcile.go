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

// reconcilePage bounds the pending records one round of the reconciler asks about.
const reconcilePage = 100

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
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			pl.gate.reconcile(ctx, pl.logger())
		}
	}()
}

// reconcile asks the witnesses about one page of pending keys and settles those
// a witness can tell. A witness's "sent" counts once the owner's lease passed, so
// it lists what blocks at now+LeaseMargin: the records whose lease passed at now
// (store.Resolvable adds the margin a person keeps); store.Settleable decides.
func (r *root) reconcile(ctx context.Context, l interface {
	Info(string, ...any)
	Warn(string, ...any)
}) {
	op := r.opts.Store.(store.Operator)
	recs, err := op.Pending(ctx, r.opts.Now().Add(store.LeaseMargin), reconcilePage)
	if err != nil {
		if ctx.Err() == nil {
			l.Warn("idemgate: the reconciler could not list the pending keys", "error", err)
		}
		return
	}
	hs, haveClient := r.capturedHistory()
	for _, rec := range recs {
		if ctx.Err() != nil {
			return
		}
		if rec.Activity == probeActivity {
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
		}
	}
}
