package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/storeopen"
	"github.com/idemgate/idemgate/internal/testutil/pgtest"
	"github.com/idemgate/idemgate/store"
)

// backend is a real store the CLI is pointed at: a SQLite file, or a PostgreSQL
// schema of its own.
type backend struct {
	name string
	spec string
}

// backends returns a fresh SQLite file and, when IDEMGATE_POSTGRES_DSN is set, a
// fresh PostgreSQL schema. Without the DSN the PostgreSQL runs are skipped, except
// under CI=true, where a skip would hide that nothing was tested.
func backends(t *testing.T) []backend {
	t.Helper()
	path := filepath.Join(t.TempDir(), "idemgate.db")
	st, err := storeopen.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	out := []backend{{"sqlite", path}}
	if d := os.Getenv("IDEMGATE_POSTGRES_DSN"); d != "" {
		out = append(out, backend{"postgres", pgtest.Schema(t, d, "idemgate_cli")})
	}
	return out
}

// eachBackend runs fn against every backend; the PostgreSQL run is a skip (or, in
// CI, a failure) without a server.
func eachBackend(t *testing.T, fn func(t *testing.T, b backend)) {
	bs := backends(t)
	for _, b := range bs {
		t.Run(b.name, func(t *testing.T) { fn(t, b) })
	}
	if len(bs) == 1 {
		t.Run("postgres", func(t *testing.T) { pgtest.DSN(t, "./cmd/idemgate/") })
	}
}

func openStore(t *testing.T, b backend) storeopen.Store {
	t.Helper()
	st, err := storeopen.Open(context.Background(), b.spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// result is one CLI run.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

func idem(t *testing.T, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return result{code, out.String(), errb.String()}
}

// typeAt makes the CLI's clock read at (running on from there) for the rest of the
// test: a person who types a command later, e.g. a resolve --not-sent once
// store.NotSentFrom passed.
func typeAt(t *testing.T, at time.Time) {
	t.Helper()
	shift := time.Until(at)
	clock = func() time.Time { return time.Now().Add(shift) }
	t.Cleanup(func() { clock = time.Now })
}

// ok runs the CLI and fails the test unless it exits 0.
func ok(t *testing.T, args ...string) result {
	t.Helper()
	r := idem(t, args...)
	if r.code != 0 {
		t.Fatalf("idemgate %s: %s", strings.Join(args, " "), r)
	}
	return r
}

func decodeJSON[T any](t *testing.T, r result) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("stdout is not the JSON expected: %v\n%s", err, r)
	}
	return v
}

var testArgs = []byte(`[{"amount":4200,"customer":"cus_1"}]`)

// seed claims key as a destructive ChargeCard of workflow wf, created at `at`,
// with its lease at `lease`; then applies `then` ("abandon", "complete", "release" or "").
func seed(t *testing.T, st store.Store, key, wf string, at, lease time.Time, then string) {
	t.Helper()
	seedRun(t, st, key, wf, "run-"+wf, at, lease, then)
}

// seedRun is seed with the workflow's run ID.
func seedRun(t *testing.T, st store.Store, key, wf, run string, at, lease time.Time, then string) {
	t.Helper()
	ctx := context.Background()
	c := store.Claim{Key: key, Activity: "ChargeCard", Effect: "destructive", ArgsHash: "hash-" + key, Args: testArgs,
		Owner: "owner-" + key, Lease: lease, Window: 24 * time.Hour, WorkflowID: wf, RunID: run, Attempt: 1, Now: at}
	if o, _, err := st.Begin(ctx, c); err != nil || o != store.OutcomeClaimed {
		t.Fatalf("seed %s: %v %v", key, o, err)
	}
	tr := store.Transition{Key: key, Owner: c.Owner, Now: at.Add(time.Second), Window: 24 * time.Hour,
		Receipt: store.Receipt{Key: key, Activity: c.Activity, Effect: c.Effect, ArgsHash: c.ArgsHash, WorkflowID: wf,
			RunID: c.RunID, Attempt: 1, Error: "connection reset"}}
	var err error
	switch then {
	case "abandon":
		tr.Receipt.Decision = store.DecisionUnknown
		err = st.Abandon(ctx, tr)
	case "complete":
		tr.Receipt.Decision, tr.Result, tr.Receipt.Error = store.DecisionRan, []byte("stored"), ""
		err = st.Complete(ctx, tr)
	case "release":
		tr.Receipt.Decision = store.DecisionReleased
		err = st.Release(ctx, tr)
	}
	if err != nil {
		t.Fatalf("seed %s %s: %v", key, then, err)
	}
}

// snapshot is everything the CLI could change, to show that it did not.
type snapshot struct {
	Receipts []store.Receipt
	Records  []store.Record
	Pauses   []store.Pause
}

func snap(t *testing.T, st store.Store, keys ...string) snapshot {
	t.Helper()
	ctx := context.Background()
	var s snapshot
	var err error
	if s.Receipts, err = st.Receipts(ctx, store.ReceiptFilter{}); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		r, err := st.Get(ctx, k)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			t.Fatal(err)
		}
		s.Records = append(s.Records, r)
	}
	if s.Pauses, err = st.Pauses(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

func unchanged(t *testing.T, before snapshot, st store.Store, keys ...string) {
	t.Helper()
	if after := snap(t, st, keys...); !reflect.DeepEqual(before, after) {
		t.Fatalf("the store changed:\nbefore %+v\nafter  %+v", before, after)
	}
}
