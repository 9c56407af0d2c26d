package interceptor_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/store/memory"
)

func TestNewValidates(t *testing.T) {
	cases := []struct {
		name string
		opts interceptor.Options
		want []string
	}{
		{"no store", interceptor.Options{}, []string{"Options.Store is nil", "sqlite.Open"}},
		{"bad effect", interceptor.Options{Store: memory.New(), Effects: map[string]interceptor.Effect{"Foo": 0}},
			[]string{`Options.Effects["Foo"]`}},
		{"empty identifying fields", interceptor.Options{Store: memory.New(), IdentifyingFields: map[string][]string{"UpsertContact": {}}},
			[]string{`IdentifyingFields["UpsertContact"]`}},
		{"negative window", interceptor.Options{Store: memory.New(), Window: -time.Hour}, []string{"Options.Window"}},
		{"negative size", interceptor.Options{Store: memory.New(), MaxResultSize: -1}, []string{"Options.MaxResultSize"}},
		{"zero vendor window", interceptor.Options{Store: memory.New(), VendorWindows: map[string]time.Duration{"ChargeCard": 0}},
			[]string{`VendorWindows["ChargeCard"]`}},
		{"negative hold", interceptor.Options{Store: memory.New(), HoldUnknown: -time.Second}, []string{"Options.HoldUnknown"}},
		{"negative pause refresh", interceptor.Options{Store: memory.New(), PauseRefresh: -time.Second}, []string{"Options.PauseRefresh"}},
		{"negative read receipt queue", interceptor.Options{Store: memory.New(), ReadReceiptQueue: -1}, []string{"Options.ReadReceiptQueue"}},
		{"two at once", interceptor.Options{Window: -1}, []string{"Options.Store", "Options.Window"}},
	}
	for _, c := range cases {
		gate, err := interceptor.New(c.opts)
		if err == nil || gate != nil {
			t.Fatalf("%s: New = %v, %v; want an error", c.name, gate, err)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not mention %q", c.name, err, w)
			}
		}
	}
	if _, err := interceptor.New(interceptor.Options{Store: memory.New()}); err != nil {
		t.Fatalf("New with a store: %v", err)
	}
}

// An activity that arrives without the workflow-side interceptor has no key: a write
// fails closed and nothing runs; a read runs.
func TestKeyMissing(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	v := newVendor()
	for _, name := range []string{"ChargeCard", "UpsertContact"} {
		env := suite.NewTestActivityEnvironment()
		gate, _ := interceptor.New(interceptor.Options{Store: memory.New()})
		env.SetWorkerOptions(worker.Options{Interceptors: []sdkinterceptor.WorkerInterceptor{gate}})
		env.RegisterActivity(&tools{v: v})
		_, err := env.ExecuteActivity(name, charge)
		app := appErr(t, err)
		if app.Type() != interceptor.ErrTypeKeyMissing || !app.NonRetryable() || v.count() != 0 {
			t.Fatalf("%s without a key: %s non-retryable=%v vendor %d", name, app.Type(), app.NonRetryable(), v.count())
		}
		if !strings.Contains(app.Error(), name) || !strings.Contains(app.Error(), "worker.Options.Interceptors") {
			t.Fatalf("message must name the activity and the fix: %s", app.Error())
		}
	}
	env := suite.NewTestActivityEnvironment()
	gate, _ := interceptor.New(interceptor.Options{Store: memory.New()})
	env.SetWorkerOptions(worker.Options{Interceptors: []sdkinterceptor.WorkerInterceptor{gate}})
	env.RegisterActivity(&tools{v: v})
	if _, err := env.ExecuteActivity("GetBalance", charge); err != nil || v.count() != 1 {
		t.Fatalf("read without a key: vendor %d err %v", v.count(), err)
	}
}

// Every decision is logged through the activity logger and counted through the
// worker's metrics handler, on fresh runs and on replays of a stored result.
func TestDecisionsAreLoggedAndCounted(t *testing.T) {
	h := newHarness(t)
	logs := &capturingHandler{}
	h.suite.SetLogger(log.NewStructuredLogger(slog.New(logs)))
	metrics := &capturingMetrics{mu: &sync.Mutex{}, counts: map[string]int64{}}
	h.suite.SetMetricsHandler(metrics)
	if _, err := h.run("wf-m", call{Activity: "ChargeCard", Key: bizKey, Charge: charge, MaxAttempts: 1},
		call{Activity: "ChargeCard", Key: bizKey, Charge: charge, MaxAttempts: 1},
		call{Activity: "GetBalance", Charge: charge, MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"idemgate_decisions activity_type=ChargeCard decision=ran effect=destructive",
		"idemgate_decisions activity_type=ChargeCard decision=replayed effect=destructive",
		"idemgate_decisions activity_type=GetBalance decision=ran effect=read",
	} {
		if metrics.get(want) != 1 {
			t.Errorf("counter %q = %d, want 1 (have %v)", want, metrics.get(want), metrics.counts)
		}
	}
	key := interceptor.BusinessKey(testNamespace, "ChargeCard", bizKey)
	for _, d := range []string{"ran", "replayed"} {
		if !logs.has("idemgate", "decision", d, "key", key) {
			t.Errorf("no log line for decision %s with key %s", d, key)
		}
	}
}

type capturingHandler struct {
	mu    sync.Mutex
	lines []map[string]string
	attrs []slog.Attr
}

func (h *capturingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *capturingHandler) Handle(_ context.Context, r slog.Record) error {
	m := map[string]string{"msg": r.Message}
	for _, a := range h.attrs {
		m[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value.String(); return true })
	h.mu.Lock()
	h.lines = append(h.lines, m)
	h.mu.Unlock()
	return nil
}
func (h *capturingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &capturingChild{parent: h, attrs: as}
}
func (h *capturingHandler) WithGroup(string) slog.Handler { return h }

func (h *capturingHandler) has(msg string, kv ...string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
next:
	for _, l := range h.lines {
		if l["msg"] != msg {
			continue
		}
		for i := 0; i+1 < len(kv); i += 2 {
			if l[kv[i]] != kv[i+1] {
				continue next
			}
		}
		return true
	}
	return false
}

type capturingChild struct {
	parent *capturingHandler
	attrs  []slog.Attr
}

func (c *capturingChild) Enabled(context.Context, slog.Level) bool { return true }
func (c *capturingChild) Handle(ctx context.Context, r slog.Record) error {
	r2 := r.Clone()
	r2.AddAttrs(c.attrs...)
	return c.parent.Handle(ctx, r2)
}
func (c *capturingChild) WithAttrs(as []slog.Attr) slog.Handler {
	return &capturingChild{parent: c.parent, attrs: append(append([]slog.Attr{}, c.attrs...), as...)}
}
func (c *capturingChild) WithGroup(string) slog.Handler { return c }

// capturingMetrics counts Counter increments by name and sorted tags.
type capturingMetrics struct {
	mu     *sync.Mutex
	counts map[string]int64
	tags   map[string]string
}

func (m *capturingMetrics) lock() *sync.Mutex { return m.mu }

func (m *capturingMetrics) WithTags(tags map[string]string) client.MetricsHandler {
	merged := map[string]string{}
	for k, v := range m.tags {
		merged[k] = v
	}
	for k, v := range tags {
		merged[k] = v
	}
	return &capturingMetrics{mu: m.lock(), counts: m.counts, tags: merged}
}

func (m *capturingMetrics) Counter(name string) client.MetricsCounter {
	return counterFunc(func(d int64) {
		if !strings.HasPrefix(name, "idemgate") {
			return
		}
		key := name
		for _, k := range []string{"activity_type", "decision", "effect"} {
			key += " " + k + "=" + m.tags[k]
		}
		mu := m.lock()
		mu.Lock()
		m.counts[key] += d
		mu.Unlock()
	})
}
func (m *capturingMetrics) Gauge(string) client.MetricsGauge { return gaugeFunc(func(float64) {}) }
func (m *capturingMetrics) Timer(string) client.MetricsTimer {
	return timerFunc(func(time.Duration) {})
}

func (m *capturingMetrics) get(key string) int64 {
	mu := m.lock()
	mu.Lock()
	defer mu.Unlock()
	return m.counts[key]
}

type counterFunc func(int64)

func (f counterFunc) Inc(d int64) { f(d) }

type gaugeFunc func(float64)

func (f gaugeFunc) Update(v float64) { f(v) }

type timerFunc func(time.Duration)

func (f timerFunc) Record(d time.Duration) { f(d) }

// sealed encodes as JSON until it was decoded by the worker; then it has no
// canonical form: an argument the data converter carries but the gate cannot hash.
type sealed struct{ decoded bool }

func (s sealed) MarshalJSON() ([]byte, error) {
	if s.decoded {
		return nil, errors.New("sealed after decoding")
	}
	return []byte(`"sealed"`), nil
}

func (s *sealed) UnmarshalJSON([]byte) error { s.decoded = true; return nil }

type sealedTools struct{ v *vendor }

func (s *sealedTools) ChargeSealed(ctx context.Context, _ sealed) (string, error) {
	s.v.hit(ctx)
	return "charged", nil
}

// A write whose arguments have no canonical form on the activity side (none was
// minted in a workflow) is refused before its body runs, with the same wording as
// the workflow side's refusal.
func TestArgumentsWithoutCanonicalFormRefusedInTheActivity(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	v := newVendor()
	env := suite.NewTestActivityEnvironment()
	gate, _ := interceptor.New(interceptor.Options{Store: memory.New()})
	env.SetWorkerOptions(worker.Options{Interceptors: []sdkinterceptor.WorkerInterceptor{gate}})
	env.RegisterActivity(&sealedTools{v: v})
	_, err := env.ExecuteActivity("ChargeSealed", sealed{})
	app := appErr(t, err)
	if app.Type() != interceptor.ErrTypeArgsInvalid || !app.NonRetryable() || v.count() != 0 {
		t.Fatalf("%s non-retryable=%v vendor %d", app.Type(), app.NonRetryable(), v.count())
	}
	if msg := app.Error(); !strings.Contains(msg, "ChargeSealed (destructive)") || !strings.Contains(msg, "sealed after decoding") ||
		!strings.Contains(msg, "Nothing was run. Next step: pass plain data") {
		t.Fatalf("message must name the activity, the cause, and say nothing ran and what to pass: %s", msg)
	}
}
