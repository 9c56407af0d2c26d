// Package workflows holds AgentLoop, an agent as a Temporal workflow: it asks a
// planner activity for the next tool call, runs the tool (an activity, through the
// idemgate gate), feeds the result back, and stops when the planner says done, after
// a step budget, or when the gate refuses a write for good.
package workflows

import (
	"encoding/json"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/idemgate/idemgate/activities"
	"github.com/idemgate/idemgate/interceptor"
)

// AgentInput starts an agent job.
type AgentInput struct {
	Goal string `json:"goal"`
	// MaxSteps is the step budget. Optional: 0 means 12.
	MaxSteps int `json:"max_steps,omitempty"`
	// Replay marks this run as the re-run of a recorded job: only what the policy
	// allows fires; a withheld step stops the loop with its exact call.
	Rerun *interceptor.RerunPolicy `json:"replay,omitempty"`
	// Retry is the tools' retry policy. Optional: nil means 5 attempts, 200 ms apart.
	Retry *temporal.RetryPolicy `json:"retry,omitempty"`
	// ToolTimeout is each attempt's start-to-close timeout. Optional: 0 means 30 s.
	ToolTimeout time.Duration `json:"tool_timeout,omitempty"`
	// Script plans this job instead of the worker's planner. Optional.
	Script *activities.Script `json:"script,omitempty"`
}

// StepResult is one step as the workflow saw it.
type StepResult struct {
	activities.StepRecord
	// ErrorType is the ApplicationError type of a failed step (e.g. WriteGated).
	ErrorType string `json:"error_type,omitempty"`
}

// AgentResult is what the job did.
type AgentResult struct {
	Steps []StepResult `json:"steps"`
	// Stopped says why the loop ended: "done", "budget", or the refusal that ended it.
	Stopped string `json:"stopped"`
}

// Final gate refusals end the loop: nothing the planner does next can make them run.
var stopOn = map[string]bool{
	interceptor.ErrTypeWriteGated:      true,
	interceptor.ErrTypeInFlight:        true,
	interceptor.ErrTypeConflict:        true,
	interceptor.ErrTypeKeyMissing:      true,
	interceptor.ErrTypeKeyInvalid:      true,
	interceptor.ErrTypeArgsInvalid:     true,
	interceptor.ErrTypeResultNotStored: true,
}

// AgentLoop runs the agent.
func AgentLoop(ctx workflow.Context, in AgentInput) (AgentResult, error) {
	budget := in.MaxSteps
	if budget <= 0 {
		budget = 12
	}
	retry := in.Retry
	if retry == nil {
		retry = &temporal.RetryPolicy{InitialInterval: 200 * time.Millisecond, BackoffCoefficient: 1.5,
			MaximumInterval: 5 * time.Second, MaximumAttempts: 5}
	}
	timeout := in.ToolTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	opts := workflow.ActivityOptions{StartToCloseTimeout: timeout, RetryPolicy: retry}
	planCtx := workflow.WithActivityOptions(ctx, opts)
	toolCtx := workflow.WithActivityOptions(ctx, opts)
	if in.Rerun != nil {
		toolCtx = interceptor.WithRerunPolicy(toolCtx, *in.Rerun)
	}

	var res AgentResult
	history := []activities.StepRecord{}
	for len(res.Steps) < budget {
		var step activities.Step
		if err := workflow.ExecuteActivity(planCtx, "PlanNextStep", activities.PlanInput{Goal: in.Goal, History: history, Script: in.Script}).Get(ctx, &step); err != nil {
			return res, err
		}
		if step.Done {
			res.Stopped = "done"
			return res, nil
		}
		var out json.RawMessage
		err := workflow.ExecuteActivity(toolCtx, step.Tool, step.Args).Get(ctx, &out)
		rec := StepResult{StepRecord: activities.StepRecord{Tool: step.Tool, Args: step.Args, Result: out}}
		if err != nil {
			rec.Error, rec.ErrorType = err.Error(), interceptor.ErrorType(err)
		}
		res.Steps = append(res.Steps, rec)
		history = append(history, rec.StepRecord)
		if err != nil && stopOn[rec.ErrorType] {
			res.Stopped = rec.ErrorType + ": " + rec.Error
			return res, nil
		}
	}
	res.Stopped = "budget"
	return res, nil
}
