package interceptor

import (
	"context"

	"go.temporal.io/sdk/client"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
)

// NewClientInterceptor returns the client interceptor for standalone activities
// (client.ExecuteActivity, no workflow): register it in client.Options.Interceptors
// of the client that starts them. It writes the caller's activity ID into the
// activity's header, and the gate (the worker interceptor from New) keys the call by
// it: the same activity ID and type in a namespace is the same write — on every
// attempt, and when the ID is started again after it closed (ActivityIDReusePolicy),
// which then returns the stored result. Without it the gate refuses a standalone
// write as keyless (IdempotencyKeyMissing); reads run either way.
func NewClientInterceptor() sdkinterceptor.ClientInterceptor {
	return &clientRoot{}
}

type clientRoot struct {
	sdkinterceptor.ClientInterceptorBase
}

func (*clientRoot) InterceptClient(next sdkinterceptor.ClientOutboundInterceptor) sdkinterceptor.ClientOutboundInterceptor {
	o := &clientOutbound{}
	o.Next = next
	return o
}

type clientOutbound struct {
	sdkinterceptor.ClientOutboundInterceptorBase
}

func (o *clientOutbound) ExecuteActivity(ctx context.Context, in *sdkinterceptor.ClientExecuteActivityInput) (client.ActivityHandle, error) {
	if fields := sdkinterceptor.Header(ctx); fields != nil && in.Options != nil {
		p, err := callHeader{Standalone: in.Options.ID}.payload()
		if err != nil {
			return nil, err
		}
		fields[headerKey] = p
	}
	return o.Next.ExecuteActivity(ctx, in)
}

// standaloneKey is the key of a standalone activity: its caller's activity ID.
func standaloneKey(namespace, activityType, activityID string) string {
	return mint("standalone", namespace, activityType, activityID)
}
