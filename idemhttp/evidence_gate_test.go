package idemhttp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/idemgate/idemgate/idemhttp"
	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/witness"
)

// chargeAndTicket is a ChargeCard activity that writes to two keyed vendors of the
// simulated world through idemhttp: a charge at the card processor (P, the Stripe
// profile: 24 h) and a ticket at the ticket desk (Q, an IETF vendor that
// deduplicates for an hour). The two writes go out at once (the body fans out), so
// an attempt may die after either. plan says, per attempt, which of the two
// requests it writes before it dies ("" for both, then success); lost says which
// P requests (by attempt) are lost on their way — the vendor never reads them, the
// transport cannot tell. between runs after an attempt's writes, before it dies.
type chargeAndTicket struct {
	r       *lookupRun
	p, q    idemhttp.Profile
	plan    map[int32]string
	lost    map[int32]bool
	between func(attempt int32)
}

func (a *chargeAndTicket) ChargeCard(ctx context.Context, amount float64) (simCharge, error) {
	n := activity.GetInfo(ctx).Attempt
	writes := a.plan[n]
	var out simCharge
	if writes == "" || strings.Contains(writes, "P") {
		pnet := &faultyNet{base: &http.Transport{}, plan: func(int32) fault {
			if a.lost[n] {
				return neverSent
			}
			return deliver
		}}
		c := &http.Client{Transport: idemhttp.NewTransport(pnet, a.p)}
		if err := postJSON(ctx, c, a.r.w.Payments.URL+"/v1/charges", map[string]any{"customer": "cus_1", "amount": amount, "currency": "usd"}, &out); err != nil && !a.lost[n] {
			return out, err
		}
	}
	if writes == "" || strings.Contains(writes, "Q") {
		c := &http.Client{Transport: idemhttp.NewTransport(&http.Transport{}, a.q)}
		if err := postJSON(ctx, c, a.r.w.Tickets.URL+"/tickets", map[string]any{"subject": "refund cus_1", "requester": "cus_1"}, nil); err != nil {
			return out, err
		}
	}
	if writes != "" {
		if a.between != nil {
			a.between(n)
		}
		return out, fmt.Errorf("attempt %d: the worker died after writing %s", n, writes)
	}
	return out, nil
}

func postJSON(ctx context.Context, c *http.Client, url string, body map[string]any, out any) error {
	b, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s answered %d", url, resp.StatusCode)
	}
	if out != nil {
		return json.NewDecoder(resp.Body).Decode(out)
	}
	return nil
}

// The ticket desk deduplicates for an hour: the IETF profile with that window.
func ticketDesk() idemhttp.Profile {
	q := idemhttp.IETF
	q.Name, q.Window = "tickets", time.Hour
	return q
}

// TestTwoVendorsResendKeepsTheFirstAttemptsExits is atk-wit finding 1 at the gate,
// over real HTTP with the simulated vendors: an activity writes to P (24 h) and Q
// (1 h), both named in VendorWindows' 24 h. Attempt 1 reaches both and dies;
// attempt 2, half an hour on, is re-sent inside both windows, reaches P and dies
// before Q. Two hours after the first claim Q has forgotten the key. Before, the
// takeover had emptied the evidence: the record named P only, attempt 3 was re-sent
// on P's 24 h, and Q, reached again, acted twice. Now the record keeps attempt 1's
// exits: the re-send would rest on Q's hour, which has passed, so attempt 3 is
// refused, and Q acts once.
func TestTwoVendorsResendKeepsTheFirstAttemptsExits(t *testing.T) {
	r := newLookupRun(t)
	a := &chargeAndTicket{r: r, p: idemhttp.Stripe, q: ticketDesk(), plan: map[int32]string{1: "P and Q", 2: "P"}}
	a.between = qsHourPassesAfterAttempt2(r)
	_, err := r.run(t, interceptor.Options{VendorWindows: map[string]time.Duration{"ChargeCard": 24 * time.Hour}}, a)
	if n := r.w.Tickets.Total(); n != 1 {
		t.Fatalf("the ticket desk acted %d times (duplicates %v), want once: a re-send relied on P's window after Q's "+
			"had passed (workflow error: %v)", n, r.w.Tickets.Duplicates(), err)
	}
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != interceptor.ErrTypeInFlight {
		t.Fatalf("workflow error %v, want %s: attempt 3 refused", err, interceptor.ErrTypeInFlight)
	}
	if !strings.Contains(app.Error(), "idemhttp:tickets to ") || !strings.Contains(app.Error(), "1h0m0s") {
		t.Errorf("the refusal does not name Q's exit and its hour: %v", app)
	}
	if n := r.w.Payments.Total(); n != 1 {
		t.Errorf("the card processor acted %d times, want once", n)
	}
	key, rs := r.onlyKey(t)
	if got := fmt.Sprint(decisionsOf(rs)); got != "[claimed unknown taken-over resent unknown refused-in-flight]" {
		t.Fatalf("receipts %s, want attempt 2 re-sent and attempt 3 refused", got)
	}
	rec, err := r.st.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if w, ok := store.ResendWindow(rec, 24*time.Hour); !ok || w != time.Hour {
		t.Fatalf("ResendWindow = %s, %v on %+v; want Q's hour", w, ok, rec.Sent)
	}
}

// TestTwoVendorsLookupSeesEveryAttemptsExits: the same activity with P's
// authoritative lookup as its witness and a 45 min VendorWindows. Attempt 1's
// request to P is lost on its way, Q acts, and the attempt dies; attempt 2 is
// re-sent inside the 45 min, its request to P is lost too, and it dies before Q.
// Two hours on, attempt 3 is past the window and asks P's lookup, which holds
// nothing. Before, the record named P only (the takeover had emptied it), the lookup
// answered "not sent" for the whole write, the key was released, and attempt 3 ran
// afresh: Q acted twice. Now the record keeps attempt 1's exit to Q: P's lookup
// cannot tell, the write is refused, and Q acts once.
func TestTwoVendorsLookupSeesEveryAttemptsExits(t *testing.T) {
	r := newLookupRun(t)
	a := &chargeAndTicket{r: r, p: idemhttp.Stripe, q: ticketDesk(), plan: map[int32]string{1: "P and Q", 2: "P"},
		lost: map[int32]bool{1: true, 2: true}}
	a.between = qsHourPassesAfterAttempt2(r)
	opts := interceptor.Options{
		VendorWindows: map[string]time.Duration{"ChargeCard": 45 * time.Minute},
		Witnesses:     map[string][]witness.Witness{"ChargeCard": {mustLookup(t, idemhttp.Stripe, chargeLookup(r.w.Payments.URL))}},
	}
	_, err := r.run(t, opts, a)
	if n := r.w.Tickets.Total(); n != 1 {
		t.Fatalf("the ticket desk acted %d times, want once: P's lookup answered for a write that also went to Q "+
			"(workflow error: %v)", n, err)
	}
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != interceptor.ErrTypeInFlight {
		t.Fatalf("workflow error %v, want %s", err, interceptor.ErrTypeInFlight)
	}
	if !strings.Contains(app.Error(), "idemhttp:stripe: cannot tell") || !strings.Contains(app.Error(), "idemhttp:tickets") {
		t.Errorf("the refusal does not say that P's lookup cannot tell for Q: %v", app)
	}
	_, rs := r.onlyKey(t)
	if len(resolvedBy(rs)) != 0 {
		t.Fatalf("receipts %v: the key was settled", decisionsOf(rs))
	}
	if r.w.Payments.Total() != 0 {
		t.Errorf("the card processor acted %d times; its requests were all lost", r.w.Payments.Total())
	}
}

// TestLookupWitnessNeedsEveryClaimsEvidence: the lookup answers for the write only
// when every attempt since the key's first claim recorded where its key went. A
// record whose current attempt recorded nothing (it may have called the vendor
// without idemhttp), or that holds a blank for an earlier attempt that recorded
// nothing (store.Exits), cannot tell — and the vendor is not asked.
func TestLookupWitnessNeedsEveryClaimsEvidence(t *testing.T) {
	w := startWorld(t)
	lw := mustLookup(t, idemhttp.Stripe, chargeLookup(w.Payments.URL))
	p := store.Sent{Via: "idemhttp:stripe", Host: hostOf(t, w.Payments.URL), Window: idemhttp.Stripe.Window}
	earlier := p
	earlier.Owner = "a1"
	current := p
	current.Owner = "a2"
	for name, sent := range map[string][]store.Sent{
		"the current attempt recorded nothing":     {earlier},
		"an earlier attempt recorded nothing":      {{Owner: "a1"}, current},
		"the attempt before that recorded nothing": {{Owner: "a0"}, earlier, current},
	} {
		t.Run(name, func(t *testing.T) {
			rec := unknownRecord("order-9/charge", sent...)
			rec.Owner = "a2"
			a, err := lw.Ask(context.Background(), witness.Query{Record: rec, Now: time.Now()})
			if err != nil || a.Verdict != witness.CannotTell || !strings.Contains(a.Evidence, "recorded no evidence") {
				t.Fatalf("answer %+v, %v; want cannot tell: an attempt recorded no evidence", a, err)
			}
		})
	}
	if n := w.Payments.Lookups(); n != 0 {
		t.Fatalf("the vendor was asked %d times", n)
	}
	// Every attempt recorded the key leaving through this profile: the lookup tells.
	rec := unknownRecord("order-9/charge", earlier, current)
	rec.Owner = "a2"
	if a, err := lw.Ask(context.Background(), witness.Query{Record: rec, Now: time.Now()}); err != nil || a.Verdict != witness.NotSent {
		t.Fatalf("answer %+v, %v; want not sent (nothing under the key, an authoritative lookup)", a, err)
	}
}

// qsHourPassesAfterAttempt2 is the clock of the two-vendor scenarios: 30 minutes
// after attempt 1, then 90 more after attempt 2, when Q's hour has passed and Q
// forgets the keys it saw.
func qsHourPassesAfterAttempt2(r *lookupRun) func(n int32) {
	return func(n int32) {
		switch n {
		case 1:
			r.clk.jump(30 * time.Minute)
		case 2:
			r.clk.jump(90 * time.Minute)
			for _, e := range r.w.Tickets.Ledger() {
				r.w.Tickets.Forget(e.Key)
			}
		}
	}
}
