package secrets_test

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/internal/secrets"
)

const pw = "Zq7-PW"

// TestRedactEveryForm: one redaction for store DSNs, MCP URLs and text that
// embeds them; the secret is gone, the rest stays readable.
func TestRedactEveryForm(t *testing.T) {
	cases := []struct{ in, want string }{
		{"postgres://app:" + pw + "@db/x", "postgres://app:xxxxx@db/x"},
		{"postgres://app@db/x?password=" + pw, "postgres://app@db/x?password=xxxxx"},
		{"postgres://app@db/x?sslmode=require&password=" + pw + "&x=1", "postgres://app@db/x?sslmode=require&password=xxxxx&x=1"},
		{"host=db user=app password='p w " + pw + "' dbname=x", "host=db user=app password=xxxxx dbname=x"},
		{"host=db user=app password=" + pw, "host=db user=app password=xxxxx"},
		{"http://u:" + pw + "@mcp.internal:8080/mcp", "http://u:xxxxx@mcp.internal:8080/mcp"},
		{"https://mcp.example.com/mcp?access_token=" + pw, "https://mcp.example.com/mcp?access_token=xxxxx"},
		{"https://mcp.example.com/mcp?token=" + pw + "&tenant=acme", "https://mcp.example.com/mcp?token=xxxxx&tenant=acme"},
		{"https://mcp.example.com/mcp?api_key=" + pw, "https://mcp.example.com/mcp?api_key=xxxxx"},
		{"https://mcp.example.com/mcp?apiKey=" + pw, "https://mcp.example.com/mcp?apiKey=xxxxx"},
		{"https://mcp.example.com/mcp?X-Amz-Signature=" + pw, "https://mcp.example.com/mcp?X-Amz-Signature=xxxxx"},
		{"https://maps.example.com/api?key=" + pw + "&q=x", "https://maps.example.com/api?key=xxxxx&q=x"},
		{"https://mcp.example.com/cb#access_token=" + pw + "&state=s", "https://mcp.example.com/cb#access_token=xxxxx&state=s"},
		// Text: an error that quotes the URL, a flag value, a DSN in a sentence.
		{`Post "https://mcp.example.com/mcp?token=` + pw + `": dial tcp: connection refused`,
			`Post "https://mcp.example.com/mcp?token=xxxxx": dial tcp: connection refused`},
		{"--mcp crm=http://u:" + pw + "@h/mcp: unreachable", "--mcp crm=http://u:xxxxx@h/mcp: unreachable"},
		{"store host=db api_key=" + pw + " failed", "store host=db api_key=xxxxx failed"},
		// Nothing secret: unchanged.
		{"postgres://app@db/x?sslmode=disable", "postgres://app@db/x?sslmode=disable"},
		{"http://127.0.0.1:8080/mcp", "http://127.0.0.1:8080/mcp"},
		{"sqlite idemgate.db", "sqlite idemgate.db"},
		{"", ""},
	}
	for _, c := range cases {
		if got := secrets.Redact(c.in); got != c.want {
			t.Errorf("Redact(%q)\n = %q\nwant %q", c.in, got, c.want)
		}
	}
}

// TestScrubErrorsOfNetURLAndNetHTTP: errors from net/url and net/http embed the
// URL (escaped, or with the query that holds a token); ScrubError hides it and
// still unwraps.
func TestScrubErrorsOfNetURLAndNetHTTP(t *testing.T) {
	for _, target := range []string{
		"http://u:" + pw + "@127.0.0.1:1/mcp",
		"http://127.0.0.1:1/mcp?access_token=" + pw,
		"http://u:" + url.QueryEscape(pw+"/@") + "@127.0.0.1:1/mcp",
		"http://u:" + pw + "@127.0.0.1:1/%zz", // does not parse: the parse error quotes it
	} {
		_, err := http.Get(target)
		if err == nil {
			t.Fatalf("GET %s succeeded", target)
		}
		got := secrets.ScrubError(err, target)
		if strings.Contains(got.Error(), pw) || strings.Contains(got.Error(), url.QueryEscape(pw)) {
			t.Errorf("ScrubError(%q) = %q: the secret is still there", err, got)
		}
		if !errors.Is(got, err) {
			t.Errorf("ScrubError does not unwrap to the cause")
		}
	}
	if secrets.ScrubError(nil) != nil {
		t.Error("ScrubError(nil) is not nil")
	}
}
