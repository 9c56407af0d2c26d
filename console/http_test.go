package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"html/template"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/sqlite"
)

var t0 = time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)

func sqliteStore(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "idemgate.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// seedUnknown claims key as a destructive ChargeCard with args and abandons it with
// errText: pending at once, resolvable at once.
func seedUnknown(t *testing.T, st store.Store, key string, args []byte, errText string) {
	t.Helper()
	ctx := context.Background()
	c := store.Claim{Key: key, Activity: "ChargeCard", Effect: "destructive", ArgsHash: "hash-" + key, Args: args,
		Owner: "owner-" + key, Lease: t0.Add(time.Minute), Window: 24 * time.Hour, WorkflowID: "wf-" + key, RunID: "run-" + key,
		Attempt: 1, Now: t0}
	if o, _, err := st.Begin(ctx, c); err != nil || o != store.OutcomeClaimed {
		t.Fatalf("seed %s: %v %v", key, o, err)
	}
	tr := store.Transition{Key: key, Owner: c.Owner, Now: t0.Add(time.Second), Window: 24 * time.Hour,
		Receipt: store.Receipt{Time: t0.Add(time.Second), Key: key, Activity: c.Activity, Effect: c.Effect, ArgsHash: c.ArgsHash,
			WorkflowID: c.WorkflowID, RunID: c.RunID, Attempt: 1, Decision: store.DecisionUnknown, Error: errText}}
	if err := st.Abandon(ctx, tr); err != nil {
		t.Fatal(err)
	}
}

type snapshot struct {
	Receipts []store.Receipt
	Records  []store.Record
	Pauses   []store.Pause
}

func snap(t *testing.T, st store.Store, keys ...string) snapshot {
	t.Helper()
	ctx := context.Background()
	var s snapshot
	var err error
	if s.Receipts, err = st.Receipts(ctx, store.ReceiptFilter{}); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		r, err := st.Get(ctx, k)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			t.Fatal(err)
		}
		s.Records = append(s.Records, r)
	}
	if s.Pauses, err = st.Pauses(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

func unchanged(t *testing.T, before snapshot, st store.Store, keys ...string) {
	t.Helper()
	if after := snap(t, st, keys...); !reflect.DeepEqual(before, after) {
		t.Fatalf("the store changed:\nbefore %+v\nafter  %+v", before, after)
	}
}

// site is the console served on loopback with a browser-like client (cookies).
type site struct {
	t   *testing.T
	srv *httptest.Server
	c   *http.Client
	log *bytes.Buffer
}

func serve(t *testing.T, st store.Store, opts Options) *site {
	t.Helper()
	logs := &bytes.Buffer{}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(logs, nil))
	}
	if opts.Now == nil {
		opts.Now = func() time.Time { return t0.Add(time.Hour) }
	}
	h, err := Handler(st, opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	jar, _ := cookiejar.New(nil)
	return &site{t: t, srv: srv, log: logs, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

func (s *site) do(req *http.Request) (int, string, http.Header) {
	s.t.Helper()
	res, err := s.c.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b), res.Header
}

func (s *site) get(path string) (int, string, http.Header) {
	s.t.Helper()
	req, _ := http.NewRequest("GET", s.srv.URL+path, nil)
	return s.do(req)
}

func (s *site) post(path string, form url.Values, hdr ...string) (int, string) {
	s.t.Helper()
	req, _ := http.NewRequest("POST", s.srv.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	code, body, _ := s.do(req)
	return code, body
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// csrf reads this browser session's CSRF token from the pauses page.
func (s *site) csrf() string {
	s.t.Helper()
	_, body, _ := s.get("/pauses")
	m := csrfRE.FindStringSubmatch(body)
	if m == nil {
		s.t.Fatalf("no CSRF field on /pauses:\n%s", body)
	}
	return m[1]
}

var chargeArgs = []byte(`[{"amount":4200,"customer":"cus_1"}]`)

func TestConsoleHeaders(t *testing.T) {
	s := serve(t, sqliteStore(t), Options{})
	for _, p := range []string{"/", "/pauses", "/census", "/key?k=x", "/workflow?id=x", "/static/console.js"} {
		code, _, h := s.get(p)
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d", p, code)
		}
		csp := h.Get("Content-Security-Policy")
		if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("GET %s: Content-Security-Policy %q: want script-src 'self', no unsafe-inline, frame-ancestors 'none'", p, csp)
		}
		if h.Get("X-Frame-Options") != "DENY" || h.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: X-Frame-Options %q, X-Content-Type-Options %q", p, h.Get("X-Frame-Options"), h.Get("X-Content-Type-Options"))
		}
	}
	// No inline script anywhere: the one script is a file.
	_, body, _ := s.get("/")
	if strings.Count(body, "<script") != 1 || !strings.Contains(body, `<script src="static/console.js" defer></script>`) {
		t.Errorf("the page carries inline script:\n%s", body)
	}
}

func TestConsoleActionWithoutCSRFIsRefused(t *testing.T) {
	st := sqliteStore(t)
	seedUnknown(t, st, "k1", chargeArgs, "connection reset")
	s := serve(t, st, Options{})
	token := s.csrf()
	before := snap(t, st, "k1")
	seen := ownerDigest("owner-k1")
	form := func(csrf string) url.Values {
		return url.Values{"csrf": {csrf}, "key": {"k1"}, "outcome": {"sent"}, "result": {`"ch_1"`}, "reason": {"dashboard"}, "seen": {seen}}
	}
	for name, tc := range map[string]struct {
		form url.Values
		hdr  []string
	}{
		"no CSRF field":         {form: form("")},
		"another session's":     {form: form(strings.Repeat("ab", 32))},
		"another site's Origin": {form: form(token), hdr: []string{"Origin", "https://evil.example"}},
	} {
		code, body := s.post("/settle", tc.form, tc.hdr...)
		if code != http.StatusForbidden || !strings.Contains(body, "nothing changed") {
			t.Errorf("%s: %d %s, want 403 saying nothing changed", name, code, body)
		}
		unchanged(t, before, st, "k1")
	}
	for _, p := range []string{"/pause", "/resume"} {
		if code, _ := s.post(p, url.Values{"effect": {"destructive"}}); code != http.StatusForbidden {
			t.Errorf("POST %s without CSRF: %d, want 403", p, code)
		}
	}
	unchanged(t, before, st, "k1")
	// A fresh client (no session cookie) with a token copied from another session.
	other := &http.Client{}
	res, err := other.PostForm(s.srv.URL+"/settle", form(token))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Errorf("a CSRF token without its session cookie: %d, want 403", res.StatusCode)
	}
	unchanged(t, before, st, "k1")
	if code, body := s.post("/settle", form(token)); code != http.StatusOK || !strings.Contains(body, "Resolved k1 as sent by console") {
		t.Fatalf("with the CSRF token: %d\n%s", code, body)
	}
}

func TestConsoleServesLoopbackOnlyWithoutToken(t *testing.T) {
	h, err := Handler(sqliteStore(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ remote, host string }{
		{"203.0.113.5:4000", "203.0.113.1:7380"},
		{"203.0.113.5:4000", "127.0.0.1:7380"},  // a remote peer that names loopback in its Host header
		{"127.0.0.1:4000", "evil.example:7380"}, // DNS rebinding: a loopback peer, another site's name
	} {
		req := httptest.NewRequest("GET", "/", nil)
		req.RemoteAddr, req.Host = tc.remote, tc.host
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "loopback only") {
			t.Errorf("from %s as %s: %d %s, want 403", tc.remote, tc.host, rec.Code, rec.Body)
		}
	}
	for _, host := range []string{"127.0.0.1:7380", "localhost:7380", "[::1]:7380"} {
		req := httptest.NewRequest("GET", "/", nil)
		req.RemoteAddr, req.Host = "127.0.0.1:4000", host
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Errorf("loopback as %s: %d", host, rec.Code)
		}
	}
	// Behind the embedding server's authentication: any address.
	h, _ = Handler(sqliteStore(t), Options{AuthenticatedByServer: true})
	req := httptest.NewRequest("GET", "/", nil)
	req.RemoteAddr, req.Host = "203.0.113.5:4000", "console.example"
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Errorf("AuthenticatedByServer from afar: %d", rec.Code)
	}
}

func TestConsoleTokenIsRequiredAndNeverShown(t *testing.T) {
	st := sqliteStore(t)
	seedUnknown(t, st, "k1", chargeArgs, "connection reset")
	secret := "s3cret-console-token-0123456789"
	s := serve(t, st, Options{Token: []byte(secret)})
	if code, _, h := s.get("/"); code != http.StatusSeeOther || h.Get("Location") != "login" {
		t.Fatalf("GET / without the token: %d %s, want a redirect to login", code, h.Get("Location"))
	}
	_, login, _ := s.get("/login")
	csrf := csrfRE.FindStringSubmatch(login)[1]
	before := snap(t, st, "k1")
	form := url.Values{"csrf": {csrf}, "key": {"k1"}, "outcome": {"sent"}, "result": {`"ch_1"`}, "reason": {"r"}, "seen": {ownerDigest("owner-k1")}}
	if code, _ := s.post("/settle", form); code != http.StatusUnauthorized {
		t.Fatalf("POST /settle without the token: %d, want 401", code)
	}
	unchanged(t, before, st, "k1")
	if code, body := s.post("/login", url.Values{"csrf": {csrf}, "token": {"wrong-token-wrong-token"}}); code != http.StatusUnauthorized || strings.Contains(body, secret) {
		t.Fatalf("a wrong token: %d", code)
	}
	if code, _ := s.post("/login", url.Values{"csrf": {csrf}, "token": {secret}}); code != http.StatusSeeOther {
		t.Fatalf("the right token: %d", code)
	}
	var pages strings.Builder
	for _, p := range []string{"/", "/key?k=k1", "/pauses", "/census", "/workflow?id=wf-k1"} {
		code, body, _ := s.get(p)
		if code != http.StatusOK {
			t.Fatalf("GET %s signed in: %d", p, code)
		}
		pages.WriteString(body)
	}
	if code, body := s.post("/settle", form); code != http.StatusOK {
		t.Fatalf("POST /settle signed in: %d %s", code, body)
	}
	// Scripts: a Bearer token.
	req, _ := http.NewRequest("GET", s.srv.URL+"/", nil)
	req.Header.Set("Authorization", "Bearer "+secret)
	if code, _, _ := s.do(req); code != http.StatusOK {
		t.Fatalf("Bearer: %d", code)
	}
	req.Header.Set("Authorization", "Bearer nope")
	if code, _, _ := (&site{t: t, c: &http.Client{}}).do(req); code != http.StatusUnauthorized {
		t.Fatalf("a wrong Bearer: %d", code)
	}
	for _, c := range s.c.Jar.Cookies(mustURL(s.srv.URL)) {
		if strings.Contains(c.Value, secret) {
			t.Errorf("cookie %s carries the token", c.Name)
		}
	}
	if strings.Contains(pages.String(), secret) || strings.Contains(s.log.String(), secret) {
		t.Errorf("the token is on a page or in the log:\n%s", s.log)
	}
	if _, err := Handler(st, Options{Token: []byte("short")}); err == nil {
		t.Error("a 5-byte token was accepted")
	}
}

func mustURL(s string) *url.URL { u, _ := url.Parse(s); return u }

func TestConsoleReadOnlyHidesAndRefusesActions(t *testing.T) {
	st := sqliteStore(t)
	seedUnknown(t, st, "k1", chargeArgs, "connection reset")
	if err := st.Pause(context.Background(), store.Pause{Effect: "destructive", Actor: "a", Time: t0}); err != nil {
		t.Fatal(err)
	}
	s := serve(t, st, Options{ReadOnly: true})
	for _, p := range []string{"/", "/key?k=k1", "/pauses"} {
		_, body, _ := s.get(p)
		if strings.Contains(body, "<form method=\"post\"") || !strings.Contains(body, "read-only") {
			t.Errorf("GET %s in read-only mode shows an action form (or no read-only badge):\n%s", p, body)
		}
	}
	tok := csrfFor(t, s)
	before := snap(t, st, "k1")
	for path, form := range map[string]url.Values{
		"/settle": {"csrf": {tok}, "key": {"k1"}, "outcome": {"not-sent"}, "reason": {"r"}, "confirm": {"yes"}, "seen": {ownerDigest("owner-k1")}},
		"/pause":  {"csrf": {tok}, "activity": {"ChargeCard"}},
		"/resume": {"csrf": {tok}, "effect": {"destructive"}},
	} {
		if code, body := s.post(path, form); code != http.StatusForbidden || !strings.Contains(body, "read-only") {
			t.Errorf("POST %s read-only: %d %s", path, code, body)
		}
	}
	unchanged(t, before, st, "k1")
}

// csrfFor computes the session's token as the page would show it (read-only pages
// show no form to read it from).
func csrfFor(t *testing.T, s *site) string {
	t.Helper()
	for _, c := range s.c.Jar.Cookies(mustURL(s.srv.URL)) {
		if c.Name == sessionCookie {
			return s.srv.Config.Handler.(*guarded).h.csrfToken(c.Value)
		}
	}
	t.Fatal("no session cookie")
	return ""
}

// hostile is text from outside as an attacker would write it: markup, a script,
// terminal escapes (retitle, clear), a bidirectional override.
const hostile = "<script>window.pwned=1</script><img src=x onerror=\"window.pwned=2\">\x1b]0;owned\x07\x1b[2J\u202eevil"

func TestConsoleEscapesTextFromOutside(t *testing.T) {
	st := sqliteStore(t)
	args := []byte(`[{"customer":"cus_1","note":"<script>window.pwned=1</script>\u001b]0;owned\u0007\u202e"}]`)
	seedUnknown(t, st, "k1", args, hostile)
	s := serve(t, st, Options{})
	for _, p := range []string{"/", "/key?k=k1", "/workflow?id=wf-k1"} {
		_, body, _ := s.get(p)
		for _, raw := range []string{"<script>window", "<img", "\x1b", "\x07", "\u202e"} {
			if strings.Contains(body, raw) {
				t.Errorf("GET %s carries %q raw", p, raw)
			}
		}
		for _, shown := range []string{`&lt;script&gt;window.pwned=1&lt;/script&gt;`, `\x1b]0;owned\x07`, `\u202e`} {
			if p != "/workflow?id=wf-k1" && !strings.Contains(body, shown) {
				t.Errorf("GET %s does not show %q", p, shown)
			}
		}
	}
}

func TestConsoleSettleSentIsTheCLIsStoreCall(t *testing.T) {
	st := sqliteStore(t)
	seedUnknown(t, st, "k1", chargeArgs, "connection reset")
	s := serve(t, st, Options{AuthenticatedByServer: true, ActorHeader: "X-Forwarded-User"})
	_, page, _ := s.get("/key?k=k1")
	if !strings.Contains(page, `id="settle-sent"`) || !strings.Contains(page, `ChargeCard([{&#34;amount&#34;:4200`) {
		t.Fatalf("the key's page shows no settle form or withheld call:\n%s", page)
	}
	form := url.Values{"csrf": {s.csrf()}, "key": {"k1"}, "outcome": {"sent"}, "result": {` {"id": "ch_1"} `},
		"reason": {"dashboard shows ch_1"}, "seen": {ownerDigest("owner-k1")}}
	bad := url.Values{}
	for k, v := range form {
		bad[k] = v
	}
	bad.Set("result", "ch_1")
	before := snap(t, st, "k1")
	if code, body := s.post("/settle", bad); code != http.StatusBadRequest || !strings.Contains(body, "not valid JSON") {
		t.Fatalf("a result that is not JSON: %d %s", code, body)
	}
	bad.Set("result", `"ch_1"`)
	bad.Set("seen", ownerDigest("another attempt"))
	if code, body := s.post("/settle", bad); code != http.StatusConflict || !strings.Contains(body, "changed since the page showed it") {
		t.Fatalf("an owner the page did not show: %d %s", code, body)
	}
	unchanged(t, before, st, "k1")
	if code, body := s.post("/settle", form, "X-Forwarded-User", "alice"); code != http.StatusOK {
		t.Fatalf("settle: %d %s", code, body)
	}
	rec, err := st.Get(context.Background(), "k1")
	if err != nil || rec.State != store.StateCompleted {
		t.Fatalf("after settle: %v %v", rec.State, err)
	}
	_, ref, _ := interceptor.EncodeResult(nil, json.RawMessage(`{"id":"ch_1"}`)) // what `idemgate resolve` stores
	rs, _ := st.Receipts(context.Background(), store.ReceiptFilter{Key: "k1", Decision: store.DecisionResolved})
	if len(rs) != 1 {
		t.Fatalf("resolved receipts %+v", rs)
	}
	r := rs[0]
	if r.Actor != "alice" || r.Reason != "dashboard shows ch_1" || r.Resolution != store.ResolvedSent || r.Attempt != 1 ||
		r.WorkflowID != "wf-k1" || r.ArgsHash != "hash-k1" || r.ResultRef != ref || !r.Time.Equal(t0.Add(time.Hour)) {
		t.Fatalf("receipt %+v", r)
	}
	if !strings.Contains(s.log.String(), "resolved") || !strings.Contains(s.log.String(), "alice") {
		t.Errorf("no log line for the action:\n%s", s.log)
	}
}

func TestConsoleNotSentAsksFirstWithTheCall(t *testing.T) {
	st := sqliteStore(t)
	seedUnknown(t, st, "k1", chargeArgs, "connection reset")
	s := serve(t, st, Options{})
	form := url.Values{"csrf": {s.csrf()}, "key": {"k1"}, "outcome": {"not-sent"}, "reason": {"no charge at the vendor"}, "seen": {ownerDigest("owner-k1")}}
	before := snap(t, st, "k1")
	code, body := s.post("/settle", form)
	if code != http.StatusOK || !strings.Contains(body, "This runs the write again") ||
		!strings.Contains(body, `ChargeCard([{&#34;amount&#34;:4200,&#34;customer&#34;:&#34;cus_1&#34;}])`) || !strings.Contains(body, `name="confirm" value="yes"`) {
		t.Fatalf("not sent without confirming: %d\n%s", code, body)
	}
	unchanged(t, before, st, "k1")
	form.Set("confirm", "yes")
	if code, body := s.post("/settle", form); code != http.StatusOK || !strings.Contains(body, "runs ChargeCard(") {
		t.Fatalf("confirmed: %d %s", code, body)
	}
	if rec, _ := st.Get(context.Background(), "k1"); rec.State != store.StateReleased {
		t.Fatalf("state %s, want released", rec.State)
	}
	// Settled already: the same form is refused, nothing changes.
	before = snap(t, st, "k1")
	if code, body := s.post("/settle", form); code != http.StatusConflict || !strings.Contains(body, "already released") {
		t.Fatalf("twice: %d %s", code, body)
	}
	unchanged(t, before, st, "k1")
}

func TestConsolePauseAndResume(t *testing.T) {
	st := sqliteStore(t)
	s := serve(t, st, Options{})
	tok := s.csrf()
	if code, body := s.post("/pause", url.Values{"csrf": {tok}, "activity": {"ChargeCard"}, "reason": {"incident"}}); code != http.StatusOK {
		t.Fatalf("pause: %d %s", code, body)
	}
	ps, _ := st.Pauses(context.Background())
	if len(ps) != 1 || ps[0].Activity != "ChargeCard" || ps[0].Actor != "console" || ps[0].Reason != "incident" {
		t.Fatalf("pauses %+v", ps)
	}
	if code, _ := s.post("/pause", url.Values{"csrf": {tok}, "effect": {"read"}}); code != http.StatusBadRequest {
		t.Fatalf("pausing reads: %d", code)
	}
	if code, body := s.post("/resume", url.Values{"csrf": {tok}, "activity": {"ChargeCard"}, "effect": {""}}); code != http.StatusOK {
		t.Fatalf("resume: %d %s", code, body)
	}
	if code, body := s.post("/resume", url.Values{"csrf": {tok}, "activity": {"ChargeCard"}}); code != http.StatusConflict || !strings.Contains(body, "is not paused") {
		t.Fatalf("resume twice: %d %s", code, body)
	}
	rs, _ := st.Receipts(context.Background(), store.ReceiptFilter{Activity: "ChargeCard"})
	if len(rs) != 2 || rs[0].Decision != store.DecisionPaused || rs[1].Decision != store.DecisionResumed || rs[1].Actor != "console" {
		t.Fatalf("receipts %+v", rs)
	}
}

func TestConsoleTemporalLink(t *testing.T) {
	st := sqliteStore(t)
	seedUnknown(t, st, "k1", chargeArgs, "x")
	s := serve(t, st, Options{TemporalUIBase: "http://localhost:8233/", Namespace: "prod ns"})
	_, body, _ := s.get("/")
	if !strings.Contains(body, `href="http://localhost:8233/namespaces/prod%20ns/workflows/wf-k1/run-k1"`) {
		t.Fatalf("no Temporal UI link:\n%s", body)
	}
	for _, bad := range []string{"javascript:alert(1)", "localhost:8233", "ftp://x"} {
		if _, err := Handler(st, Options{TemporalUIBase: bad}); err == nil {
			t.Errorf("TemporalUIBase %q accepted", bad)
		}
	}
}

// Mounted under a prefix: links, forms and redirects are relative, so the page works.
func TestConsoleUnderAPrefix(t *testing.T) {
	st := sqliteStore(t)
	seedUnknown(t, st, "k1", chargeArgs, "connection reset")
	h, err := Handler(st, Options{Now: func() time.Time { return t0.Add(time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ops/idemgate/", http.StripPrefix("/ops/idemgate", h))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	jar, _ := cookiejar.New(nil)
	s := &site{t: t, srv: srv, c: &http.Client{Jar: jar}}
	_, body, _ := s.get("/ops/idemgate/")
	base := mustURL(srv.URL + "/ops/idemgate/")
	links := regexp.MustCompile(`(?:href|src|action)="([^"#]+)"`).FindAllStringSubmatch(body, -1)
	if len(links) < 5 {
		t.Fatalf("few links:\n%s", body)
	}
	for _, l := range links {
		u, err := base.Parse(strings.ReplaceAll(l[1], "&amp;", "&"))
		if err != nil || (u.Host == base.Host && !strings.HasPrefix(u.Path, "/ops/idemgate/")) {
			t.Errorf("link %q leaves the prefix: %v", l[1], u)
		}
		if u.Host == base.Host {
			if code, _, _ := s.get(u.RequestURI()); code != http.StatusOK {
				t.Errorf("link %q: %d", l[1], code)
			}
		}
	}
	_, keyPage, _ := s.get("/ops/idemgate/key?k=k1")
	form := url.Values{"csrf": {csrfRE.FindStringSubmatch(keyPage)[1]}, "key": {"k1"}, "outcome": {"sent"}, "result": {`"ch_1"`},
		"reason": {"r"}, "seen": {ownerDigest("owner-k1")}}
	if code, body := s.post("/ops/idemgate/settle", form); code != http.StatusOK || !strings.Contains(body, "Resolved k1") {
		t.Fatalf("settle under the prefix: %d %s", code, body)
	}
}

// What the witnesses said: the latest refusal quotes their report, and a witness's
// own receipts are shown; a claim not yet resolvable says from when, and its
// settlement is refused with the same words as `idemgate resolve`.
func TestConsoleShowsWitnessesAndWhenResolvable(t *testing.T) {
	st := sqliteStore(t)
	ctx := context.Background()
	seedUnknown(t, st, "k1", chargeArgs, "read tcp: connection reset by peer")
	refusal := "idemgate: refused destructive ChargeCard key k1: ... Witnesses asked: temporal: the activity has no completion in history; payments-lookup: no answer (timeout). Next step: ..."
	if err := st.Append(ctx, store.Receipt{Time: t0.Add(2 * time.Second), Key: "k1", Activity: "ChargeCard", Effect: "destructive",
		Decision: store.DecisionRefusedInFlight, WorkflowID: "wf-k1", RunID: "run-k1", Attempt: 2, Error: refusal}); err != nil {
		t.Fatal(err)
	}
	// A live claim with a refused attempt: listed, not yet resolvable.
	c := store.Claim{Key: "k2", Activity: "ChargeCard", Effect: "destructive", ArgsHash: "h2", Args: chargeArgs, Owner: "owner-k2",
		Lease: t0.Add(2 * time.Hour), Window: 24 * time.Hour, WorkflowID: "wf-k2", RunID: "run-k2", Attempt: 1, Now: t0}
	if _, _, err := st.Begin(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := st.Append(ctx, store.Receipt{Time: t0.Add(time.Minute), Key: "k2", Activity: "ChargeCard", Effect: "destructive",
		Decision: store.DecisionRefusedInFlight, WorkflowID: "wf-k2", RunID: "run-k2", Attempt: 2, Error: "refused: in flight"}); err != nil {
		t.Fatal(err)
	}
	s := serve(t, st, Options{})
	_, page, _ := s.get("/")
	for _, want := range []string{
		"temporal: the activity has no completion in history; payments-lookup: no answer (timeout).",
		"read tcp: connection reset by peer",
		"the owner may still be running until 2026-12-02T08:00:00Z",
		"2026-12-02T08:05:00Z", // k2: the lease plus store.LeaseMargin
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the first page lacks %q", want)
		}
	}
	_, kp, _ := s.get("/key?k=k2")
	if !strings.Contains(kp, "A person may settle this key from 2026-12-02T08:05:00Z") {
		t.Errorf("the key's page does not say from when:\n%s", kp)
	}
	before := snap(t, st, "k2")
	form := url.Values{"csrf": {s.csrf()}, "key": {"k2"}, "outcome": {"sent"}, "result": {"null"}, "reason": {"r"}, "seen": {ownerDigest("owner-k2")}}
	if code, body := s.post("/settle", form); code != http.StatusConflict || !strings.Contains(body, "a person may resolve this key from 2026-12-02T08:05:00Z") {
		t.Fatalf("settling a live claim: %d %s", code, body)
	}
	unchanged(t, before, st, "k2")
}

func TestConsoleCensusAndWorkflowPages(t *testing.T) {
	st := sqliteStore(t)
	seedUnknown(t, st, "k1", chargeArgs, "x")
	s := serve(t, st, Options{})
	_, page, _ := s.get("/census?names=Frobnicate+GetBalance")
	for _, want := range []string{"ChargeCard", "Frobnicate", "needs review", "GetBalance", "read", "destructive"} {
		if !strings.Contains(page, want) {
			t.Errorf("the census lacks %q", want)
		}
	}
	rep := interceptor.Census([]string{"ChargeCard", "Frobnicate", "GetBalance"})
	if !strings.Contains(page, template.HTMLEscapeString(rep.String())) {
		t.Errorf("the census lacks the CLI's summary line %q", rep.String())
	}
	_, wf, _ := s.get("/workflow?id=wf-k1")
	if !strings.Contains(wf, `href="key?k=k1"`) || !strings.Contains(wf, "unknown") || !strings.Contains(wf, "claimed") {
		t.Errorf("the workflow's page:\n%s", wf)
	}
}
