package interceptor

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/witness"
)

// witnessesFor lists the witnesses asked about a record of activity (or tool) name:
// the built-in ones first (Temporal's history, when ctx carries the worker's
// client), then Options.Witnesses[name], then Options.Witnesses[""].
func (r *root) witnessesFor(ctx context.Context, name string) []witness.Witness {
	ws := r.builtinWitnesses(ctx)
	ws = append(ws, r.opts.Witnesses[name]...)
	return append(ws, r.opts.Witnesses[""]...)
}

// asker settles by witnesses in this gate's terms: its store, its data converter,
// its window and clock.
func (r *root) asker(namespace string) (witness.Asker, bool) {
	st, ok := r.opts.Store.(witness.Settler)
	if !ok {
		return witness.Asker{}, false
	}
	return witness.Asker{
		Store:   st,
		Encode:  func(v any) ([]byte, error) { return encodeResult(r.opts.DataConverter, v) },
		Window:  r.opts.Window,
		Timeout: r.opts.WitnessTimeout,
		// A witness's result is bounded as the gate's own.
		MaxResultSize: r.opts.MaxResultSize,
		Now:           r.opts.Now,
		Namespace:     namespace,
	}, true
}

// askWitnesses asks the witnesses about rec, the record that made this write's
// claim come back unknown, and settles it by the first that can tell. changed
// reports that the record moved (settled here or by someone else): claim again.
// down is the store's outage (store.ErrUnavailable) met while settling: a witness
// could tell, and the write must fail closed and retryable as on any outage, not
// be refused for good.
func (c *call) askWitnesses(rec store.Record) (rep witness.Report, changed bool, down error) {
	a, ok := c.r.asker(c.info.Namespace)
	if !ok {
		return witness.Report{Key: rec.Key}, false, nil
	}
	ws := c.r.witnessesFor(c.ctx, rec.Activity)
	if len(ws) == 0 {
		return witness.Report{Key: rec.Key}, false, nil
	}
	rep, err := a.Ask(c.ctx, rec, ws, false)
	if err != nil {
		activity.GetLogger(c.ctx).Warn("idemgate: the witnesses could not settle the unknown outcome", "activity", c.name,
			"key", c.key, "error", err)
		if errors.Is(err, store.ErrUnavailable) {
			return rep, false, err
		}
		return rep, false, nil
	}
	return rep, rep.Settled || rep.Moved, nil
}

// errSettleDown is a store outage met while a witness's answer was being stored:
// nothing was claimed by this attempt, so there is no claim to give back.
type errSettleDown struct{ err error }

func (e *errSettleDown) Error() string { return e.err.Error() }
func (e *errSettleDown) Unwrap() error { return e.err }

// settle is the gate's answer to a claim that came back unknown: ask the witnesses
// (each bounded by Options.WitnessTimeout) and, when one settled the key (or someone
// else did meanwhile), claim again. It returns the last claim's outcome and what
// the witnesses said, which a refusal quotes; an *errSettleDown when the store was
// unavailable for the settlement.
func (c *call) settle(cl store.Claim, rec store.Record) (store.Outcome, store.Record, witness.Report, error) {
	rep, changed, down := c.askWitnesses(rec)
	if down != nil {
		return store.OutcomeUnknown, rec, rep, &errSettleDown{down}
	}
	if !changed {
		return store.OutcomeUnknown, rec, rep, nil
	}
	cl.Now = c.r.opts.Now()
	o, next, err := c.r.opts.Store.Begin(c.ctx, cl)
	return o, next, rep, err
}

// benignError is appError in Temporal's benign category: an expected refusal
// (waiting on a live lease, a pause, a hold) that the SDK neither logs at ERROR nor
// counts as a failure.
func benignError(msg, typ string, nonRetryable bool, next time.Duration, details ...any) error {
	return temporal.NewApplicationErrorWithOptions(msg, typ, temporal.ApplicationErrorOptions{
		NonRetryable:   nonRetryable,
		NextRetryDelay: next,
		Details:        details,
		Category:       temporal.ApplicationErrorCategoryBenign,
	})
}
