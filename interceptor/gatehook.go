package interceptor

import (
	sdkinterceptor "go.temporal.io/sdk/interceptor"

	"github.com/idemgate/idemgate/internal/gatehook"
)

func init() {
	gatehook.StopBackground = func(w sdkinterceptor.WorkerInterceptor) bool {
		r, ok := w.(*root)
		if ok {
			r.stopGiveBacks()
		}
		return ok
	}
}
