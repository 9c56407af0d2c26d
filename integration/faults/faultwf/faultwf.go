// Package faultwf holds the workflows the fault harness runs on its worker
// processes: Job (one tool call, retried by Temporal) and Sequence (many calls in a
// row, for the price measurement).
package faultwf

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/idemgate/idemgate/activities"
)

// JobInput is one tool call.
type JobInput struct {
	Tool string         `json:"tool"`
	Args map[string]any `json:"args"`
	// Timeout is each attempt's start-to-close timeout: how soon Temporal retries
	// after the worker was killed.
	Timeout time.Duration `json:"timeout"`
	// HeartbeatTimeout, when set, is each attempt's heartbeat timeout.
	HeartbeatTimeout time.Duration `json:"heartbeat_timeout,omitempty"`
	// MaxAttempts bounds the retries. Optional: 0 means 50.
	MaxAttempts int32 `json:"max_attempts,omitempty"`
}

// Job runs one tool call as an activity and returns its JSON result.
func Job(ctx workflow.Context, in JobInput) (json.RawMessage, error) {
	attempts := in.MaxAttempts
	if attempts == 0 {
		attempts = 50
	}
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: in.Timeout,
		HeartbeatTimeout:    in.HeartbeatTimeout,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 100 * time.Millisecond, BackoffCoefficient: 1.5,
			MaximumInterval: time.Second, MaximumAttempts: attempts},
	})
	var out json.RawMessage
	err := workflow.ExecuteActivity(ctx, in.Tool, in.Args).Get(ctx, &out)
	return out, err
}

// SequenceInput is N calls of one tool in a row.
type SequenceInput struct {
	Tool string `json:"tool"`
	// Args returns the arguments of call i: ArgsTemplate with "%d" in each string
	// value replaced by i, so every call is a distinct write.
	ArgsTemplate map[string]string `json:"args_template"`
	N            int               `json:"n"`
	Local        bool              `json:"local"`
	// Timeout is each attempt's start-to-close timeout. Optional: 0 means 30 s.
	Timeout time.Duration `json:"timeout,omitempty"`
}

// Sequence runs in.N calls of in.Tool one after the other, as regular or local activities.
func Sequence(ctx workflow.Context, in SequenceInput) (int, error) {
	timeout := in.Timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	// Retried until the workflow times out: a store outage fails writes closed, retryable.
	retry := &temporal.RetryPolicy{InitialInterval: 100 * time.Millisecond, BackoffCoefficient: 1.5, MaximumInterval: time.Second}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: timeout, RetryPolicy: retry})
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: timeout, RetryPolicy: retry})
	for i := range in.N {
		args := make(map[string]any, len(in.ArgsTemplate))
		for k, v := range in.ArgsTemplate {
			args[k] = Fill(v, i)
		}
		var f workflow.Future
		if in.Local {
			// A local activity gets its arguments as Go values, not decoded from a payload.
			arg, err := Typed(in.Tool, args)
			if err != nil {
				return i, err
			}
			f = workflow.ExecuteLocalActivity(lctx, in.Tool, arg)
		} else {
			f = workflow.ExecuteActivity(actx, in.Tool, args)
		}
		if err := f.Get(ctx, nil); err != nil {
			return i, err
		}
	}
	return in.N, nil
}

// Typed converts args to the input type of the named tool of package activities.
func Typed(tool string, args map[string]any) (any, error) {
	var p any
	switch tool {
	case "GetCustomer":
		p = &activities.GetCustomerInput{}
	case "UpsertContact":
		p = &activities.UpsertContactInput{}
	case "SendEmail":
		p = &activities.SendEmailInput{}
	case "CreateTicket":
		p = &activities.CreateTicketInput{}
	case "ChargeCard":
		p = &activities.ChargeCardInput{}
	default:
		return nil, fmt.Errorf("idemgate/integration/faults/faultwf: no input type for %q", tool)
	}
	b, err := json.Marshal(args)
	if err == nil {
		err = json.Unmarshal(b, p)
	}
	if err != nil {
		return nil, err
	}
	return reflect.ValueOf(p).Elem().Interface(), nil
}

// Fill replaces every "%d" in s with i.
func Fill(s string, i int) string { return strings.ReplaceAll(s, "%d", strconv.Itoa(i)) }
