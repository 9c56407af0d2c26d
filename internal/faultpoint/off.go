//go:build !idemgate_faults

package faultpoint

// Enabled reports whether this binary was built with fault injection.
const Enabled = false

// Hit does nothing: this build has no fault injection.
func Hit(string) {}
