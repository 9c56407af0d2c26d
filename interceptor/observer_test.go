package interceptor_test

import (
	"context"
	"sync"
	"testing"

	"github.com/idemgate/idemgate/interceptor"
)

// Options.Observer sees each decision once, with what the workflow saw.
func TestObserverSeesEveryDecision(t *testing.T) {
	h := newHarness(t)
	var mu sync.Mutex
	var got []interceptor.Decision
	h.opts.Observer = func(ctx context.Context, d interceptor.Decision) {
		if ctx == nil {
			t.Error("observer called without the activity's context")
		}
		mu.Lock()
		got = append(got, d)
		mu.Unlock()
	}
	other := charge
	other.Amount++
	_, err := h.run("wf-observe", call{Activity: "GetBalance", Charge: charge},
		call{Activity: "ChargeCard", Key: bizKey, Charge: charge},
		call{Activity: "ChargeCard", Key: bizKey, Charge: charge},
		call{Activity: "ChargeCard", Key: bizKey, Charge: other, MaxAttempts: 1})
	if interceptor.ErrorType(err) != interceptor.ErrTypeConflict {
		t.Fatalf("workflow error %v, want %s", err, interceptor.ErrTypeConflict)
	}
	want := []struct{ activity, decision, errType string }{
		{"GetBalance", "ran", ""},
		{"ChargeCard", "ran", ""},
		{"ChargeCard", "replayed", ""},
		{"ChargeCard", "refused-conflict", interceptor.ErrTypeConflict},
	}
	if len(got) != len(want) {
		t.Fatalf("observed %+v, want %d decisions", got, len(want))
	}
	for i, w := range want {
		d := got[i]
		if d.Activity != w.activity || d.Decision != w.decision || d.ErrorType != w.errType || d.Attempt != 1 ||
			d.Refused() != (w.errType != "") {
			t.Errorf("decision %d: %+v, want %+v", i, d, w)
		}
		if i > 1 && d.Key != got[1].Key || d.Key == "" && d.Effect != interceptor.Read {
			t.Errorf("decision %d: key %q, want the charge's %q", i, d.Key, got[1].Key)
		}
	}
	if got[1].Effect != interceptor.Destructive || got[0].Effect != interceptor.Read {
		t.Errorf("effects %v %v", got[0].Effect, got[1].Effect)
	}
}
