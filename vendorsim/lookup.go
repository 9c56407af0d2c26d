package vendorsim

import (
	"encoding/json"
	"net/http"
)

// KeyLookup is what a keyed vendor's idempotency store holds for one key.
type KeyLookup struct {
	// Found: a request with the key reached the vendor.
	Found bool `json:"found"`
	// InProgress: that request is still being processed (no answer yet).
	InProgress bool `json:"in_progress,omitempty"`
	// Status and Body are the answer the vendor stored for the key (and replays).
	Status int             `json:"status,omitempty"`
	Body   json.RawMessage `json:"body,omitempty"`
	// RecordID names the record the request produced ("" for none: rejected, failed).
	RecordID string `json:"record_id,omitempty"`
}

// Lookup answers from a keyed vendor's own idempotency store what it did with key
// (the key as the vendor received it). An unkeyed vendor never finds anything.
func (v *Vendor) Lookup(key string) KeyLookup {
	v.mu.Lock()
	defer v.mu.Unlock()
	s, ok := v.idem[key]
	switch {
	case !ok:
		return KeyLookup{}
	case !s.done:
		return KeyLookup{Found: true, InProgress: true}
	}
	return KeyLookup{Found: true, Status: s.status, Body: json.RawMessage(s.body), RecordID: s.recordID}
}

// LookupHandler serves Lookup over HTTP: GET ?key=K answers the KeyLookup as JSON.
// The fault harness and the demo serve it beside the vendor so that a witness in the
// worker can ask the vendor whether a key acted.
func (v *Vendor) LookupHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			http.Error(w, "GET only", http.StatusMethodNotAllowed)
			return
		}
		key := r.URL.Query().Get("key")
		if key == "" {
			http.Error(w, "the key query parameter is required", http.StatusBadRequest)
			return
		}
		writeJSON(w, http.StatusOK, mustJSON(v.Lookup(key)))
	})
}
