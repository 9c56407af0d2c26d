package idemhttp

import (
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/idemgate/idemgate/internal/attempt"
)

// Where says where a vendor takes the idempotency key.
type Where int

const (
	// Nowhere: the vendor takes no key (SendGrid, Slack, …). Nothing is forwarded, outcomes
	// are still recorded. The zero value, so a Profile that forgets Where forwards
	// nothing; Validate rejects a Field without a Where.
	Nowhere Where = iota
	// InHeader: one request header named Field.
	InHeader
	// InQuery: one query parameter named Field (Google Cloud's requestId).
	InQuery
	// InBody: a top-level string field named Field of a JSON object body (Square, Plaid).
	InBody
	// InAzureHeaders: Repeatability-Request-ID (the key, a GUID) and
	// Repeatability-First-Sent (the attempt's FirstClaimed in IMF-fixdate), per the
	// OASIS repeatable-requests spec Azure uses. Field is ignored.
	InAzureHeaders
)

func (w Where) String() string {
	switch w {
	case InHeader:
		return "header"
	case InQuery:
		return "query"
	case InBody:
		return "body"
	case InAzureHeaders:
		return "azure-headers"
	default:
		return "nowhere"
	}
}

// NoExpiry is a Window for vendors that remember a key indefinitely.
const NoExpiry = time.Duration(math.MaxInt64)

// Charsets for Profile.Charset.
const (
	// CharsetAlnumDashUnderscore is [A-Za-z0-9_-].
	CharsetAlnumDashUnderscore = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"
)

// Outcome is what a vendor's answer means for the write: the value of
// Answer.Outcome. It is the gate's own type, so the constants below are what the
// gate reads; a profile written outside this module names them as
// idemhttp.InFlight, idemhttp.Conflict, ….
type Outcome = attempt.Outcome

// Outcomes for Answer.Outcome.
const (
	// Unknown: the request may have reached the vendor and the answer does not
	// tell whether the write happened (a 5xx from a vendor that does not deduplicate).
	// A destructive retry is refused.
	Unknown Outcome = attempt.Unknown
	// NotSent: the request certainly never reached the vendor. The transport reports
	// it itself (dial refused, context done before the request was written); an
	// answer from the vendor proves it reached the vendor, so do not map one to it.
	NotSent Outcome = attempt.NotSent
	// Rejected: the vendor answered that it did not perform the write (a 4xx
	// rejection): the claim is released and a retry may run.
	Rejected Outcome = attempt.Rejected
	// Committed: the vendor answered that the write happened (with Replayed, that it
	// replayed an earlier one).
	Committed Outcome = attempt.Committed
	// InFlight: the vendor says a request with the same key is still being processed.
	InFlight Outcome = attempt.InFlight
	// Conflict: the vendor says the key was used with another payload.
	Conflict Outcome = attempt.Conflict
)

// Answer maps one kind of vendor answer to an outcome. All set conditions must hold; the
// first Answer that matches wins, and answers no Answer matches are mapped by status
// class (2xx committed, 4xx rejected, anything else unknown).
type Answer struct {
	// Status is the HTTP status. Optional: 0 matches any status.
	Status int
	// Code is an error code looked for as a JSON string ("idempotency_key_in_use", with
	// the quotes) in the first 64 KiB of a non-2xx body. Optional: "" matches any body.
	// The body is read without consuming it: the caller still reads all of it.
	Code string
	// Header and Value: the response header must equal Value (case-insensitive).
	// Optional: "" matches any headers.
	Header, Value string
	// Outcome is what this answer means for the write (Committed, Rejected,
	// InFlight, Conflict or Unknown).
	Outcome Outcome
	// Replayed: the answer says the vendor replayed an earlier result (GoCardless's 409
	// idempotent_creation_conflict means the create happened).
	Replayed bool
}

// Profile says how one vendor takes an idempotency key and what its answers mean. The
// built-in profiles (Stripe, Adyen, … below) cover common vendors; write your own
// for any other vendor (copy the closest one and change what differs). Every field's
// zero value is stated; a zero Profile forwards nothing and records outcomes.
type Profile struct {
	// Name names the vendor in errors and observations. Required.
	Name string
	// Where the key goes. Optional: defaults to Nowhere (no key forwarded).
	Where Where
	// Field is the header, query parameter or JSON field name. Required for InHeader,
	// InQuery and InBody.
	Field string

	// MinLen and MaxLen bound the key's length in bytes. Optional: 0 means no bound.
	// A key outside them is hashed into a form that fits (see VendorKey); MaxLen
	// must then be 0 or at least 32.
	MinLen, MaxLen int
	// Charset lists every byte the vendor accepts in a key. Optional: defaults to
	// visible ASCII (0x21–0x7E), which every header accepts.
	Charset string
	// UUIDOnly: the vendor takes only a UUID (Google, Azure, Lithic) or advises one.
	// An activity key that is not a canonical lower-case UUID is hashed into one.
	UUIDOnly bool
	// Quoted writes the key as a structured-field string ("…"), as the IETF
	// Idempotency-Key draft requires. Optional: defaults to the bare key.
	Quoted bool
	// Verbatim refuses a key that does not fit the rules, instead of hashing it (for a
	// vendor where the key is also a reference you look up later). Optional: defaults
	// to hashing.
	Verbatim bool

	// Dedupes: the vendor deduplicates requests carrying the same key within Window.
	// Optional: false means a retry reaches the vendor as a new request, so
	// destructive retries are refused and net/http's silent replay is disabled.
	Dedupes bool
	// Window is how long the vendor remembers a key (use the vendor's documented
	// minimum). A destructive retry whose key was first claimed longer ago is
	// refused. Optional: 0 means not published, and every destructive retry is
	// refused; NoExpiry means the vendor never forgets.
	Window time.Duration

	// AllowNoKey sends a request that carries no activity attempt (code outside an
	// activity) without a key. Optional: defaults to refusing it with ErrNoKey. Reads
	// (GET, HEAD, OPTIONS, TRACE) are always sent, never with a key.
	AllowNoKey bool

	// Answers maps the vendor's idempotency answers. Optional.
	Answers []Answer
	// ReplayHeader and ReplayValue: a response header saying the vendor replayed an
	// earlier result (Idempotent-Replayed: true). Optional.
	ReplayHeader, ReplayValue string
}

// Built-in profiles, from the vendors' public API references. Where
// a vendor does not publish its window, Window is 0 and destructive retries are refused;
// set Window on a copy if you know it.
var (
	// Stripe: Idempotency-Key header, ≤255 chars, kept at least 24 h (v1 API).
	Stripe = Profile{
		Name: "stripe", Where: InHeader, Field: "Idempotency-Key", MaxLen: 255,
		Dedupes: true, Window: 24 * time.Hour,
		Answers: []Answer{
			{Status: 409, Code: "idempotency_key_in_use", Outcome: InFlight},
			{Status: 400, Code: "idempotency_error", Outcome: Conflict},
		},
		ReplayHeader: "Idempotent-Replayed", ReplayValue: "true",
	}
	// Adyen: Idempotency-Key header, ≤64 chars, UUID advised, kept at least 31 days.
	Adyen = Profile{
		Name: "adyen", Where: InHeader, Field: "Idempotency-Key", MaxLen: 64, UUIDOnly: true,
		Dedupes: true, Window: 31 * 24 * time.Hour,
	}
	// CheckoutCom: Cko-Idempotency-Key header, UUID advised, 24 h; 409 while the first
	// request is still running.
	CheckoutCom = Profile{
		Name: "checkout.com", Where: InHeader, Field: "Cko-Idempotency-Key", UUIDOnly: true,
		Dedupes: true, Window: 24 * time.Hour,
		Answers: []Answer{{Status: 409, Outcome: InFlight}},
	}
	// PayPal: PayPal-Request-Id header, 1–108 chars (Orders v2), kept 6 h (up to 72 h).
	PayPal = Profile{
		Name: "paypal", Where: InHeader, Field: "PayPal-Request-Id", MinLen: 1, MaxLen: 108,
		Dedupes: true, Window: 6 * time.Hour,
	}
	// Square: idempotency_key in the JSON body, 1–45 chars (CreatePayment; the
	// tightest common bound), window not published.
	Square = Profile{
		Name: "square", Where: InBody, Field: "idempotency_key", MinLen: 1, MaxLen: 45,
		Dedupes: true,
		Answers: []Answer{{Code: "IDEMPOTENCY_KEY_REUSED", Outcome: Conflict}},
	}
	// Plaid: idempotency_key in the JSON body of transfer creates, ≤50 chars, 24 h
	// (Plaid's Transfer reference).
	Plaid = Profile{
		Name: "plaid", Where: InBody, Field: "idempotency_key", MaxLen: 50,
		Dedupes: true, Window: 24 * time.Hour,
	}
	// RazorpayX: X-Payout-Idempotency header, 4–36 chars of [A-Za-z0-9_- ], window not
	// published.
	RazorpayX = Profile{
		Name: "razorpayx", Where: InHeader, Field: "X-Payout-Idempotency", MinLen: 4, MaxLen: 36,
		Charset: CharsetAlnumDashUnderscore + " ", Dedupes: true,
	}
	// AmazonPay: x-amz-pay-idempotency-key header, ≤32 chars of [A-Za-z0-9_-], kept
	// indefinitely.
	AmazonPay = Profile{
		Name: "amazon-pay", Where: InHeader, Field: "x-amz-pay-idempotency-key", MaxLen: 32,
		Charset: CharsetAlnumDashUnderscore, Dedupes: true, Window: NoExpiry,
		Answers: []Answer{{Code: "DuplicateIdempotencyKey", Outcome: Conflict}},
	}
	// Increase: Idempotency-Key header, ≤200 chars, window not published.
	Increase = Profile{
		Name: "increase", Where: InHeader, Field: "Idempotency-Key", MaxLen: 200, Dedupes: true,
		Answers: []Answer{
			{Status: 409, Code: "idempotency_key_already_used_error", Outcome: Conflict},
		},
		ReplayHeader: "Idempotent-Replayed", ReplayValue: "true",
	}
	// ModernTreasury: Idempotency-Key header, 24 h (successes only); 409 while running.
	ModernTreasury = Profile{
		Name: "modern-treasury", Where: InHeader, Field: "Idempotency-Key",
		Dedupes: true, Window: 24 * time.Hour,
		Answers: []Answer{{Status: 409, Outcome: InFlight}},
	}
	// Lithic: Idempotency-Key header, a UUID, at least 24 h.
	Lithic = Profile{
		Name: "lithic", Where: InHeader, Field: "Idempotency-Key", UUIDOnly: true,
		Dedupes: true, Window: 24 * time.Hour,
	}
	// GoCardless: Idempotency-Key header on creates; a replayed create answers 409
	// idempotent_creation_conflict, which means the create happened. Window not
	// published.
	GoCardless = Profile{
		Name: "gocardless", Where: InHeader, Field: "Idempotency-Key", Dedupes: true,
		Answers: []Answer{
			{Status: 409, Code: "idempotent_creation_conflict", Outcome: Committed, Replayed: true},
		},
	}
	// Zendesk: Idempotency-Key header on POST /tickets, about 2 h.
	Zendesk = Profile{
		Name: "zendesk", Where: InHeader, Field: "Idempotency-Key",
		Dedupes: true, Window: 2 * time.Hour,
		Answers:      []Answer{{Status: 400, Code: "IdempotentRequestError", Outcome: Conflict}},
		ReplayHeader: "X-Idempotency-Lookup", ReplayValue: "hit",
	}
	// Telnyx: Idempotency-Key header, 1–255 chars of [A-Za-z0-9_:-], 24 h.
	Telnyx = Profile{
		Name: "telnyx", Where: InHeader, Field: "Idempotency-Key", MinLen: 1, MaxLen: 255,
		Charset: CharsetAlnumDashUnderscore + ":", Dedupes: true, Window: 24 * time.Hour,
		Answers: []Answer{{Status: 422, Outcome: Conflict}},
	}
	// Worldline: X-GCS-Idempotence-Key header, ≤40 ASCII chars, at least 24 h; 409
	// while running.
	Worldline = Profile{
		Name: "worldline", Where: InHeader, Field: "X-GCS-Idempotence-Key", MaxLen: 40,
		Dedupes: true, Window: 24 * time.Hour,
		Answers: []Answer{{Status: 409, Outcome: InFlight}},
	}
	// Moov: X-Idempotency-Key header, ≤36 chars, never expires; 409 on reuse.
	Moov = Profile{
		Name: "moov", Where: InHeader, Field: "X-Idempotency-Key", MaxLen: 36,
		Dedupes: true, Window: NoExpiry,
		Answers: []Answer{{Status: 409, Outcome: Conflict}},
	}
	// IETF: draft-ietf-httpapi-idempotency-key-header, the key as a structured-field
	// string ("…"); 409 while running, 422 on reuse with another payload. The server
	// publishes its window: set Window on a copy.
	IETF = Profile{
		Name: "ietf", Where: InHeader, Field: "Idempotency-Key", Quoted: true, Dedupes: true,
		Answers: []Answer{
			{Status: 409, Outcome: InFlight},
			{Status: 422, Outcome: Conflict},
		},
	}
	// Google: Google Cloud's requestId query parameter, a non-zero UUID, at least 60 min.
	Google = Profile{
		Name: "google", Where: InQuery, Field: "requestId", UUIDOnly: true,
		Dedupes: true, Window: 60 * time.Minute,
	}
	// Azure: Repeatability-Request-ID (GUID) and Repeatability-First-Sent; 5 min window
	// (an older First-Sent is answered 412); 409 while running; 400 with
	// Repeatability-Result: rejected on reuse.
	Azure = Profile{
		Name: "azure", Where: InAzureHeaders, UUIDOnly: true,
		Dedupes: true, Window: 5 * time.Minute,
		Answers: []Answer{
			{Status: 409, Outcome: InFlight},
			{Status: 400, Header: "Repeatability-Result", Value: "rejected", Outcome: Conflict},
		},
	}
	// NoKey: vendors that take no key for their writes (SendGrid, Postmark, Mailgun,
	// Twilio messages, Slack, GitHub, Jira, OpenAI, Anthropic, …). Forwards nothing,
	// records outcomes, refuses destructive retries, and disables net/http's silent
	// replay even if a client library adds an Idempotency-Key header.
	NoKey = Profile{Name: "no-key", AllowNoKey: true}
)

// Validate reports whether p is usable (an error wrapping ErrBadProfile when not).
// NewTransport with an invalid profile returns a transport that refuses every request
// with this error.
func (p Profile) Validate() error {
	if err := p.validate(); err != nil {
		return fmt.Errorf("idemgate/idemhttp: %w", err)
	}
	return nil
}

// validate is Validate without the package prefix, for messages that carry it already.
func (p Profile) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %q: %s", ErrBadProfile, p.Name, fmt.Sprintf(format, args...))
	}
	if p.Name == "" {
		return bad("Name is empty; name the vendor")
	}
	switch p.Where {
	case Nowhere:
		if p.Field != "" {
			return bad("Field %q is set but Where is Nowhere; set Where to InHeader, InQuery or InBody", p.Field)
		}
		return nil
	case InHeader, InQuery, InBody:
		if p.Field == "" {
			return bad("Where is %v but Field is empty; name the %v field", p.Where, p.Where)
		}
	case InAzureHeaders:
		if !p.UUIDOnly {
			return bad("Azure's Repeatability-Request-ID takes a GUID; set UUIDOnly")
		}
	default:
		return bad("unknown Where %d", int(p.Where))
	}
	if p.MinLen < 0 || p.MaxLen < 0 || (p.MaxLen > 0 && p.MinLen > p.MaxLen) {
		return bad("length bounds %d–%d are not a range", p.MinLen, p.MaxLen)
	}
	if p.Where == InHeader && (strings.ContainsAny(p.Field, " :\r\n") || http.CanonicalHeaderKey(p.Field) == "") {
		return bad("Field %q is not a header name", p.Field)
	}
	if p.Verbatim {
		return nil
	}
	// The hashed form must fit, so that every activity key has a vendor key.
	sh := newShaper(p)
	if _, ok := sh.hashed("probe"); !ok {
		return bad("the rules leave no room for a hashed key: it needs MaxLen 0 or ≥32, " +
			"MinLen ≤32 and a Charset with 0-9 and a-f (and '-' for the 36-char form); or set Verbatim")
	}
	return nil
}
