package idemhttp

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/idemgate/idemgate/internal/attempt"
	"github.com/idemgate/idemgate/internal/secrets"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/witness"
)

// maxLookupBody bounds the lookup answer a witness reads.
const maxLookupBody = 1 << 20

// Lookup says how to ask a vendor what an idempotency key produced: a resource
// stored under a client-chosen ID (GET /things/{key}), or a list filtered on a
// field that carries the key (GET /v1/charges?idempotency_key=K, a metadata
// search). LookupWitness turns it into a witness.
type Lookup struct {
	// Request makes the lookup request for vendorKey, the key as the vendor received
	// it from this profile's transport (Profile.VendorKey: a key that did not fit
	// the vendor's rules went out hashed; a Quoted profile's key without its
	// quotes). A read: GET or HEAD. Its host must be the one the write went to, as
	// the record's evidence names it, or the witness cannot tell. Required.
	Request func(ctx context.Context, vendorKey string) (*http.Request, error)
	// Read reads a 2xx answer's body (at most 1 MiB): the resource the key
	// produced, or nil when the vendor holds none under it. An error settles
	// nothing. Required.
	Read func(body []byte) (*Resource, error)
	// AbsentStatus is a status that means the vendor holds nothing under the key
	// (404 for a resource under a client-chosen ID). Optional: 0 means every answer
	// but a 2xx is an error — a 404 from a mistyped route must never read as "not
	// sent".
	AbsentStatus int
	// Authoritative: "nothing under the key" is the whole truth. The vendor stores
	// every write under the key it carried, even a failed one, and the lookup sees
	// a stored write at once (not an eventually consistent search index, such as
	// Stripe's Search API), in every account or tenant the profile writes to (a
	// lookup by key alone asks the vendor's default account: a write sent with
	// Stripe-Account or a tenant's token is not there). Only then does the witness
	// answer "not sent" (which counts once the attempt's lease passed, see
	// store.Settleable; and only while the vendor remembers the key, Remembers);
	// otherwise an empty answer is "cannot tell". Optional: defaults to false.
	Authoritative bool
	// Remembers is how long the lookup finds what a key produced, from when the
	// vendor received it: an Authoritative "nothing under the key" counts only
	// inside it (less twice the clock skew, as the transport's re-send), since a
	// lookup that reads the vendor's idempotency store finds nothing once the
	// vendor forgot the key. Optional: 0 means the profile's Window (how long the
	// vendor remembers a key), or no bound when the profile has none; NoExpiry for a
	// lookup of resources the vendor keeps for ever (GET /things/{key}).
	Remembers time.Duration
	// Skew is how far the vendor's clock may be from the workers' when a resource
	// says when it was created (Resource.Created). Optional: 0 means one minute.
	Skew time.Duration
}

// Resource is what a lookup found under a key.
type Resource struct {
	// ID names the resource in the witness's evidence ("ch_000123").
	ID string
	// Result is what the activity returns for this resource, as it would have
	// returned it had it seen the vendor's answer: the next attempt returns it.
	Result any
	// NoResult: the write happened, but the activity's result cannot be made from
	// the resource: the key settles as sent with no result stored, and the next
	// attempt is refused (IdempotencyResultNotStored), never run again.
	NoResult bool
	// Created is when the vendor created the resource, when it says. A resource
	// created before the write's first claim (store.Record.CreatedAt, less
	// Lookup.Skew) belongs to an earlier write of the same key — a business key
	// used again after the window, which the vendor may have deduplicated no
	// longer — and the witness cannot tell rather than hand that write's result to
	// this one. Optional, but give it for any vendor that keeps keys longer than
	// the gate's Options.Window.
	Created time.Time
}

// LookupWitness returns a witness that asks the vendor of profile, through client
// (nil: http.DefaultClient), whether a key whose outcome is unknown produced a
// resource. Register it for the activities that write to that vendor through this
// profile (interceptor.Options.Witnesses). It answers only for a record whose
// evidence (store.Record.Sent) shows that the key left through this profile's
// transport to the host the lookup asks, and through nothing else — under every
// attempt that claimed it since its first (store.Exits: a takeover keeps the
// evidence of the attempts before it, and an attempt that recorded none may have
// sent another way):
//
//   - a resource found: sent, with Lookup.Read's result (or none);
//   - nothing under the key, from an Authoritative lookup: not sent;
//   - nothing, from a lookup that is not authoritative, from a URL the vendor
//     redirected the lookup to (on the same host), or once the vendor may have
//     forgotten the key (Lookup.Remembers); no evidence; evidence that
//     names another profile, another host, or a second way out, or an attempt
//     that recorded none: cannot tell;
//   - an error, a status other than 2xx (and AbsentStatus), an answer too large, a
//     timeout: an error, which settles nothing.
//
// Its name is "idemhttp:" + profile.Name; its evidence names the request and what
// it found, with secrets in the URL masked. An invalid profile, a profile that
// forwards no key, or a Lookup without Request or Read is an error.
func LookupWitness(profile Profile, client *http.Client, l Lookup) (witness.Witness, error) {
	switch err := profile.validate(); {
	case err != nil:
		return nil, fmt.Errorf("idemgate/idemhttp: lookup witness: %w. Next step: fix the profile", err)
	case profile.Where == Nowhere:
		return nil, fmt.Errorf("idemgate/idemhttp: lookup witness %q: the profile forwards no key (Where is Nowhere), so "+
			"the vendor holds nothing under one. Next step: use the profile the write is sent with", profile.Name)
	case l.Request == nil || l.Read == nil:
		return nil, fmt.Errorf("idemgate/idemhttp: lookup witness %q: Lookup.Request and Lookup.Read are required. Next "+
			"step: give the request that finds what a key produced and the function that reads its answer", profile.Name)
	}
	if client == nil {
		client = http.DefaultClient
	}
	sh := newShaper(profile)
	sh.quoted = false // the key the vendor stores, not its structured-field form
	return &lookupWitness{p: profile, c: client, l: l, sh: sh}, nil
}

type lookupWitness struct {
	p  Profile
	c  *http.Client
	l  Lookup
	sh shaper
}

func (w *lookupWitness) Name() string { return "idemhttp:" + w.p.Name }

func (w *lookupWitness) Ask(ctx context.Context, q witness.Query) (witness.Answer, error) {
	rec := q.Record
	via := w.Name()
	// Every exit of every attempt that claimed the key since its first (a takeover
	// keeps the evidence of the attempts before it): an answer for this profile is
	// an answer for the write only when the key left through it and nothing else.
	exits, silent := store.Exits(rec)
	mine := slices.IndexFunc(exits, func(s store.Sent) bool { return s.Via == via })
	if mine < 0 {
		why := "no record that the key left through a keyed transport"
		if len(exits) > 0 {
			why = "the key left through " + sentVia(exits) + ", not through " + via
		}
		return witness.Answer{Verdict: witness.CannotTell, Evidence: why}, nil
	}
	host := exits[mine].Host
	for _, s := range exits {
		if s.Via != via || s.Host != host {
			return witness.Answer{Verdict: witness.CannotTell, Evidence: "the key left through " + sentVia(exits) +
				": one vendor's lookup cannot tell for the others"}, nil
		}
	}
	if len(silent) > 0 {
		return witness.Answer{Verdict: witness.CannotTell, Evidence: fmt.Sprintf("the key left through %s, but %d of "+
			"the attempts that claimed it recorded no evidence of where it went (claim owners %s): they may have "+
			"called a vendor without the keyed transport", sentVia(exits), len(silent), strings.Join(silent, ", "))}, nil
	}
	vkey, err := w.sh.shape(rec.Key)
	if err != nil {
		return witness.Answer{}, fmt.Errorf("idemgate/idemhttp: %s lookup for %s key %s: %w", w.p.Name, rec.Activity, rec.Key, err)
	}
	req, err := w.l.Request(ctx, vkey)
	if err == nil && req == nil {
		err = fmt.Errorf("it returned no request")
	}
	if err != nil {
		return witness.Answer{}, fmt.Errorf("idemgate/idemhttp: %s lookup for %s key %s: Lookup.Request: %w", w.p.Name,
			rec.Activity, rec.Key, secrets.ScrubError(err))
	}
	what := req.Method + " " + secrets.Redact(req.URL.String())
	fail := func(format string, args ...any) error {
		return fmt.Errorf("idemgate/idemhttp: %s lookup for %s key %s: %s: %s; nothing settled. Next step: check the "+
			"vendor and the Lookup; until it answers, the key waits for the next ask or for `idemgate resolve`", w.p.Name, rec.Activity, rec.Key, what,
			fmt.Sprintf(format, args...))
	}
	if !isRead(req.Method) {
		return witness.Answer{}, fail("a lookup must be a read (GET or HEAD), not %s", req.Method)
	}
	if !sameHost(req.URL, &url.URL{Scheme: req.URL.Scheme, Host: host}) {
		return witness.Answer{Verdict: witness.CannotTell, Evidence: fmt.Sprintf("%s asks %s, but the key left for %s",
			what, req.URL.Host, host)}, nil
	}
	resp, err := w.c.Do(req.WithContext(ctx))
	if err != nil {
		return witness.Answer{}, fail("%v", secrets.ScrubError(err))
	}
	defer resp.Body.Close()
	if !sameHost(resp.Request.URL, req.URL) {
		// Whoever answered after a redirect is not the vendor the key went to.
		return witness.Answer{}, fail("redirected to %s, which is not the host the key went to", resp.Request.URL.Host)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxLookupBody+1))
	switch {
	case err != nil:
		return witness.Answer{}, fail("reading the answer: %v", err)
	case len(body) > maxLookupBody:
		return witness.Answer{}, fail("the answer is over %d bytes", maxLookupBody)
	}
	var found *Resource
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		if found, err = w.l.Read(body); err != nil {
			return witness.Answer{}, fail("%d, and Lookup.Read: %v", code, err)
		}
	case w.l.AbsentStatus != 0 && code == w.l.AbsentStatus:
	default:
		return witness.Answer{}, fail("%s", strings.TrimSpace(fmt.Sprintf("%d %s", code, http.StatusText(code))))
	}
	evidence := fmt.Sprintf("%s: %d", what, resp.StatusCode)
	switch {
	case found != nil:
		id := found.ID
		if id == "" {
			id = "a resource"
		}
		skew := w.l.Skew
		if skew <= 0 {
			skew = time.Minute
		}
		if !found.Created.IsZero() && found.Created.Before(rec.CreatedAt.Add(-skew)) {
			return witness.Answer{Verdict: witness.CannotTell, Evidence: fmt.Sprintf("%s, found %s under vendor key %s, "+
				"created %s — before this write was first claimed (%s): an earlier write of the same key", evidence, id,
				vkey, found.Created.UTC().Format(time.RFC3339), rec.CreatedAt.UTC().Format(time.RFC3339))}, nil
		}
		return witness.Answer{Verdict: witness.Sent, Result: found.Result, NoResult: found.NoResult,
			Evidence: fmt.Sprintf("%s, found %s under vendor key %s", evidence, id, vkey)}, nil
	case redirected(resp.Request.URL, req.URL):
		// "Nothing under the key" is the word of the lookup the user declared
		// authoritative, not of whatever route the vendor sent it on to (an API version
		// moved, a gateway's rewrite, a list without the filter).
		return witness.Answer{Verdict: witness.CannotTell, Evidence: fmt.Sprintf("%s, redirected to %s, which holds "+
			"nothing under vendor key %s: only the lookup's own URL answers for the key", evidence,
			secrets.Redact(resp.Request.URL.String()), vkey)}, nil
	case w.l.Authoritative && w.forgot(rec, q.Now):
		return witness.Answer{Verdict: witness.CannotTell, Evidence: fmt.Sprintf("%s, nothing under vendor key %s; "+
			"but the key was first claimed at %s, and the lookup finds a key for %s (Lookup.Remembers, else the "+
			"profile's Window; less %s of clock skew): the vendor may have forgotten it", evidence, vkey,
			rec.CreatedAt.UTC().Format(time.RFC3339), w.remembers(), 2*attempt.DefaultClockSkew)}, nil
	case w.l.Authoritative:
		return witness.Answer{Verdict: witness.NotSent,
			Evidence: fmt.Sprintf("%s, nothing under vendor key %s (an authoritative lookup)", evidence, vkey)}, nil
	}
	return witness.Answer{Verdict: witness.CannotTell,
		Evidence: fmt.Sprintf("%s, nothing under vendor key %s, but the lookup is not authoritative (Lookup.Authoritative)", evidence, vkey)}, nil
}

// sentVia names the exits of the evidence ss, each once (every claim of the key
// records its own).
func sentVia(ss []store.Sent) string {
	var parts []string
	for _, s := range ss {
		if p := s.Via + " to " + s.Host; !s.Blank() && !slices.Contains(parts, p) {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, ", ")
}

// redirected reports whether the answer came from another URL than the lookup's
// (a redirect on the same host: another host is refused before).
func redirected(got, asked *url.URL) bool {
	return got.Path != asked.Path || got.RawQuery != asked.RawQuery || !strings.EqualFold(got.Scheme, asked.Scheme)
}

// remembers is how long the lookup finds a key (Lookup.Remembers, else the
// profile's Window); 0 or NoExpiry: no bound.
func (w *lookupWitness) remembers() time.Duration {
	if w.l.Remembers > 0 {
		return w.l.Remembers
	}
	return w.p.Window
}

// forgot reports whether the vendor may have forgotten rec's key by now: its
// lookup's memory, counted from the first claim, has passed (less twice the clock
// skew, as attempt.InVendorWindow for a re-send).
func (w *lookupWitness) forgot(rec store.Record, now time.Time) bool {
	m := w.remembers()
	if m <= 0 || m >= NoExpiry {
		return false
	}
	return rec.CreatedAt.IsZero() || !attempt.InVendorWindow(rec.CreatedAt, now, m, attempt.DefaultClockSkew)
}
