package postgres_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/testutil/pgtest"
	"github.com/idemgate/idemgate/store"
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
	ctx := context.Background()
	s, crash := crashableStore(t, "TestAtkDurServerCrashKeepsWritePathReceipts")
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
