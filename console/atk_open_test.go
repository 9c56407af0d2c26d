//go:build atkconsole

package console

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/store"
)

// OPEN (atk-console): with a token and an ActorHeader, but not
// AuthenticatedByServer, whoever holds the shared token names any actor in the
// receipt by sending the header: the audit trail says "alice" for a settle alice
// never made. The header can only be trusted when the embedding server sets it
// (AuthenticatedByServer); otherwise it should be ignored or the Handler refused.
func TestAtkConsoleActorHeaderIsTrustedOnlyFromTheServer(t *testing.T) {
	st := sqliteStore(t)
	seedUnknown(t, st, "k1", chargeArgs, "reset")
	tok := "tok-0123456789abcdef"
	s := serve(t, st, Options{Token: []byte(tok), ActorHeader: "X-User"})
	req, _ := http.NewRequest("GET", s.srv.URL+"/pauses", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	_, body, _ := s.do(req)
	m := csrfRE.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no csrf:\n%s", body)
	}
	form := url.Values{"csrf": {m[1]}, "key": {"k1"}, "outcome": {"sent"}, "result": {`"ch_1"`}, "reason": {"r"}, "seen": {ownerDigest("owner-k1")}}
	req, _ = http.NewRequest("POST", s.srv.URL+"/settle", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("X-User", "alice")
	if code, body, _ := s.do(req); code != http.StatusOK {
		t.Fatalf("settle: %d %s", code, body)
	}
	rs, _ := st.Receipts(context.Background(), store.ReceiptFilter{Key: "k1", Decision: store.DecisionResolved})
	if len(rs) != 1 || rs[0].Actor == "alice" {
		t.Errorf("the receipt names the actor the client chose: %+v", rs)
	}
}
