// Package soakwf holds the workflow the soak harness (integration/soak) runs on its
// worker processes: Agent, an agent loop that makes a fixed list of tool calls (reads,
// idempotent writes, destructive writes), each as an activity retried by Temporal,
// and reports what each call returned or why it was refused.
package soakwf

import (
	"encoding/json"
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/idemgate/idemgate/interceptor"
)

// Call is one tool call of a workflow. Token is unique to the call and appears in its
// arguments, so the vendors' ledgers name the call that caused each effect.
type Call struct {
	Token  string          `json:"token"`
	Tool   string          `json:"tool"`
	Effect string          `json:"effect"` // "read", "idempotent-write" or "destructive"
	Args   json.RawMessage `json:"args"`
}

// Input is a workflow's calls, made in order.
type Input struct {
	Calls []Call `json:"calls"`
	// Timeout is each attempt's start-to-close timeout (0: 4 s).
	Timeout time.Duration `json:"timeout,omitempty"`
	// MaxAttempts bounds each call's attempts (0: 30): a held refusal's last attempt
	// ends the call with the refusal (non-retryable, with the withheld call).
	MaxAttempts int32 `json:"max_attempts,omitempty"`
}

// Refusal is why a call was not run: the error's type and message, and the withheld
// call its details carry.
type Refusal struct {
	Type    string                    `json:"type"`
	Message string                    `json:"message"`
	Call    *interceptor.WithheldCall `json:"call,omitempty"`
}

// Outcome is what one call returned: its result, or its refusal, or another error.
type Outcome struct {
	Token   string          `json:"token"`
	Tool    string          `json:"tool"`
	Done    bool            `json:"done"`
	Result  json.RawMessage `json:"result,omitempty"`
	Refusal *Refusal        `json:"refusal,omitempty"`
	Err     string          `json:"err,omitempty"`
}

// Result lists every call's outcome, in order.
type Result struct {
	Calls []Outcome `json:"calls"`
}

// Refusals are the error types of the gate's refusals that carry the withheld call.
var Refusals = []string{interceptor.ErrTypeInFlight, interceptor.ErrTypeWriteGated}

// Agent makes in.Calls one after the other; a call that fails or is refused is
// recorded and the loop goes on (an agent reports the refusal and continues).
func Agent(ctx workflow.Context, in Input) (Result, error) {
	timeout := in.Timeout
	if timeout == 0 {
		timeout = 4 * time.Second
	}
	attempts := in.MaxAttempts
	if attempts == 0 {
		attempts = 30
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: timeout,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 200 * time.Millisecond, BackoffCoefficient: 2,
			MaximumInterval: 2 * time.Second, MaximumAttempts: attempts},
	})
	var res Result
	for _, c := range in.Calls {
		var args map[string]any
		if err := json.Unmarshal(c.Args, &args); err != nil {
			return res, temporal.NewNonRetryableApplicationError("soakwf: call "+c.Token+": args: "+err.Error(), "BadInput", nil)
		}
		o := Outcome{Token: c.Token, Tool: c.Tool}
		var out json.RawMessage
		err := workflow.ExecuteActivity(actx, c.Tool, args).Get(ctx, &out)
		if err == nil {
			o.Done, o.Result = true, out
		} else {
			o.Err = err.Error()
			var app *temporal.ApplicationError
			if errors.As(err, &app) {
				for _, t := range Refusals {
					if app.Type() != t {
						continue
					}
					r := &Refusal{Type: app.Type(), Message: app.Message()}
					var call interceptor.WithheldCall
					if app.HasDetails() && app.Details(&call) == nil {
						r.Call = &call
					}
					o.Refusal = r
				}
			}
		}
		res.Calls = append(res.Calls, o)
	}
	return res, nil
}
