package interceptor

import (
	"fmt"
	"strconv"
	"sync"

	commonpb "go.temporal.io/api/common/v1"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"

	"github.com/idemgate/idemgate/internal/canon"
)

// New returns the idemgate worker interceptor: register it in
// worker.Options.Interceptors. The one value mints keys on the workflow side and
// gates attempts on the activity side, so the worker that runs the workflows and
// the worker that runs the activities must both have it.
//
// New validates opts and returns an error naming every field that is wrong.
func New(opts Options) (sdkinterceptor.WorkerInterceptor, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	return newRoot(o), nil
}

// newRoot is the one gate both New and NewPlugin hand out, from validated options.
func newRoot(o Options) *root {
	return &root{opts: o, pauses: pauseCache{first: make(chan struct{})}}
}

type root struct {
	sdkinterceptor.WorkerInterceptorBase
	opts    Options
	classes sync.Map // activity name -> Classification
	pauses  pauseCache
}

func (r *root) classify(name string) Classification {
	if c, ok := r.classes.Load(name); ok {
		return c.(Classification)
	}
	c := r.opts.Classify(name)
	r.classes.Store(name, c)
	return c
}

func (r *root) InterceptWorkflow(ctx workflow.Context, next sdkinterceptor.WorkflowInboundInterceptor) sdkinterceptor.WorkflowInboundInterceptor {
	w := &workflowInbound{root: r}
	w.Next = next
	return w
}

// workflowInbound lives as long as one workflow execution in the worker's cache; a
// replay after eviction makes a new one and counts the same occurrences again.
type workflowInbound struct {
	sdkinterceptor.WorkflowInboundInterceptorBase
	root       *root
	generation int
	// parent is the parent token from the start header ("" for a top-level workflow).
	parent   string
	scope    string
	counts   map[string]int
	children map[string]int
}

func (w *workflowInbound) Init(outbound sdkinterceptor.WorkflowOutboundInterceptor) error {
	o := &workflowOutbound{wf: w}
	o.Next = outbound
	return w.Next.Init(o)
}

func (w *workflowInbound) ExecuteWorkflow(ctx workflow.Context, in *sdkinterceptor.ExecuteWorkflowInput) (any, error) {
	if p := sdkinterceptor.WorkflowHeader(ctx)[headerGeneration]; p != nil {
		w.generation, _ = strconv.Atoi(string(p.Data))
	}
	w.parent = readToken(sdkinterceptor.WorkflowHeader(ctx))
	return w.Next.ExecuteWorkflow(ctx, in)
}

type workflowOutbound struct {
	sdkinterceptor.WorkflowOutboundInterceptorBase
	wf *workflowInbound
}

func (o *workflowOutbound) ExecuteActivity(ctx workflow.Context, activityType string, args ...any) workflow.Future {
	if err := o.stamp(ctx, activityType, args); err != nil {
		f, s := workflow.NewFuture(ctx)
		s.SetError(err)
		return f
	}
	return o.Next.ExecuteActivity(ctx, activityType, args...)
}

func (o *workflowOutbound) ExecuteLocalActivity(ctx workflow.Context, activityType string, args ...any) workflow.Future {
	if err := o.stamp(ctx, activityType, args); err != nil {
		f, s := workflow.NewFuture(ctx)
		s.SetError(err)
		return f
	}
	return o.Next.ExecuteLocalActivity(ctx, activityType, args...)
}

func (o *workflowOutbound) NewContinueAsNewError(ctx workflow.Context, wfn any, args ...any) error {
	if h := sdkinterceptor.WorkflowHeader(ctx); h != nil {
		h[headerGeneration] = &commonpb.Payload{Metadata: jsonPlain, Data: []byte(strconv.Itoa(o.wf.generation + 1))}
		setToken(h, o.wf.parent)
	}
	return o.Next.NewContinueAsNewError(ctx, wfn, args...)
}

func (o *workflowOutbound) ExecuteChildWorkflow(ctx workflow.Context, childType string, args ...any) workflow.ChildWorkflowFuture {
	o.stampChild(ctx, childType)
	return o.Next.ExecuteChildWorkflow(ctx, childType, args...)
}

// stamp mints the key of this call from deterministic inputs only (namespace,
// workflow ID, original run ID or generation, activity type — the tool's name for a
// generic tool-calling activity (Options.ToolNames) — occurrence) and writes
// it to the activity header. Never from ActivityID: a reset shifts event IDs, and
// local-activity IDs change on every retry.
//
// A write whose arguments have no canonical form fails here, before it is
// scheduled, with an error that names the activity and the argument.
func (o *workflowOutbound) stamp(ctx workflow.Context, activityType string, args []any) error {
	w := o.wf
	if sdkInternal(activityType) {
		return nil // the SDK's own activities (sessions) are never keyed or gated
	}
	activityType, err := w.root.opts.effectiveName(activityType, args)
	if err != nil {
		return appError(err.Error(), ErrTypeArgsInvalid, true, 0)
	}
	if e := w.root.classify(activityType).Effect; e != Read {
		if _, err := canon.Encode(nil, args); err != nil {
			return appError(fmt.Sprintf("idemgate: %s (%s): %v. Nothing was scheduled. Next step: pass plain data "+
				"(structs, maps, slices, strings, finite numbers) so the call can be hashed and compared.",
				activityType, e, err), ErrTypeArgsInvalid, true, 0)
		}
	}
	info := workflow.GetInfo(ctx)
	h := callHeader{Scope: w.keyScope(ctx)}
	if b, ok := ctx.Value(businessKeyCtx{}).(string); ok {
		h.Business, h.HasBusiness = b, true
	}
	h.Key = w.occurrence(ctx, info.Namespace, activityType, h.HasBusiness)
	if p, ok := ctx.Value(replayPolicyCtx{}).(ReplayPolicy); ok {
		h.Replay = &p
	}
	fields := sdkinterceptor.WorkflowHeader(ctx)
	if fields == nil {
		// Not reachable through workflow.ExecuteActivity, which always gives a header.
		return nil
	}
	p, err := h.payload()
	if err != nil {
		return err
	}
	fields[headerKey] = p
	return nil
}

type updateIDCtx struct{}

// ExecuteUpdate marks the handler's context with the update ID, so the calls it
// makes are numbered per update (see occurrence).
func (w *workflowInbound) ExecuteUpdate(ctx workflow.Context, in *sdkinterceptor.UpdateInput) (any, error) {
	if u := workflow.GetCurrentUpdateInfo(ctx); u != nil {
		ctx = workflow.WithValue(ctx, updateIDCtx{}, u.ID)
	}
	return w.Next.ExecuteUpdate(ctx, in)
}

// occurrence returns the occurrence key of this call, or "" for a WithKey call:
// such a call takes no number, so adding, removing or moving one (a signal
// delivered at another point after a reset, a call added in a workflow.GetVersion
// branch) does not shift the keys of the other calls of its activity type.
//
// Calls made inside an update handler are numbered per update ID: the update's
// place among the main code's calls moves when a reset re-applies it, its ID does not.
func (w *workflowInbound) occurrence(ctx workflow.Context, namespace, activityType string, business bool) string {
	if business {
		return ""
	}
	if id, ok := ctx.Value(updateIDCtx{}).(string); ok {
		name := "update\x00" + id + "\x00" + activityType
		w.counts[name]++
		return mint("update-occurrence", namespace, w.scope, id, activityType, strconv.Itoa(w.counts[name]))
	}
	w.counts[activityType]++
	return occurrenceKey(namespace, w.scope, activityType, w.counts[activityType])
}
