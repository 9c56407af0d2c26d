package idemhttp_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"
	"testing"

	"github.com/idemgate/idemgate/idemhttp"
	"github.com/idemgate/idemgate/internal/attempt"
	"github.com/idemgate/idemgate/store"
)

// TestAtkWitNoKeyLeavesWithoutItsEvidence: when the store cannot record the
// evidence that a key leaves (store.Record.Sent), the transport sent the request
// anyway ("only makes that re-send be refused"). That holds only while the record
// has no other evidence: an activity that writes to two keyed vendors records P,
// then the store fails on Q's evidence, and Q receives the key anyway. The record
// now says the key left through P alone, so P's authoritative lookup answers for
// the whole write ("through nothing else") and its "not sent" releases a key Q
// acted on; and the re-send rule (store.ResendWindow) takes P's window only, past
// Q's. Every keyed exit must be in the evidence before the key takes it: when the
// evidence cannot be stored, the request is withheld (not sent).
func TestAtkWitNoKeyLeavesWithoutItsEvidence(t *testing.T) {
	p, q := newVendor(t, nil), newVendor(t, nil)
	profQ := idemhttp.Stripe
	profQ.Name = "q"
	var mu sync.Mutex
	var recorded []store.Sent
	ctx, st := gated("wf-1/run-1/Pay/1", "destructive", false)
	st.RecordSent = func(_ context.Context, s attempt.Sent) error {
		if s.Via == "idemhttp:q" {
			return errors.New("store unavailable")
		}
		mu.Lock()
		recorded = append(recorded, s)
		mu.Unlock()
		return nil
	}
	cp := &http.Client{Transport: idemhttp.NewTransport(http.DefaultTransport, idemhttp.Stripe)}
	cq := &http.Client{Transport: idemhttp.NewTransport(http.DefaultTransport, profQ)}
	if _, err := post(t, ctx, cp, p.URL+"/v1/charges", `{"amount":1}`); err != nil {
		t.Fatal(err)
	}
	_, errQ := post(t, ctx, cq, q.URL+"/v1/transfers", `{"amount":1}`)
	mu.Lock()
	defer mu.Unlock()
	reached := len(q.requests()) > 0
	inEvidence := slices.ContainsFunc(recorded, func(s store.Sent) bool { return s.Via == "idemhttp:q" })
	if reached && !inEvidence {
		t.Fatalf("the key reached q although its evidence was not stored (evidence %v): the record says it left "+
			"through stripe alone", recorded)
	}
	if !reached && !errors.Is(errQ, idemhttp.ErrNotSent) {
		t.Errorf("q's request was withheld, but its error %v is not ErrNotSent", errQ)
	}
}
