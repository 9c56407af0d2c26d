//go:build !race

// Allocation counts: the race detector changes them (sync.Pool drops items at random).

package interceptor_test

import (
	"log/slog"
	"strconv"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/idemgate/idemgate/interceptor"
)

// The gate's own work on a write, counted in allocations (what a busy machine does
// not blur): a destructive and an idempotent write through the gate on nopStore,
// which stores nothing, against the same write bare, in Temporal's test activity
// environment with a discarded log and no metrics handler. Every allocation is CPU
// the gate spends and the garbage collector spends again (docs/speed.md, "The
// gate's own work").
func TestGateOwnAllocs(t *testing.T) {
	header := &commonpb.Header{Fields: map[string]*commonpb.Payload{"idemgate": {
		Metadata: map[string][]byte{"encoding": []byte("json/plain")},
		// As a workflow worker writes it (the scope's NULs escaped).
		Data: []byte(`{"k":"5f0c9a6e-1d2b-5c3a-8e4f-6a7b8c9d0e1f","s":"execution\u0000wf-1\u0000run-1\u00000","rt":"wf-1"}`),
	}}}
	allocs := func(activity string, gated bool) float64 {
		var suite testsuite.WorkflowTestSuite
		suite.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
		suite.SetHeader(header)
		env := suite.NewTestActivityEnvironment()
		if gated {
			gate, err := interceptor.New(interceptor.Options{Store: &nopStore{},
				IdentifyingFields: map[string][]string{"ChargeCard": {"note"}, "UpsertContact": {"note"}}})
			if err != nil {
				t.Fatal(err)
			}
			env.SetWorkerOptions(worker.Options{Interceptors: []sdkinterceptor.WorkerInterceptor{gate}})
		}
		env.RegisterActivity(&benchTools{})
		arg, i := charge, 0
		return testing.AllocsPerRun(300, func() {
			i++
			arg.Note = strconv.Itoa(i)
			if _, err := env.ExecuteActivity(activity, arg); err != nil {
				t.Fatal(err)
			}
		})
	}
	for _, activity := range []string{"ChargeCard", "UpsertContact"} {
		bare, gated := allocs(activity, false), allocs(activity, true)
		t.Logf("%s: %.0f allocations bare, %.0f gated: the gate's own %.0f", activity, bare, gated, gated-bare)
		if own := gated - bare; own > gateOwnAllocs {
			t.Errorf("%s: the gate allocates %.0f times per write of its own (%.0f gated, %.0f bare); want at most %d",
				activity, own, gated, bare, gateOwnAllocs)
		}
	}
}

// gateOwnAllocs bounds the gate's own allocations per write (TestGateOwnAllocs).
const gateOwnAllocs = 38
