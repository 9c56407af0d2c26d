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
	"github.com/idemgate/idemgate/store/memory"
)

type benchTools struct{}

func (benchTools) GetBalance(_ context.Context, c Charge) (string, error) { return c.Note, nil }
func (benchTools) ChargeCard(_ context.Context, c Charge) (string, error) { return c.Note, nil }

// BenchmarkGatePath runs one activity per iteration through Temporal's test
// activity environment, bare and through the gate with the memory store, side by
// side: the difference is what the gate costs per activity (classification, key,
// hash, claim, result encoding, complete, receipts, log and metric).
func BenchmarkGatePath(b *testing.B) {
	header := &commonpb.Header{Fields: map[string]*commonpb.Payload{"idemgate": {
		Metadata: map[string][]byte{"encoding": []byte("json/plain")},
		Data:     []byte(`{"k":"5f0c9a6e-1d2b-5c3a-8e4f-6a7b8c9d0e1f","s":"bench"}`),
	}}}
	cases := []struct {
		name     string
		activity string
		gated    bool
		freshKey bool
	}{
		{"read/bare", "GetBalance", false, false},
		{"read/gated", "GetBalance", true, false},
		{"write/bare", "ChargeCard", false, true},
		{"write/gated", "ChargeCard", true, true},
		{"repeat/gated", "ChargeCard", true, false},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var suite testsuite.WorkflowTestSuite
			suite.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
			suite.SetHeader(header)
			env := suite.NewTestActivityEnvironment()
			if c.gated {
				gate, err := interceptor.New(interceptor.Options{Store: memory.New(),
					IdentifyingFields: map[string][]string{"ChargeCard": {"note"}}})
				if err != nil {
					b.Fatal(err)
				}
				env.SetWorkerOptions(worker.Options{Interceptors: []sdkinterceptor.WorkerInterceptor{gate}})
			}
			env.RegisterActivity(&benchTools{})
			arg := charge
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if c.freshKey {
					i++
					arg.Note = strconv.Itoa(i)
				}
				if _, err := env.ExecuteActivity(c.activity, arg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
