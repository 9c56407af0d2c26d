package interceptor

import (
	"context"
	"errors"
	"fmt"
	"time"

	sdkinterceptor "go.temporal.io/sdk/interceptor"
)

// Init wraps the activity's outbound calls so the gate sees its heartbeats.
func (a *activityInbound) Init(outbound sdkinterceptor.ActivityOutboundInterceptor) error {
	o := &activityOutbound{}
	o.Next = outbound
	return a.Next.Init(o)
}

type activityOutbound struct {
	sdkinterceptor.ActivityOutboundInterceptorBase
}

func (o *activityOutbound) RecordHeartbeat(ctx context.Context, details ...any) {
	if w, ok := ctx.Value(watchdogKey{}).(*watchdog); ok {
		w.beat()
	}
	o.Next.RecordHeartbeat(ctx, details...)
}

type watchdogKey struct{}

// errHeartbeatTimeout ends a write's context when its heartbeat timeout passed.
var errHeartbeatTimeout = errors.New("idemgate: the attempt missed its heartbeat timeout; Temporal has given up on it")

// watchdog ends an attempt's context once its heartbeat timeout passes without a
// heartbeat. Temporal has then given the activity up and scheduled a retry, but the
// SDK only cancels the attempt's context when a later heartbeat of it reaches the
// server: without the watchdog, a stalled attempt that resumes and calls the vendor
// before its start-to-close deadline is not stopped by idemhttp (which refuses to send
// once the context is done).
type watchdog struct {
	timeout time.Duration
	timer   *time.Timer
}

func (w *watchdog) beat() { w.timer.Reset(w.timeout) }

// withHeartbeatWatchdog returns ctx ended after timeout without a heartbeat, and the
// function that stops the watchdog.
func withHeartbeatWatchdog(ctx context.Context, timeout time.Duration) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	w := &watchdog{timeout: timeout}
	w.timer = time.AfterFunc(timeout, func() {
		cancel(fmt.Errorf("%w (heartbeat timeout %s)", errHeartbeatTimeout, timeout))
	})
	return context.WithValue(ctx, watchdogKey{}, w), func() {
		w.timer.Stop()
		cancel(nil)
	}
}
