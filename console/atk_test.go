package console

// Adversarial review of the console (atk-console): each test names the attack it
// tries. Those that found a hole failed on the code before its fix.

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/idemgate/idemgate/internal/operate"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memory"
)

// A person's "not sent" on an unknown record waits for the owner's lease plus
// store.LeaseMargin (store.NotSentResolvable): before then the key's page must
// say from when (not "resolvable from now", which tells the person to look at
// the vendor too early), and a not-sent must be refused with that time, changing
// nothing.
func TestAtkConsoleNotSentWaitsForTheMarginAndThePageSaysWhen(t *testing.T) {
	st := sqliteStore(t)
	seedUnknown(t, st, "k1", chargeArgs, "context deadline exceeded")
	now := t0.Add(30 * time.Second) // the owner's lease is t0+1m: not sent from t0+1m+LeaseMargin
	s := serve(t, st, Options{Now: func() time.Time { return now }})
	rec, err := st.Get(context.Background(), "k1")
	if err != nil {
		t.Fatal(err)
	}
	from := operate.TS(store.NotSentFrom(rec))
	for _, path := range []string{"/", "/key?k=k1"} {
		_, body, _ := s.get(path)
		if !strings.Contains(body, from) {
			t.Errorf("GET %s does not say that not sent is accepted from %s:\n%s", path, from, body)
		}
	}
	form := url.Values{"csrf": {s.csrf()}, "key": {"k1"}, "outcome": {"not-sent"}, "reason": {"nothing at the vendor"}, "seen": {ownerDigest("owner-k1")}}
	before := snap(t, st, "k1")
	for _, confirm := range []string{"", "yes"} {
		form.Set("confirm", confirm)
		code, body := s.post("/settle", form)
		if code != http.StatusConflict || !strings.Contains(body, from) {
			t.Errorf("not sent before %s (confirm %q): %d\n%s", from, confirm, code, body)
		}
	}
	unchanged(t, before, st, "k1")
	// "Sent" is a person's to give at once on an unknown record.
	form = url.Values{"csrf": {s.csrf()}, "key": {"k1"}, "outcome": {"sent"}, "result": {`"ch_1"`}, "reason": {"the vendor shows ch_1"}, "seen": {ownerDigest("owner-k1")}}
	if code, body := s.post("/settle", form); code != http.StatusOK {
		t.Fatalf("sent at once: %d\n%s", code, body)
	}
}

// countingStore is a real store whose Pending calls are counted: what a page load
// reads from the store.
type countingStore struct {
	store.Store
	mu      sync.Mutex
	limits  []int
	records int
}

func (c *countingStore) Pending(ctx context.Context, now time.Time, limit int) ([]store.Record, error) {
	rs, err := c.Store.Pending(ctx, now, limit)
	c.mu.Lock()
	c.limits = append(c.limits, limit)
	c.records += len(rs)
	c.mu.Unlock()
	return rs, err
}

// 2,000 blocked writes: the first page shows the oldest pendingShown and must read
// about that many from the store on each load (it reloads every few seconds in
// every open tab), not every pending record with its arguments.
func TestAtkConsolePendingPageReadsABoundedPage(t *testing.T) {
	mem := memory.New()
	const n = 2000
	for i := range n {
		seedUnknown(t, mem, fmt.Sprintf("k%04d", i), chargeArgs, "reset")
	}
	st := &countingStore{Store: mem}
	s := serve(t, st, Options{})
	code, body, _ := s.get("/")
	if code != http.StatusOK || strings.Count(body, `class="card blocked"`)+strings.Count(body, `class="card wait blocked"`) != pendingShown ||
		!strings.Contains(body, fmt.Sprintf("the oldest %d shown", pendingShown)) {
		t.Fatalf("GET /: %d, want the oldest %d shown\n%.2000s", code, pendingShown, body)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, l := range st.limits {
		if l <= 0 {
			t.Errorf("the page asked the store for every pending record (limit %d)", l)
		}
	}
	if max := 2*pendingShown + 64; st.records > max {
		t.Errorf("one page load read %d pending records from the store, want at most %d", st.records, max)
	}
}

// The actor header is cut to 200 bytes; a cut inside a character leaves a receipt
// whose actor is not UTF-8 (PostgreSQL refuses such text: the settle fails for a
// person with a long name).
func TestAtkConsoleActorCutKeepsUTF8(t *testing.T) {
	st := sqliteStore(t)
	seedUnknown(t, st, "k1", chargeArgs, "reset")
	s := serve(t, st, Options{AuthenticatedByServer: true, ActorHeader: "X-Forwarded-User"})
	name := strings.Repeat("a", 199) + "é" + "b"
	form := url.Values{"csrf": {s.csrf()}, "key": {"k1"}, "outcome": {"sent"}, "result": {`"ch_1"`}, "reason": {"seen at the vendor"}, "seen": {ownerDigest("owner-k1")}}
	if code, body := s.post("/settle", form, "X-Forwarded-User", name); code != http.StatusOK {
		t.Fatalf("settle: %d\n%s", code, body)
	}
	rs, err := st.Receipts(context.Background(), store.ReceiptFilter{Key: "k1", Decision: store.DecisionResolved})
	if err != nil || len(rs) != 1 {
		t.Fatalf("receipts %v %v", rs, err)
	}
	if a := rs[0].Actor; !utf8.ValidString(a) || len(a) > 200 || !strings.HasPrefix(name, a) {
		t.Errorf("actor %q (%d bytes): want a valid UTF-8 prefix of the header of at most 200 bytes", a, len(a))
	}
}

// A pause of an activity no receipt has named (a typo: ChargeCrad) stops nothing
// that runs: the page must say so clearly, as it does for a read.
func TestAtkConsolePauseOfAnActivityNoReceiptNamesSaysSo(t *testing.T) {
	st := sqliteStore(t)
	seedUnknown(t, st, "k1", chargeArgs, "reset")
	s := serve(t, st, Options{})
	csrf := s.csrf()
	code, body := s.post("/pause", url.Values{"csrf": {csrf}, "activity": {"ChargeCrad"}, "reason": {"incident"}})
	if code != http.StatusOK || !strings.Contains(body, "no receipt") || !strings.Contains(body, "ChargeCard") {
		t.Errorf("pause of a misspelt activity: %d; want a note that no receipt names ChargeCrad, with the names that are close (ChargeCard)\n%s", code, body)
	}
	// A name the workers have used gets no such note.
	code, body = s.post("/pause", url.Values{"csrf": {csrf}, "activity": {"ChargeCard"}, "reason": {"incident"}})
	if code != http.StatusOK || strings.Contains(body, "no receipt") {
		t.Errorf("pause of ChargeCard: %d\n%s", code, body)
	}
}

// A token a person cannot type (white space at its ends, e.g. a variable set from
// a file with its newline) locks everyone out of the sign-in form: the handler
// refuses it up front.
func TestAtkConsoleTokenWithWhiteSpaceAtItsEndsIsRefused(t *testing.T) {
	for _, tok := range []string{"0123456789abcdef0123\n", " 0123456789abcdef0123", "                    "} {
		if _, err := Handler(sqliteStore(t), Options{Token: []byte(tok)}); err == nil {
			t.Errorf("Handler accepted the token %q", tok)
		}
	}
}

var hiddenAttr = regexp.MustCompile(`(value|data-key)="[^"]*"`)

var regexpSeen = regexp.MustCompile(`name="seen" value="([0-9a-f]+)"`)

// --- attacks that did not get through (they pass; kept as regression tests) ---

// A page rendered before the key changed owner (released, claimed again by a new
// attempt that gave up too) settles nothing: not for the new owner.
func TestAtkConsoleStaleFormAfterANewOwnerIsRefused(t *testing.T) {
	st := sqliteStore(t)
	ctx := context.Background()
	seedUnknown(t, st, "k1", chargeArgs, "reset")
	s := serve(t, st, Options{})
	_, page, _ := s.get("/key?k=k1")
	m := regexpSeen.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no seen field:\n%s", page)
	}
	oldSeen := m[1]
	// A witness (or another tab) releases it; the next attempt claims and abandons.
	now := t0.Add(time.Hour)
	if err := st.Resolve(ctx, store.Transition{Key: "k1", Owner: "owner-k1", Now: now, Window: 24 * time.Hour,
		Receipt: store.Receipt{Time: now, Key: "k1", Decision: store.DecisionResolved, Resolution: store.ResolvedNotSent, Actor: "other-tab", Reason: "r"}},
		store.StateReleased); err != nil {
		t.Fatal(err)
	}
	c := store.Claim{Key: "k1", Activity: "ChargeCard", Effect: "destructive", ArgsHash: "hash-k1", Args: chargeArgs, Owner: "owner-2",
		Lease: t0.Add(-time.Minute), Window: 24 * time.Hour, WorkflowID: "wf-k1", RunID: "run-k1", Attempt: 2, Now: t0.Add(-2 * time.Minute)}
	if o, _, err := st.Begin(ctx, c); err != nil || o != store.OutcomeClaimed {
		t.Fatalf("claim 2: %v %v", o, err)
	}
	before := snap(t, st, "k1")
	for _, f := range []url.Values{
		{"outcome": {"not-sent"}, "confirm": {"yes"}},
		{"outcome": {"not-sent"}},
		{"outcome": {"sent"}, "result": {`"ch_1"`}},
	} {
		f.Set("csrf", s.csrf())
		f.Set("key", "k1")
		f.Set("reason", "stale tab")
		f.Set("seen", oldSeen)
		if code, body := s.post("/settle", f); code != http.StatusConflict || !strings.Contains(body, "changed since the page showed it") {
			t.Errorf("stale %v: %d\n%s", f, code, body)
		}
	}
	// No seen at all: refused too.
	if code, _ := s.post("/settle", url.Values{"csrf": {s.csrf()}, "key": {"k1"}, "outcome": {"sent"}, "result": {`"x"`}, "reason": {"r"}}); code != http.StatusConflict {
		t.Errorf("settle without seen: %d", code)
	}
	unchanged(t, before, st, "k1")
}

// Two tabs settle the same key at once: one settles, every other is refused.
func TestAtkConsoleConcurrentSettlesSettleOnce(t *testing.T) {
	st := sqliteStore(t)
	seedUnknown(t, st, "k1", chargeArgs, "reset")
	s := serve(t, st, Options{})
	csrf := s.csrf()
	var wg sync.WaitGroup
	codes := make(chan int, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f := url.Values{"csrf": {csrf}, "key": {"k1"}, "reason": {"tab"}, "seen": {ownerDigest("owner-k1")}}
			if i%2 == 0 {
				f.Set("outcome", "sent")
				f.Set("result", fmt.Sprintf(`"ch_%d"`, i))
			} else {
				f.Set("outcome", "not-sent")
				f.Set("confirm", "yes")
			}
			req, _ := http.NewRequest("POST", s.srv.URL+"/settle", strings.NewReader(f.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			res, err := s.c.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			res.Body.Close()
			codes <- res.StatusCode
		}()
	}
	wg.Wait()
	close(codes)
	ok := 0
	for c := range codes {
		if c == http.StatusOK {
			ok++
		}
	}
	rs, _ := st.Receipts(context.Background(), store.ReceiptFilter{Key: "k1", Decision: store.DecisionResolved})
	if ok != 1 || len(rs) != 1 {
		t.Fatalf("%d settles answered 200 and %d resolved receipts, want 1 and 1", ok, len(rs))
	}
}

// Every response — refusals, redirects, 404, 405, static files, errors — carries
// the CSP and framing headers; a GET on an action changes nothing; a loopback
// console reached by a rebinding name is refused; an action from another origin,
// or with a method override, is refused.
func TestAtkConsoleHeadersAndMethodsOnEveryResponse(t *testing.T) {
	st := sqliteStore(t)
	seedUnknown(t, st, "k1", chargeArgs, "reset")
	s := serve(t, st, Options{})
	before := snap(t, st, "k1")
	check := func(what string, h http.Header) {
		t.Helper()
		if h.Get("Content-Security-Policy") != csp || h.Get("X-Frame-Options") != "DENY" || h.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: headers %v", what, h)
		}
	}
	for _, p := range []string{"/", "/nope", "/key", "/static/console.js", "/settle?key=k1&outcome=not-sent&confirm=yes&reason=r", "/login", "/key?k=%3Cscript%3E"} {
		code, _, h := s.get(p)
		check("GET "+p, h)
		if p == "/settle?key=k1&outcome=not-sent&confirm=yes&reason=r" && code != http.StatusMethodNotAllowed {
			t.Errorf("GET %s: %d, want 405", p, code)
		}
	}
	req, _ := http.NewRequest("GET", s.srv.URL+"/", nil)
	req.Host = "evil.example:80"
	if code, _, h := s.do(req); code != http.StatusForbidden {
		t.Errorf("Host evil.example: %d", code)
	} else {
		check("rebinding", h)
	}
	form := url.Values{"csrf": {s.csrf()}, "key": {"k1"}, "outcome": {"sent"}, "result": {`"x"`}, "reason": {"r"}, "seen": {ownerDigest("owner-k1")}}
	if code, _ := s.post("/settle", form, "Origin", "http://evil.example"); code != http.StatusForbidden {
		t.Errorf("POST from another origin: %d", code)
	}
	if code, _ := s.post("/settle?_method=GET", url.Values{"key": {"k1"}}, "X-HTTP-Method-Override", "GET"); code != http.StatusForbidden {
		t.Errorf("POST with a method override and no CSRF: %d", code)
	}
	unchanged(t, before, st, "k1")
	if bytes.Contains(s.log.Bytes(), []byte(form.Get("csrf"))) {
		t.Errorf("the log shows the CSRF token:\n%s", s.log)
	}
}

// A loopback console put behind a reverse proxy on the same machine (nginx's
// proxy_pass http://127.0.0.1:7380 with the forwarding headers most guides set)
// sees every request come from loopback with a loopback Host: it would serve,
// and act for, anyone the proxy lets in. A request that says it was forwarded is
// refused unless the console has a token or the embedding server authenticates.
func TestAtkConsoleLoopbackRefusesForwardedRequests(t *testing.T) {
	st := sqliteStore(t)
	seedUnknown(t, st, "k1", chargeArgs, "reset")
	s := serve(t, st, Options{})
	for _, h := range []string{"X-Forwarded-For", "Forwarded", "X-Real-Ip", "X-Forwarded-Host"} {
		req, _ := http.NewRequest("GET", s.srv.URL+"/", nil)
		req.Header.Set(h, "203.0.113.9")
		if code, body, _ := s.do(req); code != http.StatusForbidden || !strings.Contains(body, "proxy") {
			t.Errorf("GET / with %s: %d\n%.300s", h, code, body)
		}
	}
	// With the embedding server's authentication, forwarded requests are its to judge.
	s2 := serve(t, st, Options{AuthenticatedByServer: true})
	req, _ := http.NewRequest("GET", s2.srv.URL+"/", nil)
	req.Header.Set("X-Forwarded-For", "203.0.113.9")
	if code, _, _ := s2.do(req); code != http.StatusOK {
		t.Errorf("AuthenticatedByServer, forwarded: %d", code)
	}
}

// A form over the 4 MiB the handler reads (a result pasted far over the largest
// the gate stores) gets an answer that says so, not a CSRF refusal.
func TestAtkConsoleHugeFormSaysItIsTooLarge(t *testing.T) {
	st := sqliteStore(t)
	seedUnknown(t, st, "k1", chargeArgs, "reset")
	s := serve(t, st, Options{})
	before := snap(t, st, "k1")
	big := `"` + strings.Repeat("x", 5<<20) + `"`
	form := url.Values{"csrf": {s.csrf()}, "key": {"k1"}, "outcome": {"sent"}, "result": {big}, "reason": {"r"}, "seen": {ownerDigest("owner-k1")}}
	if code, body := s.post("/settle", form); code != http.StatusRequestEntityTooLarge || !strings.Contains(body, "too large") {
		t.Errorf("5 MiB form: %d %.300s", code, body)
	}
	form.Set("result", `"`+strings.Repeat("x", 2<<20)+`"`)
	if code, body := s.post("/settle", form); code != http.StatusBadRequest || !strings.Contains(body, "the largest the gate stores") {
		t.Errorf("2 MiB result: %d %.300s", code, body)
	}
	for _, bad := range []string{"ch_1", "{", "", "  "} {
		form.Set("result", bad)
		if code, body := s.post("/settle", form); code != http.StatusBadRequest {
			t.Errorf("result %q: %d %.300s", bad, code, body)
		}
	}
	unchanged(t, before, st, "k1")
	form.Set("result", "null")
	if code, body := s.post("/settle", form); code != http.StatusOK {
		t.Errorf("result null: %d %.300s", code, body)
	}
}

// Hostile text in every field an attacker can reach — arguments, the earlier
// error, activity, workflow and run IDs, the actor header, the reason, a pause's
// scope, census names, a key in the URL — is inert on every page.
func TestAtkConsoleHostileTextInEveryField(t *testing.T) {
	st := memory.New()
	ctx := context.Background()
	h := hostile
	c := store.Claim{Key: "k" + h, Activity: "Charge" + h, Effect: "destructive", ArgsHash: "x", Args: []byte(`["` + "\\u003cscript>\\u001b[2J\\u202e" + `"]`),
		Owner: "o1", Lease: t0.Add(time.Minute), Window: 24 * time.Hour, WorkflowID: "wf" + h, RunID: "run" + h, Attempt: 1, Now: t0}
	if _, _, err := st.Begin(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := st.Abandon(ctx, store.Transition{Key: c.Key, Owner: "o1", Now: t0, Window: 24 * time.Hour, Receipt: store.Receipt{Time: t0,
		Key: c.Key, Activity: c.Activity, Effect: "destructive", WorkflowID: c.WorkflowID, RunID: c.RunID, Attempt: 1,
		Decision: store.DecisionUnknown, Error: "err" + h}}); err != nil {
		t.Fatal(err)
	}
	s := serve(t, st, Options{AuthenticatedByServer: true, ActorHeader: "X-User", TemporalUIBase: "http://localhost:8233"})
	csrf := s.csrf()
	if code, body := s.post("/pause", url.Values{"csrf": {csrf}, "activity": {"Pay" + h}, "reason": {"why" + h}}, "X-User", "mallory<script>x</script><img src=x>\u202e"); code != http.StatusOK {
		t.Fatalf("pause: %d %s", code, body)
	}
	pages := []string{"/", "/pauses", "/key?k=" + url.QueryEscape(c.Key), "/workflow?id=" + url.QueryEscape(c.WorkflowID),
		"/census?names=" + url.QueryEscape("Ship"+h), "/key?k=" + url.QueryEscape("nokey"+h)}
	for _, p := range pages {
		_, body, _ := s.get(p)
		// Attribute values the person never sees (a form's hidden key, data-key)
		// carry the key as it is, escaped for HTML: what is shown must be inert.
		shown := hiddenAttr.ReplaceAllString(body, "")
		for _, bad := range []string{"<script>window", "<img src=x", "onerror=\"", "javascript:"} {
			if i := strings.Index(body, bad); i >= 0 {
				t.Errorf("GET %s has %q raw: %q", p, bad, body[max(0, i-200):min(len(body), i+100)])
			}
		}
		for _, bad := range []string{"\x1b", "\u202e", "\x07"} {
			body := shown
			if i := strings.Index(body, bad); i >= 0 {
				t.Errorf("GET %s shows %q raw: %q", p, bad, body[max(0, i-200):min(len(body), i+100)])
			}
		}
	}
}

// The tab's title shows a key or workflow ID too: a bidirectional override or a
// control character in it is shown as an escape there as everywhere else.
func TestAtkConsoleTitleEscapesTheKey(t *testing.T) {
	st := sqliteStore(t)
	key := "\u202etxt.exe\x1b[2J"
	seedUnknown(t, st, key, chargeArgs, "reset")
	s := serve(t, st, Options{})
	for _, p := range []string{"/key?k=" + url.QueryEscape(key), "/workflow?id=" + url.QueryEscape("wf-"+key)} {
		_, body, _ := s.get(p)
		title := regexp.MustCompile(`(?s)<title>(.*?)</title>`).FindStringSubmatch(body)
		if title == nil || strings.ContainsAny(title[1], "\u202e\x1b") {
			t.Errorf("GET %s: title %q", p, title)
		}
	}
}

// A store that went away (closed, the database down) gives every page an error
// page with the security headers, never a panic or a blank 200.
func TestAtkConsoleClosedStoreAnswersWithAnError(t *testing.T) {
	st := sqliteStore(t)
	seedUnknown(t, st, "k1", chargeArgs, "reset")
	s := serve(t, st, Options{})
	csrf := s.csrf()
	if err := st.(interface{ Close() error }).Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/", "/key?k=k1", "/workflow?id=wf-k1", "/census", "/pauses"} {
		code, body, h := s.get(p)
		if code != http.StatusServiceUnavailable || !strings.Contains(body, `id="error"`) || h.Get("Content-Security-Policy") != csp {
			t.Errorf("GET %s on a closed store: %d\n%.300s", p, code, body)
		}
	}
	form := url.Values{"csrf": {csrf}, "key": {"k1"}, "outcome": {"sent"}, "result": {`"x"`}, "reason": {"r"}, "seen": {ownerDigest("owner-k1")}}
	if code, body := s.post("/settle", form); code < 400 {
		t.Errorf("settle on a closed store: %d\n%.300s", code, body)
	}
}

// "Not sent" on a claim taken over from an attempt that may have sent releases a
// write an earlier attempt may have made too: the confirmation, where the person
// decides, must say so (the card says it; the confirmation did not).
func TestAtkConsoleConfirmSaysAnEarlierAttemptMayHaveSent(t *testing.T) {
	st := sqliteStore(t)
	ctx := context.Background()
	c := store.Claim{Key: "k1", Activity: "UpsertContact", Effect: "idempotent-write", ArgsHash: "h", Args: chargeArgs, Owner: "o1",
		Lease: t0.Add(time.Minute), Window: 24 * time.Hour, WorkflowID: "wf", RunID: "run", Attempt: 1, Now: t0}
	if o, _, err := st.Begin(ctx, c); err != nil || o != store.OutcomeClaimed {
		t.Fatalf("%v %v", o, err)
	}
	c.Owner, c.Attempt, c.Now, c.Lease, c.TakeOver = "o2", 2, t0.Add(2*time.Minute), t0.Add(3*time.Minute), true
	if o, _, err := st.Begin(ctx, c); err != nil || o != store.OutcomeTakenOver {
		t.Fatalf("take over: %v %v", o, err)
	}
	if rec, _ := st.Get(ctx, "k1"); !rec.MayHaveSent {
		t.Fatalf("record %+v: want MayHaveSent", rec)
	}
	s := serve(t, st, Options{})
	form := url.Values{"csrf": {s.csrf()}, "key": {"k1"}, "outcome": {"not-sent"}, "reason": {"nothing at the vendor"}, "seen": {ownerDigest("o2")}}
	code, body := s.post("/settle", form)
	if code != http.StatusOK || !strings.Contains(body, "This runs the write again") || !strings.Contains(body, "may have sent") {
		t.Fatalf("confirmation: %d; want it to say an earlier attempt may have sent\n%s", code, body)
	}
}
