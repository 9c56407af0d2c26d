package interceptor_test

import (
	"context"
	"log/slog"
	"strconv"
	"sync/atomic"
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

// nopStore is a store.Gate that does nothing but count the calls: the gate's own
// work is what a gated activity costs over a bare one with it (BenchmarkGatePath's
// "own" cases). Begin claims every key — or, with result set, answers that the
// key completed with that result (a repeat).
type nopStore struct {
	result []byte
	calls  atomic.Int64
}

func (s *nopStore) Begin(_ context.Context, c store.Claim) (store.Outcome, store.Record, error) {
	s.calls.Add(1)
	if s.result != nil {
		return store.OutcomeCompleted, store.Record{Key: c.Key, Activity: c.Activity, Effect: c.Effect, ArgsHash: c.ArgsHash,
			State: store.StateCompleted, Result: s.result, Attempt: 1, CreatedAt: c.Now, UpdatedAt: c.Now}, nil
	}
	return store.OutcomeClaimed, store.Record{Key: c.Key, Activity: c.Activity, Effect: c.Effect, ArgsHash: c.ArgsHash,
		State: store.StateClaimed, Owner: c.Owner, Lease: c.Lease, Attempt: c.Attempt, Claims: 1, CreatedAt: c.Now,
		UpdatedAt: c.Now}, nil
}
func (s *nopStore) Complete(context.Context, store.Transition) error { s.calls.Add(1); return nil }
func (s *nopStore) Release(context.Context, store.Transition) error  { s.calls.Add(1); return nil }
func (s *nopStore) Abandon(context.Context, store.Transition) error  { s.calls.Add(1); return nil }
func (s *nopStore) Get(context.Context, string) (store.Record, error) {
	s.calls.Add(1)
	return store.Record{}, store.ErrNotFound
}
func (s *nopStore) Append(context.Context, store.Receipt) error   { s.calls.Add(1); return nil }
func (s *nopStore) Pauses(context.Context) ([]store.Pause, error) { s.calls.Add(1); return nil, nil }
func (s *nopStore) Identity() string                              { return "nop" }
func (s *nopStore) RecordSent(context.Context, string, string, store.Sent) error {
	s.calls.Add(1)
	return nil
}

// BenchmarkGatePath runs one activity per iteration through Temporal's test
// activity environment, bare and through the gate with the memory store, side by
// side: the difference is what the gate costs per activity (classification, key,
// hash, claim, result encoding, complete, receipts, log and metric). The "own"
// cases run the gate on nopStore: own − bare is the gate's own work, without a
// store's.
func BenchmarkGatePath(b *testing.B) {
	header := &commonpb.Header{Fields: map[string]*commonpb.Payload{"idemgate": {
		Metadata: map[string][]byte{"encoding": []byte("json/plain")},
		Data:     []byte(`{"k":"5f0c9a6e-1d2b-5c3a-8e4f-6a7b8c9d0e1f","s":"bench"}`),
	}}}
	// "gated" runs the memory store, which does not report a durability: reads
	// append their receipt on the path (as under strict). "queued" runs it as a
	// store.DurabilityClaim store: the read's receipt goes to the read queue. "own"
	// runs nopStore.
	cases := []struct {
		name     string
		activity string
		gated    bool
		freshKey bool
		queued   bool
		own      bool
	}{
		{"read/bare", "GetBalance", false, false, false, false},
		{"read/gated", "GetBalance", true, false, false, false},
		{"read/queued", "GetBalance", true, false, true, false},
		{"read/own", "GetBalance", true, false, false, true},
		{"idempotent/bare", "UpsertContact", false, true, false, false},
		{"idempotent/gated", "UpsertContact", true, true, false, false},
		{"idempotent/own", "UpsertContact", true, true, false, true},
		{"write/bare", "ChargeCard", false, true, false, false},
		{"write/gated", "ChargeCard", true, true, false, false},
		{"write/own", "ChargeCard", true, true, false, true},
		{"repeat/gated", "ChargeCard", true, false, false, false},
		{"repeat/own", "ChargeCard", true, false, false, true},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var suite testsuite.WorkflowTestSuite
			suite.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
			suite.SetHeader(header)
			env := suite.NewTestActivityEnvironment()
			if c.gated {
				var st store.Gate = memory.New()
				switch {
				case c.queued:
					st = newBatchStore(store.DurabilityClaim)
				case c.own:
					nop := &nopStore{}
					if !c.freshKey && c.activity != "GetBalance" {
						// A repeat: the key completed with the body's result.
						data, _, err := interceptor.EncodeResult(nil, charge.Note)
						if err != nil {
							b.Fatal(err)
						}
						nop.result = data
					}
					st = nop
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
