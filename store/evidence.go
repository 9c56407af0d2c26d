package store

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// Sent is evidence that a key left through a keyed transport (idemhttp, the MCP
// bridge) to a vendor that deduplicates on it: the transport records it just before
// it writes the keyed request. A re-send that relies on the vendor's deduplication
// (interceptor.Options.VendorWindows) rests on it; see ResendWindow.
type Sent struct {
	// Via names the transport and its profile or server ("idemhttp:stripe", "mcp:shop").
	Via string `json:"via"`
	// Host is the host the keyed request went to ("api.stripe.com").
	Host string `json:"host"`
	// Window is how long that vendor deduplicates on the key, as the transport was
	// configured (idemhttp.Profile.Window, mcptools.Options.DedupWindow); a very
	// large value means it never forgets.
	Window time.Duration `json:"window"`
}

func (s Sent) String() string {
	return fmt.Sprintf("%s to %s (window %s)", s.Via, s.Host, s.Window)
}

// ApplySent is the rule of Gate.RecordSent: the evidence s joins the record of a
// claim of owner, once (changed is false when it was there already). Only the
// current owner of a record in StateClaimed records evidence; anything else is
// ErrNotOwner — the request is sent all the same, and a later re-send is refused for
// want of evidence (fail closed). A fresh claim and a takeover start with none:
// every attempt that may have sent must have sent through the keyed transport.
func ApplySent(existing Record, owner string, s Sent) (next Record, changed bool, err error) {
	if existing.Owner != owner || existing.State != StateClaimed {
		return existing, false, ErrNotOwner
	}
	if slices.Contains(existing.Sent, s) {
		return existing, false, nil
	}
	next = existing
	next.Sent = append(slices.Clip(slices.Clone(existing.Sent)), s)
	return next, true, nil
}

// SentMustSync reports whether the commit that stores next, the record ApplySent
// returned, must be on disk before the keyed request leaves, whatever the store's
// Durability: when it holds more than one evidence. A store that loses unsynced
// commits in a crash loses a suffix of them (its log is sequential), so the first
// evidence of a claim, lost, leaves none, and a re-send is refused (fail closed);
// a later one, lost alone, would leave the earlier evidence to let a re-send rely
// on its vendor's window while the request also reaches the vendor the lost one
// named.
func SentMustSync(next Record) bool { return len(next.Sent) > 1 }

// ResendWindow is the window inside which a destructive write whose outcome is
// unknown (r) may be re-sent with the same key, relying on the vendor's
// deduplication, when the gate is configured with window for it: only if r carries
// evidence that the key left through a keyed transport (Sent), and never longer than
// the shortest window the evidence names. ok is false without evidence, or when the
// evidence names a vendor without a window: the write is then refused like any
// destructive write whose outcome is unknown.
func ResendWindow(r Record, window time.Duration) (w time.Duration, ok bool) {
	if len(r.Sent) == 0 || window <= 0 {
		return 0, false
	}
	w = window
	for _, s := range r.Sent {
		if s.Window <= 0 {
			return 0, false
		}
		w = min(w, s.Window)
	}
	return w, true
}

// EncodeSent is how SQL backends store Record.Sent: "" for none, else JSON.
func EncodeSent(s []Sent) string {
	if len(s) == 0 {
		return ""
	}
	b, _ := json.Marshal(s) // strings and integers always marshal
	return string(b)
}

// DecodeSent reads what EncodeSent wrote.
func DecodeSent(text string) ([]Sent, error) {
	if text == "" {
		return nil, nil
	}
	var s []Sent
	if err := json.Unmarshal([]byte(text), &s); err != nil {
		return nil, fmt.Errorf("idemgate/store: the record's sent evidence %q cannot be read: %w", text, err)
	}
	return s, nil
}

// ReceiptMustSync reports whether the commit that appends r (Gate.Append) must be
// on disk before Append returns, whatever the store's Durability: when r records a
// re-send (DecisionResent). The gate appends it after the takeover's synced claim
// and before the body sends again, and sends nothing without it; left unsynced, a
// crash after the re-send left would lose it (with the claim's first evidence,
// just as unsynced), and nothing would say the write was sent again.
func ReceiptMustSync(r Receipt) bool { return r.Decision == DecisionResent }
