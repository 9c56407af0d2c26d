package interceptor

import (
	"context"
	"errors"
	"fmt"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/activity"
	"google.golang.org/protobuf/proto"

	"github.com/idemgate/idemgate/store"
)

// HandOff is what an activity that completes asynchronously (it returns
// activity.ErrResultPending) hands to the code that completes it later: the task
// token for the Temporal client, and the gated call's key and owner, so that the
// completer can store the outcome under the key before it completes the activity.
// It encodes to JSON, for a completer in another process.
type HandOff struct {
	// TaskToken is activity.GetInfo(ctx).TaskToken, for client.CompleteActivity.
	TaskToken []byte `json:"taskToken"`
	// Key and Owner name the claim of this attempt; empty for a read (nothing to store).
	Key   string `json:"key,omitempty"`
	Owner string `json:"owner,omitempty"`
	// The call, for the receipt CompleteAsync appends.
	Activity string `json:"activity,omitempty"`
	Effect   string `json:"effect,omitempty"`
	// EffectSource is what decided Effect (store.Receipt.EffectSource).
	EffectSource string `json:"effectSource,omitempty"`
	ArgsHash     string `json:"argsHash,omitempty"`
	WorkflowID   string `json:"workflowId,omitempty"`
	RunID        string `json:"runId,omitempty"`
	Attempt      int32  `json:"attempt,omitempty"`
}

// handOffCtx carries the attempt's *call to AsyncToken, which builds the HandOff.
type handOffCtx struct{}

// AsyncToken returns, inside an activity, what to hand to the code that completes
// it asynchronously: pass the HandOff to CompleteAsync instead of the bare task
// token to client.CompleteActivity. Inside a write run through the gate it carries
// the key and owner of the attempt's claim; the gate records the hand-off (decision
// handed-off) when the activity returns activity.ErrResultPending, and keeps the
// claim until CompleteAsync stores the outcome or the attempt's deadline passes.
func AsyncToken(ctx context.Context) (HandOff, error) {
	if !activity.IsActivity(ctx) {
		return HandOff{}, errors.New("idemgate: AsyncToken called outside an activity")
	}
	var h HandOff
	if c, ok := ctx.Value(handOffCtx{}).(*call); ok {
		h = c.handOff() // built only here: most writes never hand off
	}
	h.TaskToken = activity.GetInfo(ctx).TaskToken
	return h, nil
}

// AsyncCompleter completes an activity by its task token; client.Client is one.
type AsyncCompleter interface {
	CompleteActivity(ctx context.Context, taskToken []byte, result any, err error) error
}

// CompleteAsync completes an activity that returned activity.ErrResultPending. It
// stores the outcome under the call's key first, owner-checked — result (err nil)
// completes the key, so a repeat of the write (a retry, a reset that re-runs it)
// returns it; an error wrapped with NotCommitted releases the key; any other error
// leaves the outcome unknown, as for a synchronous attempt — and then completes the
// activity through c. opts are the worker's interceptor options (Store and
// DataConverter matter: give the converter the client uses).
//
// A store error returns before the activity is completed: call CompleteAsync again.
// When the claim is no longer this attempt's (the attempt's deadline passed and
// another attempt took over), nothing is stored or completed and the error says so.
// Calling it again after a failed completion is safe with the same outcome; with
// another (another result, or an error after a result) it returns an error matching
// ErrOutcomeDiffers and completes nothing, since a repeat of the write returns the
// outcome stored first.
func CompleteAsync(ctx context.Context, c AsyncCompleter, opts Options, h HandOff, result any, err error) error {
	if h.Key != "" {
		if serr := storeAsync(ctx, opts, h, result, err); serr != nil {
			return serr
		}
	}
	if cerr := c.CompleteActivity(ctx, h.TaskToken, result, err); cerr != nil {
		return fmt.Errorf("idemgate: %s key %s: the outcome is stored, but completing the activity failed: %w. "+
			"Next step: call CompleteAsync again (a retry of the activity returns the stored outcome)", h.Activity, h.Key, cerr)
	}
	return nil
}

func storeAsync(ctx context.Context, opts Options, h HandOff, result any, cause error) error {
	o, err := opts.withDefaults()
	if err != nil {
		return err
	}
	now := o.Now()
	rec := store.Receipt{Time: now, Key: h.Key, Activity: h.Activity, Effect: h.Effect, EffectSource: h.EffectSource,
		ArgsHash: h.ArgsHash, WorkflowID: h.WorkflowID, RunID: h.RunID, Attempt: h.Attempt}
	t := store.Transition{Key: h.Key, Owner: h.Owner, Now: now, Window: o.Window}
	op, want := o.Store.Complete, store.StateCompleted
	switch {
	case cause != nil && errors.Is(cause, ErrNotCommitted):
		op, want, rec.Decision, rec.Error = o.Store.Release, store.StateReleased, store.DecisionReleased, cause.Error()
	case cause != nil:
		op, want, rec.Decision, rec.Error = o.Store.Abandon, store.StateUnknown, store.DecisionUnknown, cause.Error()
	default:
		data, eerr := encodeResult(o.DataConverter, result)
		if eerr != nil {
			return fmt.Errorf("idemgate: %s key %s: the result cannot be encoded: %w. Nothing was stored or completed. "+
				"Next step: complete it with a value the data converter can encode", h.Activity, h.Key, eerr)
		}
		if len(data) > o.MaxResultSize {
			// Not stored; its digest on the receipt lets a repeat of this call be compared.
			t.ResultOmitted = true
			rec.ResultRef = resultRef(data)
		} else {
			t.Result = data
			rec.ResultRef = resultRef(data)
		}
		rec.Decision = store.DecisionRan
	}
	t.Receipt = rec
	err = op(ctx, t)
	if errors.Is(err, store.ErrNotOwner) {
		r, gerr := o.Store.Get(ctx, h.Key)
		if gerr == nil && r.Owner == h.Owner {
			// Stored by an earlier call of CompleteAsync for this hand-off: go on and
			// complete only with the outcome stored, since a reset or a re-run of the
			// write returns that one.
			return sameOutcome(ctx, o, h, r, want, t, cause)
		}
		return fmt.Errorf("idemgate: %s key %s: this attempt (%d) no longer holds the claim (its deadline passed "+
			"and another attempt took over, or the key was resolved); its outcome is not stored and the activity is "+
			"not completed. Next step: see `idemgate receipts --key %s`: %w", h.Activity, h.Key, h.Attempt, h.Key, err)
	}
	if err != nil {
		return fmt.Errorf("idemgate: %s key %s: could not store the outcome: %w. Nothing was completed. "+
			"Next step: check the store, then call CompleteAsync again", h.Activity, h.Key, err)
	}
	return nil
}

// ErrOutcomeDiffers is matched (errors.Is) by the error CompleteAsync returns when an
// earlier call for the same hand-off stored another outcome: the activity is not
// completed with this one.
var ErrOutcomeDiffers = errors.New("idemgate: CompleteAsync was already called for this hand-off with another outcome")

// sameOutcome checks that r, stored for h by an earlier call of CompleteAsync, holds
// the outcome this call would store (want, with t's result): nil to go on and
// complete, else an error naming what differs. The stored outcome stands: it is
// what a repeat of the write returns.
func sameOutcome(ctx context.Context, o Options, h HandOff, r store.Record, want store.State, t store.Transition, cause error) error {
	stored := string(r.State)
	switch {
	case want == store.StateReleased && r.State == store.StateReleased:
		return nil
	case want == store.StateReleased && r.State == store.StateUnknown && r.MayHaveSent:
		// A release of a claim taken over from an attempt that may have sent leaves it
		// unknown (store.ReleasedState): the same outcome, if the earlier call was that
		// release. An Abandon (an error without NotCommitted: this attempt may have
		// acted) leaves the same record, and then the workflow must not be told that
		// nothing was performed: the receipt of the earlier call says which it was.
		released, what := releasedBefore(ctx, o, h)
		if released {
			return nil
		}
		stored = what
	case want == store.StateUnknown && r.State == store.StateUnknown:
		return nil
	case want == store.StateCompleted && r.State == store.StateCompleted:
		same, what := sameResult(ctx, o, h, r, t)
		if same {
			return nil
		}
		stored = "completed with " + what
	case r.State == store.StateCompleted:
		stored = "completed with a result"
	}
	this := "completed with a result"
	switch {
	case want == store.StateReleased:
		this = fmt.Sprintf("failed with %q, marked NotCommitted", cause)
	case want == store.StateUnknown:
		this = fmt.Sprintf("failed with %q (outcome unknown)", cause)
	case t.ResultOmitted:
		this = "completed with a result over Options.MaxResultSize"
	case len(t.Result) > 0:
		this = "completed with result " + resultRef(t.Result)
	}
	return fmt.Errorf("idemgate: %s key %s: %w: stored %s, this call %s. The activity is not completed with this "+
		"outcome: a retry, reset or re-run of the write returns the stored one. Next step: call CompleteAsync again "+
		"with the stored outcome (see `idemgate receipts --key %s`), or, if the stored one is wrong, settle the "+
		"write with the vendor by hand", h.Activity, h.Key, ErrOutcomeDiffers, stored, this, h.Key)
}

// releasedBefore reports whether the transition an earlier CompleteAsync stored for
// h was a release (NotCommitted), by its receipt; what describes the stored outcome
// otherwise.
func releasedBefore(ctx context.Context, o Options, h HandOff) (released bool, what string) {
	rr, ok := o.Store.(receiptReader)
	if !ok {
		return false, "unknown (the store lists no receipts to tell a NotCommitted completion from an unknown one)"
	}
	rs, err := rr.Receipts(ctx, store.ReceiptFilter{Key: h.Key, WorkflowID: h.WorkflowID, Decision: store.DecisionReleased})
	if err != nil {
		return false, fmt.Sprintf("unknown (its receipt cannot be read: %v)", err)
	}
	for _, rc := range rs {
		if rc.RunID == h.RunID && rc.Attempt == h.Attempt {
			return true, ""
		}
	}
	return false, "unknown (failed with an error not marked NotCommitted: the write may have happened)"
}

// sameResult compares the result of a completed record with the one t would store,
// payload by payload (the encoding of a payload's metadata map is not canonical).
// A result over Options.MaxResultSize is not stored: it is compared by the digest its
// completion receipt carries. what describes the stored result when they differ.
func sameResult(ctx context.Context, o Options, h HandOff, r store.Record, t store.Transition) (same bool, what string) {
	if r.ResultOmitted || t.ResultOmitted {
		if !r.ResultOmitted || !t.ResultOmitted {
			return false, "a result of another size"
		}
		rr, ok := o.Store.(receiptReader)
		if !ok {
			return false, "a result over Options.MaxResultSize that cannot be compared (the store lists no receipts)"
		}
		rs, err := rr.Receipts(ctx, store.ReceiptFilter{Key: h.Key, WorkflowID: h.WorkflowID, Decision: store.DecisionRan})
		if err != nil {
			return false, fmt.Sprintf("a result over Options.MaxResultSize whose receipt cannot be read (%v)", err)
		}
		for _, rc := range rs {
			if rc.RunID == h.RunID && rc.Attempt == h.Attempt && rc.ResultRef != "" {
				return rc.ResultRef == t.Receipt.ResultRef, "result " + rc.ResultRef
			}
		}
		return false, "a result over Options.MaxResultSize with no digest on record"
	}
	var a, b commonpb.Payloads
	if proto.Unmarshal(r.Result, &a) != nil || proto.Unmarshal(t.Result, &b) != nil {
		return false, "result " + resultRef(r.Result)
	}
	return proto.Equal(&a, &b), "result " + resultRef(r.Result)
}

// handOff is what AsyncToken hands out for this attempt.
func (c *call) handOff() HandOff {
	return HandOff{Key: c.key, Owner: c.owner, Activity: c.name, Effect: c.effect.String(), EffectSource: c.source,
		ArgsHash: c.hash, WorkflowID: c.info.WorkflowExecution.ID, RunID: c.info.WorkflowExecution.RunID,
		Attempt: c.info.Attempt}
}

// handedOff records that the body returned activity.ErrResultPending: the claim stays
// claimed (the attempt runs on until its deadline) and CompleteAsync stores the outcome.
func (c *call) handedOff() {
	r := c.receipt(store.DecisionHandedOff)
	r.Time = c.r.opts.Now()
	if err := c.r.opts.Store.Append(context.WithoutCancel(c.ctx), r); err != nil {
		activity.GetLogger(c.ctx).Warn("idemgate: hand-off receipt not stored (the claim stays)",
			"activity", c.name, "key", c.key, "error", err)
	}
	c.signal(store.DecisionHandedOff, nil)
}
