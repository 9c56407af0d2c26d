// Package idemgatetest is a testing kit for workflows and activities that run
// behind the idemgate gate. One call gives Temporal's testsuite environments the
// gate with an in-memory store; a test then injects what is hard to make happen
// for real and reads back what the gate decided:
//
//	func TestCheckoutSurvivesACrash(t *testing.T) {
//		k := idemgatetest.New(t, idemgatetest.WithOptions(interceptor.Options{
//			// The options your workers run with (see "Your options decide" below).
//			VendorWindows: map[string]time.Duration{"ChargeCard": 24 * time.Hour},
//		}))
//		k.CrashAfterVendor("SendEmail") // the body reached the vendor, then the worker died
//		env := k.NewWorkflowEnvironment()
//		env.RegisterWorkflow(Checkout)
//		env.RegisterActivity(shop)
//		env.ExecuteWorkflow(Checkout, "order-4217")
//		// The e-mail went out once; its retry was refused with the withheld call.
//		for _, d := range k.Decisions("SendEmail") {
//			t.Log(d.Attempt, d.Decision) // 1 unknown, 2 refused-in-flight
//		}
//	}
//
// The package's Example runs this test whole, with its own Checkout workflow and
// activities.
//
// # Your options decide what a crash turns into
//
// Give WithOptions the interceptor.Options your workers use, because they decide
// what an injected crash becomes. When a destructive write reached its vendor and
// the worker died before recording the answer, the gate cannot know whether the
// write happened. It then does one of two things:
//
//   - Re-send it with the same key, if Options.VendorWindows names the activity
//     (you say its vendor remembers keys for that long and answers a repeat from
//     its own store) and the key left through idemhttp or the MCP bridge. The
//     vendor answers the re-send with the first result: one charge.
//   - Refuse it otherwise: the retry fails with IdempotencyInFlight
//     (non-retryable) and the exact withheld call, until a witness or a person
//     settles the key. A vendor that takes no key would do the write twice.
//
// With the zero Options every destructive crash is refused; a worker whose
// options name a window re-sends. Test with the options you run, or the test
// checks a behaviour production does not have.
//
// # Injections
//
// Each applies to the next call of the named activity that reaches it, once;
// several on one activity apply to its calls in the order made. For a generic
// tool-calling activity (interceptor.Options.ToolNames) name the tool as the gate
// does ("crm.delete_contact"), or the activity type for any of its tools:
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
// # Checks at the end of the test
//
// A test whose premise did not hold fails, with a message that names what to
// change: an injection that never applied (its activity misspelled, not
// registered, or not called after it), an activity name given to Pause or a
// read-back that no environment registered or ran, and an activity that ran
// without the gate — because the test called env.SetWorkerOptions after the kit
// made the environment, which replaces the kit's interceptors (use
// env.SetWorkerOptions(k.WorkerOptions(worker.Options{...})) instead, and
// k.ActivityWorkerOptions on an activity environment, which also keeps its per-call key).
//
// # Mocked activities
//
// Activities mocked with env.OnActivity(...).Return(values) go through the gate
// like real ones (keys, classes, stored results, injections): before an activity
// starts, the kit turns each mock's values into a function of the activity's
// signature that returns them, which the testsuite runs through the worker's
// interceptors (it returns plain values without them). BodyRuns counts the
// mock's runs. A mocked error is an unmarked error: for a write its outcome is
// unknown, as for a real activity; return interceptor.NotCommitted(err) from a
// mocked function to say the write did not happen. The kit reaches the mocks
// through the testsuite's unexported fields; when a release of the SDK moves them,
// or the test sets its own activity-started listener, a mocked activity that
// skipped the gate fails the test instead.
//
// The testsuite consults a mock before the worker's interceptors run: a mock's
// call count (Once, Times, AssertExpectations) and its Run callback count every
// attempt Temporal made, including those the gate refused or answered from the
// store. Count what was sent with BodyRuns, and give a mock that a retry must
// reach no Once or Times limit (testify fails the retry before the gate sees it).
//
// # Read-back
//
// Decisions lists the gate's decisions per activity (through
// interceptor.Options.Observer), Receipts the receipts in the store (for a generic
// tool activity, by tool, or by the activity type for all its tools), BodyRuns how
// often the activity body ran and VendorCalls how many of its outgoing calls
// through idemhttp reached a vendor (every call but one that certainly was not
// sent). Every activity is counted; there is nothing to mark.
//
// # Activity tests
//
// NewActivityEnvironment gives a TestActivityEnvironment the gate and a key, which
// no workflow mints there: by default one per call (each ExecuteActivity or
// ExecuteLocalActivity is a new write, whatever other header fields the test set
// for its context propagators); a test that wants to repeat one write sets its own
// with env.SetHeader(KeyHeader("order-4217/charge")).
//
// The kit's environments allow for a busy machine: a deadlock detection timeout
// of a minute (DeadlockDetectionTimeout) instead of the SDK's 1 s of wall clock,
// and an idle timeout of five (TestTimeout).
//
// One kit is one store for all the environments it makes: each workflow
// environment has a workflow ID of its own, but a business key
// (interceptor.WithKey) is scoped by namespace and activity type only, and every
// testsuite environment has the same namespace. Cases that must not share stored
// results (table-driven cases with the same business key) each take a kit of their
// own.
//
// New(nil) (for Example functions) runs none of the end-of-test checks.
//
// The kit's clock (Now) starts at the real time and jumps forward when an
// injected crash needs its lease to pass; it is the gate's clock too.
package idemgatetest
