package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgate/idemgate/store"
)

// A claim's second evidence (store.SentMustSync) that shares its batch with a
// failing write runs twice (the savepoint re-run): it still returns only after
// the WAL was synced past its commit.
func TestAtkDurSecondEvidenceInARetriedBatchIsSynced(t *testing.T) {
	ctx := context.Background()
	s := openInternal(t, Options{FlushInterval: time.Hour})
	if _, _, err := s.Begin(ctx, dClaim("k", "a")); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordSent(ctx, "k", "a", store.Sent{Via: "idemhttp:stripe", Host: "api.stripe.com", Window: time.Hour}); err != nil {
		t.Fatal(err)
	}
	sizes := holdFirstBatch(t, s, 2)
	boom := errors.New("boom")
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := s.Append(ctx, store.Receipt{Time: d0, Key: "first", Activity: "Search", Effect: "read", Decision: store.DecisionRan}); err != nil {
			t.Errorf("Append: %v", err)
		}
	})
	waitTaken(s)
	var sentErr error
	var commitsAt, syncedAt int64
	wg.Go(func() {
		sentErr = s.RecordSent(ctx, "k", "a", store.Sent{Via: "idemhttp:mail", Host: "mail.example", Window: time.Minute})
		commitsAt, syncedAt, _, _ = s.counters()
	})
	waitQueued(s, 1)
	var failErr error
	wg.Go(func() {
		failErr = s.write(ctx, "test", false, func(ctx context.Context, tx *sql.Tx) error { return boom })
	})
	wg.Wait()
	if sentErr != nil || !errors.Is(failErr, boom) {
		t.Fatalf("second evidence: %v, failing write: %v; want nil, boom", sentErr, failErr)
	}
	if s.retriedBatches() != 1 {
		t.Fatalf("batches %v, retried %d; want the evidence and the failing write in one retried batch", *sizes, s.retriedBatches())
	}
	if syncedAt != commitsAt {
		t.Fatalf("the second evidence returned with %d of %d commits synced; want its own batch's commit synced", syncedAt, commitsAt)
	}
	rec, err := s.Get(ctx, "k")
	if err != nil || len(rec.Sent) != 2 {
		t.Fatalf("record %+v, %v; want two evidences", rec, err)
	}
}

// The disk fails the write-back of the WAL frames written since the last good
// sync: fsync reports the error once, the frames are lost on the disk while the
// page cache still serves them, and later fsyncs succeed (Linux's write-back error
// reporting; PostgreSQL's "fsyncgate", after which PostgreSQL panics on a failed
// fsync). A claim the store syncs after that lies behind the hole in the WAL: an
// operating-system crash then loses it with the hole (recovery stops at the first
// bad frame), and a retry claims the key afresh and sends again. A claim the store
// accepts after a failed sync must survive the crash, or the store must refuse it.
func TestAtkDurFailedSyncLeavesAHoleThatLosesALaterClaim(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "idemgate.db")
	s, err := OpenWith(ctx, path, Options{FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, _, err := s.Begin(ctx, dClaim("k0", "a")); err != nil {
		t.Fatal(err)
	}
	synced := fileSize(t, path+"-wal") // on disk: every frame so far
	real := s.syncWAL
	var calls atomic.Int32
	var holeTo atomic.Int64
	var salt atomic.Value
	s.syncWAL = func() error {
		if calls.Add(1) == 1 {
			holeTo.Store(fileSize(t, path+"-wal"))
			salt.Store(string(readFile(t, path+"-wal")[16:24]))
			return &os.PathError{Op: "sync", Path: path + "-wal", Err: errors.New("input/output error")}
		}
		return real()
	}
	// k1's sync fails: Begin fails, its frames never reach the disk.
	if _, _, err := s.Begin(ctx, dClaim("k1", "a")); err == nil {
		t.Fatal("Begin whose sync failed returned no error")
	}
	// k2's claim, after the failure: the store syncs it (the fsync succeeds).
	o, _, err := s.Begin(ctx, dClaim("k2", "b"))
	accepted := err == nil && o == store.OutcomeClaimed
	// What the page cache holds (the files as the process reads them), then the disk
	// as an operating-system crash leaves it: the frames of the failed write-back are
	// not there (blocks never written read as zeros).
	// A WAL restarted since (new salts in its header) was written anew after the
	// failure, over the hole.
	db, wal := readFile(t, path), readFile(t, path+"-wal")
	if len(wal) >= 24 && string(wal[16:24]) == salt.Load() {
		for i := synced; i < holeTo.Load() && i < int64(len(wal)); i++ {
			wal[i] = 0
		}
	}
	s.syncWAL = real
	s.Close()
	crashed := filepath.Join(t.TempDir(), "crashed.db")
	if err := os.WriteFile(crashed, db, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(crashed+"-wal", wal, 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Open(ctx, crashed)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Get(ctx, "k0"); err != nil {
		t.Fatalf("k0, synced before the failure: %v", err)
	}
	_, err = c.Get(ctx, "k2")
	if accepted && err != nil {
		again, _, berr := c.Begin(ctx, dClaim("k2", "c"))
		t.Fatalf("k2's claim was accepted (synced) after a failed sync, and the crash lost it (Get: %v): a retry "+
			"claims it afresh (%s, %v) and sends again; want the store to refuse writes after a failed sync, or "+
			"to rewrite what the failed write-back lost", err, again, berr)
	}
}

func fileSize(t *testing.T, p string) int64 {
	fi, err := os.Stat(p)
	if err != nil {
		t.Error(err)
		return 0
	}
	return fi.Size()
}

func readFile(t *testing.T, p string) []byte {
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The same hole, by a race: the batch after a claim's commits while the claim's
// sync waits for the disk, and syncs on its own. When the claim's sync fails and
// the later one succeeds first, the later claim must not be reported synced: its
// frames lie behind the ones the failed write-back lost.
func TestAtkDurSyncRacingAFailedSyncIsNotTrusted(t *testing.T) {
	ctx := context.Background()
	s := openInternal(t, Options{FlushInterval: time.Hour})
	if _, _, err := s.Begin(ctx, dClaim("k0", "a")); err != nil {
		t.Fatal(err)
	}
	real := s.syncWAL
	t.Cleanup(func() { s.syncWAL = real })
	var calls atomic.Int32
	inFirst, secondDone := make(chan struct{}), make(chan struct{})
	s.syncWAL = func() error {
		switch calls.Add(1) {
		case 1:
			close(inFirst)
			// Fail after the racing sync returned; a store that does not let a sync
			// overtake a failing one never makes that sync: fail after a while then.
			select {
			case <-secondDone:
			case <-time.After(2 * time.Second):
			}
			return errors.New("input/output error")
		case 2:
			defer close(secondDone)
		}
		return real()
	}
	var wg sync.WaitGroup
	var err1 error
	wg.Go(func() { _, _, err1 = s.Begin(ctx, dClaim("k1", "a")) })
	<-inFirst
	_, _, err2 := s.Begin(ctx, dClaim("k2", "b"))
	wg.Wait()
	if err1 == nil {
		t.Fatal("the claim whose sync failed returned no error")
	}
	if err2 == nil {
		t.Fatal("a claim committed while a failing sync ran was reported synced by a sync that overtook the failing one: " +
			"its frames lie after the ones the failed write-back lost, and an operating-system crash loses it (a retry " +
			"claims afresh and sends again)")
	}
	if !errors.Is(err2, store.ErrUnavailable) {
		t.Fatalf("the refused claim: %v; want store.ErrUnavailable", err2)
	}
}

// After a failed sync the writes are refused, fail closed, while the WAL cannot
// be rewritten (another connection reads from it), and go on once it was.
func TestAtkDurWritesWaitForTheRewriteAfterAFailedSync(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "idemgate.db")
	s, err := OpenWith(ctx, path, Options{FlushInterval: time.Hour, BusyTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, _, err := s.Begin(ctx, dClaim("k0", "a")); err != nil {
		t.Fatal(err)
	}
	// Another process reads from the WAL: a checkpoint cannot move past it.
	other, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	rtx, err := other.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := rtx.QueryRow("SELECT count(*) FROM idemgate_records").Scan(&n); err != nil || n != 1 {
		t.Fatalf("reader: %d, %v", n, err)
	}
	real := s.syncWAL
	var calls atomic.Int32
	s.syncWAL = func() error {
		if calls.Add(1) == 1 {
			return errors.New("input/output error")
		}
		return real()
	}
	if _, _, err := s.Begin(ctx, dClaim("k1", "a")); err == nil {
		t.Fatal("Begin whose sync failed returned no error")
	}
	if _, _, err := s.Begin(ctx, dClaim("k2", "a")); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("a claim after a failed sync, the WAL not rewritten: %v; want store.ErrUnavailable", err)
	}
	if rec, err := s.Get(ctx, "k2"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the refused claim left %+v, %v; want no record", rec, err)
	}
	if err := rtx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if o, _, err := s.Begin(ctx, dClaim("k2", "a")); err != nil || o != store.OutcomeClaimed {
		t.Fatalf("a claim once the WAL could be rewritten: %s, %v; want claimed", o, err)
	}
	if c, sy, _, _ := s.counters(); sy != c {
		t.Fatalf("%d commits, %d synced after the rewrite; want all", c, sy)
	}
	s.syncWAL = real
}

// The receipt of a re-send that relies on the vendor's deduplication ("resent",
// Actor witness:vendor-dedup) is the gate's record of a decision to send again:
// "no receipt, no re-send" (interceptor/vendordedup.go). It is appended after the
// takeover's synced claim and before the body sends; left to the flusher, an
// operating-system crash after the re-send left loses it (the claim's first
// evidence, just as unsynced, goes with it), and nothing says the write was sent
// again. It must be on disk before Append returns (store.ReceiptMustSync).
func TestAtkDurResentReceiptIsSyncedBeforeTheResend(t *testing.T) {
	ctx := context.Background()
	s := openInternal(t, Options{FlushInterval: time.Hour})
	if _, _, err := s.Begin(ctx, dClaim("k", "a")); err != nil {
		t.Fatal(err)
	}
	r := store.Receipt{Time: d0, Key: "k", Activity: "ChargeCard", Effect: "destructive", Decision: store.DecisionResent,
		Actor: "witness:vendor-dedup", Reason: "test", Attempt: 2}
	if err := s.Append(ctx, r); err != nil {
		t.Fatal(err)
	}
	if c, sy, _, _ := s.counters(); sy != c {
		t.Fatalf("the re-send's receipt returned with %d of %d commits synced; want it on disk before the re-send leaves", sy, c)
	}
	// A read's receipt is not synced (the read queue's price).
	if err := s.Append(ctx, store.Receipt{Time: d0, Key: "r", Activity: "Search", Effect: "read", Decision: store.DecisionRan}); err != nil {
		t.Fatal(err)
	}
	if c, sy, _, _ := s.counters(); sy == c {
		t.Fatalf("a read's receipt was synced (%d of %d): want it left to the flusher", sy, c)
	}
}

// 32 writers claim keys while one sync of the WAL fails at the disk: every claim
// the store accepted, before or after the failure, is in the disk image an
// operating-system crash leaves (the frames of the failed write-back lost; a WAL
// restarted since was written anew over them).
func TestAtkDurConcurrentClaimsAcrossAFailedSyncSurviveTheCrash(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "idemgate.db")
	s, err := OpenWith(ctx, path, Options{FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	real := s.syncWAL
	var (
		mu       sync.Mutex
		good     int64 // the WAL size after the last sync that succeeded
		holeFrom int64
		holeTo   int64
		salt     string
		calls    int
	)
	s.syncWAL = func() error {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		if n == 5 {
			b := readFile(t, path+"-wal")
			mu.Lock()
			holeFrom, holeTo, salt = good, int64(len(b)), string(b[16:24])
			mu.Unlock()
			return errors.New("input/output error")
		}
		err := real()
		if err == nil {
			mu.Lock()
			if holeTo == 0 {
				good = fileSize(t, path+"-wal")
			}
			mu.Unlock()
		}
		return err
	}
	const writers, each = 32, 12
	accepted := make(chan string, writers*each)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				key := "w" + string(rune('A'+w%26)) + string(rune('a'+w/26)) + "-" + string(rune('a'+i))
				o, _, err := s.Begin(ctx, dClaim(key, "o"))
				if err == nil && o == store.OutcomeClaimed {
					accepted <- key
				}
			}
		})
	}
	wg.Wait()
	close(accepted)
	mu.Lock()
	failed := holeTo != 0
	mu.Unlock()
	if !failed {
		t.Skip("fewer than five syncs: the claims shared too few batches on this machine")
	}
	db, wal := readFile(t, path), readFile(t, path+"-wal")
	if len(wal) >= 24 && string(wal[16:24]) == salt {
		for i := holeFrom; i < holeTo && i < int64(len(wal)); i++ {
			wal[i] = 0
		}
	}
	s.syncWAL = real
	crashed := filepath.Join(t.TempDir(), "crashed.db")
	if err := os.WriteFile(crashed, db, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(crashed+"-wal", wal, 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Open(ctx, crashed)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var lost []string
	n := 0
	for key := range accepted {
		n++
		if _, err := c.Get(ctx, key); err != nil {
			lost = append(lost, key)
		}
	}
	t.Logf("%d of %d claims accepted; the fifth sync failed", n, writers*each)
	if len(lost) > 0 {
		t.Fatalf("%d of the %d claims the store accepted are gone after the crash (%v…): their bodies sent, and a retry "+
			"claims them afresh", len(lost), n, lost[0])
	}
}

// A sync that could not open the WAL file (too many open files) wrote nothing and
// lost nothing: the writes after it go on, each synced, without a rewrite first.
func TestAtkDurSyncThatCouldNotOpenTheWALRefusesNothingLater(t *testing.T) {
	ctx := context.Background()
	s := openInternal(t, Options{FlushInterval: time.Hour})
	real := s.syncWAL
	t.Cleanup(func() { s.syncWAL = real })
	var calls atomic.Int32
	s.syncWAL = func() error {
		if calls.Add(1) == 1 {
			return fmt.Errorf("%w: open idemgate.db-wal: too many open files", errSyncNotRun)
		}
		return real()
	}
	if _, _, err := s.Begin(ctx, dClaim("k1", "a")); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Begin whose sync could not open the WAL: %v; want store.ErrUnavailable", err)
	}
	if o, _, err := s.Begin(ctx, dClaim("k2", "a")); err != nil || o != store.OutcomeClaimed {
		t.Fatalf("the next claim: %s, %v; want claimed", o, err)
	}
	if c, sy, _, failed := s.counters(); sy != c || !failed {
		t.Fatalf("%d of %d commits synced, failed %v; want all synced, and every later commit synced", sy, c, failed)
	}
}
