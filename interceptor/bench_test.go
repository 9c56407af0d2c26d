package interceptor_test

import (
	"context"
	"log/slog"
	"strconv"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memory"
)

type benchTools struct{}

func (benchTools) GetBalance(_ context.Context, c Charge) (string, error) { return c.Note, nil }
func (benchTools) ChargeCard(_ context.Context, c Charge) (string, error) { return c.Note, nil }
func (benchTools) UpsertContact(_ context.Context, c Charge) (string, error) {
	return c.Note, nil
}

// BenchmarkGatePath runs one activity per iteration through Temporal's test
// activity environment, bare and through the gate with the memory store, side by
// side: the difference is what the gate costs per activity (classification, key,
// hash, claim, result encoding, complete, receipts, log and metric).
func BenchmarkGatePath(b *testing.B) {
	header := &commonpb.Header{Fields: map[string]*commonpb.Payload{"idemgate": {
		Metadata: map[string][]byte{"encoding": []byte("json/plain")},
		Data:     []byte(`{"k":"5f0c9a6e-1d2b-5c3a-8e4f-6a7b8c9d0e1f","s":"bench"}`),
	}}}
	// "gated" runs the memory store, which does not report a durability: reads
	// append their receipt on the path (as under strict). "queued" runs it as a
	// store.DurabilityClaim store: the read's receipt goes to the read queue.
	cases := []struct {
		name     string
		activity string
		gated    bool
		freshKey bool
		queued   bool
	}{
		{"read/bare", "GetBalance", false, false, false},
		{"read/gated", "GetBalance", true, false, false},
		{"read/queued", "GetBalance", true, false, true},
		{"idempotent/bare", "UpsertContact", false, true, false},
		{"idempotent/gated", "UpsertContact", true, true, false},
		{"write/bare", "ChargeCard", false, true, false},
		{"write/gated", "ChargeCard", true, true, false},
		{"repeat/gated", "ChargeCard", true, false, false},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var suite testsuite.WorkflowTestSuite
			suite.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
			suite.SetHeader(header)
			env := suite.NewTestActivityEnvironment()
			if c.gated {
				var st store.Gate = memory.New()
				if c.queued {
					st = newBatchStore(store.DurabilityClaim)
				}
				gate, err := interceptor.New(interceptor.Options{Store: st,
					IdentifyingFields: map[string][]string{"ChargeCard": {"note"}, "UpsertContact": {"note"}}})
				if err != nil {
					b.Fatal(err)
				}
				env.SetWorkerOptions(worker.Options{Interceptors: []sdkinterceptor.WorkerInterceptor{gate}})
			}
			env.RegisterActivity(&benchTools{})
			arg := charge
			b.ReportAllocs()
			i := 0
			cpu0 := processCPU()
			for b.Loop() {
				if c.freshKey {
					i++
					arg.Note = strconv.Itoa(i)
				}
				if _, err := env.ExecuteActivity(c.activity, arg); err != nil {
					b.Fatal(err)
				}
			}
			// CPU time of the whole process per activity: on a shared machine the wall
			// time moves with the load, the CPU an activity costs much less.
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}
