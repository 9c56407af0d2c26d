package idemgatetest

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memory"
)

// kitStore is the gate's view of the kit's memory store, where the injections act.
type kitStore struct {
	*memory.Store
	k *Kit
}

func (s *kitStore) Begin(ctx context.Context, c store.Claim) (store.Outcome, store.Record, error) {
	inj := s.k.take(c.Activity, storeDown)
	if inj == nil && activity.IsActivity(ctx) {
		// A generic tool activity's claim names the tool; the injection may name the activity.
		if name := activity.GetInfo(ctx).ActivityType.Name; name != c.Activity {
			inj = s.k.take(name, storeDown)
		}
	}
	if inj != nil {
		return "", store.Record{}, fmt.Errorf("%w: connection refused (injected by idemgatetest.StoreDown)", store.ErrUnavailable)
	}
	return s.Store.Begin(ctx, c)
}

func (s *kitStore) Complete(ctx context.Context, t store.Transition) error {
	if s.crash(ctx, t) {
		return nil
	}
	return s.Store.Complete(ctx, t)
}

func (s *kitStore) Release(ctx context.Context, t store.Transition) error {
	if s.crash(ctx, t) {
		return nil
	}
	return s.Store.Release(ctx, t)
}

func (s *kitStore) Abandon(ctx context.Context, t store.Transition) error {
	if s.crash(ctx, t) {
		return nil
	}
	return s.Store.Abandon(ctx, t)
}

// crash drops the store write of an attempt whose worker "died", moves the clock
// past its lease (the retry comes only then), and, for ResolvedAsSent, resolves
// the key as a person would.
func (s *kitStore) crash(ctx context.Context, t store.Transition) bool {
	k := s.k
	k.mu.Lock()
	inj := k.crashed[t.Key]
	delete(k.crashed, t.Key)
	k.mu.Unlock()
	if inj == nil {
		return false
	}
	rec, err := s.Store.Get(ctx, t.Key)
	if err != nil {
		k.fail(fmt.Errorf("idemgate/idemgatetest: the crashed attempt's record %s: %w", t.Key, err))
		return true
	}
	if now := k.Now(); now.Before(rec.Lease.Add(store.LeaseMargin)) {
		k.mu.Lock()
		k.offset += rec.Lease.Add(store.LeaseMargin).Sub(now) + time.Second
		k.mu.Unlock()
	}
	if inj.kind != resolvedAsSent {
		return true
	}
	now := k.Now()
	window := k.opts.Window
	if window == 0 {
		window = interceptor.DefaultWindow
	}
	r := store.Transition{Key: t.Key, Owner: rec.Owner, Now: now, Window: window}
	r.Receipt = store.Receipt{Time: now, Key: t.Key, Activity: rec.Activity, Effect: rec.Effect, Decision: store.DecisionResolved,
		ArgsHash: rec.ArgsHash, WorkflowID: rec.WorkflowID, RunID: rec.RunID, Attempt: rec.Attempt,
		Actor: "idemgatetest", Reason: "resolved as sent by the test", Resolution: store.ResolvedSent}
	if r.Result, r.Receipt.ResultRef, err = interceptor.EncodeResult(k.opts.DataConverter, inj.result); err != nil {
		k.fail(fmt.Errorf("idemgate/idemgatetest: ResolvedAsSent(%s): the result cannot be encoded: %w", rec.Activity, err))
		return true
	}
	if err := s.Store.Resolve(ctx, r, store.StateCompleted); err != nil {
		k.fail(fmt.Errorf("idemgate/idemgatetest: ResolvedAsSent(%s): resolve %s: %w", rec.Activity, t.Key, err))
	}
	return true
}
