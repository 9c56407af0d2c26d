package idemgatetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"
	"unsafe"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
)

// sdkActivities are the Temporal Go SDK's own activities (sessions), which the gate
// never gates (interceptor/sdkinternal.go): their completions need no gate.
var sdkActivities = map[string]bool{
	"internalSessionCreationActivity":   true,
	"internalSessionCompletionActivity": true,
}

// attemptKey names one scheduled activity of one run: the testsuite retries an
// activity inside one scheduling, and reports its completion once.
func attemptKey(local bool, info *activity.Info) string {
	kind := "activity"
	if local {
		kind = "local"
	}
	return kind + "\x00" + info.WorkflowExecution.ID + "\x00" + info.WorkflowExecution.RunID + "\x00" + info.ActivityID
}

// watch makes env report to the kit: before an activity starts, the activities the
// test mocked with plain values are turned into functions, which the testsuite
// runs through the worker's interceptors (a plain value skips them); when one
// completes, the kit checks that it went through the gate.
func (k *Kit) watch(env *testsuite.TestWorkflowEnvironment) {
	started := k.startedListener(env)
	k.mu.Lock()
	k.listeners[env] = *(*unsafe.Pointer)(unsafe.Pointer(&started))
	k.mu.Unlock()
	env.SetOnActivityStartedListener(started)
	env.SetOnLocalActivityStartedListener(func(*activity.Info, context.Context, []any) { k.gateMocks(env) })
	env.SetOnActivityCompletedListener(func(info *activity.Info, _ converter.EncodedValue, err error) {
		k.completed(env, false, info, err)
	})
	env.SetOnLocalActivityCompletedListener(func(info *activity.Info, _ converter.EncodedValue, err error) {
		k.completed(env, true, info, err)
	})
}

// startedListener is the kit's activity-started listener of env: it routes the
// mocks of env through the gate.
func (k *Kit) startedListener(env *testsuite.TestWorkflowEnvironment) func(*activity.Info, context.Context, converter.EncodedValues) {
	return func(*activity.Info, context.Context, converter.EncodedValues) { k.gateMocks(env) }
}

// completed fails the test when the activity completed without reaching the kit's
// first interceptor: the gate never saw it.
func (k *Kit) completed(env *testsuite.TestWorkflowEnvironment, local bool, info *activity.Info, err error) {
	name := info.ActivityType.Name
	if sdkActivities[name] {
		return
	}
	if errors.Is(err, activity.ErrResultPending) {
		// Completed asynchronously later (env.CompleteActivity): that completion is
		// reported again, and checked then.
		return
	}
	id := attemptKey(local, info)
	k.mu.Lock()
	seen := k.seen[id]
	delete(k.seen, id)
	k.mu.Unlock()
	if seen || (err != nil && k.mockPanics(env, name)) {
		return // a mock set to panic (Panic, Never) fails the call before any body or value
	}
	var why string
	if k.mocked(env, name) {
		why = fmt.Sprintf("the test mocked it with OnActivity(...).Return(value), and the kit could not route that mock through the gate (%v). "+
			"Next step: return a function with the activity's signature from the mock (Return(func(ctx context.Context, ...) (..., error) {...})): the testsuite runs a mocked function through the gate", k.mockErr(env))
	} else {
		why = "the environment's worker no longer runs the kit's interceptors: a test that calls env.SetWorkerOptions after Kit.NewWorkflowEnvironment replaces them. " +
			"Next step: env.SetWorkerOptions(k.WorkerOptions(worker.Options{...})), which keeps them"
	}
	k.mu.Lock()
	k.ungated[env] = true
	k.mu.Unlock()
	k.fail(fmt.Errorf("idemgate/idemgatetest: activity %s (ID %s, workflow %s) completed without passing the gate, so the gate decided nothing for it; %s",
		name, info.ActivityID, info.WorkflowExecution.ID, why))
}

// mocked reports whether the test set a mock for activity name in env.
func (k *Kit) mocked(env *testsuite.TestWorkflowEnvironment, name string) bool {
	return hasMock(env, name, func(*mock.Call) bool { return true })
}

// mockPanics reports whether a mock of activity name in env is set to panic.
func (k *Kit) mockPanics(env *testsuite.TestWorkflowEnvironment, name string) bool {
	return hasMock(env, name, func(c *mock.Call) bool { return c.PanicMsg != nil })
}

// hasMock reports whether env has a mock of activity name for which match holds.
func hasMock(env *testsuite.TestWorkflowEnvironment, name string, match func(*mock.Call) bool) bool {
	m, err := activityMock(env)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(expectedCalls(m), func(c *mock.Call) bool { return c.Method == name && match(c) })
}

func (k *Kit) mockErr(env *testsuite.TestWorkflowEnvironment) error {
	if _, err := activityMock(env); err != nil {
		return err
	}
	if _, err := registry(reflect.ValueOf(env)); err != nil {
		return err
	}
	return fmt.Errorf("the test set its own activity-started listener, which replaced the kit's")
}

// gateMocks turns every activity mock of env that returns plain values into one
// that returns a function with the activity's signature giving those values. The
// testsuite returns a plain value without running the worker's interceptors, but
// runs a function through them: so a mocked activity gets a key, a class, stored
// results and the kit's injections, as a real one does.
func (k *Kit) gateMocks(env *testsuite.TestWorkflowEnvironment) {
	m, err := activityMock(env)
	if err != nil {
		return // completed reports the activity that skipped the gate
	}
	reg, err := registry(reflect.ValueOf(env))
	if err != nil {
		return
	}
	for _, c := range expectedCalls(m) {
		ret := c.ReturnArguments
		if len(ret) == 0 || (ret[0] != nil && reflect.TypeOf(ret[0]).Kind() == reflect.Func) {
			continue
		}
		fn, ok := registeredFunc(reg, c.Method)
		if !ok {
			continue
		}
		if f, ok := returning(reflect.TypeOf(fn), ret); ok {
			c.Return(f) // under the mock's lock
		}
	}
}

// returning returns a function of type ft that returns values, or false when the
// values do not fit ft's results (the testsuite then panics with its own message).
func returning(ft reflect.Type, values mock.Arguments) (any, bool) {
	if ft.Kind() != reflect.Func || ft.NumOut() != len(values) {
		return nil, false
	}
	out := make([]reflect.Value, len(values))
	for i, v := range values {
		t := ft.Out(i)
		switch {
		case v == nil:
			switch t.Kind() {
			case reflect.Interface, reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan:
				out[i] = reflect.Zero(t)
			default:
				return nil, false
			}
		case reflect.TypeOf(v).AssignableTo(t):
			out[i] = reflect.New(t).Elem()
			out[i].Set(reflect.ValueOf(v))
		default:
			return nil, false
		}
	}
	return reflect.MakeFunc(ft, func([]reflect.Value) []reflect.Value { return out }).Interface(), true
}

// The testsuite keeps the mocks and the registry in unexported fields; the kit
// reaches them by name, and reports an activity that skipped the gate when a
// release of the SDK moved them.

func activityMock(env *testsuite.TestWorkflowEnvironment) (*mock.Mock, error) {
	f := reflect.ValueOf(env).Elem().FieldByName("activityMock")
	if !f.IsValid() || f.Type() != reflect.TypeOf(mock.Mock{}) {
		return nil, fmt.Errorf("this release of the Temporal Go SDK keeps its activity mocks where the kit does not look")
	}
	return (*mock.Mock)(unsafe.Pointer(f.UnsafeAddr())), nil
}

// expectedCalls returns the mock's expectations. The slice is read without the
// mock's lock: the test adds expectations (OnActivity) on its own goroutine, never
// while an activity of the same environment starts.
func expectedCalls(m *mock.Mock) []*mock.Call { return slices.Clone(m.ExpectedCalls) }

// registry returns the testsuite's registry of env (a *TestWorkflowEnvironment or
// a *TestActivityEnvironment).
func registry(env reflect.Value) (reflect.Value, error) {
	bad := fmt.Errorf("this release of the Temporal Go SDK keeps its registry where the kit does not look")
	impl := env.Elem().FieldByName("impl")
	if !impl.IsValid() || impl.Kind() != reflect.Pointer || impl.IsNil() {
		return reflect.Value{}, bad
	}
	reg := impl.Elem().FieldByName("registry")
	if !reg.IsValid() || reg.Kind() != reflect.Pointer || reg.IsNil() {
		return reflect.Value{}, bad
	}
	reg = reflect.NewAt(reg.Type(), unsafe.Pointer(reg.UnsafeAddr())).Elem()
	if !reg.MethodByName("GetActivity").IsValid() {
		return reflect.Value{}, bad
	}
	return reg, nil
}

// registeredFunc returns the function registered as activity name.
func registeredFunc(reg reflect.Value, name string) (any, bool) {
	m := reg.MethodByName("GetActivity")
	if m.Type().NumIn() != 1 || m.Type().NumOut() != 2 {
		return nil, false
	}
	out := m.Call([]reflect.Value{reflect.ValueOf(name)})
	if !out[1].Bool() || out[0].IsNil() {
		return nil, false
	}
	a, ok := out[0].Interface().(interface{ GetFunction() any })
	if !ok {
		return nil, false
	}
	fn := a.GetFunction()
	return fn, fn != nil
}

// registeredNames lists the activities registered in env, or nil when the registry
// cannot be read.
func registeredNames(env reflect.Value) []string {
	reg, err := registry(env)
	if err != nil {
		return nil
	}
	r := reg.Elem()
	f := r.FieldByName("activityFuncMap")
	if !f.IsValid() || f.Kind() != reflect.Map || f.Type().Key().Kind() != reflect.String {
		return nil
	}
	f = reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
	if lock := reg.MethodByName("Lock"); lock.IsValid() {
		lock.Call(nil)
		defer reg.MethodByName("Unlock").Call(nil)
	}
	var names []string
	for _, key := range f.MapKeys() {
		if !sdkActivities[key.String()] {
			names = append(names, key.String())
		}
	}
	return names
}

// check runs when the test ends: every injection the test made must have applied,
// and every activity name the test gave the kit must be one the environments know.
func (k *Kit) check() {
	k.mu.Lock()
	pending := make(map[string][]*injection, len(k.pending))
	for name, q := range k.pending {
		pending[name] = slices.Clone(q)
	}
	named := maps.Clone(k.named)
	envs := slices.Clone(k.envValues)
	known := maps.Clone(k.reached)
	k.mu.Unlock()

	for _, d := range k.Decisions("") {
		known[d.Activity] = true
	}
	for _, env := range envs {
		for _, name := range registeredNames(env) {
			known[name] = true
		}
	}
	list := func() string {
		var names []string
		for name := range known {
			names = append(names, name)
		}
		sort.Strings(names)
		if len(names) == 0 {
			return "none"
		}
		return strings.Join(names, ", ")
	}
	for i, env := range envs {
		k.mu.Lock()
		reported := k.ungated[env.Interface()]
		k.mu.Unlock()
		if reported {
			continue
		}
		if runs, ok := k.runsKit(env); ok && !runs {
			k.fail(fmt.Errorf("idemgate/idemgatetest: %s (the kit's environment no. %d) no longer runs the kit's interceptors: "+
				"the test called its SetWorkerOptions after the kit made it, which replaced them, and nothing it ran went through the gate. "+
				"Next step: env.SetWorkerOptions(k.WorkerOptions(worker.Options{...})) in a workflow environment; "+
				"in an activity environment, set no worker options of your own", env.Type().Elem().Name(), i+1))
			continue
		}
		if wenv, ok := env.Interface().(*testsuite.TestWorkflowEnvironment); ok && !k.ownsStartedListener(wenv) {
			// With the kit's listener in place, every regular activity's mock was made a
			// function before it was called; a mock left with values was only called as a
			// local activity, which the testsuite runs inside the interceptors.
			for _, name := range plainMocksCalled(wenv) {
				k.fail(fmt.Errorf("idemgate/idemgatetest: activity %s was mocked with OnActivity(...).Return(value) and called without "+
					"passing the gate: the test replaced the kit's activity-started listener (SetOnActivityStartedListener), "+
					"through which the kit routes such mocks through the gate. Next step: return a function with the activity's "+
					"signature from the mock, or leave the listener to the kit", name))
			}
		}
	}

	var names []string
	for name := range pending {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		var calls []string
		for _, in := range pending[name] {
			calls = append(calls, fmt.Sprintf("%s(%q)", in.kind, name))
		}
		call := strings.Join(calls, " and ")
		if !known[name] {
			k.fail(fmt.Errorf("idemgate/idemgatetest: %s did nothing: no activity or tool named %q is registered or reached the gate "+
				"(registered and called: %s). Next step: name one of these; a generic tool activity's tool by the name the gate records "+
				"(Options.ToolNames: the prefix and the fields' values, as in Decisions)", call, name, list()))
			continue
		}
		k.fail(fmt.Errorf("idemgate/idemgatetest: %s did nothing: no call of %s reached the gate after it. Next step: inject before the call "+
			"runs, or drop the injection", call, name))
	}
	names = names[:0]
	for name := range named {
		if !known[name] && len(pending[name]) == 0 {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		k.fail(fmt.Errorf("idemgate/idemgatetest: %s(%q) named an activity that is neither registered nor reached the gate "+
			"(registered and called: %s); what it read or set says nothing. Next step: name one of these", named[name], name, list()))
	}
}

// runsKit reports whether env's worker runs the kit's interceptors (ok false when
// the testsuite's registry cannot be read).
func (k *Kit) runsKit(env reflect.Value) (runs, ok bool) {
	reg, err := registry(env)
	if err != nil {
		return false, false
	}
	f := reg.Elem().FieldByName("interceptors")
	if !f.IsValid() || f.Kind() != reflect.Slice {
		return false, false
	}
	f = reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
	for i := range f.Len() {
		if e, isEntry := f.Index(i).Interface().(*entry); isEntry && e.k == k {
			return true, true
		}
	}
	return false, true
}

// ownsStartedListener reports whether env's activity-started listener is still the
// kit's (false also when the testsuite's listener cannot be read).
func (k *Kit) ownsStartedListener(env *testsuite.TestWorkflowEnvironment) bool {
	impl := reflect.ValueOf(env).Elem().FieldByName("impl")
	if !impl.IsValid() || impl.Kind() != reflect.Pointer || impl.IsNil() {
		return false
	}
	shared := impl.Elem().FieldByName("testWorkflowEnvironmentShared")
	if !shared.IsValid() || shared.Kind() != reflect.Pointer || shared.IsNil() {
		return false
	}
	f := shared.Elem().FieldByName("onActivityStartedListener")
	if !f.IsValid() || f.Kind() != reflect.Func || f.IsNil() {
		return false
	}
	k.mu.Lock()
	mine := k.listeners[env]
	k.mu.Unlock()
	// The same closure (its object's address), not only the same code.
	return mine != nil && *(*unsafe.Pointer)(unsafe.Pointer(f.UnsafeAddr())) == mine
}

// plainMocksCalled lists the activities of env mocked with plain values that were
// called: they skipped the gate.
func plainMocksCalled(env *testsuite.TestWorkflowEnvironment) []string {
	m, err := activityMock(env)
	if err != nil {
		return nil
	}
	plain := map[string]bool{}
	for _, c := range expectedCalls(m) {
		if r := c.ReturnArguments; len(r) > 0 && (r[0] == nil || reflect.TypeOf(r[0]).Kind() != reflect.Func) {
			plain[c.Method] = true
		}
	}
	var names []string
	for _, c := range slices.Clone(m.Calls) {
		if plain[c.Method] && !slices.Contains(names, c.Method) && !sdkActivities[c.Method] {
			names = append(names, c.Method)
		}
	}
	return names
}
