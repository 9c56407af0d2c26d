package interceptor

import "go.temporal.io/sdk/workflow"

// RerunPolicy gates the re-run of a recorded agent job: reads always run; idempotent
// writes run only with AllowWrites; destructive writes only with AllowDestructive,
// which implies AllowWrites. A withheld write fails with WriteGated (non-retryable),
// and its message and receipt carry the exact call.
type RerunPolicy struct {
	AllowWrites      bool `json:"w,omitempty"`
	AllowDestructive bool `json:"d,omitempty"`
}

// Allows reports whether the policy lets an activity of effect e run.
func (p RerunPolicy) Allows(e Effect) bool {
	switch e {
	case Read:
		return true
	case IdempotentWrite:
		return p.AllowWrites || p.AllowDestructive
	default:
		return p.AllowDestructive
	}
}

type rerunPolicyCtx struct{}

// WithRerunPolicy marks the activities scheduled with the returned context as the
// re-run of a recorded job, gated by p.
func WithRerunPolicy(ctx workflow.Context, p RerunPolicy) workflow.Context {
	return workflow.WithValue(ctx, rerunPolicyCtx{}, p)
}
