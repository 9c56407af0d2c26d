package idemhttp_test

import (
	"fmt"
	"time"

	"github.com/idemgate/idemgate/idemhttp"
)

// A profile for your own vendor, written outside this module: its answers map to
// the exported outcomes (idemhttp.InFlight, idemhttp.Conflict, …), which the gate
// reads after a failed attempt.
func ExampleOutcome() {
	acme := idemhttp.Profile{
		Name: "acme", Where: idemhttp.InHeader, Field: "Acme-Request-Key",
		MaxLen: 64, Dedupes: true, Window: 48 * time.Hour,
		Answers: []idemhttp.Answer{
			{Status: 409, Code: "request_in_progress", Outcome: idemhttp.InFlight},
			{Status: 422, Code: "key_reused", Outcome: idemhttp.Conflict},
			{Status: 409, Code: "already_done", Outcome: idemhttp.Committed, Replayed: true},
			{Status: 503, Outcome: idemhttp.Unknown},
		},
		ReplayHeader: "Acme-Replayed", ReplayValue: "true",
	}
	if err := acme.Validate(); err != nil {
		fmt.Println(err)
		return
	}
	for _, a := range acme.Answers {
		var o idemhttp.Outcome = a.Outcome
		fmt.Printf("%d %q: %s (proves nothing was done: %v)\n", a.Status, a.Code, o, o.Definite())
	}
	// Output:
	// 409 "request_in_progress": in-flight (proves nothing was done: false)
	// 422 "key_reused": conflict (proves nothing was done: true)
	// 409 "already_done": committed (proves nothing was done: false)
	// 503 "": unknown (proves nothing was done: false)
}
