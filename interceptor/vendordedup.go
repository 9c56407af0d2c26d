package interceptor

import (
	"context"
	"fmt"
	"time"

	"github.com/idemgate/idemgate/internal/attempt"
	"github.com/idemgate/idemgate/store"
)

// VendorDedupWitness names the vendor's own deduplication as a witness in receipts
// ("witness:" + VendorDedupWitness): a destructive write whose outcome is unknown
// is re-sent with the same key inside the window of a vendor that deduplicates on
// it (Options.VendorWindows), and the vendor answers the re-send from its store.
const VendorDedupWitness = "vendor-dedup"

// keepsEvidence reports whether this attempt's keyed transport must record that
// the key left (store.Record.Sent): a destructive write whose unknown outcome may
// be re-sent relying on the vendor (Options.VendorWindows), or asked about by a
// witness that reads the evidence (idemhttp.LookupWitness answers only for a key
// that left through its profile).
func (c *call) keepsEvidence() bool {
	if c.effect != Destructive {
		return false
	}
	_, resends := c.r.opts.VendorWindows[c.name]
	return resends || len(c.r.opts.Witnesses[c.name]) > 0 || len(c.r.opts.Witnesses[""]) > 0
}

// vendorDedup says whether rec, a destructive write's record whose outcome is
// unknown, may be re-sent with the same key relying on the vendor's
// deduplication: only on evidence, from every attempt that claimed the key since
// its first, that the key left through a keyed transport to a vendor that
// deduplicates on it, inside the shortest window the evidence and
// Options.VendorWindows name, less twice the clock skew (store.ResendWindow,
// attempt.InVendorWindow). why is the evidence, for the receipt.
func (c *call) vendorDedup(rec store.Record) (why string, ok bool) {
	w, named := c.r.opts.VendorWindows[c.name]
	if !named {
		return "", false
	}
	ew, ok := store.ResendWindow(rec, w)
	if !ok || !attempt.InVendorWindow(rec.CreatedAt, c.now, ew, c.r.opts.ClockSkew) {
		return "", false
	}
	return fmt.Sprintf("re-sent with the same key: it left through %s; the vendor deduplicates on it for %s from %s "+
		"(the shortest of the evidence and Options.VendorWindows), and the re-send goes before %s (%s of clock skew "+
		"kept), so the vendor answers it from its store if attempt %d reached it", sentList(rec.Sent), ew,
		rec.CreatedAt.Format(time.RFC3339), rec.CreatedAt.Add(ew-2*c.r.opts.ClockSkew).Format(time.RFC3339),
		2*c.r.opts.ClockSkew, rec.Attempt), true
}

// resent records, beside the takeover's receipt, that the vendor's deduplication
// settled the unknown outcome by a re-send (store.DecisionResent, Actor
// "witness:vendor-dedup", Reason the evidence). No receipt, no re-send: when it
// cannot be stored, the claim is given back as unknown and the attempt fails
// retryable, as when the store is down.
func (c *call) resent(why string) error {
	r := c.receipt(store.DecisionResent)
	r.Actor, r.Reason = "witness:"+VendorDedupWitness, why
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), evidenceTimeout)
	defer cancel()
	if err := c.r.opts.Store.Append(ctx, r); err != nil {
		c.giveBack(c.r.opts.Store.Abandon, store.DecisionUnknown,
			fmt.Errorf("idemgate: the receipt of the re-send was not stored (%w); the activity did not run", err))
		return c.storeDown("record the re-send of", err)
	}
	return nil
}
