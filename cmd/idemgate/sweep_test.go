package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/idemgate/idemgate/store"
)

// startIdle starts a workflow nobody works on (it stays running) and returns its run ID.
func startIdle(t *testing.T, id string) string {
	t.Helper()
	run, err := server.GetDefaultClient().ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: id,
		TaskQueue: "nobody-polls-" + id}, "Anything")
	if err != nil {
		t.Fatal(err)
	}
	return run.GetRunID()
}

// FINDINGS-atk-gate F4: a namespace that exists but is not the workers' (the
// server's own temporal-system, another environment's) makes every workflow look
// gone. The sweep forgets nothing there: it believes a NotFound only from a
// namespace where Temporal shows a run this store recorded.
func TestSweepAnotherExistingNamespaceForgetsNothingResettable(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		st := openStore(t, b)
		ctx := context.Background()
		old := time.Now().Add(-48 * time.Hour)
		running := fmt.Sprintf("wf-running-ns-%s-%d", b.name, time.Now().UnixNano())
		startIdle(t, running)
		seed(t, st, "key-running-ns-01", running, old, old.Add(time.Minute), "complete")
		r := idem(t, "sweep", "--store", b.spec, "--temporal-address", server.GetFrontendHostPort(),
			"--namespace", "temporal-system", "--json")
		if _, err := st.Get(ctx, "key-running-ns-01"); err != nil {
			t.Fatalf("a sweep asking namespace temporal-system (%s) forgot the finished charge of workflow %s, which "+
				"runs in %s and can be reset: %v", r, running, server.GetDefaultNamespace(), err)
		}
		if r.code == 0 || !strings.Contains(r.stderr, "Nothing held was forgotten") || !strings.Contains(r.stderr, "Next step:") {
			t.Fatalf("a sweep that could not confirm the namespace: %s", r)
		}

		// The same with a record of the real run (the gate records it): Temporal shows
		// it in the workers' namespace, not in temporal-system.
		running2 := fmt.Sprintf("wf-running-ns2-%s-%d", b.name, time.Now().UnixNano())
		seedRun(t, st, "key-running-ns-02", running2, startIdle(t, running2), old, old.Add(time.Minute), "complete")
		seed(t, st, "key-gone-ns-0001", "wf-gone-ns-"+b.name, old, old.Add(time.Minute), "complete")
		if r := idem(t, "sweep", "--store", b.spec, "--temporal-address", server.GetFrontendHostPort(),
			"--namespace", "temporal-system"); r.code == 0 || !strings.Contains(r.stderr, "Nothing held was forgotten") {
			t.Fatalf("a sweep asking temporal-system: %s", r)
		}
		for _, k := range []string{"key-running-ns-01", "key-running-ns-02", "key-gone-ns-0001"} {
			if _, err := st.Get(ctx, k); err != nil {
				t.Fatalf("%s after a sweep asking temporal-system: %v", k, err)
			}
		}
		out := decodeJSON[map[string]any](t, ok(t, "sweep", "--store", b.spec, "--temporal-address", server.GetFrontendHostPort(),
			"--namespace", server.GetDefaultNamespace(), "--json"))
		if out["forgotten"] != float64(1) || out["held"] != float64(2) {
			t.Fatalf("sweep asking the workers' namespace = %v; want the gone workflow's record forgotten, 2 held", out)
		}
		if _, err := st.Get(ctx, "key-gone-ns-0001"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("the gone workflow's record after a sweep asking the workers' namespace: %v", err)
		}
	})
}

// F4's guard also holds when nothing in the store is shown by Temporal: the
// namespace may be right (every workflow past its retention) or wrong, and a
// NotFound cannot tell them apart. Nothing is forgotten; a recent receipt of a run
// Temporal has confirms the namespace.
func TestSweepForgetsNothingWithoutARunTemporalShows(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		st := openStore(t, b)
		ctx := context.Background()
		old := time.Now().Add(-48 * time.Hour)
		seed(t, st, "key-gone-norun-01", "wf-gone-norun-"+b.name, old, old.Add(time.Minute), "complete")
		args := []string{"sweep", "--store", b.spec, "--temporal-address", server.GetFrontendHostPort(), "--namespace", server.GetDefaultNamespace()}
		if r := idem(t, args...); r.code == 0 || !strings.Contains(r.stderr, "Nothing held was forgotten") {
			t.Fatalf("a sweep with no run to confirm the namespace: %s", r)
		}
		if _, err := st.Get(ctx, "key-gone-norun-01"); err != nil {
			t.Fatalf("forgotten without a confirmed namespace: %v", err)
		}
		// A recent receipt of a run the namespace has (a read the workers just ran).
		wf := fmt.Sprintf("wf-recent-%s-%d", b.name, time.Now().UnixNano())
		if err := st.Append(ctx, store.Receipt{Time: time.Now().Add(-time.Minute), Key: "key-recent-read", Activity: "GetBalance",
			Effect: "read", Decision: store.DecisionRan, WorkflowID: wf, RunID: startIdle(t, wf), Attempt: 1}); err != nil {
			t.Fatal(err)
		}
		out := decodeJSON[map[string]any](t, ok(t, append(args, "--json")...))
		if out["forgotten"] != float64(1) {
			t.Fatalf("sweep with a recent run to confirm the namespace = %v; want the record forgotten", out)
		}
	})
}

// FINDINGS-atk-gate F6: with --limit N the sweep must get past N held records of
// workflows that still run, or a cron sweep never reaches the records behind them.
func TestSweepWithLimitReachesPastRunningWorkflows(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		st := openStore(t, b)
		ctx := context.Background()
		old := time.Now().Add(-72 * time.Hour)
		for i := range 3 {
			running := fmt.Sprintf("wf-running-limit-%s-%d-%d", b.name, i, time.Now().UnixNano())
			seedRun(t, st, fmt.Sprintf("key-running-limit-%d", i), running, startIdle(t, running),
				old.Add(time.Duration(i)*time.Minute), old.Add(time.Hour), "complete")
		}
		newer := old.Add(time.Hour)
		for i := range 3 {
			seed(t, st, fmt.Sprintf("key-gone-limit-%03d", i), fmt.Sprintf("wf-gone-limit-%s-%d", b.name, i),
				newer.Add(time.Duration(i)*time.Minute), newer.Add(time.Hour), "complete")
		}
		out := decodeJSON[map[string]any](t, ok(t, "sweep", "--store", b.spec, "--limit", "2", "--temporal-address",
			server.GetFrontendHostPort(), "--namespace", server.GetDefaultNamespace(), "--json"))
		if out["forgotten"] != float64(2) {
			t.Fatalf("a sweep with --limit 2 behind three running workflows = %v; want 2 forgotten", out)
		}
		ok(t, "sweep", "--store", b.spec, "--limit", "2", "--temporal-address", server.GetFrontendHostPort(),
			"--namespace", server.GetDefaultNamespace(), "--json")
		for i := range 3 {
			if _, err := st.Get(ctx, fmt.Sprintf("key-gone-limit-%03d", i)); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("after two sweeps with --limit 2 the record of a workflow Temporal does not have is still kept (%v): "+
					"every sweep asks about the same running workflows", err)
			}
			if _, err := st.Get(ctx, fmt.Sprintf("key-running-limit-%d", i)); err != nil {
				t.Fatalf("a running workflow's record was forgotten: %v", err)
			}
		}
	})
}
