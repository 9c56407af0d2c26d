package mcptools_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/attempt"
	"github.com/idemgate/idemgate/mcptools"
)

// TestAtkWitNoCallLeavesWithoutItsEvidence: the bridge sent a keyed tools/call
// even when the store could not record the evidence that the key leaves for the
// server (store.Record.Sent) — "a store error only makes that re-send be refused".
// With another exit already in the evidence (an idemhttp vendor the activity wrote
// to first), the record then says the key left through that vendor alone: its
// witness answers for the whole write and the re-send rule takes its window only.
// The call must not leave without its evidence, and must say it was not sent.
func TestAtkWitNoCallLeavesWithoutItsEvidence(t *testing.T) {
	s := newTestServer(t, nil, toolSpec{name: "send_payment"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := mcptools.Dial(ctx, "pay", s.inMemory(t), mcptools.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Session().Close() })
	st := &attempt.State{Key: "k-" + t.Name(), Activity: "mcp.pay.send_payment", Effect: "destructive",
		FirstClaimed: time.Now(), RecordSent: func(context.Context, attempt.Sent) error { return errors.New("store unavailable") }}
	_, err = b.Call(attempt.NewContext(ctx, st), "mcp.pay.send_payment", map[string]any{"amount": 5})
	if _, effects := s.seen(); effects["send_payment"] != 0 {
		t.Fatalf("the tool ran %d time(s) although the evidence that its key left was not stored (error %v)",
			effects["send_payment"], err)
	}
	obs := st.Observations()
	if err == nil || len(obs) != 1 || obs[0].Outcome != attempt.NotSent {
		t.Fatalf("withheld call: error %v, observations %+v; want an error and one not-sent observation", err, obs)
	}
}
