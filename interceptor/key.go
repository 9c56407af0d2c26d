package interceptor

import (
	"context"
	"crypto/sha1"
	"strconv"

	"github.com/google/uuid"
	"go.temporal.io/sdk/workflow"

	"github.com/idemgate/idemgate/internal/attempt"
)

// Business key limits for WithKey.
const (
	MinKeyLength = 16
	MaxKeyLength = 255
)

// keyNamespace roots every idemgate key (UUID version 5); the version of the key
// derivation ("v1") is the first element of every name hashed under it.
var keyNamespace = uuid.MustParse("5d0c1d0e-6b7a-4a43-9b8e-1d3c0a2f9e11")

// mint derives a key: a version-5 (SHA-1, RFC 9562) UUID under keyNamespace of the
// parts, NUL-separated, after "v1" and the kind. Every key idemgate makes goes
// through here. It equals uuid.NewSHA1(keyNamespace, name) without its allocations.
func mint(kind string, parts ...string) string {
	var stack [512]byte
	b := mintName(stack[:0], kind, parts...)
	return mintUUID(b)
}

// mintName appends the name mint hashes to b.
func mintName(b []byte, kind string, parts ...string) []byte {
	b = append(b, keyNamespace[:]...)
	b = append(b, "v1\x00"...)
	b = append(b, kind...)
	for _, p := range parts {
		b = append(b, 0)
		b = append(b, p...)
	}
	return b
}

// mintUUID is the version-5 UUID of a name from mintName.
func mintUUID(b []byte) string {
	sum := sha1.Sum(b)
	var u uuid.UUID
	copy(u[:], sum[:16])
	u[6] = u[6]&0x0f | 0x50 // version 5
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	return u.String()
}

// occurrenceKey is the default key: the n-th call (from 1) of activityType in the scope.
func occurrenceKey(namespace, scope, activityType string, n int) string {
	return mint("occurrence", namespace, scope, activityType, strconv.Itoa(n))
}

// BusinessKey returns the key WithKey(ctx, key) gives an activity of activityType in
// namespace: the key its records, receipts and vendor requests carry. Operators use
// it to find a business key's records.
func BusinessKey(namespace, activityType, key string) string {
	return mint("business", namespace, activityType, key)
}

// identifyingKey is the key of a call identified by its IdentifyingFields values.
func identifyingKey(namespace, scope, activityType string, values []byte) string {
	var stack [512]byte
	b := mintName(stack[:0], "identifying", namespace, scope, activityType)
	b = append(b, 0)
	return mintUUID(append(b, values...)) // mint("identifying", …, string(values)) without the copy
}

type businessKeyCtx struct{}

// WithKey makes the caller the owner of the key of every activity scheduled with the
// returned context: a business key such as "order-4217/charge". The key is scoped
// only by namespace and activity type, so two calls with the same key — in one
// execution or in two different workflows — are the same write: the second returns
// the first's stored result (or IdempotencyConflict when its arguments differ).
//
// The key must be 16 to 255 characters. A key outside that is refused when the
// activity runs (IdempotencyKeyInvalid, non-retryable), and nothing runs.
// KeyFromContext and the forwarded vendor key are a UUID derived from it.
func WithKey(ctx workflow.Context, key string) workflow.Context {
	return workflow.WithValue(ctx, businessKeyCtx{}, key)
}

// KeyFromContext returns, inside an activity run through the gate, the key of this
// call: the same on every attempt. ok is false outside the gate.
func KeyFromContext(ctx context.Context) (string, bool) {
	s, ok := attempt.FromContext(ctx)
	if !ok || s.Key == "" {
		return "", false
	}
	return s.Key, true
}

// newOwner is the fencing token of one attempt.
func newOwner() string { return uuid.NewString() }
