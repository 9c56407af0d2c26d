package idemgateotel_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.temporal.io/sdk/contrib/opentelemetry"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/idemgate/idemgate/activities"
	idemgateotel "github.com/idemgate/idemgate/contrib/otel"
	"github.com/idemgate/idemgate/idemgatetest"
	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/vendorsim"
	"github.com/idemgate/idemgate/workflows"
)

// The agent loop charges once and tries an e-mail whose writes are paused: the
// charge's span says "ran", each e-mail attempt's span says "gated" and carries a
// refusal event with its type; the counter idemgate_decisions, through the SDK's
// metrics handler into OpenTelemetry, counts one ran and two gated.
func TestDecisionsOnSpansAndMetrics(t *testing.T) {
	w, err := vendorsim.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	tools, err := activities.New(activities.Endpoints{Docs: w.Docs.URL, CRM: w.CRM.URL, Tickets: w.Tickets.URL,
		Payments: w.Payments.URL, Email: w.Email.URL, Chat: w.Chat.URL})
	if err != nil {
		t.Fatal(err)
	}

	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	tracing, err := opentelemetry.NewTracingInterceptor(opentelemetry.TracerOptions{Tracer: tp.Tracer("test")})
	if err != nil {
		t.Fatal(err)
	}
	opts := activities.GateOptions(nil)
	opts.Observer = idemgateotel.Observe
	k := idemgatetest.New(t, idemgatetest.WithOptions(opts),
		idemgatetest.WithMetricsHandler(opentelemetry.NewMetricsHandler(opentelemetry.MetricsHandlerOptions{Meter: mp.Meter("test")})))
	k.Pause("SendEmail", "test")

	env := k.NewWorkflowEnvironment()
	env.SetWorkerOptions(k.WorkerOptions(worker.Options{Interceptors: []sdkinterceptor.WorkerInterceptor{tracing}}))
	env.RegisterWorkflow(workflows.AgentLoop)
	env.RegisterActivity(tools)
	env.RegisterActivity(&activities.Planning{})
	script := activities.Script{Steps: []activities.Step{
		{Tool: "ChargeCard", Args: json.RawMessage(`{"customer":"cus_42","amount":4200,"currency":"eur"}`)},
		{Tool: "SendEmail", Args: json.RawMessage(`{"to":"ada@example.com","subject":"Hi","body":"Charged."}`)},
	}}
	env.ExecuteWorkflow(workflows.AgentLoop, workflows.AgentInput{Script: &script,
		Retry: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 1, MaximumAttempts: 2}})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var res workflows.AgentResult
	if err := env.GetWorkflowResult(&res); err != nil || !strings.HasPrefix(res.Stopped, interceptor.ErrTypeWriteGated) {
		t.Fatalf("job: %v %+v", err, res)
	}
	chargeKey := k.Decisions("ChargeCard")[0].Key

	type seen struct {
		attrs  map[string]string
		events []map[string]string
	}
	got := map[string][]seen{}
	for _, s := range spans.GetSpans() {
		name, ok := strings.CutPrefix(s.Name, "RunActivity:")
		if !ok {
			continue
		}
		v := seen{attrs: attrs(s.Attributes)}
		for _, e := range s.Events {
			if e.Name == idemgateotel.EventRefused {
				v.events = append(v.events, attrs(e.Attributes))
			}
		}
		got[name] = append(got[name], v)
	}
	if c := got["ChargeCard"]; len(c) != 1 || c[0].attrs[idemgateotel.AttrDecision] != "ran" ||
		c[0].attrs[idemgateotel.AttrEffect] != "destructive" || c[0].attrs[idemgateotel.AttrKey] != chargeKey ||
		c[0].attrs[idemgateotel.AttrAttempt] != "1" || len(c[0].events) != 0 {
		t.Errorf("ChargeCard spans: %+v", c)
	}
	if e := got["SendEmail"]; len(e) != 2 {
		t.Errorf("SendEmail spans: %+v, want 2", e)
	} else {
		for i, s := range e {
			if s.attrs[idemgateotel.AttrDecision] != "gated" || s.attrs[idemgateotel.AttrAttempt] != string(rune('1'+i)) ||
				len(s.events) != 1 || s.events[0][idemgateotel.AttrErrorType] != interceptor.ErrTypeWriteGated ||
				s.events[0][idemgateotel.AttrDecision] != "gated" {
				t.Errorf("SendEmail span %d: %+v", i, s)
			}
		}
	}
	if p := got["PlanNextStep"]; len(p) == 0 || p[0].attrs[idemgateotel.AttrDecision] != "ran" || p[0].attrs[idemgateotel.AttrEffect] != "read" {
		t.Errorf("PlanNextStep spans: %+v", p)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	counts := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != interceptor.MetricDecisions {
				continue
			}
			sum, ok := m.Data.(metricdata.Sum[int64])
			if !ok {
				t.Fatalf("%s is a %T, want a counter", m.Name, m.Data)
			}
			for _, dp := range sum.DataPoints {
				a := attrs(dp.Attributes.ToSlice())
				counts[a["activity_type"]+" "+a["effect"]+" "+a["decision"]] += dp.Value
			}
		}
	}
	for want, n := range map[string]int64{"ChargeCard destructive ran": 1, "SendEmail destructive gated": 2} {
		if counts[want] != n {
			t.Errorf("%s{%s} = %d, want %d (all: %v)", interceptor.MetricDecisions, want, counts[want], n, counts)
		}
	}
}

func attrs(kvs []attribute.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value.String()
	}
	return m
}
