package idemgatetest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/internal/attempt"
	"github.com/idemgate/idemgate/internal/gatehook"
	"github.com/idemgate/idemgate/internal/testutil/patient"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memory"
)

// Kit is one gate with an in-memory store, shared by the environments it makes.
// Its methods are safe for concurrent use.
type Kit struct {
	// Store is the in-memory store behind the gate. Store.FailWith(err) makes the
	// whole store unreachable until Store.FailWith(nil).
	Store *memory.Store

	tb    testing.TB
	gate  sdkinterceptor.WorkerInterceptor
	suite testsuite.WorkflowTestSuite
	opts  interceptor.Options

	mu        sync.Mutex
	offset    time.Duration
	pending   map[string][]*injection // activity -> its injections not applied yet, in order
	crashed   map[string]*injection   // key -> crash whose store writes are dropped
	decisions []interceptor.Decision
	// types are the activity types of decisions (by index): a generic tool
	// activity's decisions name its tools (Options.ToolNames).
	types []string
	// tools holds the tools of each generic tool activity type that reached the gate.
	tools map[string]map[string]bool
	runs  map[string]int
	calls map[string]int
	envs  int
	// seen holds the activities (attemptKey) that reached the kit's interceptor
	// and whose completion the environment has not reported yet.
	seen map[string]bool
	// reached holds the activity and tool names that reached the kit's interceptors.
	reached map[string]bool
	// named holds the activity names the test gave the kit, with the method.
	named map[string]string
	// envValues are the environments the kit made, for their registered activities.
	envValues []reflect.Value
	// ungated holds the environments in which an activity completed without the gate.
	ungated map[any]bool
	// listeners holds the kit's activity-started listener of each workflow
	// environment (the address of the closure), to tell whether the test replaced it.
	listeners map[*testsuite.TestWorkflowEnvironment]unsafe.Pointer
}

type kind int

const (
	crashAfterVendor kind = iota + 1
	resolvedAsSent
	storeDown
)

func (kd kind) String() string {
	switch kd {
	case crashAfterVendor:
		return "CrashAfterVendor"
	case resolvedAsSent:
		return "ResolvedAsSent"
	default:
		return "StoreDown"
	}
}

type injection struct {
	kind   kind
	result any // resolvedAsSent
}

// Option configures New.
type Option func(*config)

type config struct {
	opts    interceptor.Options
	logger  log.Logger
	metrics client.MetricsHandler
}

// WithOptions gives the gate these options: pass the ones your workers use
// (Effects, VendorWindows, HoldUnknown …). Leave Store nil: the gate runs on the
// kit's own in-memory store (Kit.Store), and New fails when Store is set rather
// than ignore it. Their Now and Observer still apply (Now offset by the kit's
// jumps, Observer called after the kit's). Optional: the zero Options.
func WithOptions(o interceptor.Options) Option { return func(c *config) { c.opts = o } }

// WithLogger sets the environments' logger. Optional: nothing is logged.
func WithLogger(l log.Logger) Option { return func(c *config) { c.logger = l } }

// WithMetricsHandler gives the environments this metrics handler, through which
// the gate counts its decisions (interceptor.MetricDecisions). Optional: the
// testsuite's default.
func WithMetricsHandler(h client.MetricsHandler) Option { return func(c *config) { c.metrics = h } }

// New returns a kit. tb may be nil (in Example functions): an invalid option then
// panics instead of failing the test.
func New(tb testing.TB, opts ...Option) *Kit {
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	k := &Kit{Store: memory.New(), tb: tb, pending: map[string][]*injection{}, crashed: map[string]*injection{},
		runs: map[string]int{}, calls: map[string]int{}, seen: map[string]bool{}, reached: map[string]bool{}, named: map[string]string{}, ungated: map[any]bool{},
		listeners: map[*testsuite.TestWorkflowEnvironment]unsafe.Pointer{}, tools: map[string]map[string]bool{}}
	o := cfg.opts
	if o.Store != nil {
		k.fatal(fmt.Errorf("idemgate/idemgatetest: WithOptions: Options.Store is set (%T), but the kit runs the gate "+
			"on its own in-memory store (Kit.Store) and would ignore yours. Next step: leave Store nil and read what "+
			"happened with Kit.Decisions or Kit.Store; to try `idemgate pending`/`resolve` on a file, run a worker on "+
			"a SQLite store (docs/testing.md)", o.Store))
		return k
	}
	base, user := o.Now, o.Observer
	if base == nil {
		base = time.Now
	}
	o.Store = &kitStore{Store: k.Store, k: k}
	o.Now = func() time.Time {
		k.mu.Lock()
		defer k.mu.Unlock()
		return base().Add(k.offset)
	}
	o.Observer = func(ctx context.Context, d interceptor.Decision) {
		typ := d.Activity
		if activity.IsActivity(ctx) {
			typ = activity.GetInfo(ctx).ActivityType.Name
		}
		k.mu.Lock()
		k.decisions = append(k.decisions, d)
		k.types = append(k.types, typ)
		if typ != d.Activity {
			if k.tools[typ] == nil {
				k.tools[typ] = map[string]bool{}
			}
			k.tools[typ][d.Activity] = true
		}
		k.mu.Unlock()
		if user != nil {
			user(ctx, d)
		}
	}
	if o.PauseRefresh == 0 {
		// Pause and Resume take effect at the next write: the gate re-reads the
		// pauses (from memory) before every write.
		o.PauseRefresh = time.Nanosecond
	}
	gate, err := interceptor.New(o)
	if err != nil {
		k.fatal(fmt.Errorf("idemgate/idemgatetest: %w", err))
	}
	k.gate, k.opts = gate, o
	if cfg.logger == nil {
		cfg.logger = log.NewStructuredLogger(slog.New(slog.DiscardHandler))
	}
	k.suite.SetLogger(cfg.logger)
	if cfg.metrics != nil {
		k.suite.SetMetricsHandler(cfg.metrics)
	}
	if tb != nil {
		tb.Cleanup(k.stop) // after the check (cleanups run last first)
		tb.Cleanup(k.check)
	}
	return k
}

// stop ends the gate's background store work when the test ends: a give-back the
// test's store outage (Store.FailWith) left retrying would go on for the rest of
// the test binary, holding the kit.
func (k *Kit) stop() {
	if !gatehook.StopBackground(k.gate) {
		k.fail(fmt.Errorf("idemgate/idemgatetest: the kit's gate is not one of package interceptor's (internal error)"))
	}
}

// fail reports err from an activity's goroutine, where a test may not stop.
func (k *Kit) fail(err error) {
	if k.tb == nil {
		panic(err)
	}
	k.tb.Error(err)
}

func (k *Kit) fatal(err error) {
	if k.tb == nil {
		panic(err)
	}
	k.tb.Helper()
	k.tb.Fatal(err)
}

// Now is the gate's clock: the real time plus the jumps injected crashes made.
func (k *Kit) Now() time.Time { return k.opts.Now() }

// Interceptors are the worker interceptors the kit installs (the gate and the
// kit's bookkeeping around it): add them to worker.Options.Interceptors (after
// Temporal's tracing interceptor, if any) when a test sets its own worker
// options, or use WorkerOptions, which does.
func (k *Kit) Interceptors() []sdkinterceptor.WorkerInterceptor {
	return []sdkinterceptor.WorkerInterceptor{&entry{k: k}}
}

// DeadlockDetectionTimeout is the workflow deadlock detection timeout the kit's
// worker options give a test that sets none. The SDK's default (1 s of wall
// clock) fails a workflow task that a busy machine merely did not run for a
// second (TMPRL1101); a workflow that really blocks still fails, later.
const DeadlockDetectionTimeout = patient.DeadlockDetectionTimeout

// TestTimeout is the idle timeout (wall clock) of the kit's environments, instead
// of the testsuite's 3 s, for the same reason.
const TestTimeout = patient.TestTimeout

// WorkerOptions returns o with the kit's interceptors after o's own, and
// DeadlockDetectionTimeout when o sets none: a test that sets its own worker
// options on a workflow environment of the kit calls
// env.SetWorkerOptions(k.WorkerOptions(o)). env.SetWorkerOptions(o) alone replaces
// the kit's interceptors, and the kit fails the test at the first activity that
// completes without the gate.
//
// It also makes the SDK compute its binary checksum (an MD5 of the whole test
// executable, which the SDK otherwise reads inside the first workflow task that
// schedules an activity, where it counts against the deadlock detection timeout).
func (k *Kit) WorkerOptions(o worker.Options) worker.Options {
	patient.Warm()
	o.Interceptors = append(slices.Clone(o.Interceptors), k.Interceptors()...)
	if o.DeadlockDetectionTimeout == 0 {
		o.DeadlockDetectionTimeout = DeadlockDetectionTimeout
	}
	return o
}

// ActivityWorkerOptions is WorkerOptions for an activity environment of the kit: o
// with the kit's per-call key and its interceptors after o's own. A test that sets
// its own worker options on an activity environment (BackgroundActivityContext, say)
// calls env.SetWorkerOptions(k.ActivityWorkerOptions(o)); WorkerOptions there
// would drop the key every call of an activity environment needs (there is no
// workflow to mint it), and every write would be refused as IdempotencyKeyMissing.
func (k *Kit) ActivityWorkerOptions(o worker.Options) worker.Options {
	o = k.WorkerOptions(o)
	n := len(o.Interceptors) - len(k.Interceptors())
	o.Interceptors = slices.Insert(o.Interceptors, n, sdkinterceptor.WorkerInterceptor(&keyer{env: k.nextEnv()}))
	return o
}

// NewWorkflowEnvironment returns a workflow test environment whose worker runs
// the gate. Register the workflow and activities on it as usual; activities
// mocked with OnActivity(...).Return go through the gate too (see the package
// doc). A test that sets its own worker options passes them through
// k.WorkerOptions; the kit takes the environment's activity started and
// completed listeners for its checks.
//
// Each environment starts its workflow with a workflow ID of its own
// ("idemgatetest-N"): every testsuite environment uses the same IDs by default, so
// two of them sharing the kit's store would share minted keys, and the second
// would get the first's stored results. A test that sets its own start options
// (env.SetStartWorkflowOptions) chooses the ID itself.
func (k *Kit) NewWorkflowEnvironment() *testsuite.TestWorkflowEnvironment {
	env := k.suite.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(k.WorkerOptions(worker.Options{}))
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "idemgatetest-" + strconv.Itoa(k.nextEnv()), TaskQueue: "idemgatetest"})
	env.SetTestTimeout(TestTimeout)
	k.watch(env)
	k.mu.Lock()
	k.envValues = append(k.envValues, reflect.ValueOf(env))
	k.mu.Unlock()
	return env
}

func (k *Kit) nextEnv() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.envs++
	return k.envs
}

// NewActivityEnvironment returns an activity test environment whose worker runs
// the gate, with a key for every call: the one in the header the test set
// (env.SetHeader(KeyHeader(...))), else one of the call's own, so each
// ExecuteActivity and ExecuteLocalActivity is a write of its own, also when the
// test set a header of its own (for a context propagator).
func (k *Kit) NewActivityEnvironment() *testsuite.TestActivityEnvironment {
	n := k.nextEnv()
	env := k.suite.NewTestActivityEnvironment()
	env.SetWorkerOptions(worker.Options{Interceptors: append(
		[]sdkinterceptor.WorkerInterceptor{&keyer{env: n}}, k.Interceptors()...)})
	env.SetTestTimeout(TestTimeout)
	k.mu.Lock()
	k.envValues = append(k.envValues, reflect.ValueOf(env))
	k.mu.Unlock()
	return env
}

// KeyHeader is the header an activity scheduled under interceptor.WithKey(ctx,
// key) carries: give it to TestActivityEnvironment.SetHeader so every call in
// that environment is the same write.
func KeyHeader(key string) *commonpb.Header {
	h := &commonpb.Header{Fields: map[string]*commonpb.Payload{}}
	if _, err := interceptor.SetTestKey(h.Fields, key); err != nil {
		panic(err) // not reached: the map is not nil and the header encodes
	}
	return h
}

// CrashAfterVendor makes the next call of activity reach the body, whose vendor
// calls are made, and then die with the worker before anything is recorded.
// activity is an activity type, or the tool of a generic tool-calling activity
// as the gate names it (Options.ToolNames: "crm.delete_contact"); an injection
// that never applies fails the test when it ends.
// Temporal retries after the attempt's lease; the kit's clock jumps past it.
func (k *Kit) CrashAfterVendor(activity string) {
	k.inject(activity, &injection{kind: crashAfterVendor})
}

// ResolvedAsSent is CrashAfterVendor followed by a person resolving the key as
// sent with result (`idemgate resolve KEY --sent`): the retry returns result
// without running the body.
func (k *Kit) ResolvedAsSent(activity string, result any) {
	k.inject(activity, &injection{kind: resolvedAsSent, result: result})
}

// StoreDown makes the claim of the next call of activity fail as if the store
// could not be reached: the write fails closed, retryably, and does not run.
func (k *Kit) StoreDown(activity string) { k.inject(activity, &injection{kind: storeDown}) }

func (k *Kit) inject(activity string, in *injection) {
	k.mu.Lock()
	k.pending[activity] = append(k.pending[activity], in)
	k.mu.Unlock()
}

// name records that the test named activity in method, for the check at the end.
func (k *Kit) name(method, activity string) {
	if activity == "" {
		return
	}
	k.mu.Lock()
	if _, ok := k.named[activity]; !ok {
		k.named[activity] = method
	}
	k.mu.Unlock()
}

// take removes and returns the first pending injection of activity if it is one
// of kinds: injections of one activity apply to its calls in the order made.
func (k *Kit) take(activity string, kinds ...kind) *injection {
	k.mu.Lock()
	defer k.mu.Unlock()
	q := k.pending[activity]
	if len(q) == 0 {
		return nil
	}
	for _, kd := range kinds {
		if q[0].kind == kd {
			if len(q) == 1 {
				delete(k.pending, activity)
			} else {
				k.pending[activity] = q[1:]
			}
			return q[0]
		}
	}
	return nil
}

// Pause pauses the writes of activity, as `idemgate pause --activity` does, until Resume.
func (k *Kit) Pause(activity, reason string) {
	k.name("Pause", activity)
	p := store.Pause{Activity: activity, Actor: "idemgatetest", Reason: reason, Time: k.Now()}
	if err := k.Store.Pause(context.Background(), p); err != nil {
		k.fatal(fmt.Errorf("idemgate/idemgatetest: pause %s: %w", activity, err))
	}
}

// Resume lifts the pause of activity.
func (k *Kit) Resume(activity string) {
	k.name("Resume", activity)
	p := store.Pause{Activity: activity, Actor: "idemgatetest", Reason: "resumed by the test", Time: k.Now()}
	if err := k.Store.Resume(context.Background(), p); err != nil {
		k.fatal(fmt.Errorf("idemgate/idemgatetest: resume %s: %w", activity, err))
	}
}

// Decisions lists the gate's decisions for activity ("" for every activity), in
// order. activity is an activity type or, for a generic tool activity
// (Options.ToolNames), one tool as the gate names it ("crm.delete_contact"); the
// activity type lists the decisions of all its tools.
func (k *Kit) Decisions(activity string) []interceptor.Decision {
	k.name("Decisions", activity)
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []interceptor.Decision
	for i, d := range k.decisions {
		if activity == "" || d.Activity == activity || k.types[i] == activity {
			out = append(out, d)
		}
	}
	return out
}

// Receipts lists the receipts stored for activity ("" for every activity), oldest
// first; a generic tool activity's type lists those of all its tools.
func (k *Kit) Receipts(activity string) []store.Receipt {
	k.name("Receipts", activity)
	names := []string{activity}
	k.mu.Lock()
	for tool := range k.tools[activity] {
		names = append(names, tool)
	}
	k.mu.Unlock()
	var rs []store.Receipt
	for _, name := range names {
		got, err := k.Store.Receipts(context.Background(), store.ReceiptFilter{Activity: name})
		if err != nil {
			k.fatal(fmt.Errorf("idemgate/idemgatetest: receipts of %s: %w", name, err))
		}
		rs = append(rs, got...)
	}
	if len(names) > 1 {
		slices.SortStableFunc(rs, func(a, b store.Receipt) int { return a.Time.Compare(b.Time) })
	}
	return rs
}

// BodyRuns is how often the body of activity ran.
func (k *Kit) BodyRuns(activity string) int {
	k.name("BodyRuns", activity)
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.runs[activity]
}

// VendorCalls is how many outgoing calls of activity's bodies through idemhttp
// may have reached a vendor: all but those certainly not sent.
func (k *Kit) VendorCalls(activity string) int {
	k.name("VendorCalls", activity)
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.calls[activity]
}

// ErrWorkerDied is what the attempt a crash was injected into ends with; the
// gate records nothing of it, as after a real crash.
var ErrWorkerDied = errors.New("idemgate/idemgatetest: the worker died after the activity's vendor calls (injected)")

type bodyInbound struct {
	sdkinterceptor.ActivityInboundInterceptorBase
	k *Kit
}

func (a *bodyInbound) ExecuteActivity(ctx context.Context, in *sdkinterceptor.ExecuteActivityInput) (any, error) {
	name := activity.GetInfo(ctx).ActivityType.Name
	st, gated := attempt.FromContext(ctx)
	tool := name // a generic tool activity's tool (Options.ToolNames), as the gate names it
	if gated && st.Activity != "" {
		tool = st.Activity
	}
	inj := a.k.take(tool, crashAfterVendor, resolvedAsSent)
	if inj == nil && tool != name {
		inj = a.k.take(name, crashAfterVendor, resolvedAsSent)
	}
	res, err := a.Next.ExecuteActivity(ctx, in)
	sent := 0
	if gated {
		for _, o := range st.Observations() {
			if o.Outcome != attempt.NotSent {
				sent++
			}
		}
	}
	a.k.mu.Lock()
	a.k.runs[name]++
	a.k.calls[name] += sent
	if tool != name {
		a.k.runs[tool]++
		a.k.calls[tool] += sent
		a.k.reached[tool] = true
	}
	if inj != nil && gated && st.Key != "" {
		a.k.crashed[st.Key] = inj
	}
	a.k.mu.Unlock()
	if inj != nil {
		return nil, ErrWorkerDied
	}
	return res, err
}

// entry is the kit's interceptor: the gate, with the kit's bookkeeping before it
// (what reaches entry reaches the gate) and after it (what reaches bodyInbound is
// a body run).
type entry struct {
	sdkinterceptor.WorkerInterceptorBase
	k *Kit
}

func (e *entry) InterceptActivity(ctx context.Context, next sdkinterceptor.ActivityInboundInterceptor) sdkinterceptor.ActivityInboundInterceptor {
	body := &bodyInbound{k: e.k}
	body.Next = next
	a := &entryInbound{k: e.k, direct: next}
	a.Next = e.k.gate.InterceptActivity(ctx, body)
	return a
}

func (e *entry) InterceptWorkflow(ctx workflow.Context, next sdkinterceptor.WorkflowInboundInterceptor) sdkinterceptor.WorkflowInboundInterceptor {
	return e.k.gate.InterceptWorkflow(ctx, next)
}

func (e *entry) InterceptNexusOperation(ctx context.Context, next sdkinterceptor.NexusOperationInboundInterceptor) sdkinterceptor.NexusOperationInboundInterceptor {
	return e.k.gate.InterceptNexusOperation(ctx, next)
}

type entryInbound struct {
	sdkinterceptor.ActivityInboundInterceptorBase
	k      *Kit
	direct sdkinterceptor.ActivityInboundInterceptor
}

// throughGate marks a context that went through the kit's interceptors.
type throughGate struct{}

func (a *entryInbound) ExecuteActivity(ctx context.Context, in *sdkinterceptor.ExecuteActivityInput) (any, error) {
	if ctx.Value(throughGate{}) != nil {
		// The testsuite runs a local activity's mocked function through the
		// interceptors a second time, inside the first run: the gate has decided.
		return a.direct.ExecuteActivity(ctx, in)
	}
	info := activity.GetInfo(ctx)
	a.k.mu.Lock()
	a.k.seen[attemptKey(info.IsLocalActivity, &info)] = true
	a.k.reached[info.ActivityType.Name] = true
	a.k.mu.Unlock()
	return a.Next.ExecuteActivity(context.WithValue(ctx, throughGate{}, true), in)
}

// keyer sits before the gate in an activity environment and gives each call a key
// of its own: a counter per environment, not the activity ID, which the testsuite
// gives every local activity alike ("test-local-activity").
type keyer struct {
	sdkinterceptor.WorkerInterceptorBase
	env   int
	calls atomic.Int64
}

func (k *keyer) InterceptActivity(ctx context.Context, next sdkinterceptor.ActivityInboundInterceptor) sdkinterceptor.ActivityInboundInterceptor {
	a := &keyerInbound{k: k}
	a.Next = next
	return a
}

type keyerInbound struct {
	sdkinterceptor.ActivityInboundInterceptorBase
	k *keyer
}

// ExecuteActivity writes the call's key into the header unless the test set one
// (KeyHeader), and takes it out again when the call returns: the testsuite hands
// every call the very header the test gave SetHeader (for a context propagator,
// say), so a key left in it would make every later call the first one again.
func (a *keyerInbound) ExecuteActivity(ctx context.Context, in *sdkinterceptor.ExecuteActivityInput) (any, error) {
	key := "idemgatetest/env-" + strconv.Itoa(a.k.env) + "/call-" + strconv.FormatInt(a.k.calls.Add(1), 10)
	fields := sdkinterceptor.Header(ctx)
	before := make(map[string]bool, len(fields))
	for name := range fields {
		before[name] = true
	}
	added, err := interceptor.SetTestKey(fields, key)
	if err != nil {
		return nil, err
	}
	if added {
		defer func() {
			for name := range fields {
				if !before[name] {
					delete(fields, name)
				}
			}
		}()
	}
	return a.Next.ExecuteActivity(ctx, in)
}
