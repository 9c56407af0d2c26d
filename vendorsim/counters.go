package vendorsim

import (
	"encoding/json"
	"slices"
	"time"
)

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

// Entry is one side effect a vendor performed: a line of its ledger.
type Entry struct {
	// Seq numbers the vendor's entries from 1, in the order performed.
	Seq int `json:"seq"`
	// Vendor is the vendor's name.
	Vendor string `json:"vendor"`
	// Key is what the effect is counted under (Effects): the Idempotency-Key as the
	// vendor received it for a keyed vendor, the message fingerprint ("msg:…") for
	// an unkeyed one, the contact's e-mail for the CRM's PUT.
	Key string `json:"key"`
	// Keyed: Key is an idempotency key the request carried.
	Keyed bool `json:"keyed,omitempty"`
	// Path is the request's path; Body its JSON body, as received.
	Path string          `json:"path"`
	Body json.RawMessage `json:"body,omitempty"`
	// RecordID names the record the effect produced or changed ("" for none).
	RecordID string    `json:"record_id,omitempty"`
	Time     time.Time `json:"time"`
}

// Ledger returns a copy of every side effect the vendor performed, in order: what
// a checker compares with what the callers were told.
func (v *Vendor) Ledger() []Entry {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.ledger)
}

func (v *Vendor) performed(key string, keyed bool, path string, body []byte, recordID string) {
	v.mu.Lock()
	v.effects[key]++
	v.ledger = append(v.ledger, Entry{Seq: len(v.ledger) + 1, Vendor: v.Name, Key: key, Keyed: keyed, Path: path,
		Body: json.RawMessage(slices.Clone(body)), RecordID: recordID, Time: time.Now()})
	v.mu.Unlock()
}
