package interceptor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"google.golang.org/protobuf/proto"

	"github.com/idemgate/idemgate/interceptor/internal/canon"
	"github.com/idemgate/idemgate/internal/attempt"
	"github.com/idemgate/idemgate/internal/faultpoint"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/witness"
)

// Decisions the gate logs and counts beyond the stored ones.
const (
	decisionRefusedInvalid  store.Decision = "refused-invalid"
	decisionRefusedNoResult store.Decision = "refused-no-result"
	decisionStoreDown       store.Decision = "refused-store-unavailable"
	decisionWrongStore      store.Decision = "refused-wrong-store"
)

// evidenceTimeout bounds the store writes made after the activity body returned;
// they run even when the attempt's own context is already done.
const evidenceTimeout = 30 * time.Second

// earlierReadTimeout bounds the read of an earlier attempt's receipt for a refusal.
const earlierReadTimeout = 5 * time.Second

func (r *root) InterceptActivity(ctx context.Context, next sdkinterceptor.ActivityInboundInterceptor) sdkinterceptor.ActivityInboundInterceptor {
	a := &activityInbound{root: r}
	a.Next = next
	return a
}

type activityInbound struct {
	sdkinterceptor.ActivityInboundInterceptorBase
	root *root
}

// call is one attempt going through the gate.
type call struct {
	r      *root
	ctx    context.Context
	info   activity.Info
	name   string
	effect Effect
	// source is what decided effect (store.Receipt.EffectSource).
	source string
	key    string
	args   []byte
	hash   string
	owner  string
	now    time.Time
	// lease is this attempt's lease (its deadline plus 2×ClockSkew).
	lease time.Time
}

func (a *activityInbound) ExecuteActivity(ctx context.Context, in *sdkinterceptor.ExecuteActivityInput) (any, error) {
	r := a.root
	info := activity.GetInfo(ctx)
	if sdkInternal(info.ActivityType.Name) {
		return a.Next.ExecuteActivity(ctx, in)
	}
	c := &call{r: r, ctx: ctx, info: info, name: info.ActivityType.Name, now: r.opts.Now()}
	c.lease = claimLease(info.Deadline, c.now, r.opts.ClockSkew)
	// Until this attempt has stored its outcome (or its lease passed), the plugin
	// must not close the store under it.
	defer r.inflight.done(r.inflight.add(c.lease))
	name, err := r.opts.effectiveName(c.name, in.Args)
	if err != nil {
		c.classify()
		c.signal(decisionRefusedInvalid, err)
		return nil, appError(err.Error(), ErrTypeArgsInvalid, true, 0)
	}
	c.name = name
	c.classify()
	h, hasHeader := readHeader(sdkinterceptor.Header(ctx))

	if c.effect == Read {
		c.key = h.Key
		ctx = attempt.NewContext(ctx, &attempt.State{Key: h.Key, Activity: c.name, Effect: Read.String()})
		res, err := a.Next.ExecuteActivity(ctx, in)
		rec := c.receipt(store.DecisionRan)
		if err != nil {
			rec.Error = err.Error()
		}
		switch {
		case r.opts.SkipReadReceipts:
		case r.reads != nil:
			// Off the path: appended in a batch within readFlushEvery (readq.go).
			r.reads.push(ctx, rec, activity.GetLogger(ctx), activity.GetMetricsHandler(ctx))
		default:
			if aerr := r.opts.Store.Append(context.WithoutCancel(ctx), rec); aerr != nil {
				activity.GetLogger(ctx).Warn("idemgate: read receipt not stored (the read ran)", "activity", c.name, "error", aerr)
			}
		}
		c.signal(store.DecisionRan, err)
		if err != nil {
			return nil, boundary(err)
		}
		return res, nil
	}

	if c.args, c.hash, err = canon.EncodeHash(in.Args); err != nil {
		c.signal(decisionRefusedInvalid, err)
		return nil, argsInvalid(c.name, c.effect, err, "run")
	}
	if c.key, err = c.resolveKey(h, hasHeader, in.Args); err != nil {
		c.signal(decisionRefusedInvalid, err)
		return nil, err
	}
	if h.Store != "" && h.Store != r.opts.Store.Identity() {
		return nil, c.wrongStore(h.Store)
	}
	if h.Rerun != nil && !h.Rerun.Allows(c.effect) {
		return nil, c.gated(*h.Rerun)
	}
	if p, ok := r.paused(ctx, c.name, info.ActivityType.Name, c.effect); ok {
		return nil, c.pausedWrite(p)
	}

	if r.history.p.Load() == nil {
		if s, ok := activityHistory(ctx); ok {
			r.captureHistory(s)
		}
	}
	c.owner = newOwner()
	cl := store.Claim{
		Key: c.key, Activity: c.name, Effect: c.effect.String(), EffectSource: c.source, ArgsHash: c.hash, Args: c.args,
		Owner: c.owner, Lease: c.lease, Window: r.opts.Window, TakeOver: c.effect == IdempotentWrite,
		WorkflowID: info.WorkflowExecution.ID, RunID: info.WorkflowExecution.RunID, RootWorkflowID: h.Root,
		Attempt: info.Attempt, Now: c.now,
	}
	faultpoint.Hit(faultpoint.BeforeClaim)
	outcome, rec, err := r.opts.Store.Begin(ctx, cl)
	if err == nil && outcome == store.OutcomeUnknown && r.giveBacks.settle(c.key, rec.Owner) {
		// The claim's owner was an attempt of this process whose outcome (not sent, or
		// its result) is known here and was waiting for the store in the background: it
		// is stored now, so claim again rather than refuse it as unknown.
		outcome, rec, err = r.opts.Store.Begin(ctx, cl)
	}
	if err == nil && outcome == store.OutcomeUnknown {
		// A vendor that deduplicates on the forwarded key makes a re-send safe inside its
		// window, if the key did leave to it: the record must carry the evidence the keyed
		// transport recorded (store.ResendWindow), or the configuration is all we have.
		if why, ok := c.vendorDedup(rec); ok {
			cl.TakeOver = true
			outcome, rec, err = r.opts.Store.Begin(ctx, cl)
			if err == nil && outcome == store.OutcomeTakenOver {
				// The vendor's deduplication is the witness: its receipt says so.
				if err := c.resent(why); err != nil {
					return nil, err
				}
			}
		}
	}
	var said witness.Report
	if err == nil && outcome == store.OutcomeUnknown {
		// Someone may know what the earlier attempt did: ask the witnesses before refusing.
		outcome, rec, said, err = c.settle(cl, rec)
	}
	var down *errSettleDown
	if errors.As(err, &down) {
		// A witness could tell, but the store did not take the settlement: nothing of
		// this attempt's was claimed. Fail closed and retryable, as on any outage.
		return nil, c.storeDown("store a witness's settlement of", down.err)
	}
	if err != nil {
		// The claim may have committed with its reply lost. The body did not run: give
		// the claim back, unless that Begin could have taken over from an attempt that
		// may have sent — then the key stays unknown.
		cause := fmt.Errorf("idemgate: the claim failed (%w) and may have committed with its reply lost; the activity did not run", err)
		if cl.TakeOver {
			c.giveBack(c.r.opts.Store.Abandon, store.DecisionUnknown, cause)
		} else {
			c.giveBack(c.r.opts.Store.Release, store.DecisionReleased, cause)
		}
		return nil, c.storeDown("claim", err)
	}
	switch outcome {
	case store.OutcomeClaimed, store.OutcomeTakenOver:
		faultpoint.Hit(faultpoint.AfterClaim)
		return c.run(a.Next, in, rec, outcome == store.OutcomeTakenOver)
	case store.OutcomeCompleted:
		return c.returnStored(rec)
	case store.OutcomeConflict:
		return nil, c.conflict(rec)
	case store.OutcomeInFlight:
		return nil, c.inFlight(rec)
	default: // store.OutcomeUnknown: destructive, owner gone, outcome unknown.
		return nil, c.refuseUnknown(rec, said)
	}
}

// claimLease is how long a claim is held: the attempt's deadline (by the SDK, on this
// worker's clock) plus twice the clock skew, since the owner's clock may run behind
// by the skew and a later worker's ahead by as much. Until then the owner may still
// be running, and nobody takes the claim over. The claim-rule model
// (store/claimmodel) explores exactly this padding.
func claimLease(deadline, now time.Time, skew time.Duration) time.Time {
	if deadline.IsZero() {
		deadline = now.Add(defaultLease)
	}
	return deadline.Add(2 * skew)
}

func (c *call) resolveKey(h callHeader, hasHeader bool, args []any) (string, error) {
	return c.r.opts.keyOf(keySite{namespace: c.info.Namespace, name: c.name, effect: c.effect,
		activityID: c.info.ActivityID, workflowID: c.info.WorkflowExecution.ID, args: c.args}, h, hasHeader, args)
}

// keySite is where a call's key is computed: what keyOf needs of the attempt (the
// gate's call) or of a scheduled event (the Temporal-history witness).
type keySite struct {
	namespace string
	// name is the effective name (the tool's name under ToolNames).
	name   string
	effect Effect
	// activityID and workflowID of the attempt ("" workflowID: a standalone activity).
	activityID, workflowID string
	// args is the canonical JSON of the arguments, for messages.
	args []byte
}

// keyOf is the key of a call as the gate computes it, from the header the workflow
// (or client) stamped and the arguments: the one rule the gate and the
// Temporal-history witness share.
func (o *Options) keyOf(s keySite, h callHeader, hasHeader bool, args []any) (string, error) {
	ns := s.namespace
	if h.Standalone != "" {
		if h.Standalone != s.activityID || s.workflowID != "" {
			return "", appError(fmt.Sprintf("idemgate: %s (%s) activity %s carries the standalone key of activity %q, "+
				"not its own. Nothing was run. Next step: start standalone activities through a client with "+
				"interceptor.NewClientInterceptor, and do not copy its header into other calls.",
				s.name, s.effect, s.activityID, h.Standalone), ErrTypeKeyInvalid, true, 0)
		}
		return standaloneKey(ns, s.name, h.Standalone), nil
	}
	if h.HasBusiness {
		if n := utf8.RuneCountInString(h.Business); n < MinKeyLength || n > MaxKeyLength {
			return "", appError(fmt.Sprintf("idemgate: %s (%s): the key %q given with WithKey is %d characters; "+
				"keys must be %d to %d characters. Nothing was run. Next step: use a longer business key "+
				"that names the write, e.g. \"order-4217/charge\".",
				s.name, s.effect, h.Business, n, MinKeyLength, MaxKeyLength), ErrTypeKeyInvalid, true, 0)
		}
		return BusinessKey(ns, s.name, h.Business), nil
	}
	if fields := o.IdentifyingFields[s.name]; len(fields) > 0 && hasHeader {
		var stack [256]byte
		values := append(stack[:0], '{')
		for i, f := range fields {
			v, ok, err := canon.Field(args, f)
			var amb *canon.AmbiguousError
			if errors.As(err, &amb) {
				return "", appError(fmt.Sprintf("idemgate: %s (%s): identifying field %q is ambiguous: %v; the "+
					"arguments are untrusted input, so the write is refused as invalid arguments. Nothing was run. "+
					"Next step: send the field under one key only.", s.name, s.effect, f, amb), ErrTypeArgsInvalid, true, 0)
			}
			if err != nil || !ok {
				return "", appError(fmt.Sprintf("idemgate: %s (%s): identifying field %q not found in the arguments %s. "+
					"Nothing was run. Next step: pass it, or fix Options.IdentifyingFields[%q].",
					s.name, s.effect, f, s.args, s.name), ErrTypeKeyInvalid, true, 0)
			}
			if i > 0 {
				values = append(values, ',')
			}
			values = append(strconv.AppendQuote(values, f), ':') // as fmt's %q
			values = append(values, v...)
		}
		values = append(values, '}')
		return identifyingKey(ns, h.Scope, s.name, values), nil
	}
	if (!hasHeader || h.Key == "") && s.workflowID == "" {
		return "", appError(fmt.Sprintf("idemgate: %s (%s) is a standalone activity (ID %q) that arrived without an "+
			"idempotency key: the client that started it does not run the idemgate client interceptor. Nothing was "+
			"run. Next step: add interceptor.NewClientInterceptor() to client.Options.Interceptors of that client.",
			s.name, s.effect, s.activityID), ErrTypeKeyMissing, true, 0)
	}
	if !hasHeader || h.Key == "" {
		return "", appError(fmt.Sprintf("idemgate: %s (%s) arrived without an idempotency key: the workflow %s that "+
			"scheduled it does not run the idemgate interceptor. Nothing was run. Next step: add the interceptor from "+
			"interceptor.New to worker.Options.Interceptors of the worker that runs the workflow.",
			s.name, s.effect, s.workflowID), ErrTypeKeyMissing, true, 0)
	}
	return h.Key, nil
}

func (c *call) run(next sdkinterceptor.ActivityInboundInterceptor, in *sdkinterceptor.ExecuteActivityInput, rec store.Record, takenOver bool) (res any, err error) {
	// Retry: an earlier attempt may have reached the vendor with this key (only a
	// takeover says so; a re-claim after a release follows attempts that reached nobody).
	st := &attempt.State{Key: c.key, Activity: c.name, Effect: c.effect.String(), FirstClaimed: rec.CreatedAt, Retry: takenOver,
		ClockSkew: c.r.opts.ClockSkew}
	if c.keepsEvidence() {
		// Its unknown outcome may be re-sent relying on the vendor, or settled by a
		// witness that asks the vendor: only on evidence that the key left through
		// the keyed transport (store.ResendWindow, idemhttp.LookupWitness, an MCP
		// server's Dedup lookup through mcptools.Bridge.Witness).
		st.RecordSent = c.recordSent
	}
	actx := c.ctx
	if hb := c.info.HeartbeatTimeout; hb > 0 && !c.info.IsLocalActivity {
		var stop func()
		actx, stop = withHeartbeatWatchdog(actx, hb)
		defer stop()
	}
	finished := false
	defer func() {
		if !finished { // a panic: the outcome is unknown; keep the claim and let the panic go on.
			c.abandon(errors.New("the activity panicked"), store.DecisionUnknown)
		}
	}()
	actx = context.WithValue(attempt.NewContext(actx, st), handOffCtx{}, c)
	res, err = next.ExecuteActivity(actx, in)
	finished = true
	faultpoint.Hit(faultpoint.AfterAnswer)
	if err == activity.ErrResultPending { // compared by identity, as the SDK does
		c.handedOff()
		return nil, err
	}
	if err != nil {
		obs := st.Observations()
		if definite(err, obs) {
			// This attempt sent nothing; an earlier one it took over may have, and then
			// the store keeps the key unknown (store.ReleasedState): say so.
			d, cause := store.DecisionReleased, err
			if store.ReleasedState(rec) == store.StateUnknown {
				d = store.DecisionUnknown
				cause = fmt.Errorf("%w (this attempt sent nothing, but an earlier attempt may have reached the vendor, "+
					"so the outcome stays unknown until a person resolves it)", err)
			}
			c.giveBack(c.r.opts.Store.Release, d, cause)
			c.signal(d, cause)
			if o, ok := vendorConflict(obs); ok {
				// Retrying would meet the same answer: the vendor holds this key for another payload.
				return nil, appError(fmt.Sprintf("idemgate: %s (%s) key %s: the vendor %s says the key was already used "+
					"with another payload (%s); nothing was performed. Next step: give this different write its own "+
					"key (WithKey), or repeat the original arguments.", c.name, c.effect, c.key, o.Vendor, o.Detail),
					ErrTypeConflict, true, 0, ConflictDetails{Key: c.key, Activity: c.name, ArgsHash: c.hash, Args: c.args})
			}
			return nil, boundary(err)
		}
		c.abandon(err, store.DecisionUnknown)
		return nil, boundary(err)
	}
	data, err := encodeResult(c.r.opts.DataConverter, res)
	if err != nil {
		c.abandon(err, store.DecisionUnknown)
		return nil, appError(fmt.Sprintf("idemgate: %s (%s) key %s ran, but its result cannot be encoded: %v. "+
			"The outcome is recorded as unknown. Next step: return a value the data converter can encode.",
			c.name, c.effect, c.key, err), ErrTypeResultNotStored, true, 0)
	}
	omitted := len(data) > c.r.opts.MaxResultSize
	if omitted {
		data = nil
	}
	if err := c.transition(c.r.opts.Store.Complete, store.DecisionRan, data, omitted, nil); err != nil {
		if errors.Is(err, store.ErrNotOwner) {
			c.signal(store.DecisionUnknown, err)
			return nil, appError(fmt.Sprintf("idemgate: %s (%s) key %s: this attempt (%d) finished after another attempt "+
				"took its claim; its result is not recorded and does not overwrite the newer attempt's.",
				c.name, c.effect, c.key, c.info.Attempt), ErrTypeInFlight, true, 0)
		}
		// No receipt, no success: the write happened but is not on record. It goes on
		// record when the store answers again, for Temporal's retry to find.
		c.completeLater(data, omitted, err)
		return nil, c.storeDown("store the result of", err)
	}
	faultpoint.Hit(faultpoint.AfterStore)
	c.signal(store.DecisionRan, nil)
	return res, nil
}

// transition runs an owner-checked Complete/Release/Abandon with its receipt, even
// when the attempt's context is already done.
func (c *call) transition(op func(context.Context, store.Transition) error, d store.Decision, result []byte, omitted bool, cause error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), evidenceTimeout)
	defer cancel()
	now := c.r.opts.Now()
	rec := c.receipt(d)
	rec.Time = now
	if len(result) > 0 {
		rec.ResultRef = resultRef(result)
	}
	if cause != nil {
		rec.Error = cause.Error()
	}
	return op(ctx, store.Transition{Key: c.key, Owner: c.owner, Now: now, Result: result, ResultOmitted: omitted,
		Window: c.r.opts.Window, Receipt: rec})
}

func (c *call) abandon(cause error, d store.Decision) {
	if err := c.transition(c.r.opts.Store.Abandon, d, nil, false, cause); err != nil {
		activity.GetLogger(c.ctx).Warn("idemgate: unknown outcome not stored; the claim stays until its lease passes",
			"activity", c.name, "key", c.key, "error", err)
	}
	c.signal(d, cause)
}

func (c *call) returnStored(rec store.Record) (any, error) {
	if rec.ResultOmitted {
		msg := fmt.Sprintf("idemgate: %s (%s) key %s already ran (attempt %d of workflow %s, %s), but its result was "+
			"over the %d-byte limit and not stored, so it cannot be returned and will not be run again. Next step: "+
			"raise Options.MaxResultSize, or read the result from the vendor.", c.name, c.effect, c.key, rec.Attempt,
			rec.WorkflowID, rec.UpdatedAt.Format(time.RFC3339), c.r.opts.MaxResultSize)
		c.refuse(decisionRefusedNoResult, msg, false)
		return nil, appError(msg, ErrTypeResultNotStored, true, 0)
	}
	var p commonpb.Payloads
	if err := proto.Unmarshal(rec.Result, &p); err != nil {
		msg := fmt.Sprintf("idemgate: %s (%s) key %s already ran, but its stored result cannot be decoded: %v. "+
			"It will not be run again. Next step: inspect the record with `idemgate receipts --key %s`.",
			c.name, c.effect, c.key, err, c.key)
		c.refuse(decisionRefusedNoResult, msg, false)
		return nil, appError(msg, ErrTypeResultNotStored, true, 0)
	}
	r := c.receipt(store.DecisionReplayed)
	r.ResultRef = resultRef(rec.Result)
	if err := c.r.opts.Store.Append(c.ctx, r); err != nil {
		return nil, c.storeDown("record the replay of", err)
	}
	c.signal(store.DecisionReplayed, nil)
	// The SDK sends a *commonpb.Payloads result as it is: the stored payloads, which
	// Options.DataConverter made exactly as the worker makes a fresh result.
	return &p, nil
}

func (c *call) conflict(rec store.Record) error {
	d := ConflictDetails{Key: c.key, Activity: c.name, ArgsHash: c.hash, StoredArgsHash: rec.ArgsHash,
		StoredAt: rec.CreatedAt, StoredState: string(rec.State), StoredArgs: rec.Args, Args: c.args,
		Differs: differs(rec.Args, c.args)}
	msg := fmt.Sprintf("idemgate: %s (%s) key %s was already used at %s with other arguments (differs: %s; stored "+
		"args hash %.12s, this call %.12s). Not run. Next step: repeat the exact arguments to get the stored "+
		"result, or give this different write its own key (WithKey).", c.name, c.effect, c.key,
		rec.CreatedAt.Format(time.RFC3339), shortList(d.Differs), rec.ArgsHash, c.hash)
	c.refuse(store.DecisionRefusedConflict, msg, false)
	return appError(msg, ErrTypeConflict, true, 0, d)
}

func (c *call) inFlight(rec store.Record) error {
	wait := max(rec.Lease.Sub(c.now)+time.Second, time.Second)
	msg := fmt.Sprintf("idemgate: %s (%s) key %s: attempt %d (workflow %s) holds the claim and may still be running "+
		"until %s. Not run twice", c.name, c.effect, c.key, rec.Attempt, rec.WorkflowID, rec.Lease.Format(time.RFC3339))
	last := c.lastAttempt(wait)
	if last == "" {
		msg += fmt.Sprintf("; Temporal retries after %s.", wait.Round(time.Millisecond))
	} else {
		msg += ". This was " + last + " Next step: once the owner's lease passed, look at `idemgate receipts --key " +
			c.key + "`, then retry the write or settle it."
	}
	// The refusal names the call it withholds, whether or not Temporal retries it: it
	// may be the workflow's last word on this write (soak finding 2).
	call := c.withheld()
	msg += fmt.Sprintf(" Withheld call: %s.", call)
	c.refuse(store.DecisionRefusedInFlight, msg, true)
	// Expected: the owner is still within its lease. Benign, so the SDK neither logs
	// it at ERROR nor counts a failure, and retried only once the lease passed. Its
	// details carry the withheld call, as every refusal of an unknown outcome's.
	return c.expected(msg, ErrTypeInFlight, last, wait, call)
}

// lastAttempt is "" when Temporal retries this attempt's retryable failure after
// next, else what a refusal says after "this was ": the attempt is the last its
// retry policy allows (MaximumAttempts), or a retry after next would come past the
// activity's ScheduleToClose (a local activity's defaults to its StartToClose; the
// server caps it at the workflow's timeout), so the refusal ends the activity. (A
// nil RetryPolicy: the server did not say, as for local activities; counted as
// retried.)
func (c *call) lastAttempt(next time.Duration) string {
	if rp := c.info.RetryPolicy; rp != nil && rp.MaximumAttempts > 0 && c.info.Attempt >= rp.MaximumAttempts {
		return fmt.Sprintf("the last attempt its retry policy allows (MaximumAttempts %d): the activity fails here, and "+
			"Temporal does not retry it.", rp.MaximumAttempts)
	}
	if c.info.ScheduleToCloseTimeout <= 0 || c.info.ScheduledTime.IsZero() {
		return ""
	}
	end := c.info.ScheduledTime.Add(c.info.ScheduleToCloseTimeout)
	if c.now.Add(next).Before(end) {
		return ""
	}
	return fmt.Sprintf("the last attempt its ScheduleToClose (%s, until %s) allows: a retry after %s would come too "+
		"late, so the activity fails here.", c.info.ScheduleToCloseTimeout, end.Format(time.RFC3339),
		next.Round(time.Millisecond))
}

// expected is the error of an expected, retryable refusal (a live lease, a pause, a
// hold): benign — the SDK neither logs it at ERROR nor counts a failure — while
// Temporal retries it; on the last attempt (last from lastAttempt, not "") it ends
// the activity and is an ordinary, loud failure.
func (c *call) expected(msg, typ, last string, next time.Duration, details ...any) error {
	if last != "" {
		return appError(msg, typ, false, next, details...)
	}
	return benignError(msg, typ, false, next, details...)
}

// recordSent is attempt.State.RecordSent for this attempt: evidence in the claim that
// the key leaves through a keyed transport, committed (not synced) before it does.
func (c *call) recordSent(ctx context.Context, s attempt.Sent) error {
	err := c.r.opts.Store.RecordSent(ctx, c.key, c.owner, s)
	if err != nil {
		activity.GetLogger(c.ctx).Warn("idemgate: the evidence that the key left through the keyed transport is not "+
			"stored; the keyed transport withholds the request (not sent)", "activity", c.name, "key", c.key,
			"via", s.Via, "host", s.Host, "error", err)
	}
	return err
}

func (c *call) refuseUnknown(rec store.Record, said witness.Report) error {
	call := c.withheld()
	call.Earlier = c.earlier(rec)
	why, hint := "", ""
	if e := call.Earlier; e != nil {
		why = fmt.Sprintf(" (it failed with %q)", e.Error)
		hint = " If that error was raised before anything was sent, mark it with interceptor.NotCommitted so a " +
			"retry may run."
	}
	msg := fmt.Sprintf("idemgate: refused %s %s key %s: attempt %d (workflow %s, claimed %s) ended without proof of "+
		"whether it reached the outside world%s, so it is not sent again. Withheld call: %s. Next step: check with "+
		"the vendor, then `idemgate resolve %s --sent --result FILE --reason ...` if it happened (the stored result "+
		"is returned) or `--not-sent --reason ...` if it did not (the write runs once more).%s", c.effect, c.name,
		c.key, rec.Attempt, rec.WorkflowID, rec.CreatedAt.Format(time.RFC3339), why, call, c.key, hint)
	if w, ok := c.r.opts.VendorWindows[c.name]; ok {
		msg += c.noResend(rec, w)
	}
	if len(said.Said) > 0 {
		msg += " Witnesses asked: " + said.Summary() + "."
	}
	if !store.Resolvable(rec, c.now) {
		// The owner's lease passed only just: a worker whose clock runs behind may still
		// send until lease + store.LeaseMargin, and resolve waits for that too — and so
		// must the person's look at the vendor (claimmodel's
		// TestPersonWhoLookedEarlySettlesWrong).
		from := store.ResolvableFrom(rec).Format(time.RFC3339)
		msg += fmt.Sprintf(" `idemgate resolve` accepts this key from %s (its lease plus %s, for late workers): "+
			"look the write up at the vendor at or after %s, not before (a look before then can miss a request "+
			"still on its way).", from, store.LeaseMargin, from)
	} else if !store.NotSentResolvable(rec, c.now) {
		// The attempt gave up without proof: a request it wrote just before may still
		// land until its lease plus the margin, so a person's --not-sent waits for that
		// (atk-op finding 4); --sent is taken now.
		from := store.NotSentFrom(rec).Format(time.RFC3339)
		msg += fmt.Sprintf(" `idemgate resolve --sent` is accepted now; --not-sent from %s (its lease plus %s: a "+
			"request the attempt wrote before it gave up may still land until then): a look at the vendor before "+
			"then can miss it.", from, store.LeaseMargin)
	}
	hold := c.r.opts.HoldUnknown
	// A witness that said "not sent" too early settles the key once its answer counts
	// (store.NotSentFrom): the retry that asks again comes then.
	counts, early := earlyNotSent(said)
	untilCounts := ceilSecond(counts.Sub(c.now) + time.Second)
	// Retried only while the record outlives the next retry: a destructive record with
	// no known outcome never expires (store.Expired); any other would be forgotten past
	// its window, and the retry after that would send the write again.
	outlives := func(d time.Duration) bool { return store.UnknownOutcome(rec) || c.now.Add(2*d).Before(rec.ExpiresAt) }
	var delay time.Duration
	var retries, lastWord string
	switch {
	case hold > 0 && outlives(hold):
		// Held: retried no sooner than the point where the answer can change — a
		// witness can settle once the owner's lease passed, its early "not sent" later.
		delay = max(hold, ceilSecond(rec.Lease.Sub(c.now)+time.Second))
		if early {
			delay = max(delay, untilCounts)
		}
		retries = fmt.Sprintf(" Held: Temporal retries in %s until the key is settled by a witness or a person "+
			"(Options.HoldUnknown), and the workflow goes on by itself once it is.", delay)
		lastWord = " Held (Options.HoldUnknown) would retry it, but this was %s Give held writes a retry policy " +
			"without MaximumAttempts, bounded by ScheduleToClose instead."
	case early && outlives(untilCounts):
		// Not refused for good when a witness will settle the key: the retry asks it again.
		delay = untilCounts
		retries = fmt.Sprintf(" A witness said not sent; its answer counts from %s, so Temporal retries in %s and the "+
			"write runs then if it still says so.", counts.Format(time.RFC3339), untilCounts)
		lastWord = " A witness said not sent; its answer counts from " + counts.Format(time.RFC3339) + ", but this was %s"
	}
	if retries != "" {
		if early {
			call.NotSentCountsFrom = &counts
		}
		last := c.lastAttempt(delay)
		if last == "" {
			msg += retries
		} else {
			msg += fmt.Sprintf(lastWord, last)
		}
		c.refuse(store.DecisionRefusedInFlight, msg, true)
		return c.expected(msg, ErrTypeInFlight, last, delay, call)
	}
	if hold > 0 {
		msg += fmt.Sprintf(" Refused for good: the key's record expires at %s, before the hold could end "+
			"(Options.HoldUnknown %s, Options.Window).", rec.ExpiresAt.Format(time.RFC3339), hold)
	}
	c.refuse(store.DecisionRefusedInFlight, msg, true)
	return appError(msg, ErrTypeInFlight, true, 0, call)
}

// earlyNotSent is the earliest time an early "not sent" in said counts from
// (witness.Said.CountsFrom), and whether there is one.
func earlyNotSent(said witness.Report) (time.Time, bool) {
	var at time.Time
	for _, s := range said.Said {
		if s.Early && !s.CountsFrom.IsZero() && (at.IsZero() || s.CountsFrom.Before(at)) {
			at = s.CountsFrom
		}
	}
	return at, !at.IsZero()
}

// ceilSecond rounds d up to whole seconds (a retry delay Temporal shows plainly).
func ceilSecond(d time.Duration) time.Duration {
	return (d + time.Second - 1).Truncate(time.Second)
}

// noResend says why a write named in Options.VendorWindows is not re-sent.
func (c *call) noResend(rec store.Record, w time.Duration) string {
	ew, ok := store.ResendWindow(rec, w)
	exits, silent := store.Exits(rec)
	switch {
	case len(exits) == 0:
		return fmt.Sprintf(" Options.VendorWindows names %s, but nothing shows that the key left through a keyed "+
			"transport (idemhttp, the MCP bridge): the body may call the vendor without the key, so the vendor cannot "+
			"deduplicate a re-send.", c.name)
	case len(silent) > 0:
		return fmt.Sprintf(" Options.VendorWindows names %s, and the key left through %s, but %d of the attempts "+
			"that claimed it since %s recorded no such evidence (claim owners %s): they may have called a vendor "+
			"without the key, which cannot deduplicate a re-send.", c.name, sentList(exits), len(silent),
			rec.CreatedAt.Format(time.RFC3339), strings.Join(silent, ", "))
	case !ok:
		return fmt.Sprintf(" Options.VendorWindows names %s, but the key left for a vendor that does not deduplicate "+
			"on it (%s), so a re-send would reach it as a second write.", c.name, sentList(exits))
	default:
		return fmt.Sprintf(" The key left through %s, but the shortest of their windows (%s from %s) has ended or is "+
			"about to.", sentList(exits), ew, rec.CreatedAt.Format(time.RFC3339))
	}
}

// sentList names the exits of the evidence ss, each once (the claims of one key
// record the same exit each time they send).
func sentList(ss []store.Sent) string {
	var parts []string
	seen := map[store.Sent]bool{}
	for _, s := range ss {
		s.Owner = ""
		if !s.Blank() && !seen[s] {
			seen[s] = true
			parts = append(parts, s.String())
		}
	}
	return strings.Join(parts, ", ")
}

// receiptReader is the one Operator method a refusal uses when the store has it:
// reading the earlier attempt's receipt. Every store.Store has it; a store.Gate
// need not.
type receiptReader interface {
	Receipts(ctx context.Context, f store.ReceiptFilter) ([]store.Receipt, error)
}

// earlier reads the receipt of the attempt that left rec unknown (rec's owner:
// same workflow, run and attempt), whose error a refusal quotes. nil when none is on
// record — the attempt crashed or timed out — the receipts cannot be read, or the
// store cannot list receipts (a store.Gate that is not a receiptReader).
func (c *call) earlier(rec store.Record) *EarlierAttempt {
	rr, ok := c.r.opts.Store.(receiptReader)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), earlierReadTimeout)
	defer cancel()
	rs, err := rr.Receipts(ctx, store.ReceiptFilter{Key: c.key, WorkflowID: rec.WorkflowID, Decision: store.DecisionUnknown})
	if err != nil {
		activity.GetLogger(c.ctx).Warn("idemgate: the earlier attempt's receipt could not be read; the refusal stands without its error",
			"activity", c.name, "key", c.key, "error", err)
		return nil
	}
	for i := len(rs) - 1; i >= 0; i-- {
		if r := rs[i]; r.RunID == rec.RunID && r.Attempt == rec.Attempt && r.Error != "" {
			return &EarlierAttempt{WorkflowID: r.WorkflowID, RunID: r.RunID, Attempt: r.Attempt, Time: r.Time, Error: r.Error}
		}
	}
	return nil
}

func (c *call) gated(p RerunPolicy) error {
	call := c.withheld()
	allow := "AllowWrites"
	if c.effect == Destructive {
		allow = "AllowDestructive"
	}
	msg := fmt.Sprintf("idemgate: rerun policy withheld %s %s key %s. Withheld call: %s. Next step: re-run with "+
		"RerunPolicy{%s: true} to let it fire.", c.effect, c.name, c.key, call, allow)
	c.refuse(store.DecisionGated, msg, true)
	return appError(msg, ErrTypeWriteGated, true, 0, call)
}

func (c *call) withheld() WithheldCall {
	return WithheldCall{Activity: c.name, Key: c.key, Effect: c.effect.String(), Args: c.args}
}

// refuse records a refusal. A refusal stands even when its receipt cannot be
// stored: refusing is always safe.
func (c *call) refuse(d store.Decision, msg string, withCall bool) {
	r := c.receipt(d)
	r.Error = msg
	if withCall {
		r.Call = c.args
	}
	if err := c.r.opts.Store.Append(context.WithoutCancel(c.ctx), r); err != nil {
		activity.GetLogger(c.ctx).Warn("idemgate: refusal receipt not stored", "activity", c.name, "key", c.key, "error", err)
	}
	c.signal(d, errors.New(msg))
}

// wrongStore refuses a write whose key was minted beside another store: claiming it
// here too would let both stores claim it, and the write happen twice. Retryable:
// a leftover worker on the wrong store must not use up the write, a worker on the
// right store takes a later attempt. Nothing is stored: this is not the key's store.
func (c *call) wrongStore(theirs string) error {
	ours := c.r.opts.Store.Identity()
	msg := fmt.Sprintf("idemgate: %s (%s) key %s was minted by a workflow worker whose claim store is %q, but this "+
		"activity worker's store is %q: claiming it here could run the write a second time, unseen by the other "+
		"store. Not run; Temporal retries, and a worker on store %q can take it. Next step: stop the workers on "+
		"store %q that poll this task queue, or point them at the same store (the same SQLite file or PostgreSQL "+
		"database) as the workflow workers.", c.name, c.effect, c.key, theirs, ours, theirs, ours)
	c.signal(decisionWrongStore, errors.New(msg))
	return appError(msg, ErrTypeWrongStore, false, 0)
}

func (c *call) storeDown(what string, err error) error {
	c.signal(decisionStoreDown, err)
	return appError(fmt.Sprintf("idemgate: could not %s %s (%s) key %s: claim store unavailable: %v. Writes fail "+
		"closed; Temporal retries. Next step: check the store (database reachable, disk writable).",
		what, c.name, c.effect, c.key, err), ErrTypeStoreUnavailable, false, 0)
}

// classify sets the call's effect and its source from c.name.
func (c *call) classify() {
	cl := c.r.classify(c.name)
	c.effect, c.source = cl.Effect, cl.Source.EffectSource()
}

func (c *call) receipt(d store.Decision) store.Receipt {
	return store.Receipt{
		Time: c.now, Key: c.key, Activity: c.name, Effect: c.effect.String(), EffectSource: c.source, Decision: d,
		ArgsHash: c.hash, WorkflowID: c.info.WorkflowExecution.ID, RunID: c.info.WorkflowExecution.RunID,
		Attempt: c.info.Attempt,
	}
}

// signal logs a decision through the activity logger and counts it through the
// worker's metrics handler, tagged by activity, effect and decision.
func (c *call) signal(d store.Decision, err error) {
	kv := []any{"decision", decisionValue(d), "activity", c.name, "effect", c.effect.logValue(), "key", c.key, "attempt", c.info.Attempt}
	logger := activity.GetLogger(c.ctx)
	switch {
	case err != nil:
		logger.Info("idemgate", append(kv, "error", err.Error())...)
	case c.effect == Read:
		logger.Debug("idemgate", kv...)
	default:
		logger.Info("idemgate", kv...)
	}
	// A worker without a metrics handler has the SDK's no-op one: nothing to tag.
	if h := activity.GetMetricsHandler(c.ctx); h != client.MetricsNopHandler {
		h.WithTags(map[string]string{
			"activity_type": c.metricName(), "effect": c.effect.String(), "decision": string(d),
		}).Counter(MetricDecisions).Inc(1)
	}
	c.observe(d, err)
}

// decisionValue is string(d) as a log value: the gate's decisions are constants,
// which an interface holds without an allocation.
func decisionValue(d store.Decision) any {
	switch d {
	case store.DecisionRan:
		return string(store.DecisionRan)
	case store.DecisionReplayed:
		return string(store.DecisionReplayed)
	case store.DecisionReleased:
		return string(store.DecisionReleased)
	case store.DecisionUnknown:
		return string(store.DecisionUnknown)
	case store.DecisionRefusedInFlight:
		return string(store.DecisionRefusedInFlight)
	}
	return string(d)
}

// metricName is the activity_type tag of the call's decision metric: its name, or
// for a name taken from the arguments (Options.ToolNames) that no option names, the
// generic activity type. A model that invents tool names must not make one metric
// series per name: metrics backends keep every series for the life of the process.
func (c *call) metricName() string {
	if c.name == c.info.ActivityType.Name || c.r.known[c.name] {
		return c.name
	}
	return c.info.ActivityType.Name
}

// MetricDecisions counts gate decisions, tagged activity_type, effect and decision.
// activity_type is the activity type, or with Options.ToolNames the tool's name when
// an option names it (Effects, Hints, IdentifyingFields, VendorWindows) and the
// generic activity type otherwise, so that model-written names stay out of the tags.
const MetricDecisions = "idemgate_decisions"

// EncodeResult encodes an activity result the way the gate stores it — the Temporal
// payloads dc makes of it, as the worker would send them (nil dc:
// converter.GetDefaultDataConverter()), proto-marshalled — and returns it with its
// reference, the digest receipts show. A repeat of the write hands the stored
// payloads back as they are, so the workflow decodes them exactly like a fresh
// result. `idemgate resolve --sent` stores an operator's result with it.
func EncodeResult(dc converter.DataConverter, v any) (data []byte, ref string, err error) {
	if data, err = encodeResult(dc, v); err != nil {
		return nil, "", err
	}
	return data, resultRef(data), nil
}

// encodeResult stores a result that is already *commonpb.Payloads (the SDK's own
// encoding, as some executors hand it to interceptors) as it is.
func encodeResult(dc converter.DataConverter, v any) ([]byte, error) {
	p, ok := v.(*commonpb.Payloads)
	if !ok {
		if dc == nil {
			dc = converter.GetDefaultDataConverter()
		}
		var err error
		if p, err = dc.ToPayloads(v); err != nil {
			return nil, err
		}
	}
	// Deterministic (a payload's metadata is a map): a repeat of CompleteAsync
	// compares results by the digest of these bytes when they were too large to store.
	return marshalPayloads(p)
}

// resultRef is "sha256:" and the hex of the first 8 bytes of b's SHA-256.
func resultRef(b []byte) string {
	sum := sha256.Sum256(b)
	var out [len("sha256:") + 16]byte
	copy(out[:], "sha256:")
	hex.Encode(out[len("sha256:"):], sum[:8])
	return string(out[:])
}
