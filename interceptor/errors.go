package interceptor

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/idemgate/idemgate/internal/attempt"
)

// Error types of the *temporal.ApplicationError values the gate returns. They are
// part of the wire contract: match them in retry policies and workflow code.
const (
	// ErrTypeInFlight: an earlier attempt holds the key. Retryable, with the next
	// retry after its lease, while that attempt may still be running; non-retryable
	// for a destructive write whose earlier attempt ended with an unknown outcome —
	// the message carries the withheld call and a person or reconciler must decide
	// (retryable after Options.HoldUnknown when that is set).
	ErrTypeInFlight = "IdempotencyInFlight"
	// ErrTypeConflict: the key was already used with other arguments. Non-retryable.
	ErrTypeConflict = "IdempotencyConflict"
	// ErrTypeWriteGated: the rerun policy or a pause (`idemgate pause`) withheld the
	// write; the message carries the withheld call. Non-retryable under a replay
	// policy; retryable under a pause, with the next retry after the next refresh.
	ErrTypeWriteGated = "WriteGated"
	// ErrTypeKeyMissing: a write arrived without a key (the scheduling workflow does
	// not run the interceptor). Non-retryable; nothing ran.
	ErrTypeKeyMissing = "IdempotencyKeyMissing"
	// ErrTypeStoreUnavailable: the claim store could not be reached; writes fail
	// closed. Retryable.
	ErrTypeStoreUnavailable = "IdempotencyStoreUnavailable"
	// ErrTypeKeyInvalid: WithKey was given a key outside 16..255 characters, or an
	// identifying field is missing. Non-retryable; nothing ran.
	ErrTypeKeyInvalid = "IdempotencyKeyInvalid"
	// ErrTypeArgsInvalid: the arguments have no canonical form (a channel, a func,
	// NaN). Non-retryable; nothing ran.
	ErrTypeArgsInvalid = "IdempotencyArgsInvalid"
	// ErrTypeWrongStore: the write's key was minted by a workflow worker whose claim
	// store is another than this activity worker's (two fleets on different stores
	// gating one task queue). Retryable, so that a worker on the right store can
	// take the next attempt; nothing ran and nothing was claimed here.
	ErrTypeWrongStore = "IdempotencyWrongStore"
	// ErrTypeResultNotStored: a finished write was repeated, but its result was over
	// Options.MaxResultSize and not stored. Non-retryable; not run again.
	ErrTypeResultNotStored = "IdempotencyResultNotStored"
)

// ErrNotCommitted is matched (errors.Is) by every error wrapped with NotCommitted.
var ErrNotCommitted = errors.New("idemgate: the write certainly did not happen")

type notCommitted struct{ err error }

func (e *notCommitted) Error() string        { return e.err.Error() }
func (e *notCommitted) Unwrap() error        { return e.err }
func (e *notCommitted) Is(target error) bool { return target == ErrNotCommitted }

// NotCommitted marks err as a definite failure: the activity proves the write did
// not happen (the request was never sent, or the vendor rejected it). The gate
// releases the claim so a retry may run, and returns err itself to Temporal.
// Any other error is an unknown outcome and keeps the claim. NotCommitted(nil) is nil.
func NotCommitted(err error) error {
	if err == nil {
		return nil
	}
	return &notCommitted{err: err}
}

// WithheldCall is the call the gate refused to run, in the details of WriteGated and
// non-retryable IdempotencyInFlight errors.
type WithheldCall struct {
	Activity string          `json:"activity"`
	Key      string          `json:"key"`
	Effect   string          `json:"effect"`
	Args     json.RawMessage `json:"args"`
	// Earlier is the attempt whose unknown outcome made the gate refuse, as its
	// receipt recorded it; nil when no error is on record (it crashed or timed out)
	// and in WriteGated errors.
	Earlier *EarlierAttempt `json:"earlier,omitempty"`
	// NotSentCountsFrom is set on a retryable (held) refusal when a witness said
	// "not sent" before its answer could count: the time it counts from
	// (store.NotSentFrom), when Temporal retries and the write runs once if the
	// witness still says so. Nil when no witness's answer is waiting to count: the
	// key waits for a person, or for a witness that can tell later.
	NotSentCountsFrom *time.Time `json:"not_sent_counts_from,omitempty"`
}

// EarlierAttempt is the attempt that left a key with an unknown outcome, from its
// receipt: its own error is often the root cause of the refusal.
type EarlierAttempt struct {
	WorkflowID string    `json:"workflow_id"`
	RunID      string    `json:"run_id"`
	Attempt    int32     `json:"attempt"`
	Time       time.Time `json:"time"`
	// Error is the attempt's error as its receipt recorded it; the text of a
	// *temporal.ApplicationError names its type ("… (type: InvalidAmount, retryable: true)").
	Error string `json:"error"`
}

func (c WithheldCall) String() string { return c.Activity + "(" + string(c.Args) + ")" }

// ConflictDetails is in the details of an IdempotencyConflict: the stored record, so
// the caller can recover (use it, or choose a new key).
type ConflictDetails struct {
	Key            string          `json:"key"`
	Activity       string          `json:"activity"`
	ArgsHash       string          `json:"args_hash"`
	StoredArgsHash string          `json:"stored_args_hash"`
	StoredAt       time.Time       `json:"stored_at"`
	StoredState    string          `json:"stored_state"`
	StoredArgs     json.RawMessage `json:"stored_args"`
	Args           json.RawMessage `json:"args"`
	// Differs names the top-level fields (or argument positions) that differ.
	Differs []string `json:"differs"`
}

// ErrorType returns the type of the first *temporal.ApplicationError in err's chain
// (an activity error seen by the workflow wraps it), or "".
func ErrorType(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Type()
	}
	return ""
}

func appError(msg, typ string, nonRetryable bool, next time.Duration, details ...any) error {
	return temporal.NewApplicationErrorWithOptions(msg, typ, temporal.ApplicationErrorOptions{
		NonRetryable:   nonRetryable,
		NextRetryDelay: next,
		Details:        details,
	})
}

// argsInvalid refuses a write whose arguments have no canonical form (a channel, a
// func, NaN): in the workflow before it is scheduled (nothing is "scheduled"), or
// in the activity before its body runs (nothing is "run").
func argsInvalid(activity string, e Effect, cause error, nothing string) error {
	return appError(fmt.Sprintf("idemgate: %s (%s): %v. Nothing was %s. Next step: pass plain data "+
		"(structs, maps, slices, strings, finite numbers) so the call can be hashed and compared.",
		activity, e, cause, nothing), ErrTypeArgsInvalid, true, 0)
}

// boundary shapes an activity's own error for Temporal: the NotCommitted wrapper is
// removed, and a %w-wrapped non-retryable ApplicationError is lifted to the top
// level (Temporal reads the flag only there).
func boundary(err error) error {
	if nc, ok := err.(*notCommitted); ok {
		err = nc.err
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) && error(app) != err && app.NonRetryable() {
		return temporal.NewApplicationErrorWithOptions(err.Error(), app.Type(), temporal.ApplicationErrorOptions{
			NonRetryable: true,
			Cause:        app,
		})
	}
	return err
}

// definite reports whether the activity's error proves the write did not happen:
// marked with NotCommitted, or every call the attempt made through idemhttp was
// definitely not performed.
func definite(err error, obs []attempt.Observation) bool {
	if errors.Is(err, ErrNotCommitted) {
		return true
	}
	if len(obs) == 0 {
		return false
	}
	for _, o := range obs {
		if !o.Outcome.Definite() {
			return false
		}
	}
	return true
}

// differs names what differs between two canonical argument lists.
func differs(stored, now []byte) []string {
	var a, b []json.RawMessage
	if json.Unmarshal(stored, &a) != nil || json.Unmarshal(now, &b) != nil {
		return []string{"arguments"}
	}
	var out []string
	for i := range max(len(a), len(b)) {
		if i >= len(a) || i >= len(b) {
			out = append(out, fmt.Sprintf("argument %d", i+1))
			continue
		}
		if string(a[i]) == string(b[i]) {
			continue
		}
		var ma, mb map[string]json.RawMessage
		if json.Unmarshal(a[i], &ma) != nil || json.Unmarshal(b[i], &mb) != nil {
			out = append(out, fmt.Sprintf("argument %d", i+1))
			continue
		}
		for k, v := range ma {
			if w, ok := mb[k]; !ok || string(v) != string(w) {
				out = append(out, k)
			}
		}
		for k := range mb {
			if _, ok := ma[k]; !ok {
				out = append(out, k)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func shortList(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// vendorConflict finds a vendor's "key reused with another payload" answer.
func vendorConflict(obs []attempt.Observation) (attempt.Observation, bool) {
	for _, o := range obs {
		if o.Outcome == attempt.Conflict {
			return o, true
		}
	}
	return attempt.Observation{}, false
}
