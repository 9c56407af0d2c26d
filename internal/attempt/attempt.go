// Package attempt carries one gated activity attempt through its context: the key,
// what the gate knows of the claim, and what the calls made during the attempt
// observed about whether their write happened. The interceptor puts it in the
// activity's context; idemhttp reads the key and reports observations; the gate reads
// the observations when the activity returns an error. Package interceptor re-exports
// the parts users need.
package attempt

import (
	"context"
	"sync"
	"time"

	"github.com/idemgate/idemgate/store"
)

// Outcome is what one outgoing call learned about its write.
type Outcome int

const (
	// Unknown: the request may have reached the vendor and no definite answer came
	// (timeout after the request was written, dropped connection, 5xx from a vendor
	// that does not deduplicate).
	Unknown Outcome = iota
	// NotSent: the request certainly never reached the vendor (dial refused, context
	// done before the request was written, refused by the transport).
	NotSent
	// Rejected: the vendor answered that it did not perform the write (a 4xx
	// rejection).
	Rejected
	// Committed: the vendor answered that the write happened.
	Committed
	// InFlight: the vendor says the same key is still being processed.
	InFlight
	// Conflict: the vendor says the key was used with another payload.
	Conflict
)

func (o Outcome) String() string {
	switch o {
	case NotSent:
		return "not-sent"
	case Rejected:
		return "rejected"
	case Committed:
		return "committed"
	case InFlight:
		return "in-flight"
	case Conflict:
		return "conflict"
	default:
		return "unknown"
	}
}

// Definite reports whether the outcome proves the write did not happen.
func (o Outcome) Definite() bool { return o == NotSent || o == Rejected || o == Conflict }

// Observation is one outgoing call's report.
type Observation struct {
	Outcome Outcome
	// Vendor names the profile or vendor ("stripe").
	Vendor string
	// Status is the HTTP status, when there was an answer.
	Status int
	// Replayed: the vendor said it answered from its own idempotency store.
	Replayed bool
	// Detail is a short, human-readable note ("409 idempotency_key_in_use").
	Detail string
}

// State is the attempt as the gate set it up.
type State struct {
	// Key is the activity's idempotency key, the same on every attempt.
	Key string
	// Activity is the activity type name.
	Activity string
	// Effect is "read", "idempotent-write" or "destructive".
	Effect string
	// FirstClaimed is when the key was first claimed: the time of the first attempt
	// that may have reached the vendor (zero for reads).
	FirstClaimed time.Time
	// Retry is true when an earlier attempt held this key's claim (a takeover or a
	// re-claim): the vendor may already have seen the key.
	Retry bool
	// ClockSkew is the gate's clock bound (interceptor.Options.ClockSkew); zero means
	// DefaultClockSkew. InVendorWindow's margin is twice it.
	ClockSkew time.Duration

	// RecordSent, set by the gate for a destructive write whose unknown outcome it
	// would re-send relying on the vendor's deduplication (Options.VendorWindows),
	// records in the claim store that the key leaves through a keyed transport
	// (store.Gate.RecordSent). nil: nobody needs the evidence. Transports call Sending.
	RecordSent func(ctx context.Context, s Sent) error

	mu   sync.Mutex
	obs  []Observation
	sent []Sent
}

// Sent is where a keyed request leaves for (store.Sent, the evidence the claim keeps):
// the transport and its profile or server ("idemhttp:stripe", "mcp:shop"), the host,
// and how long that vendor deduplicates on the key as the transport is configured
// (0: it does not, or nobody said).
type Sent = store.Sent

// Sending is what a keyed transport calls just before it writes a request that
// carries the key: when the gate asked for evidence (RecordSent), it is recorded
// in the store, once per attempt and destination, before the request may leave. On
// an error the transport must withhold the request (not sent): the evidence must
// name every exit the key took, since a re-send relying on a vendor's window and a
// witness that answers "through this exit and nothing else" read it.
func (s *State) Sending(ctx context.Context, to Sent) error {
	if s == nil || s.RecordSent == nil {
		return nil
	}
	s.mu.Lock()
	for _, x := range s.sent {
		if x == to {
			s.mu.Unlock()
			return nil
		}
	}
	s.mu.Unlock()
	if err := s.RecordSent(ctx, to); err != nil {
		return err
	}
	s.mu.Lock()
	s.sent = append(s.sent, to)
	s.mu.Unlock()
	return nil
}

// Observe records an observation. Safe for concurrent use.
func (s *State) Observe(o Observation) {
	s.mu.Lock()
	s.obs = append(s.obs, o)
	s.mu.Unlock()
}

// Observations returns a copy of what was observed so far.
func (s *State) Observations() []Observation {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Observation, len(s.obs))
	copy(out, s.obs)
	return out
}

type ctxKey struct{}

// NewContext returns ctx carrying s.
func NewContext(ctx context.Context, s *State) context.Context {
	return context.WithValue(ctx, ctxKey{}, s)
}

// FromContext returns the attempt carried by ctx.
func FromContext(ctx context.Context) (*State, bool) {
	s, ok := ctx.Value(ctxKey{}).(*State)
	return s, ok && s != nil
}

// DefaultClockSkew is the largest difference idemgate assumes between two clocks
// (the worker's that first claimed a key, a later worker's, and the vendor's) when
// nobody said otherwise: interceptor.DefaultClockSkew, the default of
// interceptor.Options.ClockSkew.
const DefaultClockSkew = 2 * time.Second

// Skew is s.ClockSkew, or DefaultClockSkew when it is zero.
func (s *State) Skew() time.Duration {
	if s == nil || s.ClockSkew <= 0 {
		return DefaultClockSkew
	}
	return s.ClockSkew
}

// InVendorWindow reports whether a write whose key was first claimed at first (by
// the claiming worker's clock) may be re-sent at now (by this worker's clock) with
// the same key to a vendor that remembers keys for window from when it first saw
// them, when any two clocks differ by at most skew. It stops 2×skew before the
// window ends, since each clock may be off by skew: without that margin a worker
// whose clock runs behind re-sends to a vendor that has already forgotten the key,
// and the write happens twice. One rule, with one skew (Options.ClockSkew), for the
// gate (Options.VendorWindows) and idemhttp (Profile.Window).
func InVendorWindow(first, now time.Time, window, skew time.Duration) bool {
	return now.Before(first.Add(window - 2*skew))
}
