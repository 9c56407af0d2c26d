package secrets

import (
	"strings"
	"testing"
)

// TestRedactURLInAPair: text that is all key=value pairs (a worker's --mcp value
// NAME=URL, a slog text line) was read as a libpq DSN and only secret-named keys
// were hidden: a URL under another key kept its password and its ?access_token.
func TestRedactURLInAPair(t *testing.T) {
	const pw = "Zq7-PAIRPW"
	for _, s := range []string{
		"crm=http://u:" + pw + "@host/mcp",
		"crm=https://host/mcp?access_token=" + pw,
		`level=WARN msg=dial server=crm url=http://u:` + pw + `@host/mcp`,
		`url='http://host/mcp?token=` + pw + `'`,
	} {
		if got := Redact(s); strings.Contains(got, pw) {
			t.Errorf("Redact(%q) = %q: the secret is shown", s, got)
		}
	}
	// A DSN stays as it was, its password hidden.
	if got := Redact("host=db user=app password=" + pw + " dbname=x"); got != "host=db user=app password=xxxxx dbname=x" {
		t.Errorf("DSN: %q", got)
	}
}
