// Package interceptor is idemgate's Temporal worker interceptor: it makes the side
// effects of activities at-most-once.
//
// # Safe defaults
//
// Every activity is classified by its name: read, idempotent write or destructive.
// Reads always run. A write claims its key in a durable store before it runs and
// stores its result before it acknowledges. A write whose earlier attempt may
// already have reached the outside world is refused rather than fired twice; a
// repeat of a finished write returns the stored result without running. A name with
// no known verb is destructive and flagged for review. When the gate cannot tell
// whether a side effect happened, it refuses — with the exact withheld call.
//
// # Wiring
//
//	st, err := sqlite.Open(ctx, "idemgate.db")
//	...
//	gate, err := interceptor.New(interceptor.Options{Store: st})
//	...
//	w := worker.New(c, "agent", worker.Options{Interceptors: []sdkinterceptor.WorkerInterceptor{gate}})
//
// The same value mints keys in workflows and gates activities, so the workers that
// run the workflows and the activities both need it.
//
// # Keys
//
// Keys are minted in the workflow outbound interceptor from deterministic inputs
// only: namespace, workflow ID, the original run ID (ScopeExecution) or not
// (ScopeWorkflowID), a continue-as-new generation, the activity type and its
// occurrence number among calls of that type. They are UUIDs, stable across
// retries, worker restarts, replay and reset, and distinct across executions and
// continue-as-new runs. WithKey gives a caller-owned business key instead (such a
// call takes no occurrence number); Options.IdentifyingFields derives the key from
// the fields that identify the record. Calls made in an update handler are numbered
// per update ID, so a reset that re-applies the update elsewhere moves no key. Give
// a call made where a signal is read, or added later in a workflow.GetVersion
// branch, a WithKey key: its place among the other calls of its type can move. A
// standalone activity (client.ExecuteActivity) is keyed by its caller's activity ID
// when the client runs NewClientInterceptor. Inside an activity, KeyFromContext
// returns the key; package idemhttp forwards it to the vendor.
//
// # Outcomes
//
// An activity error is an unknown outcome — the claim stays — unless the activity
// wraps it with NotCommitted, or every call it made through idemhttp was definitely
// not performed. An idempotent write whose earlier attempt ended unknown runs again
// with the same key; a destructive one is refused with IdempotencyInFlight
// (non-retryable) until a person resolves it, unless Options.VendorWindows says the
// vendor deduplicates on the forwarded key. With Options.HoldUnknown the refusal
// is retryable instead, so the workflow waits and continues by itself once the key
// is resolved (`idemgate resolve`). The refusal quotes the earlier attempt's own
// error from its receipt (WithheldCall.Earlier): often the root cause, such as a
// validation error the activity raised before sending and did not mark NotCommitted.
//
// When the gate knows the body did not run — a claim whose reply was lost, a
// definite failure — it gives its own claim back (owner-checked), retrying in the
// background while the store is down until the store answers or the lease passes.
//
// # Pauses
//
// `idemgate pause` keeps a kill switch in the store. Before it claims a write, the
// gate checks the pauses, re-read at most every Options.PauseRefresh (2 s): a paused
// write fails with a retryable WriteGated that says who paused it, when and why.
// Reads are never paused. When the pauses cannot be read, the last known ones stay
// in force.
//
// # Errors
//
// The gate's errors are top-level *temporal.ApplicationError values with the
// ErrType* constants as types; ErrorType reads the type back from an activity error
// in workflow code.
package interceptor
