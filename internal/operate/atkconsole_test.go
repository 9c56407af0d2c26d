package operate_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/internal/operate"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memory"
)

type limits struct {
	store.Store
	asked []int
}

func (l *limits) Pending(ctx context.Context, now time.Time, limit int) ([]store.Record, error) {
	l.asked = append(l.asked, limit)
	return l.Store.Pending(ctx, now, limit)
}

// Pending without probes asks the store for a bounded page (the console reloads it
// every few seconds; `idemgate pending --limit`), never every pending record, and
// still returns limit records when the store's plugin probes come first.
func TestAtkConsolePendingAsksForABoundedPage(t *testing.T) {
	ctx := context.Background()
	mem := memory.New()
	t0 := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	add := func(key, activity string, at time.Time) {
		c := store.Claim{Key: key, Activity: activity, Effect: "destructive", ArgsHash: "h", Owner: "o-" + key,
			Lease: at.Add(time.Minute), Window: time.Hour, WorkflowID: "wf", RunID: "run", Attempt: 1, Now: at}
		if o, _, err := mem.Begin(ctx, c); err != nil || o != store.OutcomeClaimed {
			t.Fatalf("%s: %v %v", key, o, err)
		}
		if err := mem.Abandon(ctx, store.Transition{Key: key, Owner: c.Owner, Now: at, Window: time.Hour,
			Receipt: store.Receipt{Time: at, Key: key, Activity: activity, Effect: "destructive", Decision: store.DecisionUnknown}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 30 { // the oldest: probes
		add(fmt.Sprintf("p%02d", i), interceptor.ProbeActivity, t0.Add(time.Duration(i)*time.Second))
	}
	for i := range 500 {
		add(fmt.Sprintf("k%03d", i), "ChargeCard", t0.Add(time.Minute+time.Duration(i)*time.Second))
	}
	st := &limits{Store: mem}
	rs, err := operate.Pending(ctx, st, t0.Add(time.Hour), 5, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 5 || rs[0].Key != "k000" || rs[4].Key != "k004" {
		t.Fatalf("got %d records %v, want k000..k004", len(rs), rs)
	}
	for _, l := range st.asked {
		if l <= 0 || l > 200 {
			t.Errorf("asked the store for %d records (all: %v), want a bounded page", l, st.asked)
		}
	}
}
