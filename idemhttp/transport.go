package idemhttp

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/idemgate/idemgate/internal/attempt"
)

const (
	// effectDestructive is attempt.State.Effect for writes a retry would repeat.
	effectDestructive = "destructive"
	// maxPeek bounds how much of an error body is read to find a vendor's error code.
	maxPeek = 64 << 10
	// maxBody bounds a body a body-field profile rewrites.
	maxBody = 8 << 20
)

// replayTriggers are the header names that make net/http treat a POST as replayable
// (net/http.Request.isReplayable).
var replayTriggers = [...]string{"Idempotency-Key", "X-Idempotency-Key"}

// NewTransport returns a RoundTripper that forwards the activity's key to the vendor as
// profile says, reports each write's outcome to the gate, and withholds requests that
// must not reach the vendor. base nil means http.DefaultTransport. An invalid profile
// gives a transport that refuses every request with the error Profile.Validate returns;
// call Validate at start-up to fail earlier.
func NewTransport(base http.RoundTripper, profile Profile) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	p := profile
	p.Answers = append([]Answer(nil), profile.Answers...)
	t := &transport{base: base, p: p, sh: newShaper(p), invalid: p.validate()}
	if ht, ok := base.(*http.Transport); ok {
		t.traced = true
		t.h2c = ht.Protocols != nil && ht.Protocols.UnencryptedHTTP2()
	}
	t.headerKey = http.CanonicalHeaderKey(p.Field)
	if !p.Dedupes && isReplayTrigger(t.headerKey) {
		// Keep net/http from silently re-sending a POST the vendor would not dedupe:
		// a non-canonical map key is written as is (header names are case-insensitive)
		// but is not what isReplayable looks up.
		t.headerKey = strings.ToLower(t.headerKey)
	}
	for _, a := range p.Answers {
		var q []byte
		if a.Code != "" {
			q = []byte(strconv.Quote(a.Code))
		}
		t.codes = append(t.codes, q)
	}
	return t
}

// Client returns an *http.Client whose transport is NewTransport(nil, profile).
func Client(profile Profile) *http.Client {
	return &http.Client{Transport: NewTransport(nil, profile)}
}

// Wrap returns a copy of c whose transport is NewTransport(c.Transport, profile); c is not
// changed. A nil c is treated as &http.Client{}.
func Wrap(c *http.Client, profile Profile) *http.Client {
	if c == nil {
		return Client(profile)
	}
	out := *c
	out.Transport = NewTransport(c.Transport, profile)
	return &out
}

type transport struct {
	base      http.RoundTripper
	p         Profile
	sh        shaper
	headerKey string   // map key the key header is written under (see the net/http trap)
	codes     [][]byte // p.Answers[i].Code quoted, nil when unset
	traced    bool     // base is a *http.Transport, whose httptrace hooks prove "not written"
	h2c       bool     // base may speak HTTP/2 over a plain connection
	invalid   error
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the base transport.
func (t *transport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.invalid != nil {
		closeBody(req)
		st, _ := attempt.FromContext(req.Context())
		return nil, t.refuse(req, st, t.invalid, true, "the transport was built with an invalid profile",
			"fix the profile (Profile.Validate reports this at start-up)")
	}
	if isRead(req.Method) {
		// A read is never the write the gate guards: no key, no observation.
		return t.base.RoundTrip(req)
	}
	ctx := req.Context()
	st, ok := attempt.FromContext(ctx)
	if !ok || st.Key == "" {
		st = nil
		if t.p.Where != Nowhere && !t.p.AllowNoKey {
			closeBody(req)
			return nil, t.refuse(req, nil, ErrNoKey, true,
				fmt.Sprintf("%s takes an idempotency key in the %s %q", t.p.Name, t.p.Where, t.p.Field),
				"send it with the ctx of an activity the idemgate interceptor gates, or use a profile with AllowNoKey")
		}
	}
	if first := firstRequest(req); st != nil && !sameHost(first.URL, req.URL) {
		// http.Client follows a 307/308 with the same method, headers and body: the
		// key (and the write) would go to a host the caller never chose.
		closeBody(req)
		t.observe(st, attempt.Observation{Outcome: attempt.NotSent, Detail: "withheld: redirect to another host " + req.URL.Host})
		// Not ErrNotSent: the first request reached the vendor and was answered with
		// a redirect, so the write's outcome is unknown.
		return nil, t.refuse(req, st, ErrCrossHostRedirect, false, fmt.Sprintf(
			"%s answered %s %s with a redirect to %s; the key and the body never leave for a host other than %s",
			first.URL.Host, first.Method, first.URL.Path, req.URL.Host, first.URL.Host),
			"if the new host is the vendor's, call it directly (configure its URL); until then the write's outcome is unknown")
	}
	if err := ctx.Err(); err != nil {
		closeBody(req)
		t.observe(st, attempt.Observation{Outcome: attempt.NotSent, Detail: "withheld: context done before sending"})
		return nil, t.refuse(req, st, context.Cause(ctx), true,
			"the attempt's context is done (a zombie attempt past its deadline must not reach the vendor)",
			"let Temporal retry the activity")
	}
	var vkey string
	if st != nil && t.p.Where != Nowhere {
		var err error
		if vkey, err = t.sh.shape(st.Key); err != nil {
			closeBody(req)
			t.observe(st, attempt.Observation{Outcome: attempt.NotSent, Detail: "withheld: " + err.Error()})
			return nil, t.refuse(req, st, err, true, "the activity key cannot be sent to "+t.p.Name,
				"use a key that fits, or a profile without Verbatim so the key is hashed into one")
		}
	}
	if st != nil && st.Effect == effectDestructive && st.Retry {
		if why := t.windowPassed(st); why != "" {
			closeBody(req)
			// Not NotSent: this request is withheld, but an earlier attempt may have
			// reached the vendor; the claim must stay until a person looks.
			t.observe(st, attempt.Observation{Outcome: attempt.Unknown, Detail: "withheld destructive retry: " + why})
			return nil, t.refuse(req, st, ErrWindowPassed, false, why, fmt.Sprintf(
				"an earlier attempt may have reached %s: look the write up there (vendor key %q) and complete or release the claim by hand",
				t.p.Name, vkey))
		}
	}

	renames := !t.p.Dedupes && hasReplayTrigger(req.Header)
	if st == nil && !renames {
		return t.base.RoundTrip(req)
	}
	var tk *tracker
	octx := ctx
	if st != nil {
		tk = newTracker()
		octx = httptrace.WithClientTrace(ctx, &tk.trace)
	}
	out := req.WithContext(octx) // a shallow copy: the caller's request is not changed
	out.Header = req.Header.Clone()
	if out.Header == nil {
		out.Header = make(http.Header, 1)
	}
	if st != nil {
		if err := t.place(out, st, vkey); err != nil {
			closeBody(req)
			t.observe(st, attempt.Observation{Outcome: attempt.NotSent, Detail: "withheld: " + err.Error()})
			return nil, err
		}
	}
	if renames {
		disableReplay(out.Header)
	}
	if st != nil {
		// Evidence for the gate, before the key leaves: a re-send of an unknown outcome
		// that relies on the vendor's deduplication (Options.VendorWindows) and a
		// witness that reads the evidence (LookupWitness: "through this profile and
		// nothing else") rest on it naming every exit the key took. Not recorded (a
		// store error): withheld, as on any store outage — sent anyway, the record
		// would name the other exits only.
		if err := st.Sending(ctx, attempt.Sent{Via: "idemhttp:" + t.p.Name, Host: req.URL.Host, Window: t.dedupWindow()}); err != nil {
			closeBody(req)
			t.observe(st, attempt.Observation{Outcome: attempt.NotSent, Detail: "withheld: the evidence was not stored: " + err.Error()})
			return nil, t.refuse(req, st, err, true, "the evidence that the key leaves for "+req.URL.Host+
				" could not be stored in the claim store", "let Temporal retry the activity once the store answers")
		}
	}

	resp, err := t.base.RoundTrip(out)
	if st == nil {
		return resp, err
	}
	if err != nil {
		if t.notWritten(tk, err) {
			t.observe(st, attempt.Observation{Outcome: attempt.NotSent, Detail: "not sent: " + err.Error()})
			return nil, fmt.Errorf("%w (idemgate/idemhttp: %s: %w)", err, t.p.Name, ErrNotSent)
		}
		t.observe(st, attempt.Observation{Outcome: attempt.Unknown, Detail: "no answer after the request may have been written: " + err.Error()})
		return nil, err
	}
	t.observe(st, t.classify(resp))
	return resp, nil
}

// refuse builds the error for a request the transport withholds: it names the vendor, the
// request, the activity and its key, what is wrong and what to do.
func (t *transport) refuse(req *http.Request, st *attempt.State, cause error, notSent bool, what, next string) error {
	who := "no activity (the request's context carries no idemgate attempt)"
	if st != nil {
		who = fmt.Sprintf("activity %q, key %q", st.Activity, st.Key)
	}
	if notSent {
		return fmt.Errorf("idemgate/idemhttp: %s: %s %s, %s: %w: %s; nothing was sent (%w); %s",
			t.p.Name, req.Method, req.URL.Path, who, cause, what, ErrNotSent, next)
	}
	return fmt.Errorf("idemgate/idemhttp: %s: %s %s, %s: %w: %s; %s",
		t.p.Name, req.Method, req.URL.Path, who, cause, what, next)
}

func (t *transport) observe(st *attempt.State, o attempt.Observation) {
	if st == nil {
		return
	}
	o.Vendor = t.p.Name
	st.Observe(o)
}

// place writes the vendor key where the profile says. out is a copy of the request with
// its own Header.
func (t *transport) place(out *http.Request, st *attempt.State, vkey string) error {
	switch t.p.Where {
	case InHeader:
		setHeader(out.Header, t.headerKey, vkey)
	case InAzureHeaders:
		if st.FirstClaimed.IsZero() {
			return t.refuse(out, st, ErrNoKey, true,
				"the attempt has no FirstClaimed time, which Azure's Repeatability-First-Sent needs",
				"run the activity through the idemgate interceptor, which sets it")
		}
		setHeader(out.Header, "Repeatability-Request-Id", vkey)
		setHeader(out.Header, "Repeatability-First-Sent", st.FirstClaimed.UTC().Format(http.TimeFormat))
	case InQuery:
		u := *out.URL
		u.RawQuery = setQuery(u.RawQuery, t.p.Field, vkey)
		out.URL = &u
	case InBody:
		if out.Body == nil || out.Body == http.NoBody {
			return nil // an endpoint without a body takes no key
		}
		raw, err := io.ReadAll(io.LimitReader(out.Body, maxBody+1))
		out.Body.Close()
		body := raw
		switch {
		case err != nil:
		case len(raw) > maxBody:
			err = fmt.Errorf("body larger than %d bytes", maxBody)
		case len(bytes.TrimSpace(raw)) > 0: // an empty body takes no key
			body, err = setJSONField(raw, t.p.Field, vkey)
		}
		if err != nil {
			return t.refuse(out, st, ErrBadBody, true,
				fmt.Sprintf("%s takes the key in the top-level JSON field %q (%v)", t.p.Name, t.p.Field, err),
				"send a JSON object body, or use a header profile for this endpoint")
		}
		out.Body = io.NopCloser(bytes.NewReader(body))
		out.ContentLength = int64(len(body))
		out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	return nil
}

// dedupWindow is how long the vendor deduplicates on the key this transport sends:
// 0 when it sends none or the vendor does not deduplicate (or does not say how long).
func (t *transport) dedupWindow() time.Duration {
	if t.p.Where == Nowhere || !t.p.Dedupes || t.p.Window <= 0 {
		return 0
	}
	return t.p.Window
}

// windowPassed says why a destructive retry must not be sent, or "" when the vendor
// still remembers the key.
func (t *transport) windowPassed(st *attempt.State) string {
	switch {
	case !t.p.Dedupes:
		return t.p.Name + " does not deduplicate on a key, so the retry would reach it as a second write"
	case st.FirstClaimed.IsZero():
		return "the attempt does not say when its key was first claimed, so the vendor's window cannot be checked"
	case t.p.Window == NoExpiry:
		return ""
	case t.p.Window <= 0:
		return t.p.Name + " does not publish how long it remembers a key (Profile.Window is 0)"
	}
	if now := time.Now(); !attempt.InVendorWindow(st.FirstClaimed, now, t.p.Window, st.Skew()) {
		return fmt.Sprintf("the key was first claimed %s ago (%s) and %s remembers keys for %s (a retry is sent only until %s "+
			"before that ends, for clock skew), so it could take the retry as a new write",
			now.Sub(st.FirstClaimed).Round(time.Second), st.FirstClaimed.UTC().Format(time.RFC3339), t.p.Name, t.p.Window, 2*st.Skew())
	}
	return ""
}

// notWritten reports whether a failed round trip provably wrote nothing: no write
// began (no write hook fired) and nothing could still be writing when RoundTrip
// returned. See "Not sent means never written" in the package doc.
func (t *transport) notWritten(tk *tracker, err error) bool {
	if tk.began.Load() {
		return false // some try, perhaps one net/http replayed, began to write the request
	}
	if t.traced {
		// net/http fires GotConn before writing, and on HTTP/1 every failed round
		// trip waits for its writer to stop, whose WroteRequest then has fired.
		// HTTP/2 may return on cancellation while its writer is still sending, so
		// there only "no connection" proves nothing was written.
		return !tk.gotConn.Load() || !(tk.h2.Load() || t.h2c)
	}
	// Another RoundTripper may return while a try it started goes on writing (and
	// its hooks have yet to fire): only a failed dial or lookup with no connection
	// proves nothing was written.
	if tk.gotConn.Load() {
		return false
	}
	var op *net.OpError
	var dns *net.DNSError
	return (errors.As(err, &op) && op.Op == "dial") || errors.As(err, &dns)
}

// classify maps the vendor's answer to an observation.
func (t *transport) classify(resp *http.Response) attempt.Observation {
	code := resp.StatusCode
	o := attempt.Observation{Status: code}
	if t.p.ReplayHeader != "" && strings.EqualFold(resp.Header.Get(t.p.ReplayHeader), t.p.ReplayValue) {
		o.Replayed = true
	}
	success := code >= 200 && code < 300
	var body []byte
	peeked := false
	for i, a := range t.p.Answers {
		if a.Status != 0 && a.Status != code {
			continue
		}
		if a.Header != "" && !strings.EqualFold(resp.Header.Get(a.Header), a.Value) {
			continue
		}
		if a.Code != "" {
			if success {
				continue
			}
			if !peeked {
				body, peeked = peekBody(resp), true
			}
			if !bytes.Contains(body, t.codes[i]) {
				continue
			}
		}
		o.Outcome = a.Outcome
		o.Replayed = o.Replayed || a.Replayed
		o.Detail = strconv.Itoa(code)
		for _, w := range []string{a.Code, a.Header, a.Value} {
			if w != "" {
				o.Detail += " " + w
			}
		}
		return o
	}
	switch {
	case success:
		o.Outcome = attempt.Committed
	case code >= 400 && code < 500:
		o.Outcome = attempt.Rejected
		o.Detail = strconv.Itoa(code) + " " + http.StatusText(code)
	default:
		o.Outcome = attempt.Unknown
		o.Detail = strconv.Itoa(code) + " " + http.StatusText(code)
	}
	return o
}

// peekBody reads up to maxPeek bytes of resp.Body and puts them back in front of the
// rest, so the caller still reads the whole body.
func peekBody(resp *http.Response) []byte {
	if resp.Body == nil || resp.Body == http.NoBody {
		return nil
	}
	buf, _ := io.ReadAll(io.LimitReader(resp.Body, maxPeek))
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(buf), resp.Body), resp.Body}
	return buf
}

// tracker records, through httptrace, whether a request got a connection and whether
// its write began.
type tracker struct {
	trace   httptrace.ClientTrace
	gotConn atomic.Bool
	h2      atomic.Bool
	began   atomic.Bool
}

func newTracker() *tracker {
	tk := &tracker{}
	tk.trace.GotConn = func(info httptrace.GotConnInfo) {
		tk.gotConn.Store(true)
		if c, ok := info.Conn.(interface{ ConnectionState() tls.ConnectionState }); ok &&
			c.ConnectionState().NegotiatedProtocol == "h2" {
			tk.h2.Store(true)
		}
	}
	// Any of these means some of the request may be on the wire (WroteRequest fires
	// even when the write failed part way).
	tk.trace.WroteHeaderField = func(string, []string) { tk.began.Store(true) }
	tk.trace.WroteHeaders = func() { tk.began.Store(true) }
	tk.trace.Wait100Continue = func() { tk.began.Store(true) }
	tk.trace.WroteRequest = func(httptrace.WroteRequestInfo) { tk.began.Store(true) }
	return tk
}

// firstRequest is the request a redirect chain began with (req itself when it is not
// a redirect).
func firstRequest(req *http.Request) *http.Request {
	for req.Response != nil && req.Response.Request != nil {
		req = req.Response.Request
	}
	return req
}

// sameHost reports whether a and b name the same host and port (the scheme's
// default port when none is given).
func sameHost(a, b *url.URL) bool {
	return strings.EqualFold(a.Hostname(), b.Hostname()) && effectivePort(a) == effectivePort(b)
}

func effectivePort(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if strings.EqualFold(u.Scheme, "https") {
		return "443"
	}
	return "80"
}

func isRead(method string) bool {
	switch method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return false
}

func isReplayTrigger(canonical string) bool {
	return canonical == replayTriggers[0] || canonical == replayTriggers[1]
}

func hasReplayTrigger(h http.Header) bool {
	_, a := h[replayTriggers[0]]
	_, b := h[replayTriggers[1]]
	return a || b
}

// disableReplay moves the header names net/http's isReplayable looks for to lower-case
// map keys: the same header on the wire, no silent re-send.
func disableReplay(h http.Header) {
	for _, k := range replayTriggers {
		if v, ok := h[k]; ok {
			delete(h, k)
			lk := strings.ToLower(k)
			h[lk] = append(h[lk], v...)
		}
	}
}

// setHeader sets key (canonical or deliberately not) to v, removing any other spelling of
// the same name so exactly one value goes out.
func setHeader(h http.Header, key, v string) {
	for k := range h {
		if k != key && strings.EqualFold(k, key) {
			delete(h, k)
		}
	}
	h[key] = []string{v}
}

// setQuery sets name=value in a raw query, replacing earlier values of name and keeping
// the other parameters as they were.
func setQuery(raw, name, value string) string {
	kv := url.QueryEscape(name) + "=" + url.QueryEscape(value)
	if raw == "" {
		return kv
	}
	var b strings.Builder
	for part := range strings.SplitSeq(raw, "&") {
		k, _, _ := strings.Cut(part, "=")
		if uk, err := url.QueryUnescape(k); part == "" || (err == nil && uk == name) {
			continue
		}
		b.WriteString(part)
		b.WriteByte('&')
	}
	b.WriteString(kv)
	return b.String()
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}
