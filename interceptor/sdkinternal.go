package interceptor

// sdkActivities are the Temporal Go SDK's own activities (go.temporal.io/sdk
// internal/session.go): a session's creation activity heartbeats through the SDK's
// internal client for as long as the session is open, so gating it would cancel
// every session at its heartbeat timeout. Matched by exact name.
var sdkActivities = map[string]bool{
	"internalSessionCreationActivity":   true,
	"internalSessionCompletionActivity": true,
}

// sdkInternal reports whether name is one of the SDK's own activities: never keyed,
// gated or recorded.
func sdkInternal(name string) bool { return sdkActivities[name] }
