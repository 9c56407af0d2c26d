// Package vendorsim runs small HTTP servers that behave like the vendors an agent's
// tools call: a document search, a CRM, a ticket desk, a card processor, an e-mail
// sender and a chat service. The keyed ones deduplicate on the Idempotency-Key as the
// IETF draft describes (the stored response replayed with Idempotent-Replayed: true,
// 409 while the first request is in progress, 422 — Stripe-style 400
// idempotency_error for the card processor — on the same key with another payload);
// the unkeyed ones perform every request they get. The keyed ones also answer a
// lookup by key from that store (GET /v1/charges?idempotency_key=K on the card
// processor, GET /tickets?idempotency_key=K on the ticket desk): the record the key
// produced, or an empty list when it produced none — what an idempotency witness
// (idemhttp.LookupWitness) asks. Each counts the side effects it
// performed per key (per message for the unkeyed ones), so a duplicate is visible.
//
// The demo (examples/agentloop) and the tests start them in-process with Start.
package vendorsim

import (
	"net/http"
	"sync"
)

// Style says how a keyed vendor answers idempotency errors.
type Style int

const (
	// Unkeyed vendors take no key and perform every request (SendGrid, Slack).
	Unkeyed Style = iota
	// IETF answers per draft-ietf-httpapi-idempotency-key-header: key as a structured-field
	// string, 409 in progress, 422 for another payload, 400 when a required key is missing.
	IETF
	// StripeStyle answers like Stripe: bare key, 409 idempotency_key_in_use, 400
	// idempotency_error for another payload.
	StripeStyle
)

// Vendor is one simulated vendor.
type Vendor struct {
	Name  string
	Style Style
	// URL is the base URL, set by Start.
	URL string

	mu           sync.Mutex
	beforeAnswer func(key string)
	beforeEffect func(key string)
	beforeLookup func(w http.ResponseWriter, r *http.Request) bool
	lookups      int
	effects      map[string]int
	ledger       []Entry
	replays      map[string]int
	idem         map[string]*stored
	records      map[string]map[string]any // contacts by e-mail, tickets, charges by id
	seq          int
	srv          *http.Server
	mux          *http.ServeMux
}

type stored struct {
	hash     string
	done     bool
	status   int
	body     []byte
	recordID string
}

// World is the set of vendors the agent's tools call.
type World struct {
	Docs, CRM, Tickets, Payments, Email, Chat *Vendor
}

// Vendors lists the world's vendors in a fixed order.
func (w *World) Vendors() []*Vendor {
	return []*Vendor{w.Docs, w.CRM, w.Tickets, w.Payments, w.Email, w.Chat}
}

func newVendor(name string, s Style) *Vendor {
	return &Vendor{Name: name, Style: s, effects: map[string]int{}, replays: map[string]int{},
		idem: map[string]*stored{}, records: map[string]map[string]any{}, mux: http.NewServeMux()}
}
