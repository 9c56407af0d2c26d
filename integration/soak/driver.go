package main

import (
	"context"
	"math/rand/v2"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/idemgate/idemgate/integration/soak/soakwf"
	"github.com/idemgate/idemgate/store"
)

// plan is what the harness sends one workflow: the approvals (tokens, each in a
// soakwf.SignalApprove signal), the calls that come in soakwf.SignalCalls signals,
// and the calls it makes by soakwf.UpdateCall updates (the token is the update's ID).
type plan struct {
	id        string
	approvals []string
	signalled []soakwf.Call
	updates   []soakwf.Call
	rng       *rand.Rand // the driver's delays (one driver at a time)

	// driving: a driver goroutine serves the plan; kick wakes it to send everything
	// again (after a reset). Both under run.mu.
	driving bool
	kick    chan struct{}
}

// drives: the workflow needs the harness after its start.
func (p *plan) drives() bool { return len(p.approvals)+len(p.signalled)+len(p.updates) > 0 }

// Update is an outcome the harness got for a call it made by an update.
type Update struct {
	WorkflowID string
	Outcome    soakwf.Outcome
}

// kick makes the driver of workflow id send its signals and updates (again): it
// starts one, or wakes the running one.
func (r *run) kick(ctx context.Context, id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.plans[id]
	if p == nil || ctx.Err() != nil {
		return
	}
	if p.driving {
		select {
		case p.kick <- struct{}{}:
		default:
		}
		return
	}
	p.driving = true
	r.drivers.Go(func() { r.drive(ctx, p) })
}

// drive sends p's signals and updates, then waits until the workflow is closed (and
// stops) or a kick (and sends them all again).
func (r *run) drive(ctx context.Context, p *plan) {
	for {
		r.deliver(ctx, p)
		for woken := false; !woken; {
			select {
			case <-ctx.Done():
				r.mu.Lock()
				p.driving = false
				r.mu.Unlock()
				return
			case <-p.kick:
				woken = true
				continue
			case <-time.After(2 * time.Second):
			}
			if !r.closed(ctx, p.id) {
				continue
			}
			r.mu.Lock()
			select {
			case <-p.kick: // reset meanwhile: the new run needs them
				woken = true
			default:
				p.driving = false
			}
			r.mu.Unlock()
			if !woken {
				return
			}
		}
	}
}

// deliver sends the approvals one by one and the signalled calls in one or two
// signals, at random moments, while it makes the updates.
func (r *run) deliver(ctx context.Context, p *plan) {
	done := make(chan struct{}, len(p.updates))
	for _, c := range p.updates {
		go func() {
			r.update(ctx, p.id, c)
			done <- struct{}{}
		}()
	}
	pause := func() {
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(p.rng.IntN(1500)) * time.Millisecond):
		}
	}
	signal := func(name string, arg any) {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := r.cfg.Client.SignalWorkflow(sctx, p.id, "", name, arg); err != nil && ctx.Err() == nil && !r.closed(ctx, p.id) {
			r.logf("signal %s %s: %v", p.id, name, err)
		}
	}
	for _, t := range p.approvals {
		pause()
		signal(soakwf.SignalApprove, t)
	}
	if n := len(p.signalled); n > 0 {
		k := 1 + p.rng.IntN(n)
		pause()
		signal(soakwf.SignalCalls, p.signalled[:k])
		if k < n {
			pause()
			signal(soakwf.SignalCalls, p.signalled[k:])
		}
	}
	for range p.updates {
		<-done
	}
}

// update makes call c by an update of workflow id (its latest run) and records the
// outcome it gets; it tries again while the workflow runs (a reset or a worker's
// restart can fail the update; the same update ID is deduplicated by Temporal in a
// run that has it, and the call's key is the same in a run that does not).
func (r *run) update(ctx context.Context, id string, c soakwf.Call) {
	for ctx.Err() == nil {
		uctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		h, err := r.cfg.Client.UpdateWorkflow(uctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateID: c.Token,
			UpdateName: soakwf.UpdateCall, Args: []any{c}, WaitForStage: client.WorkflowUpdateStageCompleted})
		var o soakwf.Outcome
		if err == nil {
			err = h.Get(uctx, &o)
		}
		cancel()
		if err == nil {
			r.mu.Lock()
			r.updates = append(r.updates, Update{WorkflowID: id, Outcome: o})
			r.mu.Unlock()
			return
		}
		if ctx.Err() != nil || r.closed(ctx, id) {
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// closed: workflow id's latest run is not running (false when it cannot be told).
func (r *run) closed(ctx context.Context, id string) bool {
	d, err := r.cfg.Client.DescribeWorkflowExecution(ctx, id, "")
	return err == nil && d.WorkflowExecutionInfo.Status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
}

// ran counts the calls of each kind in RanKinds that actually ran.
func (r *run) ran(in Input) map[string]int {
	out := map[string]int{}
	for _, k := range RanKinds {
		out[k] = 0
	}
	calls := map[string]soakwf.Call{}
	for _, c := range in.Calls {
		calls[c.Token] = c
	}
	done := func(o soakwf.Outcome) {
		c := calls[o.Token]
		if !o.Done {
			return
		}
		if c.Approval {
			out[RanApproved]++
		}
		if c.Via == soakwf.ViaSignal {
			out[RanSignalled]++
		}
		if c.Tool == asyncTool {
			out[RanAsync]++
		}
	}
	for _, rn := range in.Runs {
		if rn.Result != nil {
			for _, o := range rn.Result.Calls {
				if calls[o.Token].Via != soakwf.ViaUpdate {
					done(o)
				}
			}
		}
	}
	for _, u := range in.Updates {
		if u.Outcome.Done {
			out[RanUpdate]++
			done(u.Outcome)
		}
	}
	for _, rc := range in.Receipts {
		if rc.Decision == store.DecisionHandedOff {
			out[RanHandedOff]++
		}
	}
	out[RanMCPRead] = r.mcp.Runs(mcpRead)
	out[RanMCPDestructive] = r.mcp.Runs(mcpDestructive)
	return out
}
