package postgres_test

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemgate/idemgate/internal/testutil/pgtest"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/postgres"
)

// TestServerCrashKeepsWriteOutcomes: a crash of the PostgreSQL server (an
// immediate shutdown: what a backend's crash, the OOM killer or `pg_ctl restart -m
// immediate` does) loses every commit made with synchronous_commit=off whose WAL
// was still in the server's memory. Under store.DurabilityClaim a write's
// completion, release, unknown outcome and settlement, and a claim's second
// evidence, must survive it like the claim does (the soak's finding 1: completions
// lost, the records listed as pending though they ran). The WAL writer is slowed to
// its maximum so that an unsynced commit is still in memory when the server dies.
// It runs in a child process on a private server.
func TestServerCrashKeepsWriteOutcomes(t *testing.T) {
	dsn(t)
	pgtest.RunOnPrivateServer(t, filepath.Join("..", ".."), "TestServerCrashKeepsWriteOutcomesChild")
}

func TestServerCrashKeepsWriteOutcomesChild(t *testing.T) {
	ctx := context.Background()
	s, crash := crashableStore(t, "TestServerCrashKeepsWriteOutcomes")
	mustClaim := func(key string) {
		t.Helper()
		c := claim(key, "a")
		c.Now = time.Now()
		c.Lease = c.Now.Add(time.Hour)
		if o, _, err := s.Begin(ctx, c); err != nil || o != store.OutcomeClaimed {
			t.Fatalf("Begin %s = %q, %v", key, o, err)
		}
	}
	tr := func(key string) store.Transition {
		now := time.Now()
		return store.Transition{Key: key, Owner: "a", Now: now, Result: []byte(`"ok"`), Window: time.Hour,
			Receipt: store.Receipt{Key: key, Activity: "ChargeCard", Effect: "destructive", Time: now}}
	}
	stripe := store.Sent{Via: "idemhttp:stripe", Host: "api.stripe.com", Window: 24 * time.Hour}
	other := store.Sent{Via: "idemhttp:mail", Host: "mail.example", Window: 0}

	receipts := func(key string) int {
		t.Helper()
		rs, err := s.Receipts(ctx, store.ReceiptFilter{Key: key})
		if err != nil {
			t.Fatalf("Receipts %s: %v", key, err)
		}
		return len(rs)
	}
	// Each step is the last commit before its own crash, so nothing synced after
	// it could carry it to disk. The record and its receipts after the crash must be
	// what they were before it.
	steps := []struct {
		name string
		do   func(key string) error
	}{
		{"complete", func(k string) error { return s.Complete(ctx, tr(k)) }},
		{"release", func(k string) error { return s.Release(ctx, tr(k)) }},
		{"abandon", func(k string) error { return s.Abandon(ctx, tr(k)) }},
		{"resolve-sent", func(k string) error {
			if err := s.Abandon(ctx, tr(k)); err != nil {
				return err
			}
			crash() // the abandon is then on disk either way: only the settlement is tested
			t2 := tr(k)
			t2.Receipt.Actor, t2.Receipt.Resolution = "person:test", "sent"
			return s.Resolve(ctx, t2, store.StateCompleted)
		}},
		{"second-evidence", func(k string) error {
			if err := s.RecordSent(ctx, k, "a", stripe); err != nil {
				return err
			}
			return s.RecordSent(ctx, k, "a", other)
		}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			key := "k-" + st.name
			mustClaim(key)
			if err := st.do(key); err != nil {
				t.Fatalf("%s: %v", st.name, err)
			}
			before, err := s.Get(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			n := receipts(key)
			crash()
			after, err := s.Get(ctx, key)
			if err != nil {
				t.Fatalf("Get after the crash: %v", err)
			}
			if after.State != before.State || len(after.Sent) != len(before.Sent) || !after.UpdatedAt.Equal(before.UpdatedAt) {
				t.Errorf("a server crash lost the %s: before %s, evidence %v, updated %s; after %s, evidence %v, updated %s",
					st.name, before.State, before.Sent, before.UpdatedAt, after.State, after.Sent, after.UpdatedAt)
			}
			if m := receipts(key); m != n {
				t.Errorf("a server crash lost the %s's receipt: %d receipts before, %d after", st.name, n, m)
			}
		})
	}
}

// crashableStore opens a store on the private server of the test named parent (run
// in a child process by pgtest.RunOnPrivateServer) with the WAL writer slowed to
// its maximum, so that a commit made with synchronous_commit=off is still in the
// server's memory when it dies, and returns it with crash, which restarts the
// server in immediate mode and returns once the store answers again.
func crashableStore(t *testing.T, parent string) (*postgres.Store, func()) {
	t.Helper()
	pgctl := pgtest.PrivateServer(t, parent)
	ctx := context.Background()
	d := dsn(t)
	admin, err := pgx.Connect(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`ALTER SYSTEM SET wal_writer_delay = '10s'`, `ALTER SYSTEM SET wal_writer_flush_after = '128MB'`,
		`SELECT pg_reload_conf()`} {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	admin.Close(ctx)
	s := open(t, d, postgres.Options{ConnectTimeout: 2 * time.Second})
	crash := func() {
		t.Helper()
		if out, err := exec.Command(pgctl, "restart", "-m", "immediate").CombinedOutput(); err != nil {
			t.Fatalf("pg_ctl restart -m immediate: %v\n%s", err, out)
		}
		deadline := time.Now().Add(60 * time.Second)
		for {
			_, err := s.Get(ctx, "none")
			if errors.Is(err, store.ErrNotFound) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the store still fails 60 s after the restart: %v", err)
			}
			time.Sleep(50 * time.Millisecond) // poll interval, not a wait for an outcome
		}
	}
	return s, crash
}
