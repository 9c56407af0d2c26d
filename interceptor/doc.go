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
// The plugin is the usual form: one entry in worker.Options.
//
//	st, err := sqlite.Open(ctx, "idemgate.db") // postgres.Open(ctx, dsn) for a fleet of workers
//	if err != nil { return err }
//	gate, err := interceptor.NewPlugin(interceptor.Options{Store: st},
//		interceptor.PluginOptions{StoreName: "sqlite idemgate.db", CloseStore: true})
//	if err != nil { return err }
//	w := worker.New(c, "agent", worker.Options{Plugins: []worker.Plugin{gate}})
//
// At start the plugin logs the census of the worker's activities, checks the store
// before the worker polls and starts asking witnesses about blocked writes; at stop
// it waits for gated attempts to store their outcome, then closes the store. The
// same value mints keys in workflows and gates activities, so the workers that run
// the workflows and the activities both need it (a client made with it in
// client.Options.Plugins hands it to every worker made from that client).
//
// New is the lower-level form, a bare worker interceptor for code that assembles
// worker.Options.Interceptors itself (replayers, tests); the census, the store
// check, the witnesses' reconciler and closing the store are then the caller's:
//
//	gate, err := interceptor.New(interceptor.Options{Store: st})
//	...
//	w := worker.New(c, "agent", worker.Options{Interceptors: []sdkinterceptor.WorkerInterceptor{gate}})
//	...
//	w.Stop()
//	interceptor.Flush(ctx, gate) // the last read receipts, before st.Close()
//
// The same value mints keys in workflows and gates activities, so the workers that
// run the workflows and the activities both need it.
//
// # Read receipts
//
// Under the store's default durability (store.DurabilityClaim) a read writes
// nothing on its path: its receipt is queued and appended in a batch within 100 ms
// (one transaction or round trip for many reads), and at Flush; the plugin flushes
// at its workers' stop. A crash of the process loses the receipts of its last reads,
// never a claim or a write's receipt. A full queue (Options.ReadReceiptQueue) slows
// reads down rather than drop their receipts; a receipt is dropped only while the
// store fails or when it refuses that receipt, logged and counted
// (MetricReadReceiptsDropped). Under store.DurabilityStrict each read appends its
// receipt before it returns.
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
// the fields that identify the record: calls with the same values are the same write
// within the key scope, and if their other arguments differ the second is an
// IdempotencyConflict (fields are matched by JSON or Go name, case-insensitively, in
// the first argument that has them). A generic tool-calling activity named in
// Options.ToolNames is classified, keyed, looked up in every other option and shown
// in receipts by the tool's name. Calls made in an update handler are numbered
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
// vendor deduplicates on the forwarded key: then the retry is re-sent with the same
// key while the first attempt is inside the vendor's window (up to 2×Options.ClockSkew
// before its end, for clock skew between the workers and the vendor) — and only if the claim
// holds the evidence that the key left through a keyed transport (idemhttp, the MCP
// bridge), which records it in the store just before the key leaves. A body that
// calls the vendor with a plain http.Client sends no key the vendor could
// deduplicate on, and its unknown outcome is refused like any other. The evidence
// of every attempt that claimed the key since its first is kept (store.Exits): each
// of them must have recorded its own, and the re-send stops at the shortest window
// that any of them names, for it reaches every vendor the key may have reached. Such a re-send is the vendor's
// deduplication acting as a witness (package witness): a "resent" receipt
// (store.DecisionResent) beside the takeover names it, Actor "witness:vendor-dedup",
// with the evidence and the window as its Reason; without that receipt nothing is
// re-sent. Before refusing, the gate asks Options.Witnesses (an idemhttp lookup by key,
// a function of yours); a destructive write that has witnesses keeps the same evidence
// of where its key went, which a vendor's witness reads. The refusal quotes the
// earlier attempt's own error from its receipt (WithheldCall.Earlier, when the store
// can list receipts): often the root cause, such as a validation error the activity
// raised before sending and did not mark NotCommitted.
//
// One store per key space: the workflow worker puts its store's identity
// (store.Gate.Identity) beside the key, and an activity worker on another store — a
// leftover fleet polling the same task queue — refuses the write with
// IdempotencyWrongStore (retryable, nothing claimed or run, both stores named), so a
// worker on the right store takes a later attempt instead of the key being claimed,
// and the write sent, once in each store. A header without an identity (a workflow
// worker of an older idemgate) is accepted.
//
// Before a person is asked, witnesses are (package witness): the gate asks them,
// in order, when a claim comes back unknown — Temporal's own history first (the
// attempt's completion may have reached Temporal although the store lost it), then
// Options.Witnesses for the activity (a vendor lookup, an MCP server's Dedup, a
// function of yours). A witness's "sent" stores the result it found and the retry
// returns it; its "not sent" counts only when it was asked at or after the earlier
// attempt's lease plus store.LeaseMargin (store.Settleable: until then a request
// written before the deadline may still land), and the write then runs once more; an error,
// a timeout (Options.WitnessTimeout) or "cannot tell" settles nothing, and the
// refusal quotes what each said. Every settlement is a receipt naming the witness.
//
// To let a blocked workflow continue by itself, set Options.HoldUnknown: the
// refusal is then retryable (in Temporal's benign error category: the SDK neither
// logs it at ERROR nor counts it as a failure) with NextRetryDelay HoldUnknown, and
// never before the earlier attempt's lease passed, so the activity's retry policy
// keeps it waiting until a witness or a person settles the key (`idemgate resolve
// KEY --sent|--not-sent`); the next retry returns the stored result or runs the
// write once more. Every refusal is an attempt: give such activities MaximumAttempts 0 and a ScheduleToClose
// timeout that bounds the wait: a destructive write's unknown outcome is never
// forgotten (store.Expired), so the hold lasts until it is settled or
// the retry policy gives up — past Options.Window too.
//
//	gate, err := interceptor.New(interceptor.Options{Store: st, HoldUnknown: 30 * time.Second})
//	...
//	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
//		StartToCloseTimeout:    30 * time.Second,
//		ScheduleToCloseTimeout: 12 * time.Hour, // how long to wait for a person
//		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 0},
//	})
//
// A repeat of a finished write returns the stored payloads as they are, so give
// Options.DataConverter the converter the worker's client uses, codec included: the
// stored result is then exactly what a fresh attempt sends (and encrypted at rest
// when the codec encrypts).
//
// When the gate knows the body did not run — a claim whose reply was lost, a
// definite failure — it gives its own claim back (owner-checked), retrying in the
// background while the store is down, until the store answers — past the attempt's
// lease too (the give-back is owner-checked, so a late one cannot touch a claim taken
// since) — or the plugin stops.
//
// # Clocks
//
// A claim is held until the attempt's deadline plus twice Options.ClockSkew, so a
// worker whose clock runs ahead never takes over (or reports as unknown) a claim
// whose owner, with a clock behind, may still be running: every retry after a
// timeout waits that much longer. The same bound keeps a re-send that relies on the
// vendor's deduplication (Options.VendorWindows, idemhttp's Profile.Window) 2×ClockSkew
// short of the vendor's window: one skew, everywhere. The default, 2 s, is generous
// for NTP-synced fleets (within milliseconds); set it to your fleet's bound.
//
// # Pauses
//
// `idemgate pause` keeps a kill switch in the store. Before it claims a write, the
// gate checks the pauses, re-read at most every Options.PauseRefresh (2 s): a paused
// write fails with a retryable, benign WriteGated that says who paused it, when and why.
// Reads are never paused. When the pauses cannot be read, the last known ones stay
// in force.
//
// # Errors
//
// The gate's errors are top-level *temporal.ApplicationError values with the
// ErrType* constants as types; ErrorType reads the type back from an activity error
// in workflow code. The expected, retryable refusals — IdempotencyInFlight while the
// owner's lease runs, WriteGated of a pause, a refusal held by Options.HoldUnknown —
// are in temporal.ApplicationErrorCategoryBenign: the SDK logs them at DEBUG, not as
// ERROR, and counts no failure; their NextRetryDelay is when the answer can change
// (the lease, the next pause refresh, the hold). On the last attempt the activity's
// retry policy allows (MaximumAttempts, from activity.Info.RetryPolicy) nothing
// retries them: such a refusal ends the activity, and is an ordinary (loud) error
// that says so.
package interceptor
