package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/store/sqlite"
)

func runDemo(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "plan.json")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// Bad input: a clear one-line error with the fix, exit code 2, nothing started.
func TestBadInput(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"malformed plan", []string{"--plan", writeFile(t, `{"steps": [`)}, "is not a plan"},
		{"missing plan", []string{"--plan", filepath.Join(t.TempDir(), "nope.json")}, "no such file"},
		{"unknown tool", []string{"--plan", writeFile(t, `{"steps":[{"tool":"DropDatabase","args":{}}]}`)}, `step 1: unknown tool "DropDatabase": use one of SearchDocs`},
		{"args that do not fit", []string{"--plan", writeFile(t, `{"steps":[{"tool":"ChargeCard","args":{"customer":"cus_1","amount":-5,"currency":"eur"}}]}`)},
			"amount must be a positive number of cents"},
		{"unknown field", []string{"--plan", writeFile(t, `{"steps":[{"tool":"SearchDocs","args":{"q":"x"}}]}`)}, `unknown field "q"`},
		{"unwritable store", []string{"--store", "/proc/idemgate/none/demo.db"}, "pick a writable path with --store"},
		{"unreachable Temporal", []string{"--temporal-address", "127.0.0.1:1", "--store", filepath.Join(t.TempDir(), "s.db")}, "cannot reach Temporal at 127.0.0.1:1"},
		{"model without a name", []string{"--llm-base-url", "http://127.0.0.1:1/v1"}, "--llm-base-url needs --llm-model"},
		{"stray argument", []string{"now"}, `unexpected argument "now"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, stderr := runDemo(t, c.args...)
			if code != 2 {
				t.Fatalf("exit code %d, want 2 (stderr %q)", code, stderr)
			}
			if !strings.Contains(stderr, c.want) || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
				t.Fatalf("stderr %q: want one line containing %q", stderr, c.want)
			}
		})
	}
}

// A model planner that names a tool that does not exist stops the job with a clear
// error; no tool runs.
func TestModelPlannerUnknownTool(t *testing.T) {
	chat := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer sk-test" {
			http.Error(w, "wrong request "+r.URL.Path, 400)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1796000000,"model":"m","choices":[{"index":0,` +
			`"message":{"role":"assistant","content":null,"refusal":null,"tool_calls":[{"id":"call_1","type":"function",` +
			`"function":{"name":"DropDatabase","arguments":"{}"}}]},"logprobs":null,"finish_reason":"tool_calls"}]}`))
	}))
	defer chat.Close()
	code, _, stderr := runDemo(t, "--llm-base-url", chat.URL+"/v1", "--llm-model", "m", "--llm-api-key-file", writeFile(t, "sk-test\n"),
		"--store", filepath.Join(t.TempDir(), "s.db"))
	if code != 2 || !strings.Contains(stderr, `unknown tool "DropDatabase"`) {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}

// The model's API key is never taken on the command line: the flag is refused,
// without echoing the key, before anything starts.
func TestAPIKeyFlagRefused(t *testing.T) {
	for _, args := range [][]string{{"--llm-api-key", "sk-Zq7secret"}, {"--llm-api-key=sk-Zq7secret"}} {
		code, stdout, stderr := runDemo(t, append([]string{"--llm-base-url", "http://127.0.0.1:1/v1", "--llm-model", "m"}, args...)...)
		if code != 2 || strings.Contains(stdout+stderr, "Zq7secret") || !strings.Contains(stderr, "OPENAI_API_KEY") ||
			!strings.Contains(stderr, "--llm-api-key-file FILE") {
			t.Fatalf("%q: exit %d, stderr %q", args, code, stderr)
		}
	}
}

// An API key file that cannot be read stops the demo with an error naming the file.
func TestAPIKeyFileUnreadable(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-key")
	code, _, stderr := runDemo(t, "--llm-base-url", "http://127.0.0.1:1/v1", "--llm-model", "m", "--llm-api-key-file", missing)
	if code != 2 || !strings.Contains(stderr, "--llm-api-key-file") || !strings.Contains(stderr, missing) {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}

// The demo's default output tells each scenario on a short screen and ends with a
// summary table, all on one screen: no per-decision lines, no receipt table, no
// alarming word for a correct outcome.
func TestDemoDefaultOutputFitsOneScreen(t *testing.T) {
	code, stdout, stderr := runDemo(t, "--store", filepath.Join(t.TempDir(), "s.db"))
	if code != 0 {
		t.Fatalf("exit %d, stderr %q\n%s", code, stderr, stdout)
	}
	lines := strings.Split(strings.TrimRight(stdout, "\n"), "\n")
	if len(lines) > 60 {
		t.Errorf("the default output is %d lines, want at most 60:\n%s", len(lines), stdout)
	}
	for _, bad := range []string{"    gate: ", "DUPLICATED", "Receipts (", "FAIL"} {
		if strings.Contains(stdout, bad) {
			t.Errorf("the default output contains %q:\n%s", bad, stdout)
		}
	}
	for _, want := range []string{
		// Each scenario's screen: what would happen without the gate, and the counts.
		"without idemgate: Temporal retries ChargeCard and the card is charged a second time",
		"ok   card charged 1 time (want 1)",
		// An idempotent re-run with one key reads as correct.
		"it re-ran with the same key; the CRM kept one contact",
		"ok   e-mails sent 1 (want 1)",
		// The summary table.
		"2 worker died after a charge     2 charges               1 charge (the processor's lookup)",
		"7 worker died after an MCP tool  2 gift cards            1 gift card (the shop's Dedup)",
		"Every count is as expected",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the default output lacks %q:\n%s", want, stdout)
		}
	}
	if n := strings.Count(stdout, "\n   ok   "); n != 8 {
		t.Errorf("%d scenario screens end with their counts ok, want 8:\n%s", n, stdout)
	}
	// The vendor's own dedup answering the re-send says so on its own line.
	if !regexp.MustCompile(`(?m)^\s+the shop answered the re-send from its own store \("gift card gc_\d+ issued"\): no new card$`).MatchString(stdout) {
		t.Errorf("no line says the shop answered the re-send from its store:\n%s", stdout)
	}
	if last := lines[len(lines)-1]; !strings.Contains(last, "-v") || !strings.Contains(last, "receipts --store ") {
		t.Errorf("the last line %q does not say where to look further (-v, idemgate receipts --store)", last)
	}
	if header := regexp.MustCompile(`(?m)^SCENARIO\s+WITHOUT IDEMGATE\s+WITH IDEMGATE$`); !header.MatchString(stdout) {
		t.Errorf("no summary table header:\n%s", stdout)
	}
	// The README quotes the summary: it must be what the demo prints.
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	quote := regexp.MustCompile("(?s)the run ends with[^\n]*:\n\n```\n(SCENARIO.*?)```").FindSubmatch(readme)
	if quote == nil {
		t.Fatal("README.md does not quote the demo's summary after \"the run ends with …:\"")
	}
	if !strings.Contains(stdout, string(quote[1])) {
		t.Errorf("README.md quotes a summary the demo does not print:\n%s\nthe demo printed:\n%s", quote[1], stdout)
	}
}

// -v adds a line per gate decision, the receipts and the vendors' tallies; a write
// that ran on a later attempt says why (a re-send the vendor deduplicates, a re-run
// of an idempotent write with its key), never reading as a second send.
func TestDemoVerboseExplainsEveryLaterAttempt(t *testing.T) {
	code, stdout, stderr := runDemo(t, "-v", "--store", filepath.Join(t.TempDir(), "s.db"))
	if code != 0 {
		t.Fatalf("exit %d, stderr %q\n%s", code, stderr, stdout)
	}
	for _, want := range []string{"gate: ran ", "Receipts (append-only, from the store):", "Vendor side effects",
		"grace@example.com (an upsert re-run with its key: one record)", "SCENARIO"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the -v output lacks %q", want)
		}
	}
	if strings.Contains(stdout, "DUPLICATED") || strings.Contains(stdout, "DOUBLED") {
		t.Errorf("the -v output calls a correct outcome a duplicate:\n%s", stdout)
	}
	lines := strings.Split(stdout, "\n")
	later := regexp.MustCompile(`gate: (ran|replayed)\s+\S+\s+(destructive|idempotent-write)\s+attempt ([2-9]|\d\d)`)
	seen := map[string]bool{}
	for i, l := range lines {
		m := later.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		seen[m[1]+" "+m[2]] = true
		if i+1 == len(lines) || !strings.HasPrefix(lines[i+1], "          ") ||
			!regexp.MustCompile(`same key|settled the key as sent`).MatchString(lines[i+1]) {
			t.Errorf("%q is not followed by why it ran again (next line %q)", l, lines[min(i+1, len(lines)-1)])
		}
	}
	for _, want := range []string{"ran destructive", "ran idempotent-write", "replayed destructive"} {
		if !seen[want] {
			t.Errorf("no later attempt %s in the -v output", want)
		}
	}
	rows := regexp.MustCompile(`(?m)^.*mcp\.shop\.gift_card\s+destructive\s+2\s+ran.*$`).FindAllString(stdout, -1)
	if len(rows) != 1 || !strings.Contains(rows[0], "the re-send, same key: witness:vendor-dedup answers from its own store") {
		t.Errorf("the receipt of the gift card's re-send does not say the vendor answered it: %q", rows)
	}
}

// --console serves the operator's page on the demo's store and prints its address.
func TestConsoleFlagServesThePage(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "demo.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var out bytes.Buffer
	stop, err := serveConsole(st, &out)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	addr := regexp.MustCompile(`http://127\.0\.0\.1:\d+/`).FindString(out.String())
	if addr == "" || strings.Count(out.String(), "\n") != 1 {
		t.Fatalf("want one line with the address, got %q", out.String())
	}
	res, err := http.Get(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 || !strings.Contains(string(body), "Writes waiting on a person") {
		t.Fatalf("GET %s: %d\n%s", addr, res.StatusCode, body)
	}
}
