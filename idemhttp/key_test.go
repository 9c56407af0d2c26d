package idemhttp_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/idemgate/idemgate/idemhttp"
)

// TestVendorKeyDistinctAndStable: the same activity key always gives the same vendor key,
// and distinct keys (minted UUIDs, business keys, keys crafted to look like the hashed
// form of other keys) give distinct vendor keys, under every built-in profile.
func TestVendorKeyDistinctAndStable(t *testing.T) {
	var keys []string
	for i := range 2000 {
		keys = append(keys, uuid.NewSHA1(uuid.NameSpaceURL, fmt.Appendf(nil, "wf-%d", i)).String())
		keys = append(keys, fmt.Sprintf("order-%07d/charge", i))
	}
	keys = append(keys,
		strings.ToUpper(keys[0]), // same UUID, other case: another key
		strings.Repeat("x", 255),
		strings.Repeat("x", 254)+"y",
		"order 4217 / refund ✓ with spaces and non-ASCII",
		"00000000-0000-0000-0000-000000000000",
	)
	profiles := []idemhttp.Profile{
		idemhttp.Stripe, idemhttp.Adyen, idemhttp.CheckoutCom, idemhttp.PayPal, idemhttp.Square, idemhttp.Plaid,
		idemhttp.RazorpayX, idemhttp.AmazonPay, idemhttp.Increase, idemhttp.ModernTreasury, idemhttp.Lithic,
		idemhttp.GoCardless, idemhttp.Zendesk, idemhttp.Telnyx, idemhttp.Worldline, idemhttp.Moov, idemhttp.IETF,
		idemhttp.Google, idemhttp.Azure,
	}
	for _, p := range profiles {
		t.Run(p.Name, func(t *testing.T) {
			all := append([]string(nil), keys...)
			// Keys shaped exactly like the hashed forms of other keys must not collide with them.
			for _, k := range keys[:50] {
				h, err := p.VendorKey(k)
				if err != nil {
					t.Fatal(err)
				}
				all = append(all, strings.Trim(h, `"`))
			}
			seen := map[string]string{}
			for _, k := range all {
				v, err := p.VendorKey(k)
				if err != nil {
					t.Fatalf("VendorKey(%q): %v", k, err)
				}
				if again, _ := p.VendorKey(k); again != v {
					t.Fatalf("VendorKey(%q) gave %q then %q", k, v, again)
				}
				if prev, dup := seen[v]; dup && prev != k {
					t.Fatalf("keys %q and %q both give vendor key %q", prev, k, v)
				}
				seen[v] = k
			}
		})
	}
}

func TestVendorKeyForms(t *testing.T) {
	hashed, _ := idemhttp.Stripe.VendorKey("order 4217 / refund")
	if !uuidRE.MatchString(hashed) || hashed[14] != '8' {
		t.Fatalf("hashed key %q is not a UUIDv8", hashed)
	}
	if got, _ := idemhttp.Stripe.VendorKey(hashed); got == hashed {
		t.Fatalf("a key shaped like a hash was sent as it is: %q", got)
	}
	short, _ := idemhttp.AmazonPay.VendorKey(activityKey)
	if len(short) != 32 || strings.Trim(short, "0123456789abcdef") != "" {
		t.Fatalf("Amazon Pay key %q, want 32 hex digits", short)
	}
	if got, _ := idemhttp.AmazonPay.VendorKey("order-4217-charge"); got != "order-4217-charge" {
		t.Fatalf("a business key that fits was changed to %q", got)
	}
	if got, _ := idemhttp.IETF.VendorKey(`a"b\c-business-key`); got != `"a\"b\\c-business-key"` {
		t.Fatalf("IETF quoting gave %s", got)
	}
	if got, _ := idemhttp.NoKey.VendorKey(activityKey); got != "" {
		t.Fatalf("no-key profile gave a key %q", got)
	}
	verbatim := idemhttp.AmazonPay
	verbatim.Verbatim = true
	if _, err := verbatim.VendorKey(activityKey); !errors.Is(err, idemhttp.ErrBadKey) {
		t.Fatalf("Verbatim with a key too long: err = %v, want ErrBadKey", err)
	}
}
