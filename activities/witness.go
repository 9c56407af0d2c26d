package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/idemgate/idemgate/idemhttp"
	"github.com/idemgate/idemgate/internal/attempt"
	"github.com/idemgate/idemgate/witness"
)

// ChargeLookupWitness is a witness for ChargeCard (interceptor.Options.Witnesses
// ["ChargeCard"]), named "payments-lookup": it asks the card processor's lookup at
// lookupURL (GET lookupURL?key=K, as vendorsim.Vendor.LookupHandler serves it) what
// it did with the key ChargeCard forwarded (idemhttp.Stripe.VendorKey of the
// record's key).
//
//   - The processor stored an answer below 300 for the key: Sent, with the charge as
//     ChargeCard's result.
//   - It stored a rejection (4xx): NotSent — the card was not charged.
//   - It never saw the key: NotSent. That is authoritative for this processor: it
//     performs no charge without an Idempotency-Key and remembers every key for its
//     window (idemhttp.Stripe.Window), so for a record older than the window (less
//     twice the default clock skew: the processor counts by its own clock) it
//     cannot tell. The gate counts a "not sent" only when it was asked after the
//     attempt's lease (store.Settleable).
//   - A request still in progress: CannotTell. A lookup that fails: an error, which
//     settles nothing.
//
// client nil means http.DefaultClient; the gate bounds each answer by
// Options.WitnessTimeout through ctx.
func ChargeLookupWitness(lookupURL string, client *http.Client) witness.Witness {
	if client == nil {
		client = http.DefaultClient
	}
	return witness.Func("payments-lookup", func(ctx context.Context, q witness.Query) (witness.Answer, error) {
		ans, err := askChargeLookup(ctx, client, lookupURL, q)
		if err != nil {
			return witness.Answer{}, fmt.Errorf("idemgate/activities: ChargeCard key %s: the payments lookup: %w", q.Record.Key, err)
		}
		return ans, nil
	})
}

func askChargeLookup(ctx context.Context, client *http.Client, lookupURL string, q witness.Query) (witness.Answer, error) {
	// The processor counts its window by its own clock: stop 2×clock skew before it
	// ends, as the gate's re-send does (attempt.InVendorWindow).
	if c := q.Record.CreatedAt; !c.IsZero() && !attempt.InVendorWindow(c, q.Now, idemhttp.Stripe.Window, attempt.DefaultClockSkew) {
		return witness.Answer{Evidence: fmt.Sprintf("the key was claimed at %s: the processor's %s window (less %s of "+
			"clock skew) has passed, so it may have forgotten the key", c.Format(time.RFC3339), idemhttp.Stripe.Window,
			2*attempt.DefaultClockSkew)}, nil
	}
	vk, err := idemhttp.Stripe.VendorKey(q.Record.Key)
	if err != nil {
		return witness.Answer{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, lookupURL+"?key="+url.QueryEscape(vk), nil)
	if err != nil {
		return witness.Answer{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return witness.Answer{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return witness.Answer{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return witness.Answer{}, fmt.Errorf("answered %s", resp.Status)
	}
	var l struct {
		Found      bool            `json:"found"`
		InProgress bool            `json:"in_progress"`
		Status     int             `json:"status"`
		Body       json.RawMessage `json:"body"`
	}
	if err := json.Unmarshal(body, &l); err != nil {
		return witness.Answer{}, fmt.Errorf("the answer is not JSON: %v", err)
	}
	switch {
	case !l.Found:
		return witness.Answer{Verdict: witness.NotSent, Evidence: "GET lookup?key=" + vk + ": the processor never saw the key"}, nil
	case l.InProgress:
		return witness.Answer{Evidence: "GET lookup?key=" + vk + ": the processor is still processing the key's request"}, nil
	case l.Status >= 300:
		return witness.Answer{Verdict: witness.NotSent, Evidence: fmt.Sprintf("GET lookup?key=%s: the processor rejected the request (%d)", vk, l.Status)}, nil
	}
	var ch Charge
	if err := json.Unmarshal(l.Body, &ch); err != nil || ch.ID == "" {
		return witness.Answer{}, fmt.Errorf("the processor's stored answer for key %s is not a charge: %.200s", vk, l.Body)
	}
	return witness.Answer{Verdict: witness.Sent, Result: ch, Evidence: fmt.Sprintf("GET lookup?key=%s: charge %s", vk, ch.ID)}, nil
}
