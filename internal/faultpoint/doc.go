// Package faultpoint marks the boundaries of a gated write where the fault harness
// (integration/faults) kills the worker process, to prove that no crash point makes a
// side effect happen twice.
//
// In a normal build Hit is an empty function the compiler inlines away: production
// workers carry no fault injection. Built with the tag idemgate_faults
// (`go build -tags idemgate_faults`), Hit(p) sends SIGKILL to its own process when the
// environment variable IDEMGATE_KILL_AT names p, after writing "faultpoint: p" to
// stderr so the harness can tell which point fired.
package faultpoint

// The boundaries of a write, in order. Boundary 3 (the vendor performed the write and
// has not answered) is killed from the vendor's side, not here.
const (
	// BeforeClaim: the write is classified and keyed; nothing is stored yet.
	BeforeClaim = "before-claim"
	// AfterClaim: the claim is committed; the activity body has not run.
	AfterClaim = "after-claim"
	// AfterAnswer: the activity body returned (the vendor answered); the result is not stored.
	AfterAnswer = "after-answer"
	// AfterStore: the result is stored; Temporal has not been told the attempt completed.
	AfterStore = "after-store"
)

// Env is the environment variable that names the point to kill at.
const Env = "IDEMGATE_KILL_AT"
