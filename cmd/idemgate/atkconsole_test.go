package main

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// A token from $IDEMGATE_CONSOLE_TOKEN set from a file with its newline
// (`export IDEMGATE_CONSOLE_TOKEN="$(cat f; echo)"`, a Kubernetes secret with a
// newline) must still be the token a person types into the sign-in form, as with
// --token-file.
func TestAtkConsoleEnvTokenWithANewlineStillSignsIn(t *testing.T) {
	path := t.TempDir() + "/idemgate.db"
	openStore(t, backend{"sqlite", path})
	secret := "env-token-0123456789abcdef"
	base, stderr := startConsole(t, map[string]string{"IDEMGATE_CONSOLE_TOKEN": secret + "\n"}, "--store", path, "--listen", "127.0.0.1:0")
	c := browser()
	_, login := fetch(t, c, "GET", base+"/login", nil)
	m := consoleCSRF.FindStringSubmatch(login)
	if m == nil {
		t.Fatalf("no sign-in form:\n%s", login)
	}
	code, body := fetch(t, c, "POST", base+"/login", url.Values{"csrf": {m[1]}, "token": {secret}})
	if code != http.StatusSeeOther {
		t.Fatalf("sign in with the token typed: %d\n%s", code, body)
	}
	if code, _ := fetch(t, c, "GET", base+"/", nil); code != http.StatusOK {
		t.Fatalf("GET / after signing in: %d", code)
	}
	if strings.Contains(stderr.String(), secret) {
		t.Errorf("the log shows the token:\n%s", stderr)
	}
}

// `idemgate pause --activity ChargeCrad` (a typo of ChargeCard, which the
// receipts name) says that no receipt names it, with the close name; a pause of
// ChargeCard says nothing of the kind.
func TestAtkConsoleCLIPauseOfAnUnnamedActivitySaysSo(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		st := openStore(t, b)
		now := time.Now()
		seed(t, st, "k-typo", "wf-typo", now.Add(-time.Hour), now.Add(-50*time.Minute), "abandon")
		r := ok(t, "pause", "--store", b.spec, "--activity", "ChargeCrad", "--reason", "incident")
		if !strings.Contains(r.stderr, "no receipt names the activity ChargeCrad") || !strings.Contains(r.stderr, "ChargeCard") {
			t.Errorf("pause of a misspelt activity: %s", r)
		}
		if r := ok(t, "pause", "--store", b.spec, "--activity", "ChargeCard", "--reason", "incident"); strings.Contains(r.stderr, "no receipt") {
			t.Errorf("pause of ChargeCard: %s", r)
		}
	})
}
