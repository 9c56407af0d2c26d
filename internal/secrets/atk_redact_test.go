package secrets_test

import (
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/secrets"
)

// TestRedactMoreForms: forms of a password or token that Redact printed as they
// were. Each case names where such text comes from.
func TestRedactMoreForms(t *testing.T) {
	const s = "S3cr3tV4lue"
	for _, c := range []struct{ why, in string }{
		{"logfmt (slog's text handler) quotes a value with a space", `msg=open password="two ` + s + `"`},
		{"a form body or query string inside text", `body a=b&password=` + s},
		{"a query string inside text, secret first after another pair", `query: tenant=acme&access_token=` + s + ` failed`},
		{"pass as a parameter name", "https://h/mcp?pass=" + s},
		{"passphrase as a parameter name", "https://h/mcp?passphrase=" + s},
		{"an API key as the user name with an empty password (Stripe's basic auth)", "https://sk_live_" + s + ":@api.stripe.com/v1"},
		{"a token as the user name of an HTTPS URL (GitHub's https://TOKEN@github.com)", "https://ghp_" + s + "@github.com/o/r.git"},
		{"a token as the user name of an MCP URL inside text", `Post "https://ghp_` + s + `@mcp.example.com/mcp": refused`},
		{"a JSON-encoded URL: encoding/json writes & as \\u0026", `{"url":"https://h/mcp?a=1\u0026access_token=` + s + `"}`},
		{"an Authorization header quoted in an error", "request failed: Authorization: Bearer " + s},
		{"a stdio MCP command with a --api-key flag", "crm=npx crm-server --api-key " + s},
		{"a stdio MCP command with a --token flag", "crm=crm-server --token " + s + " --port 9"},
		{"a raw '#' in a password that begins with digits", "postgres://app:12#" + s + "@db/x"},
		{"a raw '?' in a password that begins with digits", "postgres://app:12?" + s + "@db/x"},
		{"a raw '/' in a password that begins with digits, inside text", "open store postgres://app:12/" + s + "@db/x: refused"},
		{"a URL as the value of a lone key=value pair (--mcp NAME=URL)", "crm=http://u:" + s + "@h/mcp"},
		{"a quoted URL as the value of a lone key=value pair", `server="https://h/mcp?access_token=` + s + `"`},
		{"a raw space in a PostgreSQL password (storeopen prints the spec)", "postgres://app:p w " + s + "@db/x"},
		{"JSON with a secret field", `config {"password":"` + s + `","host":"db"}`},
	} {
		if got := secrets.Redact(c.in); strings.Contains(got, s) {
			t.Errorf("%s:\nRedact(%q)\n = %q: the secret is still there", c.why, c.in, got)
		}
	}
	// What is not secret stays readable.
	for _, in := range []string{
		"postgres://app@db/x?sslmode=disable",
		"https://github.com/o/r.git",
		"https://mastodon.example/@ada",
		"https://h:8443/users/@ada",
		"--port 9 --verbose",
		`{"host":"db","port":5432}`,
		"a=b&c=d",
		"see https://h/mcp?a=1&b=2 for details",
	} {
		if got := secrets.Redact(in); got != in {
			t.Errorf("Redact(%q) = %q, want it unchanged", in, got)
		}
	}
}

// TestRedactLongTextIsFast: Redact runs on every line the worker logs; a long
// query string or a=a=a=… must not take time quadratic in its length (80 kB took
// minutes while pairs inside a value were redacted by recursion).
func TestRedactLongTextIsFast(t *testing.T) {
	for _, s := range []string{
		strings.Repeat("a=", 40000),
		strings.Repeat("a=b&", 20000),
		strings.Repeat("a=a=http://", 7000),
		strings.Repeat("--token a1 ", 8000),
		strings.Repeat(`"k":"v",`, 10000),
	} {
		start := time.Now()
		secrets.Redact(s)
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("Redact of %d bytes (%.12q…) took %v", len(s), s, d)
		}
	}
}
