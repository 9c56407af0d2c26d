// Package gatehook lets the module's own packages reach what the gate does not
// export: package interceptor fills it in when it is initialised.
package gatehook

import sdkinterceptor "go.temporal.io/sdk/interceptor"

// StopBackground ends the background store work (give-backs, results stored
// later) of a gate made by interceptor.New or NewPlugin, as a plugin does before it
// closes its store; false when w is no such gate. The testing kit calls it when a
// test ends: its in-memory store is not used again, and a store the test left down
// would keep the retries going for the rest of the test binary.
var StopBackground func(w sdkinterceptor.WorkerInterceptor) bool
