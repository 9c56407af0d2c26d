package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"go.temporal.io/sdk/client"
	"go.temporal.io/server/temporaltest"

	"github.com/idemgate/idemgate/activities"
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
			"--payments-url", world.Payments.URL, "--email-url", world.Email.URL, "--chat-url", world.Chat.URL}, &out, &out)
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
