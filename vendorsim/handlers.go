package vendorsim

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

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
	raw, body, ok := readJSON(w, r)
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
	v.performed(email, false, r.URL.Path, raw, email)
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
		panic(errors.Join(errors.New("idemgate/vendorsim: encode answer"), err))
	}
	return b
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
