package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/store"
)

// syncBuf is a goroutine-safe buffer for a command's stderr.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// startConsole runs `idemgate console` with args until the test ends and returns
// its base URL (from the line it prints) and its stderr.
func startConsole(t *testing.T, env map[string]string, args ...string) (string, *syncBuf) {
	t.Helper()
	pr, pw := io.Pipe()
	stderr := &syncBuf{}
	stop := make(chan struct{})
	c := &cli{stdout: pw, stderr: stderr, stdin: strings.NewReader(""), now: time.Now, stop: stop,
		getenv: func(k string) string { return env[k] }}
	exited := make(chan int, 1)
	go func() { code := c.main(append([]string{"console"}, args...)); pw.Close(); exited <- code }()
	lines := bufio.NewScanner(pr)
	if !lines.Scan() {
		t.Fatalf("idemgate console printed nothing; stderr:\n%s", stderr)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	m := regexp.MustCompile(`http://[^ /]+/`).FindString(lines.Text())
	if m == "" {
		t.Fatalf("no address in %q", lines.Text())
	}
	t.Cleanup(func() {
		close(stop)
		select {
		case code := <-exited:
			if code != 0 {
				t.Errorf("idemgate console exited %d; stderr:\n%s", code, stderr)
			}
		case <-time.After(30 * time.Second):
			t.Error("idemgate console did not stop within 30 s")
		}
	})
	return strings.TrimSuffix(m, "/"), stderr
}

// consoleOnce runs `idemgate console` told to stop as soon as it serves: a command
// that should have refused its flags returns instead of serving until the test times out.
func consoleOnce(t *testing.T, args ...string) result {
	t.Helper()
	var out, errb syncBuf
	stop := make(chan struct{})
	close(stop)
	c := &cli{stdout: &out, stderr: &errb, stdin: strings.NewReader(""), now: time.Now, stop: stop,
		getenv: func(string) string { return "" }}
	code := c.main(append([]string{"console"}, args...))
	return result{code, out.String(), errb.String()}
}

func browser() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func fetch(t *testing.T, c *http.Client, method, u string, form url.Values) (int, string) {
	t.Helper()
	var res *http.Response
	var err error
	if method == "GET" {
		res, err = c.Get(u)
	} else {
		res, err = c.PostForm(u, form)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

var consoleCSRF = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)
var consoleSeen = regexp.MustCompile(`name="seen" value="([0-9a-f]+)"`)

func TestConsoleCommandServesTheStoreAndRefusesForgedActions(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		st := openStore(t, b)
		now := time.Now()
		seed(t, st, "k-console", "wf-console", now.Add(-time.Hour), now.Add(-50*time.Minute), "abandon")
		base, stderr := startConsole(t, nil, "--store", b.spec, "--listen", "127.0.0.1:0")
		c := browser()
		code, page := fetch(t, c, "GET", base+"/", nil)
		if code != 200 || !strings.Contains(page, "k-console") || !strings.Contains(page, "ChargeCard([{&#34;amount&#34;:4200") {
			t.Fatalf("GET /: %d\n%s", code, page)
		}
		_, keyPage := fetch(t, c, "GET", base+"/key?k=k-console", nil)
		csrf, seen := consoleCSRF.FindStringSubmatch(keyPage), consoleSeen.FindStringSubmatch(keyPage)
		if csrf == nil || seen == nil {
			t.Fatalf("no settle form:\n%s", keyPage)
		}
		before := snap(t, st, "k-console")
		form := url.Values{"key": {"k-console"}, "outcome": {"sent"}, "result": {`"ch_1"`}, "reason": {"r"}, "seen": {seen[1]}}
		if code, body := fetch(t, c, "POST", base+"/settle", form); code != http.StatusForbidden {
			t.Fatalf("POST without the CSRF field: %d %s", code, body)
		}
		unchanged(t, before, st, "k-console")
		form.Set("csrf", csrf[1])
		if code, body := fetch(t, browser(), "POST", base+"/settle", form); code != http.StatusForbidden {
			t.Fatalf("POST from another browser session: %d %s", code, body)
		}
		unchanged(t, before, st, "k-console")
		if code, body := fetch(t, c, "POST", base+"/settle", form); code != 200 || !strings.Contains(body, "as sent by console") {
			t.Fatalf("POST with it: %d %s", code, body)
		}
		if strings.Contains(stderr.String(), "secret") {
			t.Errorf("stderr shows a secret:\n%s", stderr)
		}
	})
}

func TestConsoleCommandNeedsATokenBeyondLoopback(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "idemgate.db")
	st := openStore(t, backend{"sqlite", path})
	_ = st
	r := consoleOnce(t, "--store", path, "--token", "tok-on-the-command-line")
	if r.code != exitUsage || strings.Contains(r.stderr+r.stdout, "tok-on-the-command-line") || !strings.Contains(r.stderr, "--token is refused") || !strings.Contains(r.stderr, "IDEMGATE_CONSOLE_TOKEN") {
		t.Fatalf("--token: %s", r)
	}
	r = consoleOnce(t, "--store", path, "--listen", "0.0.0.0:0")
	if r.code != exitUsage || !strings.Contains(r.stderr, "not a loopback address") {
		t.Fatalf("--listen 0.0.0.0 without a token: %s", r)
	}
	tokenFile := filepath.Join(dir, "token")
	secret := "file-token-0123456789abcdef"
	if err := os.WriteFile(tokenFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base, stderr := startConsole(t, nil, "--store", path, "--listen", "0.0.0.0:0", "--token-file", tokenFile)
	base = strings.Replace(base, "0.0.0.0", "127.0.0.1", 1)
	base = strings.Replace(base, "[::]", "127.0.0.1", 1)
	c := browser()
	res, err := c.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "login" {
		t.Fatalf("GET / without the token: %d %s", res.StatusCode, res.Header.Get("Location"))
	}
	req, _ := http.NewRequest("GET", base+"/", nil)
	req.Header.Set("Authorization", "Bearer "+secret)
	if res, err = c.Do(req); err != nil || res.StatusCode != 200 {
		t.Fatalf("with the token: %v %v", res, err)
	}
	res.Body.Close()
	// The environment variable works too.
	base2, _ := startConsole(t, map[string]string{"IDEMGATE_CONSOLE_TOKEN": secret}, "--store", path, "--listen", "127.0.0.1:0")
	req, _ = http.NewRequest("GET", base2+"/", nil)
	req.Header.Set("Authorization", "Bearer "+secret)
	if res, err = c.Do(req); err != nil || res.StatusCode != 200 {
		t.Fatalf("token from the environment: %v %v", res, err)
	}
	res.Body.Close()
	if strings.Contains(stderr.String(), secret) {
		t.Errorf("the token is in the console's log:\n%s", stderr)
	}
}

// The console's settle is `idemgate resolve`'s store call: twin keys settled one
// each way leave the same receipt but for key, time and actor.
func TestConsoleSettleLeavesTheReceiptResolveLeaves(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		st := openStore(t, b)
		now := time.Now()
		seed(t, st, "k-cli", "wf-twin", now.Add(-time.Hour), now.Add(-50*time.Minute), "abandon")
		seed(t, st, "k-web", "wf-twin", now.Add(-time.Hour), now.Add(-50*time.Minute), "abandon")
		resultFile := filepath.Join(t.TempDir(), "r.json")
		if err := os.WriteFile(resultFile, []byte(`{"id": "ch_1"}`), 0o600); err != nil {
			t.Fatal(err)
		}
		ok(t, "resolve", "k-cli", "--store", b.spec, "--sent", "--result", resultFile, "--reason", "dashboard", "--actor", "console")
		base, _ := startConsole(t, nil, "--store", b.spec, "--listen", "127.0.0.1:0")
		c := browser()
		_, keyPage := fetch(t, c, "GET", base+"/key?k=k-web", nil)
		form := url.Values{"csrf": {consoleCSRF.FindStringSubmatch(keyPage)[1]}, "seen": {consoleSeen.FindStringSubmatch(keyPage)[1]},
			"key": {"k-web"}, "outcome": {"sent"}, "result": {`{"id": "ch_1"}`}, "reason": {"dashboard"}}
		if code, body := fetch(t, c, "POST", base+"/settle", form); code != 200 {
			t.Fatalf("settle: %d %s", code, body)
		}
		get := func(key string) (store.Receipt, store.Record) {
			rs, err := st.Receipts(context.Background(), store.ReceiptFilter{Key: key, Decision: store.DecisionResolved})
			if err != nil || len(rs) != 1 {
				t.Fatalf("%s: %v %v", key, rs, err)
			}
			rec, err := st.Get(context.Background(), key)
			if err != nil {
				t.Fatal(err)
			}
			r := rs[0]
			r.ID, r.Time, r.Key, r.ArgsHash = 0, time.Time{}, "", ""
			rec.Key, rec.ArgsHash, rec.Owner, rec.UpdatedAt, rec.ExpiresAt, rec.CreatedAt, rec.Lease = "", "", "", time.Time{}, time.Time{}, time.Time{}, time.Time{}
			return r, rec
		}
		rc, recc := get("k-cli")
		rw, recw := get("k-web")
		if !reflect.DeepEqual(rc, rw) || !reflect.DeepEqual(recc, recw) {
			t.Fatalf("the console's settlement differs from resolve's:\ncli %+v\n    %+v\nweb %+v\n    %+v", rc, recc, rw, recw)
		}
	})
}
