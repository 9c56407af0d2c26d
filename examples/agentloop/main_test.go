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
		_, _ = w.Write([]byte(`{"choices":[{"message":{"tool_calls":[{"function":{"name":"DropDatabase","arguments":"{}"}}]}}]}`))
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
