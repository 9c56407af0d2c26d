// Package faults is idemgate's fault harness: it proves "never twice" under the faults
// that cause duplicates in production, on a real Temporal server, and measures what the
// gate costs.
//
// The worker runs as its own OS process (./workerproc, built with -tags
// idemgate_faults) and is killed with SIGKILL at each boundary of a write: before the
// claim, after the claim, after the vendor performed the write but before it answered
// (killed from the vendor simulator's side), after the answer, and after the result was
// stored but before Temporal got the completion. A second worker process then finishes
// the job, and the vendor simulators (package vendorsim) count what really happened:
// side effects, duplicates, refusals that need a person, and lost writes. The worker
// asks a witness before it refuses an unknown outcome (the card processor's lookup by
// key, which the harness serves beside the vendor) and holds what no witness can
// tell (Options.HoldUnknown); the harness reads the trial's receipts for who settled
// each unknown outcome and checks every settlement against the vendor's ledger
// (Shares, SharesMarkdown). A witness's "not sent" counts only from the claim's lease
// plus store.LeaseMargin (5 minutes): faultreport waits for that retry; the tests
// (Env.Scheduled) end the trial once it is scheduled and count it apart.
//
// RunMatrix runs the trials; Markdown prints the table; Violations lists what breaks
// the promise. The tests in this package run every cell with a small number of trials
// (and the zombie-attempt and store-outage cases); integration/faults/faultreport runs the
// documented full report and the price measurement (Price). See integration/FAULTS.md.
package faults
