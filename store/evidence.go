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
//
// Each evidence names the claim that recorded it (Owner). A record keeps the
// evidence of every claim since its CreatedAt: a takeover keeps what the owners
// before it recorded, and a claim that recorded none leaves a blank (Blank: no Via)
// in its place, since it may have sent without the keyed transport. See Exits.
type Sent struct {
	// Via names the transport and its profile or server ("idemhttp:stripe", "mcp:shop").
	Via string `json:"via"`
	// Host is the host the keyed request went to ("api.stripe.com").
	Host string `json:"host"`
	// Window is how long that vendor deduplicates on the key, as the transport was
	// configured (idemhttp.Profile.Window, mcptools.Options.DedupWindow); a very
	// large value means it never forgets.
	Window time.Duration `json:"window"`
	// Owner is the claim that recorded it: its owner's fencing token
	// (Record.Owner), set by RecordSent (ApplySent). Evidence stored by older
	// versions has none and counts as the record's current claim's.
	Owner string `json:"owner,omitempty"`
}

// Blank reports whether s stands for a claim that recorded no evidence (Owner's):
// a takeover leaves one for it (Decide). No re-send and no witness's "not sent"
// rests on a record that holds one: that claim's attempt may have sent without the
// keyed transport.
func (s Sent) Blank() bool { return s.Via == "" }

func (s Sent) String() string {
	if s.Blank() {
		return fmt.Sprintf("nothing from the claim of owner %s (it may have sent without a keyed transport)", s.Owner)
	}
	return fmt.Sprintf("%s to %s (window %s)", s.Via, s.Host, s.Window)
}

// ApplySent is the rule of Gate.RecordSent: the evidence s joins the record of a
// claim of owner, tagged with it (s.Owner = owner), once per claim (changed is
// false when that claim recorded it already). Only the current owner of a record in
// StateClaimed records evidence; anything else is ErrNotOwner, and the keyed
// transport withholds its request. A fresh claim starts with none; a takeover keeps
// the evidence of the claims before it (Decide), and the new owner records its own.
func ApplySent(existing Record, owner string, s Sent) (next Record, changed bool, err error) {
	if existing.Owner != owner || existing.State != StateClaimed {
		return existing, false, ErrNotOwner
	}
	s.Owner = owner
	if slices.ContainsFunc(existing.Sent, func(e Sent) bool { return ownedBy(e, existing.Owner) == s }) {
		return existing, false, nil
	}
	next = existing
	next.Sent = append(slices.Clip(slices.Clone(existing.Sent)), s)
	return next, true, nil
}

// ownedBy is e with the owner an untagged evidence counts for: the record's
// current one (owner), who alone could have recorded it since the record's last
// takeover (older versions emptied the evidence on takeover).
func ownedBy(e Sent, owner string) Sent {
	if e.Owner == "" {
		e.Owner = owner
	}
	return e
}

// ClaimSent is the evidence the current claim of r (r.Owner) recorded.
func ClaimSent(r Record) []Sent {
	var out []Sent
	for _, e := range r.Sent {
		if e = ownedBy(e, r.Owner); e.Owner == r.Owner && !e.Blank() {
			out = append(out, e)
		}
	}
	return out
}

// keptSent is the evidence a takeover of existing keeps (Decide): all of it, each
// tagged with the claim that recorded it (an untagged one is the outgoing owner's),
// and a blank for the outgoing claim when it recorded none. Evidence is never
// dropped while the record stands for attempts that may have sent: a re-send and a
// witness read every exit the key took since CreatedAt (atk-wit finding 1).
func keptSent(existing Record) []Sent {
	out := make([]Sent, 0, len(existing.Sent)+1)
	for _, e := range existing.Sent {
		out = append(out, ownedBy(e, existing.Owner))
	}
	if len(ClaimSent(existing)) == 0 {
		out = append(out, Sent{Owner: existing.Owner})
	}
	return out
}

// Exits is what r's evidence says of the ways the key left since r.CreatedAt:
// the evidence of every claim that recorded some (blanks left out), and silent,
// the owners of the claims that recorded none — the current claim (r.Owner)
// without evidence of its own, and every claim a takeover left a blank for. Each
// of those may have sent without the keyed transport, so the evidence names every
// exit only when silent is empty; a re-send (ResendWindow) and a witness that
// answers "through this exit and nothing else" need that. A record written before
// the evidence was kept across takeovers holds its current claim's only, as the
// takeovers of then left it.
func Exits(r Record) (exits []Sent, silent []string) {
	for _, e := range r.Sent {
		if e = ownedBy(e, r.Owner); e.Blank() {
			silent = append(silent, e.Owner)
		} else {
			exits = append(exits, e)
		}
	}
	if len(ClaimSent(r)) == 0 {
		silent = append(silent, r.Owner)
	}
	return exits, silent
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
// unknown (r) may be re-sent with the same key, relying on the vendors'
// deduplication, when the gate is configured with window for it: only if every
// claim of r since its CreatedAt (the first claim that may have sent, and every
// takeover after it) recorded evidence that the key left through a keyed transport
// (Exits: none silent), and never longer than the shortest window that any of
// them names — the key may have reached each of those vendors, and the re-send
// reaches them all again, measured from CreatedAt. ok is false without evidence,
// when a claim recorded none (its attempt may have sent without the key, to a
// vendor that cannot deduplicate), or when the evidence names a vendor without a
// window: the write is then refused like any destructive write whose outcome is
// unknown.
func ResendWindow(r Record, window time.Duration) (w time.Duration, ok bool) {
	exits, silent := Exits(r)
	if len(exits) == 0 || len(silent) > 0 || window <= 0 {
		return 0, false
	}
	w = window
	for _, s := range exits {
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
