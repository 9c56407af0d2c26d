package idemhttp

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/idemgate/idemgate/internal/attempt"
)

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

// refuse builds the error for a request the transport withholds: it names the vendor, the
// request, the activity and its key, what is wrong and what to do.
func (t *transport) refuse(req *http.Request, st *attempt.State, cause error, notSent bool, what, next string) error {
	who := "no activity (the request's context carries no idemgate attempt)"
	if st != nil {
		who = fmt.Sprintf("activity %q, key %q", st.Activity, st.Key)
	}
	if notSent {
		return fmt.Errorf("idemhttp: %s: %s %s, %s: %w: %s; nothing was sent (%w); %s",
			t.p.Name, req.Method, req.URL.Path, who, cause, what, ErrNotSent, next)
	}
	return fmt.Errorf("idemhttp: %s: %s %s, %s: %w: %s; %s",
		t.p.Name, req.Method, req.URL.Path, who, cause, what, next)
}
