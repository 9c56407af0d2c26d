package witness_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memory"
	"github.com/idemgate/idemgate/witness"
)

// A witness with an empty name went to the store as a Transition with Witness ""
// — a person's — and was judged by the person's rule (store.Resolvable), under
// which an abandoned claim (StateUnknown) settles at once: its "not sent", asked
// before the earlier attempt's lease passed, released the key, and the retry sent
// the write again while the earlier attempt could still reach the vendor.
func TestAtkCoreUnnamedWitnessIsNotAPerson(t *testing.T) {
	st := memory.New()
	rec := unknown(t, st, "k-unnamed") // abandoned at t0+1s, lease t0+1m
	a := witness.Asker{Store: st, Window: time.Hour, Now: func() time.Time { return t0.Add(2 * time.Second) }}
	unnamed := witness.Func("", func(context.Context, witness.Query) (witness.Answer, error) {
		return witness.Answer{Verdict: witness.NotSent, Evidence: "no charge with that key"}, nil
	})
	rep, err := a.Ask(context.Background(), rec, []witness.Witness{unnamed}, false)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := st.Get(context.Background(), "k-unnamed"); got.State != store.StateUnknown || rep.Settled {
		t.Fatalf("an unnamed witness's not-sent before the lease settled the key: record %s, report %s", got.State, rep.Summary())
	}
	if len(rep.Said) != 1 || rep.Said[0].Err == nil || !strings.Contains(rep.Said[0].Err.Error(), "no name") {
		t.Fatalf("report = %s; want the unnamed witness's answer refused as an error naming the problem", rep.Summary())
	}
}

// Asker.Timeout bounded a witness only through its ctx: a witness that ignores ctx
// (a vendor SDK call without one, a lock) held the gate's attempt for as long as it
// blocked — past the attempt's own deadline, one stuck goroutine per retry.
func TestAtkCoreWitnessIgnoringCtxDoesNotHangTheAsker(t *testing.T) {
	st := memory.New()
	rec := unknown(t, st, "k-stuck")
	stuck := make(chan struct{})
	defer close(stuck)
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		cancel  bool
		want    string
	}{
		{"timeout", 20 * time.Millisecond, false, "no answer within 20ms"},
		{"ctx", 0, true, "context canceled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			entered := make(chan struct{}, 1)
			deaf := witness.Func("deaf", func(context.Context, witness.Query) (witness.Answer, error) {
				entered <- struct{}{}
				<-stuck
				return witness.Answer{Verdict: witness.NotSent}, nil
			})
			a := witness.Asker{Store: st, Timeout: tc.timeout, Now: func() time.Time { return t0.Add(2 * time.Minute) }}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			type result struct {
				rep witness.Report
				err error
			}
			done := make(chan result, 1)
			go func() {
				rep, err := a.Ask(ctx, rec, []witness.Witness{deaf}, false)
				done <- result{rep, err}
			}()
			if tc.cancel {
				<-entered // the witness is asked and ignores ctx: cancel now
				cancel()
			}
			select {
			case r := <-done:
				said := r.rep.Summary()
				if r.err != nil {
					said = r.err.Error()
				}
				if r.rep.Settled || !strings.Contains(said, tc.want) {
					t.Fatalf("Ask = %s; want no settlement and %q", said, tc.want)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("Ask still waits on a witness that ignores its ctx, 30s after its bound")
			}
			if got, _ := st.Get(context.Background(), "k-stuck"); got.State != store.StateUnknown {
				t.Fatalf("record moved to %s", got.State)
			}
		})
	}
}

// The result a witness hands over is encoded by Asker.Encode (the gate's data
// converter): an encoder that panics (a MarshalJSON that panics) crashed the caller
// — the gate's attempt, or the plugin's background reconciler and with it the
// worker — instead of settling nothing.
func TestAtkCorePanickingEncoderSettlesNothing(t *testing.T) {
	st := memory.New()
	rec := unknown(t, st, "k-panic")
	a := witness.Asker{Store: st, Window: time.Hour, Now: func() time.Time { return t0.Add(2 * time.Minute) },
		Encode: func(any) ([]byte, error) { panic("MarshalJSON: nil map") }}
	var (
		err      error
		panicked any
	)
	func() {
		defer func() { panicked = recover() }()
		_, err = a.Ask(context.Background(), rec, []witness.Witness{answer(witness.Answer{Verdict: witness.Sent, Result: 1})}, false)
	}()
	if panicked != nil {
		t.Fatalf("Ask panicked: %v", panicked)
	}
	if err == nil || !strings.Contains(err.Error(), "panicked") {
		t.Fatalf("Ask = %v; want an error saying the encoder panicked", err)
	}
	if got, _ := st.Get(context.Background(), "k-panic"); got.State != store.StateUnknown {
		t.Fatalf("record moved to %s", got.State)
	}
}

// The gate stores no result over Options.MaxResultSize (a repeat is refused with
// IdempotencyResultNotStored); a witness's result went into the store whatever its
// size. Asker.MaxResultSize bounds it the same way.
func TestAtkCoreWitnessResultBounded(t *testing.T) {
	st := memory.New()
	rec := unknown(t, st, "k-huge")
	huge := strings.Repeat("x", 4096)
	a := witness.Asker{Store: st, Window: time.Hour, MaxResultSize: 1024, Now: func() time.Time { return t0.Add(2 * time.Minute) },
		Encode: func(v any) ([]byte, error) { return []byte(v.(string)), nil }}
	rep, err := a.Ask(context.Background(), rec, []witness.Witness{answer(witness.Answer{Verdict: witness.Sent, Result: huge})}, false)
	if err != nil || !rep.Settled {
		t.Fatalf("Ask = %+v, %v", rep, err)
	}
	got, _ := st.Get(context.Background(), "k-huge")
	if got.State != store.StateCompleted || !got.ResultOmitted || len(got.Result) != 0 {
		t.Fatalf("record %s omitted=%v with a %d-byte result; want completed, result over MaxResultSize not stored",
			got.State, got.ResultOmitted, len(got.Result))
	}
}
