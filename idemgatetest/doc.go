// Package idemgatetest is a testing kit for workflows and activities that run
// behind the idemgate gate. One call gives Temporal's testsuite environments the
// gate with an in-memory store; a test then injects what is hard to make happen
// for real and reads back what the gate decided:
//
//	k := idemgatetest.New(t, idemgatetest.WithOptions(activities.GateOptions(nil)))
//	k.CrashAfterVendor("SendEmail") // the first attempt reached the vendor, then the worker died
//	env := k.NewWorkflowEnvironment()
//	env.RegisterWorkflow(workflows.AgentLoop)
//	env.RegisterActivity(tools)
//	env.ExecuteWorkflow(workflows.AgentLoop, input)
//	k.Decisions("SendEmail") // unknown (attempt 1), refused-in-flight (attempt 2)
//
// # Injections
//
// Each applies to the next call of the named activity that reaches it, once:
//
//   - CrashAfterVendor: the body runs (its vendor calls are made), then the worker
//     dies before it can record anything; the retry comes after the dead
//     attempt's lease. A destructive write is then refused (IdempotencyInFlight,
//     non-retryable) unless its vendor deduplicates on the key
//     (Options.VendorWindows) and the key left through idemhttp or the MCP
//     bridge (which record that it did); an idempotent one is taken over and
//     runs again with the same key.
//   - ResolvedAsSent: as CrashAfterVendor, then a person resolves the key as sent
//     with the result given (`idemgate resolve KEY --sent`): the retry returns
//     that result without running.
//   - StoreDown: the claim store cannot be reached for that call's claim: the
//     write fails closed with IdempotencyStoreUnavailable (retryable). For a
//     longer outage, use Kit.Store.FailWith.
//   - Pause (until Resume): writes of the activity are paused as by `idemgate
//     pause`: WriteGated, retryable.
//
// # Read-back
//
// Decisions lists the gate's decisions per activity (through
// interceptor.Options.Observer), Receipts the receipts in the store, BodyRuns how
// often the activity body ran and VendorCalls how many of its outgoing calls
// through idemhttp reached a vendor (every call but one that certainly was not
// sent). Every activity is counted; there is nothing to mark.
//
// # Activity tests
//
// NewActivityEnvironment gives a TestActivityEnvironment the gate and a key, which
// no workflow mints there: by default one derived from the environment and the
// activity ID (each ExecuteActivity is a new write); a test that wants to repeat
// one write sets its own with env.SetHeader(KeyHeader("order-4217/charge")).
//
// The kit's clock (Now) starts at the real time and jumps forward when an
// injected crash needs its lease to pass; it is the gate's clock too.
package idemgatetest
