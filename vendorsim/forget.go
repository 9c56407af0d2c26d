package vendorsim

// Forget drops key (as the vendor received it) from a keyed vendor's idempotency
// store, as a real vendor does once its window passed (Stripe after 24 h, most
// others sooner): a later request with the key is performed anew, and the lookup
// by key finds nothing. It reports whether the vendor held the key. The records
// the key produced stay.
func (v *Vendor) Forget(key string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	_, ok := v.idem[key]
	delete(v.idem, key)
	return ok
}
