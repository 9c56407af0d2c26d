package idemgateotel

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemgate/idemgate/interceptor"
)

// Span attribute and event names (the attribute names are interceptor's).
const (
	AttrDecision  = interceptor.AttrDecision
	AttrEffect    = interceptor.AttrEffect
	AttrKey       = interceptor.AttrKey
	AttrAttempt   = interceptor.AttrAttempt
	AttrErrorType = interceptor.AttrErrorType
	// EventRefused is the span event of a refusal.
	EventRefused = "idemgate.refused"
)

// Observe puts d on the span in ctx (the activity's, when Temporal's tracing
// interceptor runs before the gate); without a recording span it does nothing.
// It is an interceptor.Observer: set it as interceptor.Options.Observer.
func Observe(ctx context.Context, d interceptor.Decision) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(
		attribute.String(AttrDecision, d.Decision),
		attribute.String(AttrEffect, d.Effect.String()),
		attribute.String(AttrKey, d.Key),
		attribute.Int(AttrAttempt, int(d.Attempt)),
	)
	if d.Refused() {
		span.AddEvent(EventRefused, trace.WithAttributes(
			attribute.String(AttrDecision, d.Decision),
			attribute.String(AttrErrorType, d.ErrorType),
		))
	}
}

var _ interceptor.Observer = Observe
