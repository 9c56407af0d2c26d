// Package vendorsim runs small HTTP servers that behave like the vendors an agent's
// tools call: a document search, a CRM, a ticket desk, a card processor, an e-mail
// sender and a chat service. The keyed ones deduplicate on the Idempotency-Key as the
// IETF draft describes (the stored response replayed with Idempotent-Replayed: true,
// 409 while the first request is in progress, 422 — Stripe-style 400
// idempotency_error for the card processor — on the same key with another payload);
// the unkeyed ones perform every request they get. Each counts the side effects it
// performed per key (per message for the unkeyed ones), so a duplicate is visible.
//
// The demo (examples/agentloop) and the tests start them in-process with Start.
package vendorsim

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
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
	effects      map[string]int
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

// Start starts every vendor on a loopback port. Close stops them.
func Start() (*World, error) {
	w := &World{
		Docs:     newVendor("docs", Unkeyed),
		CRM:      newVendor("crm", Unkeyed),
		Tickets:  newVendor("tickets", IETF),
		Payments: newVendor("payments", StripeStyle),
		Email:    newVendor("email", Unkeyed),
		Chat:     newVendor("chat", Unkeyed),
	}
	w.Docs.mux.HandleFunc("GET /search", w.Docs.search)
	w.CRM.mux.HandleFunc("GET /customers/{id}", w.CRM.getCustomer)
	w.CRM.mux.HandleFunc("PUT /contacts/{email}", w.CRM.upsertContact)
	w.Tickets.mux.HandleFunc("POST /tickets", w.Tickets.keyed(w.Tickets.createTicket))
	w.Payments.mux.HandleFunc("POST /v1/charges", w.Payments.keyed(w.Payments.createCharge))
	w.Email.mux.HandleFunc("POST /v3/mail/send", w.Email.unkeyed(w.Email.sendMail))
	w.Chat.mux.HandleFunc("POST /api/chat.postMessage", w.Chat.unkeyed(w.Chat.postMessage))
	for _, v := range w.Vendors() {
		if err := v.start(); err != nil {
			w.Close()
			return nil, err
		}
	}
	return w, nil
}

// Close stops every vendor.
func (w *World) Close() {
	for _, v := range w.Vendors() {
		if v != nil && v.srv != nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = v.srv.Shutdown(ctx)
			cancel()
			_ = v.srv.Close()
		}
	}
}

func newVendor(name string, s Style) *Vendor {
	return &Vendor{Name: name, Style: s, effects: map[string]int{}, replays: map[string]int{},
		idem: map[string]*stored{}, records: map[string]map[string]any{}, mux: http.NewServeMux()}
}

func (v *Vendor) start() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("vendorsim: %s: listen on loopback: %w", v.Name, err)
	}
	v.URL = "http://" + ln.Addr().String()
	v.srv = &http.Server{Handler: v.mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = v.srv.Serve(ln) }()
	return nil
}

// Effects returns how many side effects were performed for key.
func (v *Vendor) Effects(key string) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.effects[key]
}

// Total returns how many side effects were performed in all.
func (v *Vendor) Total() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	n := 0
	for _, c := range v.effects {
		n += c
	}
	return n
}

// Replays returns how many requests were answered from the vendor's own idempotency store.
func (v *Vendor) Replays() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	n := 0
	for _, c := range v.replays {
		n += c
	}
	return n
}

// Duplicates returns the keys whose side effect was performed more than once.
func (v *Vendor) Duplicates() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []string
	for k, c := range v.effects {
		if c > 1 {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// Records returns how many distinct records the vendor holds (contacts, tickets, charges).
func (v *Vendor) Records() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.records)
}

// Record returns a copy of one record.
func (v *Vendor) Record(id string) (map[string]any, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	r, ok := v.records[id]
	if !ok {
		return nil, false
	}
	out := make(map[string]any, len(r))
	for k, x := range r {
		out[k] = x
	}
	return out, true
}

func (v *Vendor) performed(key string) {
	v.mu.Lock()
	v.effects[key]++
	v.mu.Unlock()
}

// SetBeforeAnswer sets a hook that runs after a write's side effect was performed and
// before the vendor answers (nil removes it). The demo and the fault tests use it to
// stop a worker at exactly that point. It receives the request's key (or the message
// fingerprint of an unkeyed vendor).
func (v *Vendor) SetBeforeAnswer(hook func(key string)) {
	v.mu.Lock()
	v.beforeAnswer = hook
	v.mu.Unlock()
}

// SetBeforeEffect sets a hook that runs when a keyed write has reserved its key and
// before it performs the side effect (nil removes it): while it runs, the key is in
// progress and a second request with it is answered 409.
func (v *Vendor) SetBeforeEffect(hook func(key string)) {
	v.mu.Lock()
	v.beforeEffect = hook
	v.mu.Unlock()
}

func (v *Vendor) runBeforeAnswer(key string) {
	v.mu.Lock()
	hook := v.beforeAnswer
	v.mu.Unlock()
	if hook != nil {
		hook(key)
	}
}

// handler performs a write and returns its status and JSON answer.
type handler func(r *http.Request, body map[string]any) (status int, answer map[string]any, recordID string)

// keyed wraps a write with the vendor's idempotency store.
func (v *Vendor) keyed(h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		if v.Style == IETF {
			key = strings.TrimSuffix(strings.TrimPrefix(key, `"`), `"`)
		}
		raw, body, ok := readJSON(w, r)
		if !ok {
			return
		}
		if key == "" {
			v.idemError(w, "missing", "this endpoint requires an Idempotency-Key header")
			return
		}
		hash := sha(raw)
		v.mu.Lock()
		s, seen := v.idem[key]
		switch {
		case seen && s.hash != hash:
			v.mu.Unlock()
			v.idemError(w, "reused", "the key was used with another payload")
			return
		case seen && !s.done:
			v.mu.Unlock()
			v.idemError(w, "in-progress", "a request with this key is still being processed")
			return
		case seen:
			v.replays[key]++
			status, out := s.status, s.body
			v.mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Idempotent-Replayed", "true")
			w.WriteHeader(status)
			_, _ = w.Write(out)
			return
		}
		s = &stored{hash: hash}
		v.idem[key] = s
		beforeEffect := v.beforeEffect
		v.mu.Unlock()
		if beforeEffect != nil {
			beforeEffect(key)
		}

		status, answer, id := h(r, body)
		out, _ := json.Marshal(answer)
		v.mu.Lock()
		if status >= 500 {
			delete(v.idem, key) // nothing stored: a retry is processed anew
		} else {
			s.done, s.status, s.body, s.recordID = true, status, out, id
		}
		v.mu.Unlock()
		if status < 300 {
			v.performed(key)
			v.runBeforeAnswer(key)
		}
		writeJSON(w, status, out)
	}
}

// unkeyed performs every request; the side effect is counted per message.
func (v *Vendor) unkeyed(h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		raw, body, ok := readJSON(w, r)
		if !ok {
			return
		}
		status, answer, _ := h(r, body)
		out, _ := json.Marshal(answer)
		if status < 300 {
			fp := "msg:" + sha(raw)[:16]
			v.performed(fp)
			v.runBeforeAnswer(fp)
		}
		writeJSON(w, status, out)
	}
}

func (v *Vendor) idemError(w http.ResponseWriter, kind, msg string) {
	if v.Style == StripeStyle {
		code := map[string]string{"missing": "parameter_missing", "reused": "idempotency_error", "in-progress": "idempotency_key_in_use"}[kind]
		status := map[string]int{"missing": 400, "reused": 400, "in-progress": 409}[kind]
		errType := "idempotency_error"
		if kind == "missing" {
			errType = "invalid_request_error"
		}
		out, _ := json.Marshal(map[string]any{"error": map[string]any{"type": errType, "code": code, "message": msg}})
		writeJSON(w, status, out)
		return
	}
	status := map[string]int{"missing": 400, "reused": 422, "in-progress": 409}[kind]
	out, _ := json.Marshal(map[string]any{"type": "https://iana.org/assignments/http-problem-types#idempotency-" + kind, "title": msg})
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_, _ = w.Write(out)
}

func (v *Vendor) search(w http.ResponseWriter, r *http.Request) {
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	if q == "" {
		writeJSON(w, 400, mustJSON(map[string]any{"error": "q is required"}))
		return
	}
	docs := []map[string]any{
		{"title": "Refund policy", "url": "https://docs.example.com/refunds", "snippet": "Refunds within 30 days for " + q},
		{"title": "Billing FAQ", "url": "https://docs.example.com/billing", "snippet": "How charges appear for " + q},
	}
	writeJSON(w, 200, mustJSON(map[string]any{"query": q, "results": docs}))
}

func (v *Vendor) getCustomer(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !strings.HasPrefix(id, "cus_") {
		writeJSON(w, 404, mustJSON(map[string]any{"error": "no customer " + id}))
		return
	}
	writeJSON(w, 200, mustJSON(map[string]any{"id": id, "name": "Ada Lovelace", "email": "ada@example.com", "plan": "pro"}))
}

// upsertContact is idempotent by nature: PUT the whole contact under its e-mail.
func (v *Vendor) upsertContact(w http.ResponseWriter, r *http.Request) {
	email := r.PathValue("email")
	_, body, ok := readJSON(w, r)
	if !ok {
		return
	}
	if !strings.Contains(email, "@") {
		writeJSON(w, 400, mustJSON(map[string]any{"error": "invalid e-mail " + email}))
		return
	}
	v.mu.Lock()
	rec := map[string]any{"email": email}
	for k, x := range body {
		rec[k] = x
	}
	version := 1
	if old, ok := v.records[email]; ok {
		version = int(old["version"].(float64)) + 1
	}
	rec["version"] = float64(version)
	v.records[email] = rec
	v.mu.Unlock()
	v.performed(email)
	v.runBeforeAnswer(email)
	writeJSON(w, 200, mustJSON(rec))
}

func (v *Vendor) createTicket(_ *http.Request, body map[string]any) (int, map[string]any, string) {
	subject, _ := body["subject"].(string)
	if subject == "" {
		return 400, map[string]any{"error": "subject is required"}, ""
	}
	v.mu.Lock()
	v.seq++
	id := fmt.Sprintf("T-%d", 1000+v.seq)
	rec := map[string]any{"id": id, "subject": subject, "requester": body["requester"], "status": "open"}
	v.records[id] = rec
	v.mu.Unlock()
	return 201, rec, id
}

func (v *Vendor) createCharge(_ *http.Request, body map[string]any) (int, map[string]any, string) {
	amount, _ := body["amount"].(float64)
	currency, _ := body["currency"].(string)
	customer, _ := body["customer"].(string)
	if amount <= 0 || currency == "" || customer == "" {
		return 400, map[string]any{"error": map[string]any{"type": "invalid_request_error", "code": "parameter_invalid",
			"message": "amount > 0, currency and customer are required"}}, ""
	}
	if amount > 1_000_000 {
		return 402, map[string]any{"error": map[string]any{"type": "card_error", "code": "card_declined", "message": "card declined"}}, ""
	}
	v.mu.Lock()
	v.seq++
	id := fmt.Sprintf("ch_%06d", v.seq)
	rec := map[string]any{"id": id, "amount": amount, "currency": currency, "customer": customer, "status": "succeeded"}
	v.records[id] = rec
	v.mu.Unlock()
	return 200, rec, id
}

func (v *Vendor) sendMail(_ *http.Request, body map[string]any) (int, map[string]any, string) {
	to, _ := body["to"].(string)
	if !strings.Contains(to, "@") {
		return 400, map[string]any{"errors": []any{map[string]any{"message": "invalid recipient"}}}, ""
	}
	v.mu.Lock()
	v.seq++
	id := fmt.Sprintf("msg-%d", v.seq)
	v.mu.Unlock()
	return 202, map[string]any{"message_id": id}, id
}

func (v *Vendor) postMessage(_ *http.Request, body map[string]any) (int, map[string]any, string) {
	channel, _ := body["channel"].(string)
	if channel == "" {
		return 200, map[string]any{"ok": false, "error": "channel_not_found"}, ""
	}
	v.mu.Lock()
	v.seq++
	ts := fmt.Sprintf("1700000000.%06d", v.seq)
	v.mu.Unlock()
	return 200, map[string]any{"ok": true, "channel": channel, "ts": ts}, ts
}

func readJSON(w http.ResponseWriter, r *http.Request) ([]byte, map[string]any, bool) {
	raw, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		writeJSON(w, 400, mustJSON(map[string]any{"error": "cannot read body"}))
		return nil, nil, false
	}
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		writeJSON(w, 400, mustJSON(map[string]any{"error": "body is not a JSON object: " + err.Error()}))
		return nil, nil, false
	}
	return raw, body, true
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(errors.Join(errors.New("vendorsim: encode answer"), err))
	}
	return b
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
