package idemgatetest_test

import (
	"testing"

	"go.temporal.io/sdk/worker"

	"github.com/idemgate/idemgate/idemgatetest"
)

// docs/review/atk-kit.md, finding 2: an activity test that needs worker options of
// its own (a BackgroundActivityContext, say) had no way to keep the gate —
// k.WorkerOptions is for workflow environments and dropped the kit's per-call key,
// so every write was refused as IdempotencyKeyMissing. ActivityWorkerOptions keeps
// the key and the gate: each call is a write of its own, sent once.
func TestActivityWorkerOptionsKeepTheKey(t *testing.T) {
	w, tools := world(t)
	k := idemgatetest.New(t)
	env := k.NewActivityEnvironment()
	env.SetWorkerOptions(k.ActivityWorkerOptions(worker.Options{}))
	env.RegisterActivity(tools)
	other := mail
	other.To = "grace@example.com"
	for _, m := range []any{mail, other} {
		if _, err := env.ExecuteActivity(tools.SendEmail, m); err != nil {
			t.Fatal(err)
		}
	}
	ds := k.Decisions("SendEmail")
	if len(ds) != 2 || ds[0].Key == ds[1].Key || w.Email.Total() != 2 || k.BodyRuns("SendEmail") != 2 {
		t.Fatalf("decisions %+v; e-mails %d, body runs %d; want two writes, each sent once", ds, w.Email.Total(), k.BodyRuns("SendEmail"))
	}
}
