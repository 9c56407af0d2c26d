// Package soakwf holds the workflow the soak harness (integration/soak) runs on its
// worker processes: Agent, an agent loop that makes a fixed list of tool calls (reads,
// idempotent writes, destructive writes), each as an activity retried by Temporal,
// and reports what each call returned or why it was refused.
package soakwf

import (
	"encoding/json"
	"errors"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/idemgate/idemgate/integration/faults/faultwf"
	"github.com/idemgate/idemgate/interceptor"
)

// Call is one tool call of a workflow. Token is unique to the call and appears in its
// arguments, so the vendors' ledgers name the call that caused each effect.
type Call struct {
	Token  string          `json:"token"`
	Tool   string          `json:"tool"`
	Effect string          `json:"effect"` // "read", "idempotent-write" or "destructive"
	Args   json.RawMessage `json:"args"`
	// Local runs the call as a local activity.
	Local bool `json:"local,omitempty"`
	// Child: the call runs in a child workflow (consecutive such calls share one).
	Child bool `json:"child,omitempty"`
}

// Input is a workflow's calls, made in order.
type Input struct {
	Calls []Call `json:"calls"`
	// Timeout is each attempt's start-to-close timeout (0: 4 s).
	Timeout time.Duration `json:"timeout,omitempty"`
	// MaxAttempts bounds each call's attempts (0: 30): a held refusal's last attempt
	// ends the call with the refusal (non-retryable, with the withheld call).
	MaxAttempts int32 `json:"max_attempts,omitempty"`
	// LocalScheduleToClose bounds a local activity's attempts with their retries (0:
	// 2 minutes; negative: unset, the SDK's default, which is the start-to-close
	// timeout: no retry later than that).
	LocalScheduleToClose time.Duration `json:"local_schedule_to_close,omitempty"`
	// ContinueAfter continues as new after this many calls of one run (0: never);
	// Done carries the outcomes of the runs before.
	ContinueAfter int       `json:"continue_after,omitempty"`
	Done          []Outcome `json:"done,omitempty"`
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

// Agent makes in.Calls one after the other, as activities or local activities,
// consecutive Child calls in a child workflow, continuing as new every
// ContinueAfter calls; a call that fails or is refused is recorded and the loop
// goes on (an agent reports the refusal and continues).
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
	l2c := in.LocalScheduleToClose
	switch {
	case l2c == 0:
		l2c = 2 * time.Minute
	case l2c < 0:
		l2c = 0
	}
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: timeout, ScheduleToCloseTimeout: l2c,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 200 * time.Millisecond, BackoffCoefficient: 2,
			MaximumInterval: 2 * time.Second, MaximumAttempts: attempts},
	})
	res := Result{Calls: in.Done}
	ran := 0
	for i := len(in.Done); i < len(in.Calls); {
		if in.ContinueAfter > 0 && ran >= in.ContinueAfter {
			next := in
			next.Done = res.Calls
			return res, workflow.NewContinueAsNewError(ctx, Agent, next)
		}
		c := in.Calls[i]
		if c.Child {
			j := i
			for j < len(in.Calls) && in.Calls[j].Child {
				j++
			}
			child := Input{Timeout: in.Timeout, MaxAttempts: in.MaxAttempts, LocalScheduleToClose: in.LocalScheduleToClose}
			for _, cc := range in.Calls[i:j] {
				cc.Child = false
				child.Calls = append(child.Calls, cc)
			}
			var cr Result
			if err := workflow.ExecuteChildWorkflow(ctx, Agent, child).Get(ctx, &cr); err != nil {
				for _, cc := range in.Calls[i:j] {
					res.Calls = append(res.Calls, Outcome{Token: cc.Token, Tool: cc.Tool, Err: "child workflow: " + err.Error()})
				}
			} else {
				res.Calls = append(res.Calls, cr.Calls...)
			}
			ran += j - i
			i = j
			continue
		}
		res.Calls = append(res.Calls, call(ctx, actx, lctx, c))
		ran++
		i++
	}
	return res, nil
}

// call makes one call and reports its outcome.
func call(ctx, actx, lctx workflow.Context, c Call) Outcome {
	o := Outcome{Token: c.Token, Tool: c.Tool}
	var args map[string]any
	if err := json.Unmarshal(c.Args, &args); err != nil {
		o.Err = "args: " + err.Error()
		return o
	}
	var f workflow.Future
	if c.Local {
		// A local activity gets its arguments as Go values, not decoded from a payload.
		arg, err := faultwf.Typed(c.Tool, args)
		if err != nil {
			o.Err = err.Error()
			return o
		}
		f = workflow.ExecuteLocalActivity(lctx, c.Tool, arg)
	} else {
		f = workflow.ExecuteActivity(actx, c.Tool, args)
	}
	var out json.RawMessage
	err := f.Get(ctx, &out)
	if err == nil {
		o.Done, o.Result = true, out
		return o
	}
	o.Err = err.Error()
	var app *temporal.ApplicationError
	if errors.As(err, &app) && slices.Contains(Refusals, app.Type()) {
		r := &Refusal{Type: app.Type(), Message: app.Message()}
		var wc interceptor.WithheldCall
		if app.HasDetails() && app.Details(&wc) == nil {
			r.Call = &wc
		}
		o.Refusal = r
	}
	return o
}
