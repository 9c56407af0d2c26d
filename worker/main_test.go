package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.temporal.io/sdk/client"
	"go.temporal.io/server/temporaltest"

	"github.com/idemgate/idemgate/activities"
	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/internal/storeopen"
	"github.com/idemgate/idemgate/internal/testutil/pgtest"
	"github.com/idemgate/idemgate/mcptools"
	"github.com/idemgate/idemgate/vendorsim"
	"github.com/idemgate/idemgate/workflows"
)

func TestBadInput(t *testing.T) {
	urls := []string{"--docs-url", "http://127.0.0.1:9/d", "--crm-url", "http://127.0.0.1:9/c", "--tickets-url", "http://127.0.0.1:9/t",
		"--payments-url", "http://127.0.0.1:9/p", "--email-url", "http://127.0.0.1:9/e", "--chat-url", "http://127.0.0.1:9/s"}
	dir := t.TempDir()
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no vendor URLs", nil, "--docs-url is required (or IDEMGATE_DOCS_URL)"},
		{"bad vendor URL", append(append([]string{}, urls[:10]...), "--chat-url", "not a url"), `the chat endpoint "not a url" is not a URL`},
		{"unwritable store", append([]string{"--store", "/proc/idemgate/x.db"}, urls...), "pick a writable path with --store"},
		{"unreachable Temporal", append([]string{"--store", filepath.Join(dir, "w.db"), "--temporal-address", "127.0.0.1:1"}, urls...),
			"cannot reach Temporal at 127.0.0.1:1"},
		{"unknown flag", []string{"--frobnicate"}, "flag provided but not defined: -frobnicate"},
		{"unknown exporter", append([]string{"--observe", "jaeger"}, urls...), `--observe "jaeger": the only exporter is stdout`},
		{"MCP server without a name", append([]string{"--mcp", "http://127.0.0.1:1/mcp"}, urls...),
			`invalid value "http://127.0.0.1:1/mcp" for flag -mcp: want NAME=URL or 'NAME=COMMAND ARGS'`},
		{"MCP server without a target", append([]string{"--mcp", "crm="}, urls...), `invalid value "crm=" for flag -mcp: want NAME=URL`},
		{"MCP server name twice", append([]string{"--mcp", "crm=http://127.0.0.1:1/a", "--mcp", "crm=http://127.0.0.1:1/b"}, urls...),
			`the server name "crm" is given twice`},
		{"dedup window for no server", append([]string{"--mcp", "crm=http://127.0.0.1:1/a", "--mcp-dedup", "shop=24h"}, urls...),
			"--mcp-dedup shop=24h0m0s: no --mcp shop=URL is given"},
		{"dedup window not a duration", append([]string{"--mcp-dedup", "shop=a day"}, urls...),
			`invalid value "shop=a day" for flag -mcp-dedup: want NAME=DURATION`},
		{"dedup window not positive", append([]string{"--mcp-dedup", "shop=0s"}, urls...),
			`invalid value "shop=0s" for flag -mcp-dedup: want NAME=DURATION`},
		{"MCP server name not an activity name", append([]string{"--store", filepath.Join(dir, "n.db"), "--mcp", "my crm=http://127.0.0.1:1/mcp"}, urls...),
			`--mcp my crm=http://127.0.0.1:1/mcp: idemgate/mcptools: server name "my crm" has ' '`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(context.Background(), c.args, &out, &errOut)
			if code != 2 || !strings.Contains(errOut.String(), c.want) {
				t.Fatalf("exit %d, stderr %q; want 2 and %q", code, errOut.String(), c.want)
			}
		})
	}
}

// The worker runs a job on a real server, prints its census, and stops on signal.
func TestWorkerRunsAJob(t *testing.T) {
	srv := temporaltest.NewServer(temporaltest.WithT(t))
	world, err := vendorsim.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer world.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"--temporal-address", srv.GetFrontendHostPort(), "--namespace", srv.GetDefaultNamespace(),
			"--task-queue", "agent-test", "--store", filepath.Join(t.TempDir(), "w.db"),
			"--docs-url", world.Docs.URL, "--crm-url", world.CRM.URL, "--tickets-url", world.Tickets.URL,
			"--payments-url", world.Payments.URL, "--email-url", world.Email.URL, "--chat-url", world.Chat.URL,
			"--observe", "stdout"}, &out, &out)
	}()
	script := activities.Support
	job, err := srv.GetDefaultClient().ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: "agent-test"},
		workflows.AgentLoop, workflows.AgentInput{Script: &script})
	if err != nil {
		t.Fatal(err)
	}
	var res workflows.AgentResult
	if err := job.Get(ctx, &res); err != nil || res.Stopped != "done" || len(res.Steps) != 7 {
		t.Fatalf("job: %v, %+v", err, res)
	}
	if world.Payments.Total() != 1 || world.Email.Total() != 1 {
		t.Fatalf("payments %d email %d", world.Payments.Total(), world.Email.Total())
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("worker exited %d: %s", code, out.String())
	}
	if !strings.Contains(out.String(), "effects: read=3 idempotent-write=2 destructive=3") {
		t.Fatalf("no census in %q", out.String())
	}
	// --observe stdout: one JSON line per decision, keyed like the span attributes.
	decided := map[string]map[string]any{}
	for _, line := range strings.Split(out.String(), "\n") {
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var d map[string]any
		if err := json.Unmarshal([]byte(line), &d); err != nil {
			t.Fatalf("observe line %q: %v", line, err)
		}
		decided[d["activity"].(string)] = d
	}
	c := decided["ChargeCard"]
	if c == nil || c[interceptor.AttrDecision] != "ran" || c[interceptor.AttrEffect] != "destructive" ||
		c[interceptor.AttrAttempt] != float64(1) || c[interceptor.AttrKey] == "" || c["metric"] != interceptor.MetricDecisions {
		t.Fatalf("ChargeCard's decision line: %v (all: %v)", c, decided)
	}
	for _, name := range activities.Names() {
		if decided[name] == nil {
			t.Errorf("no decision line for %s", name)
		}
	}
}

// --mcp-dedup is the operator's word that a server runs Dedup; it must rest on the
// server's announcement. Against a server without Dedup (it would have re-sent an
// unknown outcome that then ran again), or with a shorter window, the worker stops at
// start, naming the server and both windows, before the store is opened. A server
// that announces Dedup without --mcp-dedup is reported, and changes nothing.
func TestMCPDedupRestsOnTheServer(t *testing.T) {
	serve := func(dedup *mcptools.Dedup) string {
		srv := mcp.NewServer(&mcp.Implementation{Name: "shop", Version: "v1"}, nil)
		if dedup != nil {
			srv.AddReceivingMiddleware(dedup.Middleware)
		}
		srv.AddTool(&mcp.Tool{Name: "refund_payment", InputSchema: &jsonschema.Schema{Type: "object"}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				t.Error("a tool ran")
				return &mcp.CallToolResult{}, nil
			})
		hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
		t.Cleanup(hs.Close)
		return hs.URL
	}
	cases := []struct {
		name  string
		dedup *mcptools.Dedup
		flag  []string
		want  []string
	}{
		{"no Dedup", nil, []string{"--mcp-dedup", "shop=24h"},
			[]string{"server shop: DedupWindow is 24h0m0s, but the server does not announce Dedup", "Next step", "the worker did not start"}},
		{"shorter window", mcptools.NewDedup(time.Hour), []string{"--mcp-dedup", "shop=24h"},
			[]string{"server shop: DedupWindow is 24h0m0s, longer than the 1h0m0s its Dedup announces", "Next step", "the worker did not start"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := filepath.Join(t.TempDir(), "w.db")
			var out, errOut bytes.Buffer
			code := run(context.Background(), append(append([]string{"--store", st, "--temporal-address", "127.0.0.1:1",
				"--mcp", "shop=" + serve(c.dedup)}, c.flag...), vendorURLs...), &out, &errOut)
			for _, want := range c.want {
				if code != 2 || !strings.Contains(errOut.String(), want) {
					t.Errorf("exit %d, stderr %q: want 2 and %q", code, errOut.String(), want)
				}
			}
			if _, err := os.Stat(st); !os.IsNotExist(err) {
				t.Errorf("the store was created (%v): the worker must stop before anything starts", err)
			}
		})
	}
	t.Run("offered, not used", func(t *testing.T) {
		var out, errOut bytes.Buffer
		code := run(context.Background(), append([]string{"--store", filepath.Join(t.TempDir(), "w.db"), "--temporal-address",
			"127.0.0.1:1", "--mcp", "shop=" + serve(mcptools.NewDedup(time.Hour))}, vendorURLs...), &out, &errOut)
		want := "mcp: shop: the server announces Dedup for 1h0m0s; without --mcp-dedup shop=1h0m0s an unknown outcome"
		if code != 2 || !strings.Contains(out.String(), want) || !strings.Contains(errOut.String(), "cannot reach Temporal") {
			t.Errorf("exit %d, stdout %q, stderr %q: want %q, then the unreachable Temporal", code, out.String(), errOut.String(), want)
		}
	})
}

// An MCP server that cannot be reached stops the worker at start, naming the server,
// before the store is opened or Temporal dialled: nothing starts.
func TestUnreachableMCPServer(t *testing.T) {
	for _, target := range []string{"http://127.0.0.1:1/mcp", filepath.Join(t.TempDir(), "no-such-server") + " --stdio"} {
		t.Run(target, func(t *testing.T) {
			st := filepath.Join(t.TempDir(), "w.db")
			var out, errOut bytes.Buffer
			code := run(context.Background(), append([]string{"--store", st, "--temporal-address", "127.0.0.1:1",
				"--mcp", "crm=" + target}, vendorURLs...), &out, &errOut)
			if code != 2 || !strings.Contains(errOut.String(), "--mcp crm="+target) ||
				!strings.Contains(errOut.String(), "server crm cannot be reached") ||
				!strings.Contains(errOut.String(), "the worker did not start") {
				t.Fatalf("exit %d, stderr %q: want 2 and an error naming server crm", code, errOut.String())
			}
			if _, err := os.Stat(st); !os.IsNotExist(err) {
				t.Fatalf("the store was created (%v): the worker must stop before anything starts", err)
			}
		})
	}
}

// With --mcp the worker registers an MCP server's tools, classed by name and
// annotations, and the planner accepts them next to the built-in tools: a job calls
// one, with the key in _meta; a call whose arguments miss the tool's schema is
// refused by the planner before anything is sent.
func TestWorkerWithMCPServer(t *testing.T) {
	var mu sync.Mutex
	var keys []string
	srv := mcp.NewServer(&mcp.Implementation{Name: "shop", Version: "v1"}, nil)
	srv.AddReceivingMiddleware(mcptools.NewDedup(24 * time.Hour).Middleware) // --mcp-dedup shop=24h rests on it
	srv.AddTool(&mcp.Tool{Name: "stock_level", Description: "Units in stock for a SKU.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
		InputSchema: &jsonschema.Schema{Type: "object", Required: []string{"sku"}, Properties: map[string]*jsonschema.Schema{"sku": {Type: "string"}}}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			mu.Lock()
			k, _ := req.Params.Meta[mcptools.MetaKey].(string)
			keys = append(keys, k)
			mu.Unlock()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "7 in stock"}}}, nil
		})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	defer hs.Close()

	tsrv := temporaltest.NewServer(temporaltest.WithT(t))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"--temporal-address", tsrv.GetFrontendHostPort(), "--namespace", tsrv.GetDefaultNamespace(),
			"--task-queue", "agent-mcp", "--store", filepath.Join(t.TempDir(), "w.db"), "--mcp", "shop=" + hs.URL,
			"--mcp-dedup", "shop=24h"}, vendorURLs...), &out, &out)
	}()
	job := func(args string) workflows.AgentResult {
		t.Helper()
		script := activities.Script{Goal: "stock", Steps: []activities.Step{{Tool: "mcp.shop.stock_level", Args: json.RawMessage(args)}}}
		run, err := tsrv.GetDefaultClient().ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: "agent-mcp"},
			workflows.AgentLoop, workflows.AgentInput{Script: &script})
		if err != nil {
			t.Fatal(err)
		}
		var res workflows.AgentResult
		if err := run.Get(ctx, &res); err != nil && !strings.Contains(err.Error(), activities.ErrTypePlanInvalid) {
			t.Fatal(err)
		} else if err != nil {
			res.Stopped = err.Error()
		}
		return res
	}
	res := job(`{"sku":"SKU-1"}`)
	if res.Stopped != "done" || len(res.Steps) != 1 || res.Steps[0].Error != "" || !strings.Contains(string(res.Steps[0].Result), "7 in stock") {
		t.Fatalf("job: %+v", res)
	}
	res = job(`{"sku":42}`)
	if !strings.Contains(res.Stopped, "mcp.shop.stock_level") || !strings.Contains(res.Stopped, "sku") {
		t.Fatalf("a call against the tool's schema: want the planner to refuse it naming the field, got %q", res.Stopped)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("worker exited %d: %s", code, out.String())
	}
	mu.Lock()
	defer mu.Unlock()
	// stock_level is a read: it sends no key, so the server's Dedup never answers it
	// from its store (a write's key in _meta: mcptools' TestKeyTravelsInMeta).
	if len(keys) != 1 || keys[0] != "" {
		t.Fatalf("the server saw keys %q: want one call, without a key (a read)", keys)
	}
	for _, want := range []string{"mcp: mcp.shop.stock_level: read — no known verb in the name; the hints of mcp server shop say read",
		"effects: read=4 idempotent-write=2 destructive=3",
		"mcp: mcp.shop.stock_level: the server deduplicates keys for 24h0m0s"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in the worker's output:\n%s", want, out.String())
		}
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var vendorURLs = []string{"--docs-url", "http://127.0.0.1:9/d", "--crm-url", "http://127.0.0.1:9/c", "--tickets-url", "http://127.0.0.1:9/t",
	"--payments-url", "http://127.0.0.1:9/p", "--email-url", "http://127.0.0.1:9/e", "--chat-url", "http://127.0.0.1:9/s"}

// The worker prints its store at start, in -h and in errors: never the password,
// whatever the DSN's form. Checked against a real PostgreSQL with a role that has one.
func TestStartupRedactsStore(t *testing.T) {
	const pw = "Zq7-s3cret-pw"
	dsn := pgtest.DSN(t, "./worker/")
	ctx := context.Background()
	role := "idemgate_pw_" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE ROLE "+role+" LOGIN SUPERUSER PASSWORD '"+pw+"'"); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	t.Cleanup(func() {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Errorf("drop role: %v", err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP ROLE "+role); err != nil {
			t.Errorf("drop role: %v", err)
		}
	})
	u, err := url.Parse(pgtest.Schema(t, dsn, "idemgate_worker")) // dropped before the role
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(role, pw)
	kv := fmt.Sprintf("host=%s port=%s user=%s password=%s dbname=%s sslmode=disable search_path=%s",
		u.Hostname(), u.Port(), role, pw, strings.TrimPrefix(u.Path, "/"), u.Query().Get("search_path"))

	srv := temporaltest.NewServer(temporaltest.WithT(t))
	for _, spec := range []string{u.String(), kv} {
		ctx, cancel := context.WithCancel(context.Background())
		var out syncBuffer
		done := make(chan int, 1)
		go func() {
			done <- run(ctx, append([]string{"--temporal-address", srv.GetFrontendHostPort(), "--namespace", srv.GetDefaultNamespace(),
				"--task-queue", "redact-test", "--store", spec}, vendorURLs...), &out, &out)
		}()
		deadline := time.Now().Add(time.Minute)
		for !strings.Contains(out.String(), "worker: polling") && time.Now().Before(deadline) {
			select {
			case code := <-done:
				t.Fatalf("worker exited %d: %s", code, out.String())
			case <-time.After(50 * time.Millisecond):
			}
		}
		cancel()
		if code := <-done; code != 0 {
			t.Fatalf("worker exited %d: %s", code, out.String())
		}
		if !strings.Contains(out.String(), "worker: polling") || !strings.Contains(out.String(), "xxxxx") ||
			!strings.Contains(out.String(), role) || strings.Contains(out.String(), pw) {
			t.Fatalf("start-up with %s: want the store named with its password redacted:\n%s", storeopen.Redact(spec), out.String())
		}
	}

	// The server is not there: the error names it, not the password.
	bad := *u
	bad.Host = "127.0.0.1:1"
	var out, errOut bytes.Buffer
	if code := run(ctx, append([]string{"--store", bad.String()}, vendorURLs...), &out, &errOut); code != 2 ||
		strings.Contains(errOut.String(), pw) || !strings.Contains(errOut.String(), "127.0.0.1:1") {
		t.Fatalf("exit %d, stderr %q: want 2 and an error without the password", code, errOut.String())
	}
	// -h shows the default from IDEMGATE_STORE, redacted.
	t.Setenv("IDEMGATE_STORE", u.String())
	out.Reset()
	errOut.Reset()
	if code := run(ctx, []string{"-h"}, &out, &errOut); code != 2 || strings.Contains(errOut.String(), pw) ||
		!strings.Contains(errOut.String(), role+":xxxxx@") {
		t.Fatalf("-h: exit %d, %q", code, errOut.String())
	}
}

// The model's API key is never taken on the command line: the flag is refused,
// without echoing the key, before anything starts.
func TestAPIKeyFlagRefused(t *testing.T) {
	for _, args := range [][]string{{"--llm-api-key", "sk-Zq7secret"}, {"-llm-api-key=sk-Zq7secret"}} {
		var out, errOut bytes.Buffer
		code := run(context.Background(), append(append([]string{"--store", filepath.Join(t.TempDir(), "w.db")}, vendorURLs...), args...), &out, &errOut)
		if code != 2 || strings.Contains(errOut.String()+out.String(), "Zq7secret") ||
			!strings.Contains(errOut.String(), "OPENAI_API_KEY") || !strings.Contains(errOut.String(), "--llm-api-key-file FILE") {
			t.Fatalf("%q: exit %d, stderr %q", args, code, errOut.String())
		}
	}
}

// An API key file that cannot be read stops the worker with an error naming the file.
func TestAPIKeyFileUnreadable(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-key")
	var out, errOut bytes.Buffer
	code := run(context.Background(), append([]string{"--store", filepath.Join(t.TempDir(), "w.db"),
		"--llm-base-url", "http://127.0.0.1:9/v1", "--llm-api-key-file", missing}, vendorURLs...), &out, &errOut)
	if code != 2 || !strings.Contains(errOut.String(), "--llm-api-key-file") || !strings.Contains(errOut.String(), missing) {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
}

// TestWorkerNeverPrintsMCPCredentials: an MCP server URL may carry credentials
// (user info, ?access_token=); neither a bad --mcp value nor an unreachable server
// prints them.
func TestWorkerNeverPrintsMCPCredentials(t *testing.T) {
	const pw = "Zq7-PW"
	urls := []string{"--docs-url", "http://127.0.0.1:9/d", "--crm-url", "http://127.0.0.1:9/c", "--tickets-url", "http://127.0.0.1:9/t",
		"--payments-url", "http://127.0.0.1:9/p", "--email-url", "http://127.0.0.1:9/e", "--chat-url", "http://127.0.0.1:9/s"}
	dir := t.TempDir()
	for name, c := range map[string]struct {
		args []string
		want string
	}{
		"unreachable, user info": {[]string{"--store", filepath.Join(dir, "a.db"), "--mcp", "crm=http://u:" + pw + "@127.0.0.1:1/mcp"},
			"--mcp crm=http://u:xxxxx@127.0.0.1:1/mcp: idemgate/mcptools: server crm cannot be reached"},
		"unreachable, token": {[]string{"--store", filepath.Join(dir, "b.db"), "--mcp", "crm=http://127.0.0.1:1/mcp?access_token=" + pw},
			"--mcp crm=http://127.0.0.1:1/mcp?access_token=xxxxx: idemgate/mcptools: server crm cannot be reached"},
		"no name": {[]string{"--mcp", "http://u:" + pw + "@127.0.0.1:1/mcp"},
			`invalid value "http://u:xxxxx@127.0.0.1:1/mcp" for flag -mcp`},
		"vendor URL": {[]string{"--chat-url", "http://u:" + pw + "@h/%zz"}, "the chat endpoint"},
	} {
		t.Run(name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(context.Background(), append(append([]string{}, urls...), c.args...), &out, &errOut)
			all := out.String() + errOut.String()
			if code != 2 || !strings.Contains(errOut.String(), c.want) || strings.Contains(all, pw) {
				t.Fatalf("exit %d, output %q; want 2, %q and no credentials", code, all, c.want)
			}
		})
	}
}
