package interceptor

import (
	"strconv"
	"sync"
	"sync/atomic"

	commonpb "go.temporal.io/api/common/v1"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"

	"github.com/idemgate/idemgate/store"
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
	r := &root{opts: o, pauses: pauseCache{first: make(chan struct{})}, known: knownNames(o)}
	if !o.SkipReadReceipts && store.DurabilityOf(o.Store) == store.DurabilityClaim {
		r.reads = newReadQueue(o.Store, o.ReadReceiptQueue)
	}
	return r
}

// knownNames is every activity or tool name the options name (Effects, Hints,
// IdentifyingFields, VendorWindows): the names a decision metric may be tagged with
// when the name comes from a call's arguments (Options.ToolNames).
func knownNames(o Options) map[string]bool {
	known := map[string]bool{}
	for n := range o.Effects {
		known[n] = true
	}
	for n := range o.Hints {
		known[n] = true
	}
	for n := range o.IdentifyingFields {
		known[n] = true
	}
	for n := range o.VendorWindows {
		known[n] = true
	}
	return known
}

type root struct {
	sdkinterceptor.WorkerInterceptorBase
	opts     Options
	classes  sync.Map // activity name -> Classification; about maxCachedClasses at most (concurrent first calls may add a few more)
	nclasses atomic.Int64
	// known is knownNames(opts); read-only.
	known     map[string]bool
	pauses    pauseCache
	giveBacks giveBacks
	// inflight is the work that still needs the store (see inflight).
	inflight inflight
	// history is the worker client the plugin's reconciler reads Temporal's history
	// with (captured from the first gated write).
	history historyHolder
	// reads queues read receipts for their batch (readq.go); nil when reads append
	// on their path (a strict store, or one that does not say) or append nothing.
	reads *readQueue
}

// stopGiveBacks ends the gate's background give-backs (see giveBack): for a stop that
// is about to close the store under them. Without it they go on while the process lives.
func (r *root) stopGiveBacks() { r.giveBacks.end() }

func (r *root) classify(name string) Classification {
	if c, ok := r.classes.Load(name); ok {
		return c.(Classification)
	}
	c := r.opts.Classify(name)
	// Bounded: with Options.ToolNames the name comes from arguments a model writes,
	// and a model that invents names must not grow the worker's memory. Past the
	// bound a name is classified on every call.
	if r.nclasses.Load() < maxCachedClasses {
		if _, loaded := r.classes.LoadOrStore(name, c); !loaded {
			r.nclasses.Add(1)
		}
	}
	return c
}

// maxCachedClasses bounds the classifications a gate keeps: far more than the
// activity types and tools of any worker.
const maxCachedClasses = 4096

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
