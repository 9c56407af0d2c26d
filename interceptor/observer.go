package interceptor

import (
	"context"

	"github.com/idemgate/idemgate/store"
)

// The names a decision is exported under: span attributes (contrib/otel) and the
// keys of the demo worker's JSON lines (--observe stdout).
const (
	AttrDecision  = "idemgate.decision"
	AttrEffect    = "idemgate.effect"
	AttrKey       = "idemgate.key"
	AttrAttempt   = "idemgate.attempt"
	AttrErrorType = "idemgate.error_type"
)

// Decision is one decision of the gate, as an Observer sees it.
type Decision struct {
	// Activity is the activity type name; Effect its class.
	Activity string
	Effect   Effect
	// Key is the call's idempotency key ("" when the call had none).
	Key string
	// Attempt is the activity attempt, from 1.
	Attempt int32
	// Decision is what the gate did: a store.Decision ("ran", "replayed",
	// "refused-in-flight", …) or one of the gate's own ("refused-invalid",
	// "refused-no-result", "refused-store-unavailable", "refused-wrong-store"). The metric
	// idemgate_decisions carries it as the tag "decision".
	Decision string
	// ErrorType is the ApplicationError type the workflow sees for a refusal
	// (IdempotencyInFlight, WriteGated, …), or the type of the activity's own
	// error; "" when there was no error or it carries no type.
	ErrorType string
	// Err is the refusal or the activity's error, nil when there was none.
	Err error
}

// Refused reports whether the gate refused the call (the body did not run).
func (d Decision) Refused() bool {
	switch store.Decision(d.Decision) {
	case store.DecisionRefusedConflict, store.DecisionRefusedInFlight, store.DecisionGated,
		decisionRefusedInvalid, decisionRefusedNoResult, decisionStoreDown, decisionWrongStore:
		return true
	}
	return false
}

// Observer is called once per gate decision, on the activity's goroutine, with
// the activity's context (which carries the activity span when the worker runs
// Temporal's tracing interceptor before the gate). It must not block; see
// contrib/otel for one that puts decisions on spans.
type Observer func(ctx context.Context, d Decision)

// observe hands a decision to Options.Observer.
func (c *call) observe(d store.Decision, err error) {
	if c.r.opts.Observer == nil {
		return
	}
	c.r.opts.Observer(c.ctx, Decision{Activity: c.name, Effect: c.effect, Key: c.key, Attempt: c.info.Attempt,
		Decision: string(d), ErrorType: decisionErrorType(d, err), Err: err})
}

// decisionErrorType is the ApplicationError type the workflow sees for decision d.
// Refusals pass their message as err, so their type follows from the decision.
func decisionErrorType(d store.Decision, err error) string {
	if err == nil {
		return ""
	}
	if t := ErrorType(err); t != "" {
		return t
	}
	switch d {
	case store.DecisionRefusedConflict:
		return ErrTypeConflict
	case store.DecisionRefusedInFlight:
		return ErrTypeInFlight
	case store.DecisionGated:
		return ErrTypeWriteGated
	case decisionStoreDown:
		return ErrTypeStoreUnavailable
	case decisionRefusedNoResult:
		return ErrTypeResultNotStored
	case decisionRefusedInvalid:
		return ErrTypeArgsInvalid
	case decisionWrongStore:
		return ErrTypeWrongStore
	}
	return ""
}
