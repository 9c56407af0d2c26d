package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"

	"github.com/idemgate/idemgate/idemhttp"
	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/vendorsim"
	"github.com/idemgate/idemgate/witness"
)

// simCharger charges the simulated card processor through idemhttp and returns
// the charge's ID.
type simCharger struct {
	url    string
	client *http.Client
}

func (s *simCharger) charge(ctx context.Context, n int) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url+"/v1/charges",
		strings.NewReader(fmt.Sprintf(`{"customer":"cus_%d","amount":2000,"currency":"usd"}`, n)))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var out struct {
		ID string `json:"id"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 {
		return "", fmt.Errorf("charge answered %d: %v", resp.StatusCode, err)
	}
	return out.ID, nil
}

// TestRealServerLookupWitnessSettlesAWorkerKilledAfterTheCharge: a real server, the
// vendor simulator, a worker stopped for good after the processor charged and
// before its answer came back. The retry, on a new worker, asks the processor's
// lookup by key (idemhttp.LookupWitness): the charge is there, the key settles
// sent with the charge's ID as the activity's result, and the workflow finishes —
// one charge, no person (issue 19).
func TestRealServerLookupWitnessSettlesAWorkerKilledAfterTheCharge(t *testing.T) {
	sim, err := vendorsim.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	lookup, err := idemhttp.LookupWitness(idemhttp.Stripe, nil, idemhttp.Lookup{
		Request: func(ctx context.Context, vendorKey string) (*http.Request, error) {
			return http.NewRequestWithContext(ctx, http.MethodGet, sim.Payments.URL+"/v1/charges?idempotency_key="+url.QueryEscape(vendorKey), nil)
		},
		Read: func(body []byte) (*idemhttp.Resource, error) {
			var list struct{ Data []struct{ ID string } }
			if err := json.Unmarshal(body, &list); err != nil || len(list.Data) == 0 {
				return nil, err
			}
			return &idemhttp.Resource{ID: list.Data[0].ID, Result: list.Data[0].ID}, nil
		},
		Authoritative: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, interceptor.Options{Witnesses: map[string][]witness.Witness{"ChargeCard": {lookup}}})

	// The processor charges, then holds its answer until the test ends: the worker
	// that sent the charge is stopped meanwhile and never hears back.
	held := make(chan struct{})
	var once sync.Once
	charged := make(chan string, 1)
	sim.Payments.SetBeforeAnswer(func(key string) {
		once.Do(func() { charged <- key; <-held })
	})
	t.Cleanup(func() { close(held) })

	ch := &simCharger{url: sim.Payments.URL, client: idemhttp.Client(idemhttp.Stripe)}
	register := func(w worker.Registry) {
		w.RegisterActivityWithOptions(ch.charge, activity.RegisterOptions{Name: "ChargeCard"})
	}
	acts := r.queue + "-acts"
	crashing := r.worker(acts, worker.Options{DisableWorkflowWorker: true}, register)
	run := r.start("lookup-witness-crash", Calls, []step{{Activity: "ChargeCard", N: 7, Queue: acts, Timeout: 2 * time.Second}})
	select {
	case <-charged:
	case <-time.After(time.Minute):
		t.Fatal("the charge never reached the processor")
	}
	crashing.Stop()
	t.Cleanup(r.worker(acts, worker.Options{DisableWorkflowWorker: true}, register).Stop)

	out, err := r.result(run)
	if err != nil {
		t.Fatalf("workflow: %v (the lookup witness should have settled the charge)", err)
	}
	if sim.Payments.Total() != 1 || len(sim.Payments.Duplicates()) != 0 || len(out) != 1 || out[0] != "ch_000001" {
		t.Fatalf("processor: %d charges, duplicates %v; workflow result %q; want one charge, ch_000001",
			sim.Payments.Total(), sim.Payments.Duplicates(), out)
	}
	rs, err := r.st.Receipts(context.Background(), store.ReceiptFilter{WorkflowID: "lookup-witness-crash", Decision: store.DecisionResolved})
	if err != nil || len(rs) != 1 || rs[0].Actor != "witness:idemhttp:stripe" || rs[0].Resolution != store.ResolvedSent ||
		!strings.Contains(rs[0].Reason, "ch_000001") {
		t.Fatalf("resolution receipts %+v, %v; want one, sent by witness:idemhttp:stripe, naming ch_000001", rs, err)
	}
}
