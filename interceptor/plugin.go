package interceptor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"github.com/idemgate/idemgate/internal/secrets"
	"github.com/idemgate/idemgate/store"
)

// PluginName is the name the plugin reports to Temporal (worker heartbeats list it).
const PluginName = "idemgate"

// DefaultProbeTimeout bounds the store check at worker start.
const DefaultProbeTimeout = 10 * time.Second

// ProbeActivity is the activity name on the claim and the receipts of the store
// check the plugin makes at every worker start (two receipts per start). The
// operator's CLI leaves them out of its listings unless asked (--probes).
const ProbeActivity = "idemgate.probe"

// PluginOptions configures what only the plugin does; the gate itself is
// configured by Options.
type PluginOptions struct {
	// StoreName names the store in the log and in the error that keeps a worker from
	// starting, e.g. "postgres://app@db.internal/idemgate" or "sqlite idemgate.db". A
	// secret in it (URL user info, ?password=…, password='…' and other secret
	// key=value pairs) is shown as xxxxx, and scrubbed from the store's own error
	// text, by the module's one redaction. Optional: "" names the store by its Go type.
	StoreName string

	// Strict refuses to start a worker while any registered activity is flagged for
	// review (no known verb in its name and no Options.Effects entry). Optional: false
	// logs the flagged names and starts.
	Strict bool

	// ProbeTimeout bounds the store check at worker start. Optional: 0 means 10 seconds.
	ProbeTimeout time.Duration

	// CloseStore makes the plugin close Options.Store (when it has a Close method)
	// once, when the last worker it started has stopped — or failed to start — and
	// the gated activity attempts still running (Worker.Stop waits for them only
	// WorkerStopTimeout) have stored their outcome or passed their leases: Stop
	// returns after that. Set it when the plugin's workers are the store's only
	// users. An attempt that handed off (activity.ErrResultPending) is not waited
	// for: a completer in the same process that may call CompleteAsync after Stop
	// needs a store of its own (or leave CloseStore false). Optional: false leaves
	// the store to the caller.
	CloseStore bool

	// ReconcileEvery is how often, while a worker of the plugin runs, the plugin
	// asks the witnesses about the store's pending keys (store.Operator.Pending, at
	// most 100 a round, oldest first; a key no witness could tell is asked again
	// after a backoff doubling up to an hour, and the round reaches the keys behind
	// it meanwhile): Temporal's history through the worker's
	// client, then Options.Witnesses. A key a witness can tell is settled with a
	// receipt naming it (see package witness), so a workflow waiting on it goes on
	// without a person. The worker's client is the one the SDK hands the first gated
	// write this plugin runs (activity.GetClient): until a write ran, only
	// Options.Witnesses are asked. A store that is only a store.Gate is not
	// reconciled. The reconciler stops with the last worker, before the store closes.
	// Optional: 0 means 30 seconds; negative disables it.
	ReconcileEvery time.Duration

	// Logger receives the census at worker start. Optional: nil means the logger of
	// the client the plugin is installed on through client.Options.Plugins (the
	// workers' own logger), else slog.Default().
	Logger log.Logger
}

// Plugin is the gate as a Temporal plugin: one value that is a worker.Plugin
// (worker.Options.Plugins, worker.WorkflowReplayerOptions.Plugins) and a
// client.Plugin (client.Options.Plugins; a client passes it on to every worker made
// from it). Make it with NewPlugin.
//
// On a worker it adds the gate's worker interceptor (the one New returns for the
// same Options); builds the census from the activities registered on that worker
// and logs it at start; refuses to start (Strict) while a registered activity is
// flagged for review; checks at start, before the worker polls, that the store
// answers a claim, an owner-checked release and a read of the pauses (the probe
// leaves two receipts of activity "idemgate.probe" per start); while a worker
// runs, asks the witnesses about the store's pending keys every
// PluginOptions.ReconcileEvery (Temporal's history first); and, with
// PluginOptions.CloseStore, closes the store once after the last worker stopped.
// On a replayer it adds the worker interceptor (replay never touches the store).
// On a client it adds NewClientInterceptor, which keys standalone activities.
//
// Temporal's test environments (testsuite) do not run plugins: there, register
// the interceptor from New in worker.Options.Interceptors.
type Plugin struct {
	clientPluginBase
	workerPluginBase

	gate *root
	p    PluginOptions

	mu           sync.Mutex
	workers      map[string]*pluginWorker // by worker instance key
	running      int                      // workers started and not yet stopped
	clientLogger log.Logger
	closeOnce    sync.Once
	// reconciling is the background reconciler while a worker runs (nil when not).
	reconciling *reconcilerRun
}

// The SDK requires both bases embedded; aliases give the two fields distinct names.
type (
	clientPluginBase = client.PluginBase
	workerPluginBase = worker.PluginBase
)

// pluginWorker is what the plugin knows of one worker.
type pluginWorker struct {
	taskQueue string
	names     []string // registered activity names, in registration order
	dynamic   bool     // a dynamic activity is registered
	err       error    // set in ConfigureWorker, returned at start
	started   bool
}

var (
	_ client.Plugin = (*Plugin)(nil)
	_ worker.Plugin = (*Plugin)(nil)
)

// NewPlugin returns the plugin. opts are the gate's options, validated as New
// validates them; every bad option is reported at once.
func NewPlugin(opts Options, p PluginOptions) (*Plugin, error) {
	var errs []error
	if p.ProbeTimeout < 0 {
		errs = append(errs, fmt.Errorf("PluginOptions.ProbeTimeout = %v is negative: use 0 for the default (10s)", p.ProbeTimeout))
	}
	o, err := opts.withDefaults()
	if err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		if len(errs) == 1 && err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("idemgate: invalid plugin options: %w", errors.Join(errs...))
	}
	if p.ProbeTimeout == 0 {
		p.ProbeTimeout = DefaultProbeTimeout
	}
	if p.ReconcileEvery == 0 {
		p.ReconcileEvery = DefaultReconcileEvery
	}
	return &Plugin{
		gate:    newRoot(o),
		p:       p,
		workers: map[string]*pluginWorker{},
	}, nil
}

// Name returns PluginName.
func (*Plugin) Name() string { return PluginName }

// WorkerInterceptor returns the gate the plugin adds to workers: for code that
// wires a worker without plugins (the test environments).
func (pl *Plugin) WorkerInterceptor() sdkinterceptor.WorkerInterceptor { return pl.gate }

// ConfigureClient adds NewClientInterceptor to the client unless it has one, and
// remembers the client's logger for the census.
func (pl *Plugin) ConfigureClient(_ context.Context, o client.PluginConfigureClientOptions) error {
	co := o.ClientOptions
	if co.Logger != nil {
		pl.mu.Lock()
		pl.clientLogger = co.Logger
		pl.mu.Unlock()
	}
	for _, i := range co.Interceptors {
		if _, ok := i.(*clientRoot); ok {
			return nil
		}
	}
	co.Interceptors = append(co.Interceptors, NewClientInterceptor())
	return nil
}

// ConfigureWorker adds the gate to the worker's interceptors and watches its
// activity registrations. A worker that already has an idemgate interceptor
// (from New, or another idemgate plugin) gets no second one and refuses to start.
func (pl *Plugin) ConfigureWorker(_ context.Context, o worker.PluginConfigureWorkerOptions) error {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if _, seen := pl.workers[o.WorkerInstanceKey]; seen {
		// The same plugin in client.Options.Plugins and worker.Options.Plugins.
		return nil
	}
	w := &pluginWorker{taskQueue: o.TaskQueue}
	pl.workers[o.WorkerInstanceKey] = w
	if hasGate(o.WorkerOptions.Interceptors) {
		w.err = fmt.Errorf("idemgate: the worker on task queue %q already has an idemgate interceptor "+
			"(interceptor.New in worker.Options.Interceptors, or a second idemgate plugin); the gate must run once per "+
			"attempt, so the worker did not start. Next step: keep either the plugin or the interceptor, not both", o.TaskQueue)
		return nil
	}
	o.WorkerOptions.Interceptors = append(o.WorkerOptions.Interceptors, pl.gate)
	reg := o.WorkerRegistryOptions
	prevActivity, prevDynamic := reg.OnRegisterActivity, reg.OnRegisterDynamicActivity
	reg.OnRegisterActivity = func(a any, ro activity.RegisterOptions) {
		if prevActivity != nil {
			prevActivity(a, ro)
		}
		pl.mu.Lock()
		w.names = append(w.names, registeredActivityNames(a, ro)...)
		pl.mu.Unlock()
	}
	reg.OnRegisterDynamicActivity = func(a any, ro activity.DynamicRegisterOptions) {
		if prevDynamic != nil {
			prevDynamic(a, ro)
		}
		pl.mu.Lock()
		w.dynamic = true
		pl.mu.Unlock()
	}
	return nil
}

// StartWorker logs the census of the registered activities, refuses a flagged one
// when Strict, checks the store, and only then lets the worker poll.
func (pl *Plugin) StartWorker(ctx context.Context, o worker.PluginStartWorkerOptions, next func(context.Context, worker.PluginStartWorkerOptions) error) error {
	pl.mu.Lock()
	w := pl.workers[o.WorkerInstanceKey]
	if w == nil || w.started { // the same plugin twice (client and worker options): check once
		pl.mu.Unlock()
		return next(ctx, o)
	}
	w.started = true
	pl.running++
	names, dynamic, werr := append([]string(nil), w.names...), w.dynamic, w.err
	pl.mu.Unlock()

	err := werr
	if err == nil {
		err = pl.census(w.taskQueue, names, dynamic)
	}
	if err == nil {
		err = pl.probe(ctx, o.WorkerInstanceKey)
	}
	if err == nil {
		err = next(ctx, o)
	}
	if err != nil {
		pl.stopped(o.WorkerInstanceKey)
		return err
	}
	if pl.gate.reads != nil {
		pl.gate.reads.setLogger(pl.logger())
	}
	pl.startReconciler()
	return nil
}

// StopWorker lets the worker stop (polling ends; running activities get
// WorkerStopTimeout to finish), then, when no other worker of this plugin still
// runs, stores the read receipts the gate still queues (see Flush; at most 30
// seconds) and, when PluginOptions.CloseStore asks for it, waits for the gated
// attempts still running to store their outcome (or pass their leases), stores the
// read receipts they queued and closes the store.
func (pl *Plugin) StopWorker(ctx context.Context, o worker.PluginStopWorkerOptions, next func(context.Context, worker.PluginStopWorkerOptions)) {
	next(ctx, o)
	pl.stopped(o.WorkerInstanceKey)
}

// ConfigureWorkflowReplayer adds the gate to the replayer, unless it has one
// already (then it is an error: the gate must not run twice).
func (pl *Plugin) ConfigureWorkflowReplayer(_ context.Context, o worker.PluginConfigureWorkflowReplayerOptions) error {
	if hasGate(o.WorkflowReplayerOptions.Interceptors) {
		return errors.New("idemgate: the workflow replayer already has an idemgate interceptor; the gate must run once. " +
			"Next step: keep either the plugin or the interceptor in WorkflowReplayerOptions, not both")
	}
	o.WorkflowReplayerOptions.Interceptors = append(o.WorkflowReplayerOptions.Interceptors, pl.gate)
	return nil
}

func hasGate(is []sdkinterceptor.WorkerInterceptor) bool {
	for _, i := range is {
		if _, ok := i.(*root); ok {
			return true
		}
	}
	return false
}

func (pl *Plugin) logger() log.Logger {
	if pl.p.Logger != nil {
		return pl.p.Logger
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if pl.clientLogger != nil {
		return pl.clientLogger
	}
	return log.NewStructuredLogger(slog.Default())
}

// census logs what the registered activities do, and refuses a flagged one when
// Strict.
func (pl *Plugin) census(taskQueue string, names []string, dynamic bool) error {
	c := pl.gate.opts.Census(names)
	l := pl.logger()
	kv := []any{"TaskQueue", taskQueue}
	if len(c.Review) > 0 {
		l.Warn("idemgate: "+c.String(), append(kv, "review", c.Review)...)
	} else {
		l.Info("idemgate: "+c.String(), kv...)
	}
	if dynamic {
		l.Info("idemgate: a dynamic activity is registered: each call is classified by its activity type when it runs "+
			"(an unknown verb is destructive); list the types it serves in Options.Effects", kv...)
	}
	if pl.p.Strict && len(c.Review) > 0 {
		return fmt.Errorf("idemgate: strict: the worker on task queue %q did not start: %d registered activities have no "+
			"known verb and are flagged for review: %s. Next step: classify each in Options.Effects "+
			"(e.g. Effects: map[string]interceptor.Effect{%q: interceptor.Destructive}), or rename it with a verb, "+
			"or turn PluginOptions.Strict off", taskQueue, len(c.Review), strings.Join(c.Review, ", "), c.Review[0])
	}
	return nil
}

// probe claims a key of its own, releases it as its owner and reads the pauses:
// the three kinds of store work a gated write needs. Its claim and release leave
// two receipts of activity "idemgate.probe"; the record expires within a minute.
func (pl *Plugin) probe(ctx context.Context, instanceKey string) error {
	ctx, cancel := context.WithTimeout(ctx, pl.p.ProbeTimeout)
	defer cancel()
	st, now := pl.gate.opts.Store, pl.gate.opts.Now()
	key, owner := "idemgate-probe:"+instanceKey, newOwner()
	outcome, _, err := st.Begin(ctx, store.Claim{
		Key: key, Activity: ProbeActivity, Effect: IdempotentWrite.String(), ArgsHash: "probe", Args: []byte("null"),
		Owner: owner, Lease: now.Add(pl.p.ProbeTimeout), Window: time.Minute, Now: now,
	})
	if err == nil && outcome != store.OutcomeClaimed {
		err = fmt.Errorf("a claim of the fresh key %s answered %q, want %q", key, outcome, store.OutcomeClaimed)
	}
	if err != nil {
		return pl.storeDown("claim a key", err)
	}
	err = st.Release(ctx, store.Transition{Key: key, Owner: owner, Now: now, Receipt: store.Receipt{
		Time: now, Key: key, Activity: ProbeActivity, Effect: IdempotentWrite.String(), Decision: store.DecisionReleased,
		ArgsHash: "probe",
	}})
	if err != nil {
		return pl.storeDown("release a claim as its owner", err)
	}
	if _, err := st.Pauses(ctx); err != nil {
		return pl.storeDown("read the pauses", err)
	}
	return nil
}

// storeDown is the error that keeps a worker from starting: it names the store
// (password redacted) and the fix; errors.Is sees the store's error.
func (pl *Plugin) storeDown(what string, err error) error {
	name := secrets.Redact(pl.p.StoreName)
	if name == "" {
		name = fmt.Sprintf("%T", pl.gate.opts.Store)
	}
	cause := secrets.Scrub(err.Error(), pl.p.StoreName)
	return &probeError{err: err, msg: fmt.Sprintf("idemgate: the worker did not start: the store %s could not %s "+
		"within %v: %s. Next step: check that %s is up and this worker can reach and write to it (address, "+
		"credentials, grants, disk), and that its schema is migrated (sqlite.Open and postgres.Open migrate), "+
		"then start the worker again", name, what, pl.p.ProbeTimeout, cause, name)}
}

type probeError struct {
	msg string
	err error
}

func (e *probeError) Error() string { return e.msg }
func (e *probeError) Unwrap() error { return e.err }

// stopped forgets a worker; when none of the plugin's workers runs any more and
// CloseStore is set, it closes the store, once.
func (pl *Plugin) stopped(instanceKey string) {
	pl.mu.Lock()
	w := pl.workers[instanceKey]
	delete(pl.workers, instanceKey)
	if w != nil && w.started {
		pl.running--
	}
	last := pl.running == 0
	rec := pl.reconciling
	if last {
		pl.reconciling = nil
	}
	pl.mu.Unlock()
	if last && rec != nil {
		rec.stop() // before the store may close under it
	}
	if !last {
		return
	}
	if !pl.p.CloseStore {
		// The caller may close the store once Stop returns: store the queued read
		// receipts first. Reads still running past WorkerStopTimeout queue theirs
		// after this, for the flusher.
		pl.flushReads()
		return
	}
	pl.closeOnce.Do(func() {
		c, ok := pl.gate.opts.Store.(io.Closer)
		if !ok {
			return
		}
		// Worker.Stop waits for running activities only WorkerStopTimeout (by default
		// not at all): an attempt still running must store its outcome before the
		// store closes, or the vendor acted and every later attempt is refused.
		pl.gate.inflight.wait(context.Background(), pl.gate.opts.Now, func(n int, until time.Time) {
			pl.logger().Info(fmt.Sprintf("idemgate: the store stays open until the %d gated activity attempts still "+
				"running have stored their outcome (at the latest until their leases pass, %s)", n,
				until.UTC().Format(time.RFC3339)), "inFlight", n)
		})
		// The reads that ran queued their receipts: store them before the store closes.
		pl.flushReads()
		if pl.gate.reads != nil {
			pl.gate.reads.stop()
		}
		// Give-backs still retrying past their leases would use a closed store.
		pl.gate.stopGiveBacks()
		if err := c.Close(); err != nil {
			pl.logger().Warn("idemgate: closing the store failed", "error", err)
		}
	})
}

// readFlushTimeout bounds the plugin's wait for the queued read receipts at stop.
const readFlushTimeout = 30 * time.Second

// flushReads stores the gate's queued read receipts at a worker's stop.
func (pl *Plugin) flushReads() {
	ctx, cancel := context.WithTimeout(context.Background(), readFlushTimeout)
	defer cancel()
	if err := pl.gate.flushReads(ctx); err != nil {
		pl.logger().Warn("idemgate: the queued read receipts were not all stored at the worker's stop", "error", err)
	}
}

// registeredActivityNames returns the activity types a registration adds, named
// as the SDK names them: a struct's exported methods (prefixed with
// RegisterOptions.Name), a function's short name, or the alias in
// RegisterOptions.Name.
func registeredActivityNames(a any, o activity.RegisterOptions) []string {
	t := reflect.TypeOf(a)
	switch {
	case t == nil:
		return nil
	case t.Kind() == reflect.Func:
		if o.Name != "" {
			return []string{o.Name}
		}
		full := runtime.FuncForPC(reflect.ValueOf(a).Pointer()).Name()
		return []string{strings.TrimSuffix(full[strings.LastIndex(full, ".")+1:], "-fm")}
	case t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct:
		var names []string
		for i := range t.NumMethod() {
			m := t.Method(i)
			if !m.IsExported() || o.SkipInvalidStructFunctions && !activityShaped(m.Type) {
				continue
			}
			names = append(names, o.Name+m.Name)
		}
		return names
	default: // an activity value registered by name
		if o.Name != "" {
			return []string{o.Name}
		}
		return nil
	}
}

var errorType = reflect.TypeFor[error]()

// activityShaped reports whether a function returns (result, error) or error, as
// the SDK requires of an activity.
func activityShaped(t reflect.Type) bool {
	n := t.NumOut()
	return n >= 1 && n <= 2 && t.Out(n-1).Implements(errorType)
}
