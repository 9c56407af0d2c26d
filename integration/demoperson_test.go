package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/console"
	"github.com/idemgate/idemgate/examples/agentloop/demo"
	"github.com/idemgate/idemgate/store"
)

// Issue 22's done-when: with the operator's page up (the demo's --console), the
// demo's blocked e-mail waits for a person, who finds it on the page alone and
// settles it there; the job goes on by itself and the e-mail went out once.
func TestDemoEmailSettledFromThePage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out strings.Builder
	sw := &syncWriter{w: &out}
	d, err := demo.Setup(ctx, demo.Config{
		TemporalAddress: server.GetFrontendHostPort(),
		Namespace:       server.GetDefaultNamespace(),
		Store:           filepath.Join(t.TempDir(), "idemgate.db"),
		Out:             sw,
		PersonSettles:   true,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	h, err := console.Handler(d.Store, console.Options{})
	if err != nil {
		t.Fatal(err)
	}
	page := httptest.NewServer(h)
	defer page.Close()

	person := make(chan error, 1)
	go func() {
		// The person reads the demo's line saying a write waits for them, then goes
		// to the page.
		for !sw.contains("waiting for you: the e-mail") {
			select {
			case <-ctx.Done():
				person <- ctx.Err()
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
		person <- settleFromThePage(ctx, page.URL)
	}()
	c, err := d.PersonSettles(ctx)
	if err != nil || !c.OK {
		t.Fatalf("scenario 8 with a person at the page: %v %v", err, c.Notes)
	}
	if err := <-person; err != nil {
		t.Fatal(err)
	}
	if n := d.World.Email.Total(); n != 1 {
		t.Fatalf("email: %d messages, want 1", n)
	}
	rs, err := d.Store.Receipts(ctx, store.ReceiptFilter{WorkflowID: c.Jobs[0], Activity: "SendEmail", Decision: store.DecisionResolved})
	if err != nil || len(rs) != 1 || rs[0].Resolution != store.ResolvedSent || rs[0].Reason != "in the provider's log" {
		t.Fatalf("resolved receipts %+v, %v; want one, sent, with the page's reason", rs, err)
	}
}

// settleFromThePage is the person: it reloads the page until a blocked SendEmail
// shows, opens the key's page, and settles it as sent with the form found there.
func settleFromThePage(ctx context.Context, base string) error {
	jar, _ := cookiejar.New(nil)
	cl := &http.Client{Jar: jar}
	get := func(path string) (string, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		res, err := cl.Do(req)
		if err != nil {
			return "", err
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		return string(b), err
	}
	keyLink := regexp.MustCompile(`href="(key\?k=[^"]+)"`)
	var keyPath string
	for keyPath == "" {
		body, err := get("/")
		if err != nil {
			return err
		}
		if strings.Contains(body, "SendEmail") {
			if m := keyLink.FindStringSubmatch(body); m != nil {
				keyPath = "/" + strings.ReplaceAll(m[1], "&amp;", "&")
				break
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the blocked e-mail never showed on the page: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	body, err := get(keyPath)
	if err != nil {
		return err
	}
	form := regexp.MustCompile(`(?s)<form method="post" action="settle" id="settle-sent">(.*?)</form>`).FindStringSubmatch(body)
	if form == nil {
		return fmt.Errorf("no settle form on %s:\n%s", keyPath, body)
	}
	vals := url.Values{}
	for _, m := range regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`).FindAllStringSubmatch(form[1], -1) {
		vals.Set(m[1], strings.ReplaceAll(m[2], "&#43;", "+"))
	}
	vals.Set("result", `{"message_id":"msg-from-the-log"}`)
	vals.Set("reason", "in the provider's log")
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/settle", strings.NewReader(vals.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, err := cl.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode >= 300 && res.StatusCode != http.StatusSeeOther {
		return fmt.Errorf("settle: %d\n%s", res.StatusCode, b)
	}
	return nil
}

// syncWriter lets the demo write while the test reads.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (s *syncWriter) contains(sub string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Contains(fmt.Sprint(s.w), sub)
}
