package idemhttp

import "errors"

// Sentinel errors for errors.Is. An error from the transport that wraps ErrNotSent proves
// the request never left this process (the transport also reports it to the gate).
var (
	// ErrNotSent: the request was not sent: refused by the transport, or it failed
	// before a byte of it was written.
	ErrNotSent = errors.New("request not sent")
	// ErrNoKey: the request carries no activity key (or no first-claimed time, for
	// Azure) and the profile needs one.
	ErrNoKey = errors.New("no activity key")
	// ErrBadKey: the key cannot be shaped into the vendor's rules.
	ErrBadKey = errors.New("key does not fit the vendor's rules")
	// ErrBadBody: a body-field profile got a body that is not a JSON object.
	ErrBadBody = errors.New("request body is not a JSON object")
	// ErrWindowPassed: a destructive retry would reach the vendor after it forgot the
	// key (or the vendor never dedupes), so it would be a second write. It does not
	// wrap ErrNotSent: this request was withheld, but an earlier attempt may have
	// reached the vendor, so the outcome of the write stays unknown.
	ErrWindowPassed = errors.New("vendor's idempotency window passed")
	// ErrBadProfile: the Profile given to NewTransport is not valid.
	ErrBadProfile = errors.New("invalid idemhttp profile")
	// ErrCrossHostRedirect: the vendor answered a gated write with a 307 or 308 to
	// another host (or port). The redirect is not followed: the key and the body
	// never leave for a host the request was not made to. It does not wrap
	// ErrNotSent: the first request reached the vendor, so the outcome is unknown.
	ErrCrossHostRedirect = errors.New("redirect to another host")
)
