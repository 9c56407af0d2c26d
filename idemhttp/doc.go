// Package idemhttp forwards a gated activity's idempotency key to the vendor it calls,
// and tells the gate what became of each write.
//
// It is an http.RoundTripper. Put it under a vendor's Go client once, and every write
// the client sends from inside a gated activity carries the activity's key where that
// vendor expects it: a header (Stripe's Idempotency-Key and a dozen others), a query
// parameter (Google's requestId), a field of the JSON body (Square, Plaid) or Azure's
// two repeatability headers. The key is the same on every attempt of the activity, so a
// retry that reaches the vendor is deduplicated there too.
//
//	sc := stripe.NewClient(apiKey, stripe.WithBackends(stripe.NewBackends(idemhttp.Client(idemhttp.Stripe))))
//
// # Safe defaults
//
//   - A write without an activity key is refused (ErrNoKey), unless the profile says
//     AllowNoKey or the vendor takes no key (NoKey). Reads (GET, HEAD, OPTIONS, TRACE)
//     always pass, untouched and unrecorded: a read is never the write the gate guards.
//   - A write whose context is already done is not sent: a zombie attempt past its
//     deadline must not reach the vendor.
//   - A destructive retry (the gate let an attempt run again after an earlier one may
//     have reached the vendor) is withheld when the vendor no longer remembers the key:
//     its window, counted from the attempt's FirstClaimed, has passed (or ends within
//     2×the gate's interceptor.Options.ClockSkew, for clock skew: attempt.InVendorWindow), is not published
//     (Window 0), or the vendor does not deduplicate at all (ErrWindowPassed). The gate
//     is told the outcome stays unknown, so the claim is kept for a person to resolve.
//   - A key already on the request is replaced: the activity's key wins. stripe-go, for
//     one, mints a random key per call; it never reaches Stripe through this transport.
//   - A key that does not fit the vendor's rules (length, charset, UUID only) is hashed
//     into one that does, deterministically and without collisions in practice (see
//     Profile.VendorKey); with Verbatim it is refused instead (ErrBadKey).
//   - A body-field profile refuses a body that is not a JSON object (ErrBadBody).
//   - A 307 or 308 redirect of a write to another host or port is not followed
//     (ErrCrossHostRedirect): http.Client would re-send the method, the headers and
//     the body, and the key never leaves for a host the request was not made to.
//     The outcome stays unknown (the first request reached the vendor). A redirect
//     on the same host is followed, with the key.
//
// Every refusal names the vendor, the request, the activity and its key, and what to do;
// nothing is sent. Errors that prove nothing left this process wrap ErrNotSent.
//
// # What the gate is told
//
// Each write reports one attempt.Observation to the attempt in its context:
//
//   - NotSent: refused by the transport, the dial failed, or the context ended before a
//     byte of the request was written (see "Not sent means never written");
//   - Rejected: a 4xx that is not one of the vendor's idempotency answers;
//   - Committed: a 2xx (Replayed when the vendor says it answered from its own store:
//     Idempotent-Replayed: true, Zendesk's x-idempotency-lookup: hit, GoCardless's 409
//     idempotent_creation_conflict);
//   - InFlight and Conflict: the vendor's "same key still running" and "same key, other
//     payload" answers, per profile;
//   - Unknown: anything else — a timeout or dropped connection after the request was
//     written, a 5xx, a 3xx.
//
// Error codes are read from at most 64 KiB of a non-2xx body, which is put back: the
// caller still reads the whole body.
//
// # Not sent means never written
//
// A failed round trip is reported NotSent, and its error wraps ErrNotSent, only when
// no write of the request began and none can still be under way. net/http can return
// from a cancelled round trip while a write is pending: HTTP/2 returns at once while
// its writer may still be sending the body, and a wrapping RoundTripper may give up
// on a try (a timeout, a hedge) that goes on writing in the background — in both,
// WroteRequest fires only later, if at all. So the transport watches every write hook
// httptrace has (WroteHeaderField, WroteHeaders, Wait100Continue, WroteRequest) and
// GotConn, and requires:
//
//   - always: no write hook fired, on any try (net/http's own silent re-sends included);
//   - base *http.Transport over HTTP/1: no connection, or a connection but no write
//     hook — every failed HTTP/1 round trip waits for its writer to stop, and the
//     writer fires WroteRequest even when the write failed part way;
//   - base *http.Transport over HTTP/2 (negotiated, or h2c enabled): no connection;
//   - any other base RoundTripper: no connection, and the error is a failed dial or
//     DNS lookup.
//
// Anything else is Unknown. TestNotSentNeedsNoWriteBegun and TestCancelMidWriteIsUnknown
// hold these rules.
//
// # The net/http trap
//
// net/http.Transport treats a request with an Idempotency-Key or X-Idempotency-Key header
// as idempotent, like a GET: when such a POST fails on a reused keep-alive connection
// after it was written (the server closed the connection before answering), the
// Transport silently sends it again on a new connection (Request.isReplayable and
// persistConn.shouldRetryRequest in net/http). Setting Request.GetBody to nil does not
// stop it for a request without a body. That second send is safe only if the vendor
// deduplicates on that header. So under a profile whose vendor does not (Dedupes
// false, NoKey), the transport writes those headers under a lower-case map key: the
// same header on the wire (names are case-insensitive), but not the key isReplayable
// looks up, and net/http returns the error instead of re-sending. Under a profile that
// dedupes, the replay is left alone: the vendor answers it from its store.
//
// # Profiles
//
// A Profile is a small value: where the key goes, the vendor's key rules, its window,
// whether it deduplicates, and how to read its answers. The built-in profiles follow the
// vendors' public references; copy one and change a field for a vendor that is not
// listed, or for an endpoint with other rules.
//
// # The vendor as a witness
//
// A write whose answer was lost (a dropped connection, a worker killed after the
// vendor acted) leaves its key unknown, and the gate refuses a destructive retry.
// A vendor that can say what a key produced settles it without a person:
// LookupWitness asks it (a resource under a client-chosen ID, or a list or search
// filtered on a field that carries the key) for the key as this profile forwarded it
// (hashed when it did not fit the vendor's rules). Found, the key settles as sent and
// Lookup.Read's result is what the retry returns; nothing under the key, from a lookup
// that is Authoritative, settles it as not sent — once the lost attempt's lease has
// passed, never before (store.Settleable), and only while the vendor remembers the
// key (Lookup.Remembers). Register it in
// interceptor.Options.Witnesses. It answers only for a record whose evidence shows the
// key left through this profile's transport to the host it asks, and nothing else
// (the transport records that evidence before the key leaves, for destructive writes
// that have witnesses or a vendor window); otherwise it cannot tell. The evidence is
// that of every attempt since the key's first claim (a takeover keeps the evidence
// of the attempts before it, store.Exits): a write whose attempts left through other
// exits too, or one of whose attempts recorded nothing, cannot be told by one
// profile's lookup.
//
// The keyed re-send (interceptor.Options.VendorWindows) is the vendor as a witness
// too: its receipt is "resent", by "witness:vendor-dedup".
//
// # Limits
//
// One activity, one key: two different writes to the same vendor from one activity carry
// the same key, and the vendor answers the second as a key reused with another payload
// (Conflict). Give each write its own activity.
package idemhttp
