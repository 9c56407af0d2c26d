package postgres

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemgate/idemgate/internal/testutil/pgtest"
	"github.com/idemgate/idemgate/store"
)

// With the default Options, 32 concurrent claims each get a connection of their
// own: 31 claims waiting on the server for a locked record do not hold off a 32nd
// claim of another key in the client (pgxpool's own default, 4 connections on a
// small machine, queued it until the lock went).
func TestDefaultPoolServes32Claims(t *testing.T) {
	ctx := context.Background()
	d := pgtest.Schema(t, pgtest.DSN(t, "./store/postgres/"), "idemgate_pool")
	s, err := Open(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Now().UTC()
	claim := func(key, owner string) store.Claim {
		return store.Claim{Key: key, Activity: "Sync", Effect: "idempotent-write", ArgsHash: "h", Owner: owner,
			Lease: now.Add(time.Hour), Window: time.Hour, WorkflowID: "wf", RunID: "run", Attempt: 1, Now: now}
	}
	if _, _, err := s.Begin(ctx, claim("locked", "o0")); err != nil {
		t.Fatal(err)
	}
	// Another session locks the record: every Begin of its key waits on the server.
	locker, err := pgx.Connect(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close(ctx)
	tx, err := locker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SELECT 1 FROM idemgate_records WHERE key = 'locked' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	// Its own session: pg_stat_activity is read once per transaction.
	watch, err := pgx.Connect(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close(ctx)
	const waiters = 31
	done := make(chan error, waiters)
	for i := range waiters {
		go func() {
			_, _, err := s.Begin(ctx, claim("locked", fmt.Sprintf("o%d", i+1)))
			done <- err
		}()
	}
	// Wait until the server has every waiter that got a connection waiting on the
	// lock, and the pool has no connection left or every waiter has one.
	deadline := time.Now().Add(60 * time.Second)
	for {
		var waiting int32
		if err := watch.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
			AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		st := s.pool.Stat()
		if waiting == st.AcquiredConns() && (waiting == waiters || st.AcquiredConns() == st.MaxConns()) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 60 s: %d sessions wait on the lock, %d of %d connections acquired", waiting, st.AcquiredConns(), st.MaxConns())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The 32nd claim, of another key, runs now, with the lock still held.
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if o, _, err := s.Begin(cctx, claim("free", "o-free")); err != nil || o != store.OutcomeClaimed {
		t.Errorf("a claim of another key beside %d waiting ones (pool of %d): %s, %v; want it claimed at once", waiters, s.pool.Stat().MaxConns(), o, err)
	}
	tx.Rollback(ctx)
	for range waiters {
		if err := <-done; err != nil {
			t.Errorf("a waiting claim: %v", err)
		}
	}
}

// The pool's size: Options.MaxConns, else pool_max_conns from the DSN, else
// DefaultMaxConns.
func TestPoolSize(t *testing.T) {
	ctx := context.Background()
	d := pgtest.Schema(t, pgtest.DSN(t, "./store/postgres/"), "idemgate_poolsize")
	sep := "?"
	if strings.Contains(d, "?") {
		sep = "&"
	}
	for _, c := range []struct {
		dsn  string
		o    Options
		want int32
	}{
		{d, Options{}, DefaultMaxConns},
		{d + sep + "pool_max_conns=7", Options{}, 7},
		{d + sep + "pool_max_conns=7", Options{MaxConns: 3}, 3},
		{d, Options{MaxConns: 64}, 64},
	} {
		s, err := OpenWith(ctx, c.dsn, c.o)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.pool.Config().MaxConns; got != c.want {
			t.Errorf("%+v with the DSN's pool_max_conns %v: pool of %d; want %d", c.o, strings.Contains(c.dsn, "pool_max_conns"), got, c.want)
		}
		s.Close()
	}
}
