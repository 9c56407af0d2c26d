package vendorsim

import (
	"slices"
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

func (v *Vendor) performed(key string) {
	v.mu.Lock()
	v.effects[key]++
	v.mu.Unlock()
}
