// Package idemgateotel puts the idemgate gate's decisions on the activity spans of
// Temporal's OpenTelemetry tracing interceptor (go.temporal.io/sdk/contrib/opentelemetry).
// It is a module of its own so the core idemgate module stays free of OpenTelemetry.
//
// Give the gate Observe as its observer, and run the tracing interceptor before the
// gate, so the activity's span is in the context the gate sees:
//
//	tracing, _ := opentelemetry.NewTracingInterceptor(opentelemetry.TracerOptions{})
//	opts := interceptor.Options{Store: st, Observer: idemgateotel.Observe}
//	gate, _ := interceptor.New(opts)
//	worker.New(c, queue, worker.Options{Interceptors: []sdkinterceptor.WorkerInterceptor{tracing, gate}})
//
// Each gated attempt's span ("RunActivity:NAME") then carries the attributes
// idemgate.decision, idemgate.effect, idemgate.key and idemgate.attempt, and a
// refusal adds the span event "idemgate.refused" with idemgate.decision and
// idemgate.error_type. The gate's metric idemgate_decisions goes through the
// worker's metrics handler (opentelemetry.NewMetricsHandler for OpenTelemetry),
// tagged activity_type, effect and decision, like the SDK's own metrics.
package idemgateotel
