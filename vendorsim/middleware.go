package vendorsim

import (
	"encoding/json"
	"net/http"
	"strings"
)

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
			v.performed(key, true, r.URL.Path, raw, id)
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
		status, answer, id := h(r, body)
		out, _ := json.Marshal(answer)
		if status < 300 {
			fp := "msg:" + sha(raw)[:16]
			v.performed(fp, false, r.URL.Path, raw, id)
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

// lookup answers what the vendor holds under an idempotency key
// (GET …?idempotency_key=K), truthfully from its own store: a list of the records
// the key produced — one, or none when a request with the key was never received,
// was rejected, or failed with a 5xx (nothing stored, as keyed does). A key whose
// first request is still being processed is answered like a second request with it
// (409 in progress): whether it will produce a record is not known yet. Lookups are
// reads: they perform nothing and are not counted. The key is matched as the vendor
// received it (an IETF vendor's without its quotes).
func (v *Vendor) lookup(object string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		key := r.URL.Query().Get("idempotency_key")
		if key == "" {
			v.idemError(w, "missing", "idempotency_key is required")
			return
		}
		v.mu.Lock()
		v.lookups++
		hook := v.beforeLookup
		v.mu.Unlock()
		if hook != nil && !hook(w, r) {
			return
		}
		l := v.Lookup(key)
		if l.InProgress {
			v.idemError(w, "in-progress", "a request with this key is still being processed")
			return
		}
		data := []any{}
		if l.RecordID != "" {
			if rec, ok := v.Record(l.RecordID); ok {
				data = append(data, rec)
			}
		}
		writeJSON(w, 200, mustJSON(map[string]any{"object": "list", "url": object, "data": data, "has_more": false}))
	}
}

// SetBeforeLookup sets a hook that runs when a lookup by key arrives, before it is
// answered (nil removes it): returning false means the hook wrote the answer itself
// (a test's 503, or a hang until its request is cancelled).
func (v *Vendor) SetBeforeLookup(hook func(w http.ResponseWriter, r *http.Request) bool) {
	v.mu.Lock()
	v.beforeLookup = hook
	v.mu.Unlock()
}

// Lookups returns how many lookups by key the vendor received.
func (v *Vendor) Lookups() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.lookups
}
