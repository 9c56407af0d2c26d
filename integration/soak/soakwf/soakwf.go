// Package soakwf holds the workflow the soak harness (integration/soak) runs on its
// worker processes: Agent, an agent loop that makes a list of tool calls (reads,
// idempotent writes, destructive writes), each as an activity retried by Temporal,
// and reports what each call returned or why it was refused. Some of its calls wait
// for an approval (the signal SignalApprove), some come in a signal (SignalCalls),
// and some are made by an update handler (UpdateCall) the client calls.
package soakwf

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
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
	// Approval: the workflow makes the call only once the signal SignalApprove has
	// named its token.
	Approval bool `json:"approval,omitempty"`
	// Via is how the call reaches the workflow: "" (its input), ViaSignal (in the
	// call list a SignalCalls signal carries; not in Input.Calls) or ViaUpdate (the
	// argument of an UpdateCall update, made by its handler; not in Input.Calls).
	Via string `json:"via,omitempty"`
}

// How a call reaches the workflow (Call.Via).
const (
	ViaSignal = "signal"
	ViaUpdate = "update"
)

// The signals and the update Agent takes.
const (
	// SignalApprove carries a token (string): the call with Approval may run.
	SignalApprove = "approve"
	// SignalCalls carries calls ([]Call, Via ViaSignal) the workflow makes after its
	// input's, until it has made Input.Signalled of them.
	SignalCalls = "calls"
	// UpdateCall carries one call (Call, Via ViaUpdate): the handler makes it and
	// returns its Outcome. The client uses the call's token as the update's ID.
	UpdateCall = "call"
)

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
	// Signalled is how many calls come in SignalCalls signals (made after Calls, in
	// the order received); Updates how many UpdateCall updates (with distinct tokens)
	// the workflow waits for before it returns. A workflow with updates does not
	// continue as new.
	Signalled int `json:"signalled,omitempty"`
	Updates   int `json:"updates,omitempty"`
	// Approved carries, across continue-as-new, the tokens SignalApprove named to
	// the runs before.
	Approved []string `json:"approved,omitempty"`
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
	// TimedOut: the call failed because Temporal's time for it ran out (a
	// temporal.TimeoutError in the chain: StartToClose, or no time left before
	// ScheduleToClose for another attempt). An activity that a reset left pending
	// keeps its first scheduling time, so its ScheduleToClose (by default the
	// workflow's run timeout) may be spent before the new run's attempt ends.
	TimedOut bool `json:"timed_out,omitempty"`
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
// goes on (an agent reports the refusal and continues). A call with Approval waits
// for SignalApprove naming it; after in.Calls come the calls SignalCalls carries
// (in.Signalled of them); meanwhile the handler of UpdateCall makes the calls the
// client sends, and the workflow returns once it has made in.Updates of them. The
// result lists the outcomes of the input's and the signalled calls in order, then
// the updates' in the order they finished.
func Agent(ctx workflow.Context, in Input) (Result, error) {
	actx, lctx := options(ctx, in)
	approveCh := workflow.GetSignalChannel(ctx, SignalApprove)
	callsCh := workflow.GetSignalChannel(ctx, SignalCalls)
	approved := map[string]bool{}
	for _, t := range in.Approved {
		approved[t] = true
	}
	known := map[string]bool{}
	for _, c := range in.Calls {
		known[c.Token] = true
	}
	// Signalled calls join in.Calls (once each: the client may send them again after
	// a reset), so that continue-as-new carries them.
	addCalls := func(cs []Call) {
		for _, c := range cs {
			if c.Via != ViaSignal || c.Token == "" || known[c.Token] {
				continue
			}
			known[c.Token] = true
			c.Child = false
			in.Calls = append(in.Calls, c)
			in.Signalled--
		}
	}
	var updates []Outcome
	if in.Updates > 0 {
		in.ContinueAfter = 0 // an update's handler must not be cut off by continue-as-new
		handled := map[string]*Outcome{}
		err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateCall, func(ctx workflow.Context, c Call) (Outcome, error) {
			if _, ok := handled[c.Token]; ok {
				// The same call again under another update ID: its first outcome.
				if err := workflow.Await(ctx, func() bool { return handled[c.Token] != nil }); err != nil {
					return Outcome{}, err
				}
				return *handled[c.Token], nil
			}
			handled[c.Token] = nil
			ua, ul := options(ctx, in)
			o := call(ctx, ua, ul, c)
			handled[c.Token] = &o
			updates = append(updates, o)
			return o, nil
		}, workflow.UpdateHandlerOptions{Validator: func(_ workflow.Context, c Call) error {
			if c.Via != ViaUpdate || c.Token == "" || c.Tool == "" || c.Local || c.Child {
				return fmt.Errorf("soakwf: update %s takes a call with via %q, a token and a tool (not local, not a child's): got %+v",
					UpdateCall, ViaUpdate, c)
			}
			return nil
		}})
		if err != nil {
			return Result{}, err
		}
	}
	res := Result{Calls: in.Done}
	ran := 0
	for i := len(in.Done); ; {
		if i >= len(in.Calls) {
			if in.Signalled <= 0 {
				break
			}
			var cs []Call
			callsCh.Receive(ctx, &cs)
			addCalls(cs)
			continue
		}
		if in.ContinueAfter > 0 && ran >= in.ContinueAfter {
			// Signals not read yet would be lost with this run: carry them.
			for {
				var t string
				if !approveCh.ReceiveAsync(&t) {
					break
				}
				approved[t] = true
			}
			for {
				var cs []Call
				if !callsCh.ReceiveAsync(&cs) {
					break
				}
				addCalls(cs)
			}
			next := in
			next.Done = res.Calls
			next.Approved = slices.Sorted(maps.Keys(approved))
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
				cc.Child, cc.Approval = false, false
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
		for c.Approval && !approved[c.Token] {
			var t string
			approveCh.Receive(ctx, &t)
			approved[t] = true
		}
		res.Calls = append(res.Calls, call(ctx, actx, lctx, c))
		ran++
		i++
	}
	if in.Updates > 0 {
		err := workflow.Await(ctx, func() bool { return len(updates) >= in.Updates && workflow.AllHandlersFinished(ctx) })
		if err != nil {
			return res, err
		}
		res.Calls = append(res.Calls, updates...)
	}
	return res, nil
}

// options are the activity and local-activity options of in's calls.
func options(ctx workflow.Context, in Input) (actx, lctx workflow.Context) {
	timeout := in.Timeout
	if timeout == 0 {
		timeout = 4 * time.Second
	}
	attempts := in.MaxAttempts
	if attempts == 0 {
		attempts = 30
	}
	actx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
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
	lctx = workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: timeout, ScheduleToCloseTimeout: l2c,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 200 * time.Millisecond, BackoffCoefficient: 2,
			MaximumInterval: 2 * time.Second, MaximumAttempts: attempts},
	})
	return actx, lctx
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
	var timeout *temporal.TimeoutError
	o.TimedOut = errors.As(err, &timeout)
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
