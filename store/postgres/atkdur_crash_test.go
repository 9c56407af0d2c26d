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

// TestAtkDurServerCrashKeepsWritePathReceipts: the receipts the gate appends on a
// write's path with Append — the re-send's ("resent": "no receipt, no re-send",
// interceptor/vendordedup.go), a refusal's with its withheld call
// ("refused-in-flight": the workflow's last word on the write when it is the last
// attempt; Pending lists a refused destructive claim by it) and a hand-off's — are
// committed with synchronous_commit=off under store.DurabilityClaim, so a crash
// of the PostgreSQL server loses them while the re-send, or the refusal, has
// happened. docs/how-it-decides.md says only read receipts and a claim's first
// evidence are left unsynced there.
func TestAtkDurServerCrashKeepsWritePathReceipts(t *testing.T) {
	dsn(t)
	pgtest.RunOnPrivateServer(t, filepath.Join("..", ".."), "TestAtkDurServerCrashKeepsWritePathReceiptsChild")
}

func TestAtkDurServerCrashKeepsWritePathReceiptsChild(t *testing.T) {
	pgctl := pgtest.PrivateServer(t, "TestAtkDurServerCrashKeepsWritePathReceipts")
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
	for _, dec := range []store.Decision{store.DecisionResent, store.DecisionRefusedInFlight, store.DecisionHandedOff} {
		t.Run(string(dec), func(t *testing.T) {
			key := "k-" + string(dec)
			c := claim(key, "a")
			c.Now = time.Now()
			c.Lease = c.Now.Add(time.Hour)
			if o, _, err := s.Begin(ctx, c); err != nil || o != store.OutcomeClaimed {
				t.Fatalf("Begin %s = %q, %v", key, o, err)
			}
			r := store.Receipt{Time: time.Now(), Key: key, Activity: "ChargeCard", Effect: "destructive", Decision: dec,
				Actor: "witness:vendor-dedup", Reason: "test", Attempt: 2}
			if err := s.Append(ctx, r); err != nil {
				t.Fatal(err)
			}
			crash()
			rs, err := s.Receipts(ctx, store.ReceiptFilter{Key: key})
			if err != nil {
				t.Fatal(err)
			}
			for _, got := range rs {
				if got.Decision == dec {
					return
				}
			}
			t.Errorf("a server crash lost the %s receipt that Append had acknowledged (receipts left: %d)", dec, len(rs))
		})
	}
}
