package activities_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/idemgate/idemgate/activities"
	"github.com/idemgate/idemgate/idemhttp"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/witness"
)

// TestAtkWitChargeLookupAtTheWindowsEdge: ChargeLookupWitness takes "the processor
// never saw the key" as authoritative up to the very end of the processor's window
// (idemhttp.Stripe.Window from the record's CreatedAt, by the asking worker's
// clock). The processor counts its window by its own clock from when it received
// the key: a processor whose clock runs ahead by less than the gate's clock skew
// (within the 2 s DefaultClockSkew, by either clock) has forgotten the key up to
// 4 s before that, answers "never saw it", and the
// charge runs a second time. The gate's own re-send rule (Options.VendorWindows,
// attempt.InVendorWindow) stops 2×ClockSkew before the window ends; so must a
// witness that reads the processor's memory.
func TestAtkWitChargeLookupAtTheWindowsEdge(t *testing.T) {
	forgot := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"found":false}`)) // its window, by its clock, has passed
	}))
	defer forgot.Close()
	now := time.Now()
	rec := store.Record{Key: "order-9/charge", Activity: "ChargeCard", Effect: store.EffectDestructive,
		State: store.StateUnknown, CreatedAt: now.Add(-(idemhttp.Stripe.Window - 3*time.Second))}
	a, err := activities.ChargeLookupWitness(forgot.URL, nil).Ask(context.Background(), witness.Query{Record: rec, Now: now})
	if err == nil && a.Verdict == witness.NotSent {
		t.Fatalf("asked 3 s before the processor's %s window ends (by the worker's clock), the witness takes the "+
			"processor's empty memory as 'not sent': %s", idemhttp.Stripe.Window, a.Evidence)
	}
}
