package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/workflow"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/store"
)

// CheckoutKeyed is Checkout with the charge under a business key (interceptor.WithKey),
// so a test can hold that key's claim before the workflow reaches it.
//
// Its ScheduleToClose (3 h) outlasts the hour-long claim the test holds: Temporal
// retries a refusal only inside it, and a refusal whose retry would come past it
// ends the activity, loud (interceptor's TestInFlightRefusalPastScheduleToCloseNamesItsCall).
func CheckoutKeyed(ctx workflow.Context, amount int, key string) (ChargeResult, error) {
	return checkout(interceptor.WithKey(ctx, key), amount, 3*time.Hour)
}

// logLine is one line the SDK logged.
type logLine struct {
	level, msg string
	kv         []any
}

func (l logLine) String() string { return fmt.Sprintf("%s %s %v", l.level, l.msg, l.kv) }

// captureLogger keeps every line the SDK logs through the client.
type captureLogger struct {
	mu    sync.Mutex
	lines []logLine
}

func (l *captureLogger) add(level, msg string, kv []any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, logLine{level, msg, kv})
}

func (l *captureLogger) Debug(msg string, kv ...any) { l.add("DEBUG", msg, kv) }
func (l *captureLogger) Info(msg string, kv ...any)  { l.add("INFO", msg, kv) }
func (l *captureLogger) Warn(msg string, kv ...any)  { l.add("WARN", msg, kv) }
func (l *captureLogger) Error(msg string, kv ...any) { l.add("ERROR", msg, kv) }

// activityErrors are the SDK's "Activity error." lines of activity type typ at level.
func (l *captureLogger) activityErrors(level, typ string) []logLine {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []logLine
	for _, line := range l.lines {
		if line.level == level && line.msg == "Activity error." && strings.Contains(fmt.Sprint(line.kv), "ActivityType "+typ) {
			out = append(out, line)
		}
	}
	return out
}

// countingMetrics sums the SDK's counters by name, whatever their tags.
type countingMetrics struct {
	mu     sync.Mutex
	counts map[string]int64
}

func (m *countingMetrics) WithTags(map[string]string) client.MetricsHandler { return m }
func (m *countingMetrics) Counter(name string) client.MetricsCounter {
	return counterFunc(func(d int64) {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.counts[name] += d
	})
}
func (m *countingMetrics) Gauge(string) client.MetricsGauge {
	return client.MetricsNopHandler.Gauge("")
}
func (m *countingMetrics) Timer(string) client.MetricsTimer {
	return client.MetricsNopHandler.Timer("")
}

func (m *countingMetrics) count(name string) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.counts[name]
}

type counterFunc func(int64)

func (f counterFunc) Inc(d int64) { f(d) }

// activityFailed is the SDK's counter of failed activity executions.
const activityFailed = "temporal_activity_execution_failed"

// Expected refusals — a pause, a live lease, a held unknown outcome — are benign:
// the SDK logs them at DEBUG, not as `ERROR Activity error.`, and counts no failure;
// the real failure (the charge's connection reset) still logs at ERROR and counts.
// The refused live claim is listed by `idemgate pending` with when its owner may
// still run.
func TestEndToEndExpectedRefusalsAreBenign(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		logs := &captureLogger{}
		metrics := &countingMetrics{counts: map[string]int64{}}
		c := server.NewClientWithOptions(client.Options{Logger: logs, MetricsHandler: metrics})
		v := &vendor{crashFirst: true}
		r := newRigWith(t, b, v, c)
		ctx := context.Background()

		// A pause, then a real failure, then a held unknown outcome.
		ok(t, "pause", "--store", b.spec, "--activity", "ChargeCard", "--reason", "incident", "--actor", "alice")
		run := r.start("benign-held")
		wf := "benign-held-" + b.name
		waitFor(t, "a paused charge refused", func() bool {
			return len(decodeJSON[[]receiptJSON](t, ok(t, "receipts", "--store", b.spec, "--json", "--workflow", wf, "--decision", "gated"))) > 0
		})
		waitFor(t, "the paused refusal to reach the SDK as a benign (DEBUG) Activity error", func() bool { return len(logs.activityErrors("DEBUG", "ChargeCard")) > 0 })
		ok(t, "resume", "--store", b.spec, "--activity", "ChargeCard", "--reason", "incident closed")
		p := r.pendingOf("benign-held")
		waitFor(t, "a held refusal", func() bool {
			return len(decodeJSON[[]receiptJSON](t, ok(t, "receipts", "--store", b.spec, "--json", "--key", p.Key,
				"--decision", "refused-in-flight"))) > 0
		})
		res := writeFile(t, "charge.json", `{"id": "ch_1", "amount": 4200}`)
		ok(t, "resolve", p.Key, "--store", b.spec, "--sent", "--result", res, "--reason", "dashboard shows ch_1")
		if out, err := outcome(t, run); err != nil || out.ID != "ch_1" || v.count() != 1 {
			t.Fatalf("held workflow: %+v, %v, vendor %d", out, err, v.count())
		}

		// A live claim: another owner holds the key for an hour.
		claimed := decodeJSON[[]receiptJSON](t, ok(t, "receipts", "--store", b.spec, "--json", "--key", p.Key, "--decision", "claimed"))
		if len(claimed) != 1 {
			t.Fatalf("claimed receipts of the charge: %+v", claimed)
		}
		st := openStore(t, b)
		biz := "order-benign-" + b.name + "/charge"
		key := interceptor.BusinessKey(server.GetDefaultNamespace(), "ChargeCard", biz)
		now := time.Now()
		lease := now.Add(time.Hour)
		if o, _, err := st.Begin(ctx, store.Claim{Key: key, Activity: "ChargeCard", Effect: "destructive", ArgsHash: claimed[0].ArgsHash,
			Args: []byte("[4200]"), Owner: "another-worker", Lease: lease, Window: time.Hour, WorkflowID: "elsewhere", Attempt: 1,
			Now: now}); err != nil || o != store.OutcomeClaimed {
			t.Fatalf("hold the key: %v %v", o, err)
		}
		keyed, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "benign-live-" + b.name, TaskQueue: r.queue,
			WorkflowExecutionTimeout: 4 * time.Hour}, CheckoutKeyed, 4200, biz) // the server caps ScheduleToClose at it
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.TerminateWorkflow(context.Background(), keyed.GetID(), "", "test over") })
		var refused []receiptJSON
		waitFor(t, "the charge refused on the live claim", func() bool {
			refused = decodeJSON[[]receiptJSON](t, ok(t, "receipts", "--store", b.spec, "--json", "--key", key, "--decision", "refused-in-flight"))
			return len(refused) > 0
		})
		if !strings.Contains(refused[0].Error, "may still be running until") {
			t.Fatalf("refusal on the live claim: %+v", refused[0])
		}
		waitFor(t, "the in-flight refusal to reach the SDK as a benign (DEBUG) Activity error", func() bool {
			for _, l := range logs.activityErrors("DEBUG", "ChargeCard") {
				if strings.Contains(fmt.Sprint(l.kv), "holds the claim") {
					return true
				}
			}
			return false
		})
		var live recordJSON
		for _, rec := range decodeJSON[[]recordJSON](t, ok(t, "pending", "--store", b.spec, "--json")) {
			if rec.Key == key {
				live = rec
			}
		}
		if live.Key == "" || !sameSecond(live.MayStillRunUntil, lease) || !live.MayHaveSent {
			t.Fatalf("pending lacks the refused live claim, running until %s: %+v", ts(lease), live)
		}

		// Only the real failure is an error.
		errs := logs.activityErrors("ERROR", "ChargeCard")
		if len(errs) != 1 || !strings.Contains(fmt.Sprint(errs[0].kv), "connection reset") {
			t.Fatalf("ERROR Activity error. lines of ChargeCard = %v; want exactly the connection reset", errs)
		}
		for _, want := range []string{"idemgate: paused", "holds the claim", "Held:"} {
			found := false
			for _, l := range logs.activityErrors("DEBUG", "ChargeCard") {
				found = found || strings.Contains(fmt.Sprint(l.kv), want)
			}
			if !found {
				t.Fatalf("no benign (DEBUG) refusal with %q; the SDK saw: %v", want, logs.activityErrors("DEBUG", "ChargeCard"))
			}
		}
		if n := metrics.count(activityFailed); n != 1 {
			t.Fatalf("%s = %d, want 1: only the connection reset is a failure", activityFailed, n)
		}
	})
}
