// Package storetest is the conformance suite every store backend must pass: RunGate
// for a store.Gate (what workers call), Run for a whole store.Store (RunGate's tests
// and the operator's).
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store { return memory.New() })
//	}
//
// The suite never sleeps: it moves the clock it passes in Claim.Now and
// Transition.Now. Keys carry a random prefix, so a backend may share one database
// between subtests and runs.
package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/claimmodel"
)

// gateTests need only the store.Gate methods.
var gateTests = []struct {
	name string
	fn   func(t *testing.T, s store.Gate, k *keys)
}{
	{"ExactlyOneWinner", testExactlyOneWinner},
	{"CompletedReplaysSameArgs", testCompletedReplays},
	{"ConflictOnOtherArgs", testConflict},
	{"LeaseKeepsClaimUntilDeadline", testLease},
	{"TakeOverKeepsHistory", testTakeOver},
	{"AbandonMeansOwnerGone", testAbandon},
	{"ReleaseLetsNextAttemptRun", testRelease},
	{"StaleOwnerCannotOverwrite", testStaleOwner},
	{"TransitionsAreOwnerChecked", testTransitionsOwnerChecked},
	{"WindowExpiry", testWindow},
	{"ResultRoundTrip", testResultRoundTrip},
	{"StepsStoreWhatDecideAndApplySay", testStepsMatchRules},
	{"MayHaveSentAfterLeasePassed", testMayHaveSentAfterLease},
	{"SentEvidenceIsTheOwners", testSentEvidence},
	{"TakeoverKeepsEveryClaimsEvidence", testTakeoverKeepsEvidence},
	{"IdentityIsKept", testIdentity},
}

// storeTests need the store.Operator methods too.
var storeTests = []struct {
	name string
	fn   func(t *testing.T, s store.Store, k *keys)
}{
	{"SweepIsBounded", testSweep},
	{"ReceiptsAppendOnly", testReceipts},
	{"ReceiptsKeepEffectSource", testEffectSource},
	{"ReceiptFilters", testReceiptFilters},
	{"PendingListsBlockingRecords", testPending},
	{"PendingListsRefusedLiveClaims", testPendingRefused},
	{"ResolveSentStoresResult", testResolveSent},
	{"ResolveNotSentReleases", testResolveNotSent},
	{"ResolveIsOwnerChecked", testResolveRefused},
	{"WitnessSettlesByItsRules", testWitnessSettle},
	{"PauseAndResume", testPauses},
	{"ModelSequences", testModelSequences},
	{"LiveClaimOutlivesItsWindow", testLiveClaimOutlivesWindow},
	{"UnknownDestructiveOutlivesItsWindow", testUnknownOutlivesWindow},
	{"FinishedDestructiveKeptWhileResettable", testResetHeld},
	{"FinishedDestructiveKeptForItsRootsChildren", testResetHeldRoot},
	{"CompletionKeptWhileItsLeaseRuns", testCompletionKeptForLease},
	{"TakeoverKeepsTheRecordPastItsLease", testTakeoverKeepsRecord},
	{"MayHaveSentIsMonotone", testMayHaveSentMonotone},
	{"ReceiptCursor", testReceiptCursor},
	{"AppendReceiptsInOrderAllOrNothing", testAppendReceipts},
	{"LateReceiptPagedBySince", testLateReceiptPaged},
	{"PruneReceipts", testPruneReceipts},
	{"PruneBesideClaims", testPruneBesideClaims},
	{"PruneThroughTheExportsHorizon", testPruneThroughID},
	{"ReceiptPagesAreBounded", testReceiptPages},
	{"ReceiptPagesBySince", testReceiptPagesSince},
}

// RunGate runs the conformance tests of a store.Gate against gates made by newGate:
// claims, owner-checked moves, windows and the rules of store.Decide and
// store.Apply. Where the gate can also list receipts (a store.Operator's Receipts),
// it checks the receipts each step appends. newGate is called once per subtest and
// must register its own cleanup with t.Cleanup.
func RunGate(t *testing.T, newGate func(t *testing.T) store.Gate) {
	for _, tc := range gateTests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newGate(t), &keys{prefix: uuid.NewString()})
		})
	}
}

// Run runs every conformance test against stores made by newStore: RunGate's and
// the operator's (receipts, sweep, pending, resolve, pauses). newStore is called
// once per subtest and must register its own cleanup with t.Cleanup.
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	RunGate(t, func(t *testing.T) store.Gate { return newStore(t) })
	for _, tc := range storeTests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newStore(t), &keys{prefix: uuid.NewString()})
		})
	}
}

// receiptLister is the Operator method the gate tests use when a backend has it.
type receiptLister interface {
	Receipts(ctx context.Context, f store.ReceiptFilter) ([]store.Receipt, error)
}

// keyReceipts lists the receipts of key when s can list receipts (ok false when it
// cannot: a gate-only backend).
func keyReceipts(t *testing.T, s store.Gate, key string) (rs []store.Receipt, ok bool) {
	t.Helper()
	l, ok := s.(receiptLister)
	if !ok {
		return nil, false
	}
	rs, err := l.Receipts(context.Background(), store.ReceiptFilter{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	return rs, true
}

type keys struct{ prefix string }

func (k *keys) key(name string) string { return k.prefix + "/" + name }

// t0 is the suite's clock origin; microsecond precision, UTC, as SQL stores keep it.
var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

const window = 24 * time.Hour

func claim(key, owner, hash string, now time.Time) store.Claim {
	return store.Claim{
		Key:        key,
		Activity:   "ChargeCard",
		Effect:     "destructive",
		ArgsHash:   hash,
		Args:       []byte(`{"amount":4200}`),
		Owner:      owner,
		Lease:      now.Add(time.Minute),
		Window:     window,
		WorkflowID: "wf-1",
		RunID:      "run-1",
		Attempt:    1,
		Now:        now,
	}
}

func begin(t *testing.T, s store.Gate, c store.Claim, want store.Outcome) store.Record {
	t.Helper()
	got, rec, err := s.Begin(context.Background(), c)
	if err != nil {
		t.Fatalf("Begin(%s, owner %s): %v", c.Key, c.Owner, err)
	}
	if got != want {
		t.Fatalf("Begin(%s, owner %s) = %q, want %q (record state %q owner %q)", c.Key, c.Owner, got, want, rec.State, rec.Owner)
	}
	return rec
}

func tr(key, owner string, now time.Time, d store.Decision) store.Transition {
	return store.Transition{Key: key, Owner: owner, Now: now, Window: window,
		Receipt: store.Receipt{Key: key, Activity: "ChargeCard", Effect: "destructive", Decision: d, ArgsHash: "h1"}}
}

func get(t *testing.T, s store.Gate, key string) store.Record {
	t.Helper()
	r, err := s.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("Get(%s): %v", key, err)
	}
	return r
}

func testExactlyOneWinner(t *testing.T, s store.Gate, k *keys) {
	const racers = 32
	for round := range 5 {
		key := k.key(fmt.Sprintf("race-%d", round))
		var wg sync.WaitGroup
		outcomes := make([]store.Outcome, racers)
		errs := make([]error, racers)
		start := make(chan struct{})
		for i := range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				outcomes[i], _, errs[i] = s.Begin(context.Background(), claim(key, fmt.Sprintf("owner-%d", i), "h1", t0))
			}()
		}
		close(start)
		wg.Wait()
		winners, inflight := 0, 0
		for i := range racers {
			if errs[i] != nil {
				t.Fatalf("racer %d: %v", i, errs[i])
			}
			switch outcomes[i] {
			case store.OutcomeClaimed:
				winners++
			case store.OutcomeInFlight:
				inflight++
			default:
				t.Errorf("racer %d: outcome %q", i, outcomes[i])
			}
		}
		if winners != 1 || inflight != racers-1 {
			t.Fatalf("round %d: %d winners, %d in-flight; want exactly 1 winner", round, winners, inflight)
		}
	}
}

func testCompletedReplays(t *testing.T, s store.Gate, k *keys) {
	ctx := context.Background()
	key := k.key("done")
	begin(t, s, claim(key, "a", "h1", t0), store.OutcomeClaimed)
	done := tr(key, "a", t0.Add(time.Second), store.DecisionRan)
	done.Result = []byte("result-bytes")
	if err := s.Complete(ctx, done); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	rec := begin(t, s, claim(key, "b", "h1", t0.Add(time.Hour)), store.OutcomeCompleted)
	if rec.State != store.StateCompleted || !bytes.Equal(rec.Result, []byte("result-bytes")) || rec.Owner != "a" {
		t.Fatalf("completed record = state %q result %q owner %q", rec.State, rec.Result, rec.Owner)
	}
	// A replay changes nothing.
	if again := get(t, s, key); again.Owner != "a" || again.Claims != 1 {
		t.Fatalf("replay changed the record: owner %q claims %d", again.Owner, again.Claims)
	}
}

func testConflict(t *testing.T, s store.Gate, k *keys) {
	ctx := context.Background()
	key := k.key("conflict")
	begin(t, s, claim(key, "a", "h1", t0), store.OutcomeClaimed)
	// Other arguments while the first claim is live: conflict, nothing changed.
	rec := begin(t, s, claim(key, "b", "h2", t0.Add(time.Second)), store.OutcomeConflict)
	if rec.ArgsHash != "h1" || rec.Owner != "a" {
		t.Fatalf("conflict record = hash %q owner %q, want the stored h1/a", rec.ArgsHash, rec.Owner)
	}
	if err := s.Complete(ctx, tr(key, "a", t0.Add(2*time.Second), store.DecisionRan)); err != nil {
		t.Fatal(err)
	}
	rec = begin(t, s, claim(key, "c", "h2", t0.Add(time.Hour)), store.OutcomeConflict)
	if rec.State != store.StateCompleted || !bytes.Equal(rec.Args, []byte(`{"amount":4200}`)) {
		t.Fatalf("conflict must carry the stored record: state %q args %s", rec.State, rec.Args)
	}
}

func testLease(t *testing.T, s store.Gate, k *keys) {
	key := k.key("lease")
	c := claim(key, "a", "h1", t0)
	c.Lease = t0.Add(10 * time.Second)
	begin(t, s, c, store.OutcomeClaimed)
	late := claim(key, "b", "h1", t0.Add(9*time.Second))
	late.TakeOver = true
	rec := begin(t, s, late, store.OutcomeInFlight)
	if !rec.Lease.Equal(t0.Add(10 * time.Second)) {
		t.Fatalf("in-flight record lease = %v, want %v", rec.Lease, t0.Add(10*time.Second))
	}
	// Lease passed, not asked to take over (destructive): unknown, nothing changes.
	gone := claim(key, "b", "h1", t0.Add(10*time.Second))
	begin(t, s, gone, store.OutcomeUnknown)
	if r := get(t, s, key); r.Owner != "a" || r.State != store.StateClaimed {
		t.Fatalf("OutcomeUnknown changed the record: owner %q state %q", r.Owner, r.State)
	}
}

func testTakeOver(t *testing.T, s store.Gate, k *keys) {
	key := k.key("takeover")
	c := claim(key, "a", "h1", t0)
	c.Lease = t0.Add(10 * time.Second)
	begin(t, s, c, store.OutcomeClaimed)
	next := claim(key, "b", "h1", t0.Add(11*time.Second))
	next.TakeOver = true
	next.Attempt = 2
	rec := begin(t, s, next, store.OutcomeTakenOver)
	if rec.Owner != "b" || rec.State != store.StateClaimed || rec.Claims != 2 || !rec.CreatedAt.Equal(t0) || rec.Attempt != 2 {
		t.Fatalf("taken-over record = owner %q state %q claims %d created %v attempt %d", rec.Owner, rec.State, rec.Claims, rec.CreatedAt, rec.Attempt)
	}
	if rs, ok := keyReceipts(t, s, key); ok && (len(rs) != 2 || rs[0].Decision != store.DecisionClaimed || rs[1].Decision != store.DecisionTakenOver) {
		t.Fatalf("receipts = %v, want claimed then taken-over", decisions(rs))
	}
}

func testAbandon(t *testing.T, s store.Gate, k *keys) {
	ctx := context.Background()
	key := k.key("abandon")
	begin(t, s, claim(key, "a", "h1", t0), store.OutcomeClaimed)
	if err := s.Abandon(ctx, tr(key, "a", t0.Add(time.Second), store.DecisionUnknown)); err != nil {
		t.Fatalf("Abandon: %v", err)
	}
	if r := get(t, s, key); r.State != store.StateUnknown {
		t.Fatalf("state after Abandon = %q", r.State)
	}
	// The owner said it is gone: no need to wait for the lease.
	begin(t, s, claim(key, "b", "h1", t0.Add(2*time.Second)), store.OutcomeUnknown)
	c := claim(key, "b", "h1", t0.Add(2*time.Second))
	c.TakeOver = true
	begin(t, s, c, store.OutcomeTakenOver)
}

func testRelease(t *testing.T, s store.Gate, k *keys) {
	ctx := context.Background()
	key := k.key("release")
	begin(t, s, claim(key, "a", "h1", t0), store.OutcomeClaimed)
	if err := s.Release(ctx, tr(key, "a", t0.Add(time.Second), store.DecisionReleased)); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if r := get(t, s, key); r.State != store.StateReleased {
		t.Fatalf("state after Release = %q", r.State)
	}
	rec := begin(t, s, claim(key, "b", "h1", t0.Add(2*time.Second)), store.OutcomeClaimed)
	if rec.Owner != "b" || rec.Claims != 2 || !rec.CreatedAt.Equal(t0.Add(2*time.Second)) || rec.State != store.StateClaimed {
		t.Fatalf("re-claim = owner %q claims %d created %v state %q, want b, 2 claims, created at the re-claim",
			rec.Owner, rec.Claims, rec.CreatedAt, rec.State)
	}
	// A released key is free for other arguments too: the first call never happened.
	key2 := k.key("release-other-args")
	begin(t, s, claim(key2, "a", "h1", t0), store.OutcomeClaimed)
	if err := s.Release(ctx, tr(key2, "a", t0.Add(time.Second), store.DecisionReleased)); err != nil {
		t.Fatal(err)
	}
	begin(t, s, claim(key2, "b", "h2", t0.Add(2*time.Second)), store.OutcomeClaimed)
}

func testStaleOwner(t *testing.T, s store.Gate, k *keys) {
	ctx := context.Background()
	key := k.key("zombie")
	c := claim(key, "zombie", "h1", t0)
	c.Lease = t0.Add(5 * time.Second)
	begin(t, s, c, store.OutcomeClaimed)
	next := claim(key, "new", "h1", t0.Add(6*time.Second))
	next.TakeOver = true
	begin(t, s, next, store.OutcomeTakenOver)

	late := tr(key, "zombie", t0.Add(7*time.Second), store.DecisionRan)
	late.Result = []byte("zombie-result")
	for name, op := range map[string]func(context.Context, store.Transition) error{
		"Complete": s.Complete, "Release": s.Release, "Abandon": s.Abandon,
	} {
		if err := op(ctx, late); !errors.Is(err, store.ErrNotOwner) {
			t.Fatalf("zombie %s = %v, want ErrNotOwner", name, err)
		}
	}
	good := tr(key, "new", t0.Add(8*time.Second), store.DecisionRan)
	good.Result = []byte("new-result")
	if err := s.Complete(ctx, good); err != nil {
		t.Fatalf("owner Complete: %v", err)
	}
	if r := get(t, s, key); string(r.Result) != "new-result" || r.Owner != "new" {
		t.Fatalf("record = result %q owner %q, want the new owner's", r.Result, r.Owner)
	}
	if rs, ok := keyReceipts(t, s, key); ok && fmt.Sprint(decisions(rs)) != "[claimed taken-over ran]" {
		t.Fatalf("receipts = %v: a refused transition must not leave a receipt", decisions(rs))
	}
}

func testTransitionsOwnerChecked(t *testing.T, s store.Gate, k *keys) {
	ctx := context.Background()
	missing := tr(k.key("missing"), "a", t0, store.DecisionRan)
	if err := s.Complete(ctx, missing); !errors.Is(err, store.ErrNotOwner) {
		t.Fatalf("Complete of a missing key = %v, want ErrNotOwner", err)
	}
	if _, err := s.Get(ctx, k.key("missing")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get of a missing key = %v, want ErrNotFound", err)
	}
	key := k.key("twice")
	begin(t, s, claim(key, "a", "h1", t0), store.OutcomeClaimed)
	if err := s.Complete(ctx, tr(key, "a", t0, store.DecisionRan)); err != nil {
		t.Fatal(err)
	}
	// Only a claimed record moves: completing or releasing a completed one is refused.
	if err := s.Complete(ctx, tr(key, "a", t0, store.DecisionRan)); !errors.Is(err, store.ErrNotOwner) {
		t.Fatalf("second Complete = %v, want ErrNotOwner", err)
	}
	if err := s.Release(ctx, tr(key, "a", t0, store.DecisionReleased)); !errors.Is(err, store.ErrNotOwner) {
		t.Fatalf("Release after Complete = %v, want ErrNotOwner", err)
	}
}

func testWindow(t *testing.T, s store.Gate, k *keys) {
	ctx := context.Background()
	key := k.key("window")
	begin(t, s, claim(key, "a", "h1", t0), store.OutcomeClaimed)
	done := t0.Add(time.Minute)
	if err := s.Complete(ctx, tr(key, "a", done, store.DecisionRan)); err != nil {
		t.Fatal(err)
	}
	if r := get(t, s, key); !r.ExpiresAt.Equal(done.Add(window)) {
		t.Fatalf("ExpiresAt = %v, want completion+window %v", r.ExpiresAt, done.Add(window))
	}
	begin(t, s, claim(key, "b", "h1", done.Add(window-time.Second)), store.OutcomeCompleted)
	// Past the window, the key's claim from another workflow (a business key used
	// again) is a new write. (Its own workflow's is a reset: testResetHeld.)
	other := claim(key, "c", "h2", done.Add(window))
	other.WorkflowID = "wf-2"
	rec := begin(t, s, other, store.OutcomeClaimed)
	if rec.Owner != "c" || rec.Claims != 1 || rec.ArgsHash != "h2" || rec.WorkflowID != "wf-2" {
		t.Fatalf("past the window = owner %q claims %d hash %q, want a new write", rec.Owner, rec.Claims, rec.ArgsHash)
	}
}

// A finished destructive write of a workflow is kept past its window while the
// workflow can still be reset (store.ResetHeld): a claim of its own workflow ID —
// the reset run — gets the stored result (or a conflict), Sweep keeps it, and only
// a sweep with Temporal's word forgets it (store.Forgettable). A standalone
// activity's (no workflow ID) and an idempotent write's expire with the window.
func testResetHeld(t *testing.T, s store.Store, k *keys) {
	ctx := context.Background()
	held, standalone, idem := k.key("reset-held"), k.key("standalone-past-window"), k.key("idem-past-window")
	complete := func(c store.Claim) {
		t.Helper()
		begin(t, s, c, store.OutcomeClaimed)
		if err := s.Complete(ctx, tr(c.Key, c.Owner, t0.Add(time.Second), store.DecisionRan)); err != nil {
			t.Fatal(err)
		}
	}
	complete(claim(held, "a", "h1", t0))
	sc := claim(standalone, "a", "h1", t0)
	sc.WorkflowID, sc.RunID = "", ""
	complete(sc)
	ic := claim(idem, "a", "h1", t0)
	ic.Activity, ic.Effect = "UpsertContact", "idempotent-write"
	complete(ic)

	later := t0.Add(2 * window) // a reset two days later
	if _, err := s.Sweep(ctx, later, 0); err != nil {
		t.Fatal(err)
	}
	r := get(t, s, held)
	if r.State != store.StateCompleted || r.Owner != "a" {
		t.Fatalf("finished destructive write after its window and a Sweep: state %q owner %q; want kept", r.State, r.Owner)
	}
	for _, key := range []string{standalone, idem} {
		if _, err := s.Get(ctx, key); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("%s past its window and a Sweep: err %v; want it forgotten", key, err)
		}
	}
	if store.Forgettable(r, later, true) || !store.Forgettable(r, later, false) {
		t.Fatalf("Forgettable(resettable true, false) = %v, %v; want false, true", store.Forgettable(r, later, true), store.Forgettable(r, later, false))
	}
	// The reset run (same workflow ID, a new run ID) gets the stored result.
	reset := claim(held, "b", "h1", later)
	reset.RunID = "run-2"
	if rec := begin(t, s, reset, store.OutcomeCompleted); rec.Owner != "a" {
		t.Fatalf("reset run past the window: owner %q; want the stored result of a", rec.Owner)
	}
	begin(t, s, claim(held, "c", "h2", later), store.OutcomeConflict)
	if rs, err := s.Pending(ctx, later, 0); err != nil || len(ours(k, rs)) != 0 {
		t.Fatalf("Pending = %v %v; a finished write blocks nothing", ours(k, rs), err)
	}
	// Another workflow's claim of the key (a business key) past the window: a new write.
	other := claim(held, "d", "h1", later)
	other.WorkflowID = "wf-2"
	if rec := begin(t, s, other, store.OutcomeClaimed); rec.Owner != "d" || rec.Claims != 1 {
		t.Fatalf("another workflow past the window: owner %q claims %d; want a new write", rec.Owner, rec.Claims)
	}
	// A sweep that heard from Temporal forgets a held record (store.HeldSweeper).
	hs, ok := s.(store.HeldSweeper)
	if !ok {
		return
	}
	forgotten := k.key("reset-held-forgotten")
	complete(claim(forgotten, "a", "h1", t0))
	if rs, err := hs.Held(ctx, t0.Add(time.Hour), 0); err != nil || len(ours(k, rs)) != 0 {
		t.Fatalf("Held inside the window = %v %v; want none", ours(k, rs), err)
	}
	rs, err := hs.Held(ctx, later, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := ours(k, rs); len(got) != 1 || got[0] != "reset-held-forgotten" {
		t.Fatalf("Held past the window = %v; want only %s (the others were re-claimed or forgotten)", got, forgotten)
	}
	stale := rs[slices.IndexFunc(rs, func(r store.Record) bool { return r.Key == forgotten })]
	if ok, err := hs.Forget(ctx, stale, t0.Add(time.Hour)); err != nil || ok {
		t.Fatalf("Forget inside the window = %v %v; want kept", ok, err)
	}
	wrong := stale
	wrong.Owner = "someone-else"
	if ok, err := hs.Forget(ctx, wrong, later); err != nil || ok {
		t.Fatalf("Forget of another owner's record = %v %v; want kept", ok, err)
	}
	if ok, err := hs.Forget(ctx, stale, later); err != nil || !ok {
		t.Fatalf("Forget = %v %v; want removed", ok, err)
	}
	if _, err := s.Get(ctx, forgotten); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("forgotten record: err %v; want ErrNotFound", err)
	}
	if rs, err := s.Receipts(ctx, store.ReceiptFilter{Key: forgotten}); err != nil || len(rs) != 2 {
		t.Fatalf("receipts of a forgotten key = %d (%v), want its claim's and completion's", len(rs), err)
	}
}

// A finished destructive write of a child workflow is kept past its window for a
// claim from any workflow of the same root (store.Root, store.PastWindowForOther):
// a reset of the root re-creates a child whose workflow ID the SDK generates anew
// (a grandchild, any child without an explicit ID) and which mints the same keys.
// The record keeps the attempt's own workflow ID and run ID beside the root's. A
// claim from another root and another workflow ID is a new write; a record without
// a root (written before roots were recorded) compares by its workflow ID.
func testResetHeldRoot(t *testing.T, s store.Store, k *keys) {
	ctx := context.Background()
	child, old, other := k.key("root-held"), k.key("root-held-old"), k.key("root-held-other")
	complete := func(c store.Claim) {
		t.Helper()
		begin(t, s, c, store.OutcomeClaimed)
		if err := s.Complete(ctx, tr(c.Key, c.Owner, t0.Add(time.Second), store.DecisionRan)); err != nil {
			t.Fatal(err)
		}
	}
	ofChild := func(key, owner, wf, run string, now time.Time) store.Claim {
		c := claim(key, owner, "h1", now)
		c.WorkflowID, c.RunID, c.RootWorkflowID = wf, run, "order-1"
		return c
	}
	complete(ofChild(child, "a", "run-a_1", "run-c1", t0))
	complete(ofChild(other, "a", "run-a_2", "run-c2", t0))
	oc := claim(old, "a", "h1", t0) // no root: an older record
	oc.WorkflowID = "run-a_3"
	complete(oc)
	r := get(t, s, child)
	if r.WorkflowID != "run-a_1" || r.RunID != "run-c1" || r.RootWorkflowID != "order-1" || store.Root(r) != "order-1" {
		t.Fatalf("record of a child: workflow %q run %q root %q; want the child's own and the root's", r.WorkflowID, r.RunID, r.RootWorkflowID)
	}
	// A sweep asks Temporal about the root and the child itself (which may outlive it).
	if got := store.ResetBy(r); !slices.Equal(got, []string{"order-1", "run-a_1"}) {
		t.Fatalf("ResetBy(child's record) = %q; want the root and the child", got)
	}
	if got := store.ResetBy(get(t, s, old)); !slices.Equal(got, []string{"run-a_3"}) {
		t.Fatalf("ResetBy(rootless record) = %q; want its workflow", got)
	}

	later := t0.Add(2 * window) // the root reset two days later
	if _, err := s.Sweep(ctx, later, 0); err != nil {
		t.Fatal(err)
	}
	// The re-created child (a new generated workflow ID, the same root) gets the stored result.
	if rec := begin(t, s, ofChild(child, "b", "run-b_1", "run-c3", later), store.OutcomeCompleted); rec.Owner != "a" {
		t.Fatalf("the root's reset re-created the child past the window: owner %q; want the stored result of a", rec.Owner)
	}
	// Another root (and another workflow ID): a business key used again, a new write.
	another := ofChild(other, "d", "wf-9", "run-9", later)
	another.RootWorkflowID = "order-2"
	if rec := begin(t, s, another, store.OutcomeClaimed); rec.Owner != "d" || rec.RootWorkflowID != "order-2" || rec.WorkflowID != "wf-9" {
		t.Fatalf("another root past the window: owner %q root %q workflow %q; want a new write of d", rec.Owner, rec.RootWorkflowID, rec.WorkflowID)
	}
	// A record without a root: a claim of its workflow ID is a reset whatever the
	// claim's root says; another workflow ID is compared with the record's workflow ID.
	same := ofChild(old, "e", "run-a_3", "run-x", later)
	if rec := begin(t, s, same, store.OutcomeCompleted); rec.Owner != "a" {
		t.Fatalf("a rootless record claimed by its workflow ID with a root: owner %q; want the stored result", rec.Owner)
	}
	// A claim without a root (an older workflow worker) from the record's root workflow.
	fromRoot := claim(child, "f", "h1", later)
	fromRoot.WorkflowID = "order-1"
	if rec := begin(t, s, fromRoot, store.OutcomeCompleted); rec.Owner != "a" {
		t.Fatalf("a rootless claim of the root workflow: owner %q; want the stored result", rec.Owner)
	}
	if rec := begin(t, s, ofChild(old, "g", "run-b_3", "run-y", later), store.OutcomeClaimed); rec.Owner != "g" {
		t.Fatalf("a rootless record claimed by another workflow ID: owner %q; want a new write", rec.Owner)
	}
	if hs, ok := s.(store.HeldSweeper); ok {
		rs, err := hs.Held(ctx, later, 0)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(rs, func(r store.Record) bool { return r.Key == child })
		if i < 0 || rs[i].RootWorkflowID != "order-1" || rs[i].WorkflowID != "run-a_1" {
			t.Fatalf("Held past the window = %v; want %s with its root", ours(k, rs), child)
		}
	}
}

func testSweep(t *testing.T, s store.Store, k *keys) {
	ctx := context.Background()
	for i := range 5 { // finished writes: forgotten once their window passed
		key := k.key(fmt.Sprintf("old-%d", i))
		c := claim(key, "a", "h1", t0)
		c.Window = time.Hour
		// Idempotent: a finished destructive write is kept while its workflow can
		// be reset (testResetHeld).
		c.Activity, c.Effect = "UpsertContact", "idempotent-write"
		begin(t, s, c, store.OutcomeClaimed)
		done := tr(key, "a", t0.Add(time.Second), store.DecisionRan)
		done.Window = time.Hour
		if err := s.Complete(ctx, done); err != nil {
			t.Fatal(err)
		}
	}
	live := claim(k.key("live"), "a", "h1", t0)
	live.Window = 48 * time.Hour
	begin(t, s, live, store.OutcomeClaimed)

	now := t0.Add(2 * time.Hour)
	n1, err := s.Sweep(ctx, now, 3)
	if err != nil {
		t.Fatal(err)
	}
	if n1 > 3 || n1 == 0 {
		t.Fatalf("Sweep(limit 3) removed %d", n1)
	}
	total := n1
	for range 5 {
		n, err := s.Sweep(ctx, now, 3)
		if err != nil {
			t.Fatal(err)
		}
		total += n
	}
	// Other subtests may share the database: count only our keys.
	for i := range 5 {
		if _, err := s.Get(ctx, k.key(fmt.Sprintf("old-%d", i))); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("expired old-%d still there after sweeping (err %v)", i, err)
		}
	}
	if _, err := s.Get(ctx, k.key("live")); err != nil {
		t.Fatalf("live record swept: %v", err)
	}
	if total < 5 {
		t.Fatalf("sweeps reported %d removed, want at least 5", total)
	}
	rs, err := s.Receipts(ctx, store.ReceiptFilter{Key: k.key("old-0")})
	if err != nil || len(rs) != 2 {
		t.Fatalf("receipts of a swept key = %d (%v), want its claim's and completion's: receipts outlive records", len(rs), err)
	}
}

func testReceipts(t *testing.T, s store.Store, k *keys) {
	ctx := context.Background()
	key := k.key("receipts")
	begin(t, s, claim(key, "a", "h1", t0), store.OutcomeClaimed)
	refused := store.Receipt{Time: t0.Add(time.Second), Key: key, Activity: "ChargeCard", Effect: "destructive",
		Decision: store.DecisionRefusedInFlight, ArgsHash: "h1", Call: []byte(`{"amount":4200}`), Error: "in flight"}
	if err := s.Append(ctx, refused); err != nil {
		t.Fatalf("Append: %v", err)
	}
	if err := s.Complete(ctx, tr(key, "a", t0.Add(2*time.Second), store.DecisionRan)); err != nil {
		t.Fatal(err)
	}
	rs, err := s.Receipts(ctx, store.ReceiptFilter{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(decisions(rs)); got != "[claimed refused-in-flight ran]" {
		t.Fatalf("receipts = %s", got)
	}
	for i := 1; i < len(rs); i++ {
		if rs[i].ID <= rs[i-1].ID {
			t.Fatalf("receipt IDs not increasing: %d then %d", rs[i-1].ID, rs[i].ID)
		}
	}
	r := rs[1]
	if !bytes.Equal(r.Call, refused.Call) || r.Error != "in flight" || !r.Time.Equal(refused.Time) || r.Activity != "ChargeCard" {
		t.Fatalf("stored receipt = %+v, want %+v", r, refused)
	}
	if rs[0].WorkflowID != "wf-1" || rs[0].RunID != "run-1" || rs[0].Attempt != 1 || rs[0].ArgsHash != "h1" {
		t.Fatalf("claim receipt lacks the attempt: %+v", rs[0])
	}
	// What a caller holds is a copy: changing it changes nothing stored.
	rs[1].Call[0] = 'X'
	rs[1].Decision = "tampered"
	again, err := s.Receipts(ctx, store.ReceiptFilter{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	if again[1].Decision != store.DecisionRefusedInFlight || again[1].Call[0] != '{' {
		t.Fatalf("receipt changed through a returned copy: %+v", again[1])
	}
}

func testReceiptFilters(t *testing.T, s store.Store, k *keys) {
	ctx := context.Background()
	wf := k.key("wf")
	for i, d := range []store.Decision{store.DecisionRan, store.DecisionReplayed, store.DecisionGated} {
		r := store.Receipt{Time: t0.Add(time.Duration(i) * time.Minute), Key: k.key(fmt.Sprint("f", i)),
			Activity: k.key(fmt.Sprint("act", i%2)), Decision: d, WorkflowID: wf}
		if err := s.Append(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name string
		f    store.ReceiptFilter
		want int
	}{
		{"workflow", store.ReceiptFilter{WorkflowID: wf}, 3},
		{"key", store.ReceiptFilter{Key: k.key("f1")}, 1},
		{"activity", store.ReceiptFilter{WorkflowID: wf, Activity: k.key("act0")}, 2},
		{"decision", store.ReceiptFilter{WorkflowID: wf, Decision: store.DecisionGated}, 1},
		{"since", store.ReceiptFilter{WorkflowID: wf, Since: t0.Add(time.Minute)}, 2},
		{"until", store.ReceiptFilter{WorkflowID: wf, Until: t0.Add(time.Minute)}, 1},
		{"limit", store.ReceiptFilter{WorkflowID: wf, Limit: 2}, 2},
	}
	for _, c := range cases {
		rs, err := s.Receipts(ctx, c.f)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if len(rs) != c.want {
			t.Errorf("%s: %d receipts, want %d", c.name, len(rs), c.want)
		}
	}
}

func testResultRoundTrip(t *testing.T, s store.Gate, k *keys) {
	ctx := context.Background()
	payload := bytes.Repeat([]byte{0, 1, 2, 0xff, '\'', '"'}, 1000)
	key := k.key("bytes")
	begin(t, s, claim(key, "a", "h1", t0), store.OutcomeClaimed)
	done := tr(key, "a", t0, store.DecisionRan)
	done.Result = payload
	if err := s.Complete(ctx, done); err != nil {
		t.Fatal(err)
	}
	if r := get(t, s, key); !bytes.Equal(r.Result, payload) || r.ResultOmitted {
		t.Fatalf("binary result did not round-trip (%d bytes back, omitted %v)", len(r.Result), r.ResultOmitted)
	}
	key2 := k.key("omitted")
	begin(t, s, claim(key2, "a", "h1", t0), store.OutcomeClaimed)
	om := tr(key2, "a", t0, store.DecisionRan)
	om.ResultOmitted = true
	if err := s.Complete(ctx, om); err != nil {
		t.Fatal(err)
	}
	if r := get(t, s, key2); !r.ResultOmitted || len(r.Result) != 0 || r.State != store.StateCompleted {
		t.Fatalf("omitted result = %+v", r)
	}
}

// testEffectSource: the claim receipt Begin appends (claim and takeover) carries
// Claim.EffectSource, and a transition's and an appended receipt keep theirs.
func testEffectSource(t *testing.T, s store.Store, k *keys) {
	ctx := context.Background()
	key, other := k.key("source"), k.key("source-released")
	c := claim(key, "a", "h1", t0)
	c.EffectSource = store.EffectByHint
	begin(t, s, c, store.OutcomeClaimed)
	refused := store.Receipt{Time: t0.Add(time.Second), Key: key, Activity: "ChargeCard", Effect: "destructive",
		EffectSource: store.EffectByOverride, Decision: store.DecisionRefusedInFlight, ArgsHash: "h1"}
	if err := s.Append(ctx, refused); err != nil {
		t.Fatal(err)
	}
	ab := tr(key, "a", t0.Add(2*time.Second), store.DecisionUnknown)
	ab.Receipt.EffectSource = store.EffectByName
	if err := s.Abandon(ctx, ab); err != nil {
		t.Fatal(err)
	}
	c = claim(key, "b", "h1", t0.Add(3*time.Second))
	c.TakeOver, c.EffectSource = true, store.EffectByOverride
	begin(t, s, c, store.OutcomeTakenOver)
	done := tr(key, "b", t0.Add(4*time.Second), store.DecisionRan)
	done.Receipt.EffectSource = store.EffectByHint
	if err := s.Complete(ctx, done); err != nil {
		t.Fatal(err)
	}
	c = claim(other, "a", "h1", t0)
	c.EffectSource = store.EffectByName
	begin(t, s, c, store.OutcomeClaimed)
	rel := tr(other, "a", t0.Add(time.Second), store.DecisionReleased)
	rel.Receipt.EffectSource = store.EffectByOverride
	if err := s.Release(ctx, rel); err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		key  string
		want string
	}{
		{key, "[claimed/hint refused-in-flight/override unknown/name taken-over/override ran/hint]"},
		{other, "[claimed/name released/override]"},
	} {
		rs, err := s.Receipts(ctx, store.ReceiptFilter{Key: w.key})
		if err != nil {
			t.Fatal(err)
		}
		got := make([]string, len(rs))
		for i, r := range rs {
			got[i] = string(r.Decision) + "/" + r.EffectSource
		}
		if fmt.Sprint(got) != w.want {
			t.Errorf("receipts of %s (decision/effect source) = %v, want %s", w.key, got, w.want)
		}
	}
}

func decisions(rs []store.Receipt) []store.Decision {
	out := make([]store.Decision, len(rs))
	for i, r := range rs {
		out[i] = r.Decision
	}
	return out
}

// farBase is a clock origin of its own, years after t0: records other subtests and
// earlier runs left in a shared database are expired there and do not block.
func farBase() time.Time {
	return t0.AddDate(10+rand.IntN(50000), 0, 0)
}

func ours(k *keys, rs []store.Record) []string {
	var out []string
	for _, r := range rs {
		if strings.HasPrefix(r.Key, k.prefix) {
			out = append(out, strings.TrimPrefix(r.Key, k.prefix+"/"))
		}
	}
	return out
}

func testPending(t *testing.T, s store.Store, k *keys) {
	ctx := context.Background()
	base := farBase()
	at := func(i int) time.Time { return base.Add(time.Duration(i) * time.Minute) }
	// Created in this order; the lease of each is one minute after its claim.
	mk := func(name string, i int) store.Claim {
		c := claim(k.key(name), "o-"+name, "h1", at(i))
		c.Lease = at(i + 1)
		return c
	}
	begin(t, s, mk("unknown", 1), store.OutcomeClaimed)
	if err := s.Abandon(ctx, tr(k.key("unknown"), "o-unknown", at(1), store.DecisionUnknown)); err != nil {
		t.Fatal(err)
	}
	begin(t, s, mk("lease-passed", 2), store.OutcomeClaimed)
	begin(t, s, mk("completed", 3), store.OutcomeClaimed)
	if err := s.Complete(ctx, tr(k.key("completed"), "o-completed", at(3), store.DecisionRan)); err != nil {
		t.Fatal(err)
	}
	begin(t, s, mk("released", 4), store.OutcomeClaimed)
	if err := s.Release(ctx, tr(k.key("released"), "o-released", at(4), store.DecisionReleased)); err != nil {
		t.Fatal(err)
	}
	begin(t, s, mk("unknown-2", 5), store.OutcomeClaimed)
	if err := s.Abandon(ctx, tr(k.key("unknown-2"), "o-unknown-2", at(5), store.DecisionUnknown)); err != nil {
		t.Fatal(err)
	}
	live := mk("live", 6)
	live.Lease = at(60)
	begin(t, s, live, store.OutcomeClaimed)

	now := at(10)
	rs, err := s.Pending(ctx, now, 0)
	if err != nil {
		t.Fatalf("Pending: %v", err)
	}
	if got := fmt.Sprint(ours(k, rs)); got != "[unknown lease-passed unknown-2]" {
		t.Fatalf("Pending = %s, want the unknown and lease-passed records, oldest first; not the live, completed or released ones", got)
	}
	for _, r := range rs {
		if strings.HasPrefix(r.Key, k.prefix) && (!bytes.Equal(r.Args, []byte(`{"amount":4200}`)) || r.Activity != "ChargeCard" || r.Owner == "") {
			t.Fatalf("pending record lacks the withheld call: %+v", r)
		}
	}
	// Other subtests sharing the database may hold older pending records (a
	// destructive write's unknown outcome never expires): the limit counts them too.
	older := 0
	for older < len(rs) && !strings.HasPrefix(rs[older].Key, k.prefix) {
		older++
	}
	if rs, err := s.Pending(ctx, now, older+2); err != nil || len(rs) != older+2 || fmt.Sprint(ours(k, rs)) != "[unknown lease-passed]" {
		t.Fatalf("Pending(limit %d) = %v, %v; want the two oldest of ours after %d older", older+2, ours(k, rs), err, older)
	}
	// Before its lease passes, a claim does not block; past the window, a
	// destructive write whose outcome nobody knows still does.
	if rs, err := s.Pending(ctx, at(3).Add(-time.Second), 0); err != nil || fmt.Sprint(ours(k, rs)) != "[unknown unknown-2]" {
		t.Fatalf("Pending before the lease passed = %v, %v; want only the abandoned records", ours(k, rs), err)
	}
	if rs, err := s.Pending(ctx, at(1).Add(30*window), 0); err != nil || fmt.Sprint(ours(k, rs)) != "[unknown lease-passed unknown-2 live]" {
		t.Fatalf("Pending long past every window = %v, %v; want every one still pending (and the live claim's lease passed)", ours(k, rs), err)
	}
}

// A destructive claim whose lease still runs is listed once an attempt has been
// refused on it (a refused-in-flight receipt after its claim receipt): the workflow
// waits on it, or failed. Only the current claim counts: a refusal before a re-claim
// does not list the new claim; nor does a refusal on an idempotent write's claim,
// which the next attempt takes over by itself.
func testPendingRefused(t *testing.T, s store.Store, k *keys) {
	ctx := context.Background()
	base := farBase()
	refusal := func(key, activity, effect string, at time.Time) {
		t.Helper()
		if err := s.Append(ctx, store.Receipt{Time: at, Key: key, Activity: activity, Effect: effect,
			Decision: store.DecisionRefusedInFlight, ArgsHash: "h1", WorkflowID: "wf", Attempt: 2,
			Error: "holds the claim and may still be running"}); err != nil {
			t.Fatal(err)
		}
	}
	pending := func(at time.Time) string {
		t.Helper()
		rs, err := s.Pending(ctx, at, 0)
		if err != nil {
			t.Fatalf("Pending: %v", err)
		}
		return fmt.Sprint(ours(k, rs))
	}
	live, quiet, idem := k.key("live"), k.key("quiet"), k.key("idem")
	for i, key := range []string{live, quiet} {
		c := claim(key, "a", "h1", base.Add(time.Duration(i)*time.Second))
		c.Lease = base.Add(time.Hour)
		begin(t, s, c, store.OutcomeClaimed)
	}
	ic := claim(idem, "a", "h1", base.Add(2*time.Second))
	ic.Activity, ic.Effect, ic.Lease = "UpsertContact", "idempotent-write", base.Add(time.Hour)
	begin(t, s, ic, store.OutcomeClaimed)
	now := base.Add(time.Minute)
	if got := pending(now); got != "[]" {
		t.Fatalf("Pending with live claims nobody was refused on = %s, want none", got)
	}
	refusal(live, "ChargeCard", "destructive", now)
	refusal(idem, "UpsertContact", "idempotent-write", now)
	// Append order decides, not time: quiet's refusal carries a time before its claim
	// (the refusing worker's clock behind).
	refusal(quiet, "ChargeCard", "destructive", now.Add(-time.Hour))
	if got := pending(now); got != "[live quiet]" {
		t.Fatalf("Pending after refusals on live claims = %s, want the destructive ones, oldest first", got)
	}
	// The owner released quiet (nothing sent); a new claim starts with no refusal on it.
	if err := s.Release(ctx, tr(quiet, "a", now, store.DecisionReleased)); err != nil {
		t.Fatal(err)
	}
	c := claim(quiet, "b", "h1", now.Add(time.Second))
	c.Lease = base.Add(2 * time.Hour)
	begin(t, s, c, store.OutcomeClaimed)
	if got := pending(now.Add(2 * time.Second)); got != "[live]" {
		t.Fatalf("Pending after a re-claim = %s, want only the claim refused since its claim", got)
	}
	// Once the owner completes, nothing is pending.
	if err := s.Complete(ctx, tr(live, "a", now.Add(3*time.Second), store.DecisionRan)); err != nil {
		t.Fatal(err)
	}
	if got := pending(now.Add(4 * time.Second)); got != "[]" {
		t.Fatalf("Pending after the owner completed = %s, want none", got)
	}
}

func resolveTr(key, owner string, now time.Time, resolution string) store.Transition {
	t := tr(key, owner, now, store.DecisionResolved)
	t.Receipt.Actor, t.Receipt.Reason, t.Receipt.Resolution = "alice", "checked the vendor dashboard", resolution
	return t
}

func testResolveSent(t *testing.T, s store.Store, k *keys) {
	ctx := context.Background()
	key := k.key("sent")
	begin(t, s, claim(key, "a", "h1", t0), store.OutcomeClaimed)
	if err := s.Abandon(ctx, tr(key, "a", t0.Add(time.Second), store.DecisionUnknown)); err != nil {
		t.Fatal(err)
	}
	begin(t, s, claim(key, "b", "h1", t0.Add(2*time.Second)), store.OutcomeUnknown)
	done := t0.Add(time.Hour)
	rt := resolveTr(key, "a", done, store.ResolvedSent)
	rt.Result = []byte("resolved-result")
	if err := s.Resolve(ctx, rt, store.StateCompleted); err != nil {
		t.Fatalf("Resolve(sent): %v", err)
	}
	r := get(t, s, key)
	if r.State != store.StateCompleted || string(r.Result) != "resolved-result" || !r.ExpiresAt.Equal(done.Add(window)) {
		t.Fatalf("resolved record = state %q result %q expires %v", r.State, r.Result, r.ExpiresAt)
	}
	rec := begin(t, s, claim(key, "c", "h1", done.Add(time.Second)), store.OutcomeCompleted)
	if string(rec.Result) != "resolved-result" {
		t.Fatalf("next attempt got %q, want the resolved result", rec.Result)
	}
	rs, err := s.Receipts(ctx, store.ReceiptFilter{Key: key, Decision: store.DecisionResolved})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || rs[0].Actor != "alice" || rs[0].Reason != "checked the vendor dashboard" ||
		rs[0].Resolution != store.ResolvedSent || !rs[0].Time.Equal(done) {
		t.Fatalf("resolved receipt = %+v", rs)
	}
}

func testResolveNotSent(t *testing.T, s store.Store, k *keys) {
	ctx := context.Background()
	base := farBase()
	key := k.key("not-sent")
	c := claim(key, "a", "h1", base)
	c.Lease = base.Add(10 * time.Second)
	begin(t, s, c, store.OutcomeClaimed)
	// The owner never came back: its lease passed while it held the claim. From the
	// lease on it blocks the key and Pending lists it, so an operator sees it at once;
	// but until LeaseMargin after the lease a worker whose clock runs behind may still
	// be sending, and a person may not resolve it yet.
	open := c.Lease.Add(store.LeaseMargin)
	early := open.Add(-time.Microsecond)
	if rs, err := s.Pending(ctx, c.Lease.Add(-time.Microsecond), 0); err != nil || len(ours(k, rs)) != 0 {
		t.Fatalf("Pending one microsecond before the lease = %v, %v; want nothing (nobody was refused on it)", ours(k, rs), err)
	}
	for _, at := range []time.Time{c.Lease, early} {
		if rs, err := s.Pending(ctx, at, 0); err != nil || fmt.Sprint(ours(k, rs)) != "[not-sent]" {
			t.Fatalf("Pending at %v (lease %v) = %v, %v; want the claim: its owner is gone", at, c.Lease, ours(k, rs), err)
		}
	}
	if got := store.ResolvableFrom(get(t, s, key)); !got.Equal(open) {
		t.Fatalf("ResolvableFrom = %v, want lease+LeaseMargin %v", got, open)
	}
	if err := s.Resolve(ctx, resolveTr(key, "a", early, store.ResolvedNotSent), store.StateReleased); !errors.Is(err, store.ErrNotOwner) {
		t.Fatalf("Resolve(not sent) one microsecond before lease+LeaseMargin = %v, want ErrNotOwner", err)
	}
	if rs, err := s.Pending(ctx, open, 0); err != nil || fmt.Sprint(ours(k, rs)) != "[not-sent]" {
		t.Fatalf("Pending at lease+LeaseMargin = %v, %v; want the claim", ours(k, rs), err)
	}
	if err := s.Resolve(ctx, resolveTr(key, "a", open, store.ResolvedNotSent), store.StateReleased); err != nil {
		t.Fatalf("Resolve(not sent) at lease+LeaseMargin: %v", err)
	}
	if r := get(t, s, key); r.State != store.StateReleased {
		t.Fatalf("state after Resolve(not sent) = %q", r.State)
	}
	begin(t, s, claim(key, "b", "h1", open.Add(time.Second)), store.OutcomeClaimed)
	rs, err := s.Receipts(ctx, store.ReceiptFilter{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(decisions(rs)); got != "[claimed resolved claimed]" || rs[1].Resolution != store.ResolvedNotSent {
		t.Fatalf("receipts = %s (%+v)", got, rs)
	}
}

func testResolveRefused(t *testing.T, s store.Store, k *keys) {
	ctx := context.Background()
	// A live claim: its attempt may still be running.
	live := k.key("live")
	c := claim(live, "a", "h1", t0)
	c.Lease = t0.Add(time.Minute)
	begin(t, s, c, store.OutcomeClaimed)
	// A completed write.
	done := k.key("completed")
	begin(t, s, claim(done, "a", "h1", t0), store.OutcomeClaimed)
	if err := s.Complete(ctx, tr(done, "a", t0, store.DecisionRan)); err != nil {
		t.Fatal(err)
	}
	// Resolved once already.
	twice := k.key("twice")
	begin(t, s, claim(twice, "a", "h1", t0), store.OutcomeClaimed)
	if err := s.Abandon(ctx, tr(twice, "a", t0, store.DecisionUnknown)); err != nil {
		t.Fatal(err)
	}
	if err := s.Resolve(ctx, resolveTr(twice, "a", t0.Add(time.Minute).Add(store.LeaseMargin), store.ResolvedNotSent), store.StateReleased); err != nil {
		t.Fatal(err)
	}
	// Taken over since the operator read it: the owner changed.
	moved := k.key("moved")
	begin(t, s, claim(moved, "a", "h1", t0), store.OutcomeClaimed)
	if err := s.Abandon(ctx, tr(moved, "a", t0, store.DecisionUnknown)); err != nil {
		t.Fatal(err)
	}
	over := claim(moved, "b", "h1", t0.Add(time.Second))
	over.TakeOver = true
	begin(t, s, over, store.OutcomeTakenOver)

	now := t0.Add(30 * time.Second)
	for _, tc := range []struct {
		name, key, owner string
		to               store.State
	}{
		{"live claim, sent", live, "a", store.StateCompleted},
		{"live claim, not sent", live, "a", store.StateReleased},
		{"completed", done, "a", store.StateCompleted},
		{"completed, not sent", done, "a", store.StateReleased},
		{"already resolved", twice, "a", store.StateCompleted},
		{"owner changed", moved, "a", store.StateReleased},
	} {
		before := get(t, s, tc.key)
		rt := resolveTr(tc.key, tc.owner, now, store.ResolvedSent)
		rt.Result = []byte("x")
		if err := s.Resolve(ctx, rt, tc.to); !errors.Is(err, store.ErrNotOwner) {
			t.Fatalf("%s: Resolve = %v, want ErrNotOwner", tc.name, err)
		}
		if after := get(t, s, tc.key); after.State != before.State || after.Owner != before.Owner || !bytes.Equal(after.Result, before.Result) {
			t.Fatalf("%s: a refused Resolve changed the record: %+v -> %+v", tc.name, before, after)
		}
	}
	if err := s.Resolve(ctx, resolveTr(k.key("missing"), "a", now, store.ResolvedSent), store.StateCompleted); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Resolve of a missing key = %v, want ErrNotFound", err)
	}
	if err := s.Resolve(ctx, resolveTr(moved, "b", t0.Add(2*time.Hour), store.ResolvedSent), store.StateUnknown); err == nil {
		t.Fatal("Resolve to StateUnknown succeeded; only completed or released are allowed")
	}
	for _, key := range []string{live, done, moved} {
		rs, err := s.Receipts(ctx, store.ReceiptFilter{Key: key, Decision: store.DecisionResolved})
		if err != nil || len(rs) != 0 {
			t.Fatalf("%s: refused Resolve left receipts %+v (%v)", key, rs, err)
		}
	}
	if rs, err := s.Receipts(ctx, store.ReceiptFilter{Key: twice, Decision: store.DecisionResolved}); err != nil || len(rs) != 1 {
		t.Fatalf("twice: %d resolved receipts (%v), want the first only", len(rs), err)
	}
}

func ourPauses(t *testing.T, s store.Store, k *keys) []store.Pause {
	t.Helper()
	ps, err := s.Pauses(context.Background())
	if err != nil {
		t.Fatalf("Pauses: %v", err)
	}
	return slices.DeleteFunc(ps, func(p store.Pause) bool {
		return !strings.HasPrefix(p.Activity, k.prefix) && !strings.HasPrefix(p.Effect, k.prefix)
	})
}

func testPauses(t *testing.T, s store.Store, k *keys) {
	ctx := context.Background()
	// Names carry the prefix so that pauses of a shared database stay apart.
	act, eff := k.key("ChargeCard"), k.key("destructive")
	if ps := ourPauses(t, s, k); len(ps) != 0 {
		t.Fatalf("new store has pauses %+v", ps)
	}
	for _, bad := range []store.Pause{{}, {Activity: act, Effect: eff}} {
		if err := s.Pause(ctx, bad); err == nil {
			t.Fatalf("Pause(%+v) succeeded; exactly one of Activity and Effect must be set", bad)
		}
	}
	p1 := store.Pause{Activity: act, Actor: "alice", Reason: "vendor incident", Time: t0}
	p2 := store.Pause{Effect: eff, Actor: "bob", Reason: "all destructive writes", Time: t0.Add(time.Minute)}
	for _, p := range []store.Pause{p1, p2} {
		if err := s.Pause(ctx, p); err != nil {
			t.Fatalf("Pause(%s): %v", p.Scope(), err)
		}
	}
	ps := ourPauses(t, s, k)
	if len(ps) != 2 || ps[0] != p1 || ps[1] != p2 {
		t.Fatalf("Pauses = %+v, want %+v then %+v", ps, p1, p2)
	}
	if !ps[0].Matches(act, "destructive") || ps[0].Matches("Other", "destructive") || !ps[1].Matches("Other", eff) {
		t.Fatal("Pause.Matches disagrees with the scope")
	}
	// Pausing again replaces the pause of that scope.
	p1b := p1
	p1b.Reason, p1b.Time = "still down", t0.Add(2*time.Minute)
	if err := s.Pause(ctx, p1b); err != nil {
		t.Fatal(err)
	}
	if ps := ourPauses(t, s, k); len(ps) != 2 || ps[1] != p1b {
		t.Fatalf("after re-pausing: %+v", ps)
	}
	if err := s.Resume(ctx, store.Pause{Activity: act, Actor: "carol", Reason: "fixed", Time: t0.Add(3 * time.Minute)}); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if ps := ourPauses(t, s, k); len(ps) != 1 || ps[0] != p2 {
		t.Fatalf("after Resume: %+v", ps)
	}
	if err := s.Resume(ctx, store.Pause{Activity: act, Time: t0}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Resume of a scope not paused = %v, want ErrNotFound", err)
	}
	rs, err := s.Receipts(ctx, store.ReceiptFilter{Activity: act})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(decisions(rs)); got != "[paused paused resumed]" {
		t.Fatalf("pause receipts = %s", got)
	}
	if r := rs[2]; r.Actor != "carol" || r.Reason != "fixed" || !r.Time.Equal(t0.Add(3*time.Minute)) {
		t.Fatalf("resume receipt = %+v", r)
	}
	if err := s.Resume(ctx, store.Pause{Effect: eff, Actor: "bob", Reason: "done", Time: t0}); err != nil {
		t.Fatal(err)
	}
	if ps := ourPauses(t, s, k); len(ps) != 0 {
		t.Fatalf("after resuming everything: %+v", ps)
	}
}

// Begin returns the record it stored, and Complete, Release and Abandon store
// exactly what store.Apply returns, field by field, whatever a backend writes
// (a whole row, or only the columns that change).
func testStepsMatchRules(t *testing.T, s store.Gate, k *keys) {
	ctx := context.Background()
	for _, tc := range []struct {
		to   store.State
		op   func(context.Context, store.Transition) error
		d    store.Decision
		take bool
	}{
		{store.StateCompleted, s.Complete, store.DecisionRan, false},
		{store.StateReleased, s.Release, store.DecisionReleased, false},
		{store.StateUnknown, s.Abandon, store.DecisionUnknown, false},
		{store.StateCompleted, s.Complete, store.DecisionRan, true},
		{store.StateReleased, s.Release, store.DecisionReleased, true},
	} {
		key := k.key(fmt.Sprintf("rules-%s-%v", tc.to, tc.take))
		owner := "a"
		rec := begin(t, s, claim(key, owner, "h1", t0), store.OutcomeClaimed)
		if tc.take {
			c := claim(key, "b", "h1", t0.Add(2*time.Minute))
			c.TakeOver, c.Attempt, c.RunID = true, 2, "run-2"
			if err := s.Abandon(ctx, tr(key, owner, t0.Add(time.Second), store.DecisionUnknown)); err != nil {
				t.Fatal(err)
			}
			rec = begin(t, s, c, store.OutcomeTakenOver)
			owner = "b"
		}
		if got := get(t, s, key); !sameRecord(got, rec) {
			t.Fatalf("%s: Get after Begin = %+v, want what Begin returned %+v", key, got, rec)
		}
		step := tr(key, owner, t0.Add(3*time.Minute), tc.d)
		step.Result, step.ResultOmitted = []byte(`{"id":"ch_1"}`), tc.take
		want, err := store.Apply(rec, tc.to, step)
		if err != nil {
			t.Fatal(err)
		}
		if err := tc.op(ctx, step); err != nil {
			t.Fatalf("%s: %s: %v", key, tc.to, err)
		}
		if got := get(t, s, key); !sameRecord(got, want) {
			t.Fatalf("%s: record after the move to %s = %+v, want store.Apply's %+v", key, tc.to, got, want)
		}
	}
}

// sameRecord compares records field by field, with empty and nil byte slices
// alike and times by instant.
func sameRecord(a, b store.Record) bool {
	norm := func(r store.Record) store.Record {
		for _, p := range []*[]byte{&r.Args, &r.Result} {
			if len(*p) == 0 {
				*p = nil
			}
		}
		for _, p := range []*time.Time{&r.Lease, &r.CreatedAt, &r.UpdatedAt, &r.ExpiresAt} {
			*p = p.UTC()
		}
		if len(r.Sent) == 0 {
			r.Sent = nil
		}
		return r
	}
	return reflect.DeepEqual(norm(a), norm(b))
}

// A claim whose lease outlives the window (StartToCloseTimeout 48h, window 24h) is
// neither re-claimed nor swept while it may run, and its attempt can still store
// its result.
func testLiveClaimOutlivesWindow(t *testing.T, s store.Store, k *keys) {
	ctx := context.Background()
	key := k.key("long-lease")
	c := claim(key, "a", "h1", t0)
	c.Lease = t0.Add(48 * time.Hour)
	rec := begin(t, s, c, store.OutcomeClaimed)
	if want := c.Lease.Add(store.LeaseMargin); !rec.ExpiresAt.Equal(want) {
		t.Fatalf("ExpiresAt = %v, want lease+LeaseMargin %v", rec.ExpiresAt, want)
	}
	later := t0.Add(window + time.Hour)
	for _, take := range []bool{false, true} {
		c2 := claim(key, "b", "h1", later)
		c2.TakeOver = take
		begin(t, s, c2, store.OutcomeInFlight)
	}
	begin(t, s, claim(key, "b", "h2", later), store.OutcomeConflict)
	if _, err := s.Sweep(ctx, later, 0); err != nil {
		t.Fatal(err)
	}
	if r := get(t, s, key); r.Owner != "a" || r.State != store.StateClaimed {
		t.Fatalf("live claim after Sweep = owner %q state %q", r.Owner, r.State)
	}
	if rs, err := s.Pending(ctx, later, 0); err != nil || len(ours(k, rs)) != 0 {
		t.Fatalf("Pending lists a live claim: %v, %v", ours(k, rs), err)
	}
	done := tr(key, "a", t0.Add(47*time.Hour), store.DecisionRan)
	done.Result = []byte("late-result")
	if err := s.Complete(ctx, done); err != nil {
		t.Fatalf("the first attempt cannot store its result: %v", err)
	}
	rec = begin(t, s, claim(key, "c", "h1", t0.Add(47*time.Hour+time.Minute)), store.OutcomeCompleted)
	if string(rec.Result) != "late-result" {
		t.Fatalf("repeat got %q, want the stored result", rec.Result)
	}
}

// A destructive write whose outcome nobody knows — abandoned as unknown, or claimed
// by an owner that vanished — is never forgotten when its window runs out: a later
// attempt is refused (OutcomeUnknown), Sweep keeps it, Pending lists it, until a
// person resolves it. An idempotent write's unknown record expires as before.
func testUnknownOutlivesWindow(t *testing.T, s store.Store, k *keys) {
	ctx := context.Background()
	unknown, vanished, idem := k.key("unknown-past-window"), k.key("vanished-past-window"), k.key("idem-unknown-past-window")
	begin(t, s, claim(unknown, "a", "h1", t0), store.OutcomeClaimed)
	if err := s.Abandon(ctx, tr(unknown, "a", t0.Add(time.Second), store.DecisionUnknown)); err != nil {
		t.Fatal(err)
	}
	begin(t, s, claim(vanished, "a", "h1", t0), store.OutcomeClaimed) // its owner never comes back
	ic := claim(idem, "a", "h1", t0)
	ic.Activity, ic.Effect = "UpsertContact", "idempotent-write"
	begin(t, s, ic, store.OutcomeClaimed)
	if err := s.Abandon(ctx, tr(idem, "a", t0.Add(time.Second), store.DecisionUnknown)); err != nil {
		t.Fatal(err)
	}

	later := t0.Add(30 * window)
	for _, key := range []string{unknown, vanished} {
		begin(t, s, claim(key, "b", "h1", later), store.OutcomeUnknown)
	}
	if _, err := s.Sweep(ctx, later, 0); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]store.State{unknown: store.StateUnknown, vanished: store.StateClaimed} {
		if r := get(t, s, key); r.State != want || r.Owner != "a" {
			t.Fatalf("%s after its window and a Sweep: state %q owner %q; want %q of owner a, kept", key, r.State, r.Owner, want)
		}
	}
	rs, err := s.Pending(ctx, later, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := ours(k, rs); len(got) != 2 {
		t.Fatalf("Pending past the window = %v; want both destructive records with no known outcome", got)
	}
	// The idempotent write's unknown record is forgotten: a repeat is a new write.
	ic2 := claim(idem, "b", "h1", later)
	ic2.Activity, ic2.Effect = "UpsertContact", "idempotent-write"
	if rec := begin(t, s, ic2, store.OutcomeClaimed); rec.Claims != 1 || rec.Owner != "b" {
		t.Fatalf("idempotent unknown past its window: claims %d owner %q; want a new write", rec.Claims, rec.Owner)
	}
	// A person resolves: the key is free again (not sent) or answers (sent).
	if err := s.Resolve(ctx, resolveTr(unknown, "a", later, store.ResolvedNotSent), store.StateReleased); err != nil {
		t.Fatalf("resolve --not-sent past the window: %v", err)
	}
	begin(t, s, claim(unknown, "c", "h1", later.Add(time.Minute)), store.OutcomeClaimed)
}

// A write that completes early in a lease longer than its window keeps its record —
// and its stored result — until that lease (plus LeaseMargin) has passed: the
// completion may not have reached Temporal, whose retry comes after the lease.
func testCompletionKeptForLease(t *testing.T, s store.Store, k *keys) {
	ctx := context.Background()
	key := k.key("early-completion")
	c := claim(key, "a", "h1", t0)
	c.Window, c.Lease = time.Hour, t0.Add(3*time.Hour)
	begin(t, s, c, store.OutcomeClaimed)
	done := tr(key, "a", t0.Add(time.Minute), store.DecisionRan)
	done.Window, done.Result = time.Hour, []byte("ch_1")
	if err := s.Complete(ctx, done); err != nil {
		t.Fatal(err)
	}
	keep := c.Lease.Add(store.LeaseMargin)
	if r := get(t, s, key); !r.ExpiresAt.Equal(keep) {
		t.Fatalf("completed record expires %v; want its claim's lease plus the margin, %v", r.ExpiresAt, keep)
	}
	retry := c.Lease.Add(time.Minute) // Temporal's retry of the same activity, after the lease
	if _, err := s.Sweep(ctx, retry, 0); err != nil {
		t.Fatal(err)
	}
	if rec := begin(t, s, claim(key, "b", "h1", retry), store.OutcomeCompleted); string(rec.Result) != "ch_1" {
		t.Fatalf("the retry after the lease got %q; want the stored result", rec.Result)
	}
	// Past both, another workflow's claim is a new write (its own workflow's is a
	// reset, answered from the record: testResetHeld).
	other := claim(key, "c", "h1", keep)
	other.WorkflowID = "wf-2"
	begin(t, s, other, store.OutcomeClaimed)
}

// A takeover keeps the record while the new owner may run, for its window from the
// takeover, and never shortens it.
func testTakeoverKeepsRecord(t *testing.T, s store.Store, k *keys) {
	ctx := context.Background()
	abandoned := func(key string, w time.Duration) {
		t.Helper()
		c := claim(key, "a", "h1", t0)
		c.Window = w
		begin(t, s, c, store.OutcomeClaimed)
		if err := s.Abandon(ctx, tr(key, "a", t0.Add(time.Second), store.DecisionUnknown)); err != nil {
			t.Fatal(err)
		}
	}
	key := k.key("takeover-long-lease")
	abandoned(key, time.Hour)
	over := claim(key, "b", "h1", t0.Add(50*time.Minute))
	over.Window, over.TakeOver, over.Lease = time.Hour, true, t0.Add(50*time.Minute+48*time.Hour)
	rec := begin(t, s, over, store.OutcomeTakenOver)
	if want := over.Lease.Add(store.LeaseMargin); !rec.ExpiresAt.Equal(want) || !rec.CreatedAt.Equal(t0) {
		t.Fatalf("taken over: ExpiresAt %v CreatedAt %v, want lease+LeaseMargin %v and the first claim %v", rec.ExpiresAt, rec.CreatedAt, want, t0)
	}
	at := t0.Add(3 * time.Hour)
	c := claim(key, "c", "h1", at)
	c.TakeOver = true
	begin(t, s, c, store.OutcomeInFlight)
	if _, err := s.Sweep(ctx, at, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(ctx, tr(key, "b", t0.Add(40*time.Hour), store.DecisionRan)); err != nil {
		t.Fatalf("the taking-over attempt cannot store its result: %v", err)
	}

	// The window runs again from the takeover: the new attempt may send then.
	key2 := k.key("takeover-window")
	abandoned(key2, time.Hour)
	over = claim(key2, "b", "h1", t0.Add(50*time.Minute))
	over.Window, over.TakeOver = time.Hour, true
	if rec := begin(t, s, over, store.OutcomeTakenOver); !rec.ExpiresAt.Equal(over.Now.Add(time.Hour)) {
		t.Fatalf("taken over: ExpiresAt %v, want the window from the takeover %v", rec.ExpiresAt, over.Now.Add(time.Hour))
	}
	// Never lower than before.
	key3 := k.key("takeover-shorter")
	abandoned(key3, window)
	over = claim(key3, "b", "h1", t0.Add(2*time.Second))
	over.Window, over.TakeOver = time.Hour, true
	if rec := begin(t, s, over, store.OutcomeTakenOver); !rec.ExpiresAt.Equal(t0.Add(window)) {
		t.Fatalf("taken over: ExpiresAt %v, want the earlier %v kept", rec.ExpiresAt, t0.Add(window))
	}
}

// "An earlier attempt may have reached the vendor" holds from an Abandon on, through
// takeovers and their definite failures; the first-claimed time stays; only a
// person's "not sent" clears it.
func testMayHaveSentMonotone(t *testing.T, s store.Store, k *keys) {
	ctx := context.Background()
	key := k.key("may-have-sent")
	check := func(step string, state store.State, may bool, created time.Time) {
		t.Helper()
		r := get(t, s, key)
		if r.State != state || r.MayHaveSent != may || !r.CreatedAt.Equal(created) {
			t.Fatalf("after %s: state %q MayHaveSent %v CreatedAt %v; want %q %v %v", step, r.State, r.MayHaveSent, r.CreatedAt, state, may, created)
		}
	}
	rec := begin(t, s, claim(key, "a", "h1", t0), store.OutcomeClaimed)
	if rec.MayHaveSent {
		t.Fatal("a fresh claim says an earlier attempt may have sent")
	}
	if err := s.Release(ctx, tr(key, "a", t0.Add(time.Second), store.DecisionReleased)); err != nil {
		t.Fatal(err)
	}
	check("a first attempt's release", store.StateReleased, false, t0)
	t1 := t0.Add(2 * time.Second)
	begin(t, s, claim(key, "b", "h1", t1), store.OutcomeClaimed)
	if err := s.Abandon(ctx, tr(key, "b", t1.Add(time.Second), store.DecisionUnknown)); err != nil {
		t.Fatal(err)
	}
	check("abandon", store.StateUnknown, true, t1)
	at := t1
	for i, owner := range []string{"c", "d"} {
		at = at.Add(time.Minute)
		over := claim(key, owner, "h1", at)
		over.TakeOver = true
		if rec := begin(t, s, over, store.OutcomeTakenOver); !rec.MayHaveSent || !rec.CreatedAt.Equal(t1) {
			t.Fatalf("takeover %d: MayHaveSent %v CreatedAt %v, want true and %v", i+1, rec.MayHaveSent, rec.CreatedAt, t1)
		}
		// This attempt failed before it sent anything; the earlier one may have charged.
		if err := s.Release(ctx, tr(key, owner, at.Add(time.Second), store.DecisionReleased)); err != nil {
			t.Fatalf("takeover %d: Release: %v", i+1, err)
		}
		check(fmt.Sprintf("takeover %d's release", i+1), store.StateUnknown, true, t1)
		begin(t, s, claim(key, "x", "h1", at.Add(2*time.Second)), store.OutcomeUnknown)
		if rs, err := s.Pending(ctx, at.Add(2*time.Second), 0); err != nil || fmt.Sprint(ours(k, rs)) != "[may-have-sent]" {
			t.Fatalf("takeover %d: Pending = %v, %v; want the key", i+1, ours(k, rs), err)
		}
	}
	// A person saw that nothing was sent: the key is free, and its clock starts anew.
	if err := s.Resolve(ctx, resolveTr(key, "d", at.Add(time.Hour), store.ResolvedNotSent), store.StateReleased); err != nil {
		t.Fatal(err)
	}
	check("resolve not sent", store.StateReleased, false, t1)
	t2 := at.Add(2 * time.Hour)
	rec = begin(t, s, claim(key, "e", "h1", t2), store.OutcomeClaimed)
	if rec.MayHaveSent || !rec.CreatedAt.Equal(t2) {
		t.Fatalf("claim after resolve not sent: MayHaveSent %v CreatedAt %v, want false and %v", rec.MayHaveSent, rec.CreatedAt, t2)
	}
	if err := s.Release(ctx, tr(key, "e", t2.Add(time.Second), store.DecisionReleased)); err != nil {
		t.Fatal(err)
	}
	check("the fresh claim's release", store.StateReleased, false, t2)
}

// A takeover after a lease passed (no Abandon: the worker died) counts as "may have
// sent" too.
func testMayHaveSentAfterLease(t *testing.T, s store.Gate, k *keys) {
	ctx := context.Background()
	key := k.key("lease-passed-takeover")
	c := claim(key, "a", "h1", t0)
	c.Lease = t0.Add(10 * time.Second)
	begin(t, s, c, store.OutcomeClaimed)
	over := claim(key, "b", "h1", t0.Add(11*time.Second))
	over.TakeOver = true
	if rec := begin(t, s, over, store.OutcomeTakenOver); !rec.MayHaveSent {
		t.Fatal("takeover of a claim whose lease passed: MayHaveSent false")
	}
	if err := s.Release(ctx, tr(key, "b", t0.Add(12*time.Second), store.DecisionReleased)); err != nil {
		t.Fatal(err)
	}
	if r := get(t, s, key); r.State != store.StateUnknown || !r.MayHaveSent || !r.CreatedAt.Equal(t0) {
		t.Fatalf("after the takeover's release: state %q MayHaveSent %v CreatedAt %v", r.State, r.MayHaveSent, r.CreatedAt)
	}
	begin(t, s, claim(key, "c", "h1", t0.Add(13*time.Second)), store.OutcomeUnknown)
}

// modelSequences (race.go, norace.go) is how many random walks of store/claimmodel
// ModelSequences replays; modelDepth their depth; the seed is fixed so every backend
// gets the same walks.
const (
	modelDepth = 12
	modelSeed  = 10
)

// The same event sequences the claim model explores, replayed through the backend:
// every Begin's outcome, every transition's error and the record after every call
// are what the rules (store.Decide, store.Apply, store.ApplyResolve, store.Expired)
// say, and at the end Pending lists the key exactly when store.Blocking does (the
// sequences append no refusal receipts, so store.Listed is store.Blocking there;
// PendingListsRefusedLiveClaims covers the rest of store.Listed).
// Records are dated 2001, so a Sweep never touches the other subtests' records.
func testModelSequences(t *testing.T, s store.Store, k *keys) {
	ctx := context.Background()
	seqs := claimmodel.Sequences(modelSequences, modelDepth, modelSeed, func(i int) string { return k.key(fmt.Sprintf("model-%d", i)) })
	calls := 0
	for i, seq := range seqs {
		key := k.key(fmt.Sprintf("model-%d", i))
		fail := func(j int, format string, a ...any) {
			t.Helper()
			var b strings.Builder
			for n, op := range seq.Ops[:j+1] {
				fmt.Fprintf(&b, "\n\t%d. %s", n+1, describeOp(op))
			}
			t.Fatalf("sequence %d (%s), call %d: %s%s", i, seq.Config, j+1, fmt.Sprintf(format, a...), b.String())
		}
		for j, op := range seq.Ops {
			calls++
			switch op.Kind {
			case claimmodel.OpBegin:
				got, rec, err := s.Begin(ctx, op.Claim)
				if err != nil || got != op.Outcome {
					fail(j, "Begin = %q, %v; the rules say %q", got, err, op.Outcome)
				}
				if !sameRecord(rec, op.Record) {
					fail(j, "Begin returned %+v; the rules say %+v", rec, op.Record)
				}
			case claimmodel.OpComplete, claimmodel.OpRelease, claimmodel.OpAbandon, claimmodel.OpResolve:
				var err error
				switch op.Kind {
				case claimmodel.OpComplete:
					err = s.Complete(ctx, op.Transition)
				case claimmodel.OpRelease:
					err = s.Release(ctx, op.Transition)
				case claimmodel.OpAbandon:
					err = s.Abandon(ctx, op.Transition)
				default:
					err = s.Resolve(ctx, op.Transition, op.To)
				}
				if op.Err == nil && err != nil || op.Err != nil && !errors.Is(err, op.Err) {
					fail(j, "%s = %v; the rules say %v", op.Kind, err, op.Err)
				}
			case claimmodel.OpSweep:
				if _, err := s.Sweep(ctx, op.Now, 0); err != nil {
					fail(j, "Sweep: %v", err)
				}
			case claimmodel.OpSent:
				err := s.RecordSent(ctx, op.Transition.Key, op.Transition.Owner, op.Sent)
				if op.Err == nil && err != nil || op.Err != nil && !errors.Is(err, op.Err) {
					fail(j, "%s = %v; the rules say %v", op.Kind, err, op.Err)
				}
			}
			rec, err := s.Get(ctx, key)
			switch {
			case !op.Found && !errors.Is(err, store.ErrNotFound):
				fail(j, "after it Get = %+v, %v; the rules say no record", rec, err)
			case op.Found && err != nil:
				fail(j, "after it Get: %v; the rules say %+v", err, op.Record)
			case op.Found && !sameRecord(rec, op.Record):
				fail(j, "after it the record is %+v; the rules say %+v", rec, op.Record)
			}
		}
		pending, err := s.Pending(ctx, seq.Now, 0)
		if err != nil {
			t.Fatalf("Pending: %v", err)
		}
		listed := slices.ContainsFunc(pending, func(r store.Record) bool { return r.Key == key })
		if listed != seq.Pending {
			t.Fatalf("sequence %d (%s): Pending at the end lists the key: %v; store.Blocking says %v", i, seq.Config, listed, seq.Pending)
		}
	}
	t.Logf("%d model sequences, %d store calls, each checked against the rules", len(seqs), calls)
}

func describeOp(op claimmodel.Op) string {
	switch op.Kind {
	case claimmodel.OpBegin:
		c := op.Claim
		return fmt.Sprintf("Begin owner %s now %s lease %s takeover %v: %s", c.Owner, c.Now.Format(time.TimeOnly), c.Lease.Format(time.TimeOnly), c.TakeOver, op.Outcome)
	case claimmodel.OpSweep:
		return fmt.Sprintf("Sweep now %s", op.Now.Format(time.TimeOnly))
	case claimmodel.OpResolve:
		if w := op.Transition.Witness; w != "" {
			return fmt.Sprintf("Resolve to %s owner %s now %s by witness %s asked at %s: %v", op.To, op.Transition.Owner,
				op.Transition.Now.Format(time.TimeOnly), w, op.Transition.AskedAt.Format(time.TimeOnly), op.Err)
		}
		return fmt.Sprintf("Resolve to %s owner %s now %s: %v", op.To, op.Transition.Owner, op.Transition.Now.Format(time.TimeOnly), op.Err)
	}
	return fmt.Sprintf("%s owner %s now %s: %v", op.Kind, op.Transition.Owner, op.Transition.Now.Format(time.TimeOnly), op.Err)
}

func testReceiptCursor(t *testing.T, s store.Store, k *keys) {
	ctx := context.Background()
	wf := k.key("wf")
	for i := range 25 {
		r := store.Receipt{Time: t0.Add(time.Duration(i) * time.Second), Key: k.key(fmt.Sprint("c", i)),
			Activity: "ChargeCard", Decision: store.DecisionRan, WorkflowID: wf}
		if err := s.Append(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	// page reads every receipt of f, Limit at a time, from the cursor on.
	page := func(f store.ReceiptFilter) (keys []string, sizes []int) {
		for range 100 {
			rs, err := s.Receipts(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			sizes = append(sizes, len(rs))
			if len(rs) == 0 {
				return keys, sizes
			}
			for _, r := range rs {
				if r.ID <= f.AfterID {
					t.Fatalf("receipt %d returned after cursor %d", r.ID, f.AfterID)
				}
				keys = append(keys, strings.TrimPrefix(r.Key, k.prefix+"/"))
			}
			f.AfterID = rs[len(rs)-1].ID
		}
		t.Fatalf("paging %+v never ends: the cursor does not move", f)
		return nil, nil
	}
	want := func(n int) string {
		var w []string
		for i := range n {
			w = append(w, fmt.Sprint("c", i))
		}
		return fmt.Sprint(w)
	}
	got, sizes := page(store.ReceiptFilter{WorkflowID: wf, Limit: 10})
	if fmt.Sprint(got) != want(25) || fmt.Sprint(sizes) != "[10 10 5 0]" {
		t.Fatalf("paged by 10: %v in pages %v; want %s in [10 10 5 0]", got, sizes, want(25))
	}
	got, _ = page(store.ReceiptFilter{WorkflowID: wf, Until: t0.Add(20 * time.Second), Limit: 7})
	if fmt.Sprint(got) != want(20) {
		t.Fatalf("paged by 7 until the 20th second: %v; want %s", got, want(20))
	}
	all, err := s.Receipts(ctx, store.ReceiptFilter{WorkflowID: wf})
	if err != nil {
		t.Fatal(err)
	}
	rest, err := s.Receipts(ctx, store.ReceiptFilter{WorkflowID: wf, AfterID: all[9].ID})
	if err != nil || len(rest) != 15 || rest[0].ID != all[10].ID {
		t.Fatalf("after the 10th receipt: %d receipts (%v); want the last 15", len(rest), err)
	}
}

// testAppendReceipts: a batch of receipts (store.AppendReceipts, one atomic step
// through store.ReceiptBatcher) is appended in the order given, with every field
// kept as Append keeps it; a batch whose context is done appends none of it.
func testAppendReceipts(t *testing.T, s store.Store, k *keys) {
	ctx := context.Background()
	wf := k.key("wf")
	var want []store.Receipt
	for i := range 5 {
		want = append(want, store.Receipt{Time: t0.Add(time.Duration(5-i) * time.Second), Key: k.key(fmt.Sprint("r", i)),
			Activity: "GetOrder", Effect: "read", EffectSource: store.EffectByName, Decision: store.DecisionRan,
			ArgsHash: fmt.Sprint("h", i), WorkflowID: wf, RunID: "run", Attempt: int32(i + 1), Error: fmt.Sprint("e", i)})
	}
	want[2].Call = []byte(`{"id":2}`)
	if err := store.AppendReceipts(ctx, s, want[:0]); err != nil {
		t.Fatalf("empty batch: %v", err)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if err := store.AppendReceipts(done, s, want); err == nil {
		t.Fatal("a batch with its context done was appended")
	}
	if rs, err := s.Receipts(ctx, store.ReceiptFilter{WorkflowID: wf}); err != nil || len(rs) != 0 {
		t.Fatalf("after a batch whose context was done: %d receipts (%v); want none of it", len(rs), err)
	}
	if err := s.Append(ctx, store.Receipt{Time: t0, Key: k.key("before"), Activity: "ChargeCard", Effect: "destructive",
		Decision: store.DecisionClaimed, WorkflowID: wf}); err != nil {
		t.Fatal(err)
	}
	if err := store.AppendReceipts(ctx, s, want); err != nil {
		t.Fatal(err)
	}
	rs, err := s.Receipts(ctx, store.ReceiptFilter{WorkflowID: wf})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 6 || rs[0].Key != k.key("before") {
		t.Fatalf("%d receipts, first %q; want the earlier receipt and then the 5 of the batch", len(rs), rs[0].Key)
	}
	for i, r := range rs[1:] {
		if r.ID <= rs[i].ID {
			t.Fatalf("receipt %d has ID %d after %d: IDs must increase in the batch's order", i, r.ID, rs[i].ID)
		}
		w := want[i]
		w.ID, w.Time = r.ID, r.Time
		if !r.Time.Equal(want[i].Time) || !reflect.DeepEqual(r, w) {
			t.Fatalf("receipt %d of the batch:\n got %+v\nwant %+v", i, r, want[i])
		}
	}
}

// testLateReceiptPaged: a receipt appended after others but stamped earlier (a
// read's receipt, which the gate appends in a batch after the read) is listed
// after them (receipts list in append order), and paging by the ID cursor with a
// Since bound finds it: a cursor by time would skip it.
func testLateReceiptPaged(t *testing.T, s store.Store, k *keys) {
	ctx := context.Background()
	wf := k.key("wf")
	for i, at := range []time.Duration{10 * time.Second, 20 * time.Second, 5 * time.Second} {
		if err := s.Append(ctx, store.Receipt{Time: t0.Add(at), Key: k.key(fmt.Sprint("r", i)), Activity: "GetOrder",
			Decision: store.DecisionRan, WorkflowID: wf}); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	f := store.ReceiptFilter{WorkflowID: wf, Since: t0.Add(time.Second), Limit: 1}
	for range 10 {
		rs, err := s.Receipts(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) == 0 {
			break
		}
		got = append(got, strings.TrimPrefix(rs[0].Key, k.prefix+"/"))
		f.AfterID = rs[0].ID
	}
	if fmt.Sprint(got) != "[r0 r1 r2]" {
		t.Fatalf("paged one at a time since t0+1s: %v; want [r0 r1 r2] (append order, the late receipt included)", got)
	}
}

// pastBase is a clock origin of its own, centuries before t0: only the prune
// subtests write receipts that old, so a prune before it touches nothing else in
// a shared database.
func pastBase() time.Time {
	return t0.AddDate(-100-rand.IntN(800), 0, 0)
}

func pruner(t *testing.T, s store.Store) store.Pruner {
	p, ok := s.(store.Pruner)
	if !ok {
		t.Skipf("%T does not implement store.Pruner (optional)", s)
	}
	return p
}

// prunes returns the DecisionPruned receipts with this reason.
func prunes(t *testing.T, s store.Store, reason string) []store.Receipt {
	t.Helper()
	rs, err := s.Receipts(context.Background(), store.ReceiptFilter{Decision: store.DecisionPruned})
	if err != nil {
		t.Fatal(err)
	}
	var out []store.Receipt
	for _, r := range rs {
		if r.Reason == reason {
			out = append(out, r)
		}
	}
	return out
}

func summary(t *testing.T, r store.Receipt) store.PruneSummary {
	t.Helper()
	var sum store.PruneSummary
	if err := json.Unmarshal(r.Call, &sum); err != nil {
		t.Fatalf("pruned receipt's call %q: %v", r.Call, err)
	}
	return sum
}

func countKey(t *testing.T, s store.Store, key string) int {
	t.Helper()
	rs, err := s.Receipts(context.Background(), store.ReceiptFilter{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	return len(rs)
}

func testPruneReceipts(t *testing.T, s store.Store, k *keys) {
	ctx := context.Background()
	p := pruner(t, s)
	base := pastBase()
	// An earlier prune, before any of ours: it removes nothing of ours and its
	// receipt must outlive the next prune.
	early := store.Prune{Before: base.Add(-time.Hour), Now: base.Add(10 * time.Second), Actor: "ops", Reason: k.key("early")}
	if _, err := p.Prune(ctx, early); err != nil {
		t.Fatal(err)
	}
	// A live key: its old receipts stay.
	live := k.key("live")
	begin(t, s, claim(live, "a", "h1", base), store.OutcomeClaimed)
	if err := s.Append(ctx, store.Receipt{Time: base.Add(time.Second), Key: live, Decision: store.DecisionRefusedInFlight}); err != nil {
		t.Fatal(err)
	}
	// Keys without a record (never claimed here, or swept): their old receipts go.
	for i := range 5 {
		for j := range 2 {
			if err := s.Append(ctx, store.Receipt{Time: base.Add(time.Duration(i*2+j) * time.Minute), Key: k.key(fmt.Sprint("gone-", i)),
				Activity: "ChargeCard", Decision: store.DecisionRan}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.Append(ctx, store.Receipt{Time: base, Activity: k.key("act"), Decision: store.DecisionPaused, Actor: "ops"}); err != nil {
		t.Fatal(err)
	}
	// A receipt after the cut-off stays (at t0, after every prune of this suite).
	if err := s.Append(ctx, store.Receipt{Time: t0, Key: k.key("new"), Decision: store.DecisionRan}); err != nil {
		t.Fatal(err)
	}

	cut := base.Add(time.Hour)
	now := base.Add(3 * time.Hour)
	pr := store.Prune{Before: cut, Now: now, Actor: "alice", Reason: k.key("retention"), Batch: 3}
	for _, bad := range []store.Prune{{Now: now, Reason: "r"}, {Before: now.Add(time.Second), Now: now, Reason: "r"},
		{Before: cut, Now: now}, {Before: cut, Now: now, Reason: "r", Batch: -1}} {
		if _, err := p.Prune(ctx, bad); err == nil {
			t.Fatalf("Prune(%+v) accepted", bad)
		}
	}
	n, err := p.Prune(ctx, pr)
	if err != nil {
		t.Fatal(err)
	}
	if n != 11 {
		t.Fatalf("Prune removed %d receipts, want 11 (5 keys without a record × 2, one pause)", n)
	}
	for i := range 5 {
		if c := countKey(t, s, k.key(fmt.Sprint("gone-", i))); c != 0 {
			t.Fatalf("gone-%d keeps %d receipts after the prune", i, c)
		}
	}
	if c := countKey(t, s, live); c != 2 {
		t.Fatalf("the live key keeps %d receipts, want its 2: the evidence of a live key never goes", c)
	}
	if c := countKey(t, s, k.key("new")); c != 1 {
		t.Fatalf("the receipt after the cut-off: %d left, want 1", c)
	}
	if rs, err := s.Receipts(ctx, store.ReceiptFilter{Activity: k.key("act")}); err != nil || len(rs) != 0 {
		t.Fatalf("the old pause receipt: %d left (%v), want 0", len(rs), err)
	}
	if e := prunes(t, s, early.Reason); len(e) != 1 {
		t.Fatalf("the earlier prune's receipt: %d left, want 1: a prune never removes one", len(e))
	}
	got := prunes(t, s, pr.Reason)
	if len(got) != 1 {
		t.Fatalf("%d pruned receipts for one prune, want exactly 1", len(got))
	}
	r := got[0]
	if r.Actor != "alice" || !r.Time.Equal(now) || r.Key != "" {
		t.Fatalf("pruned receipt = %+v; want actor alice at %v", r, now)
	}
	if sum := summary(t, r); !sum.Before.Equal(cut) || sum.Count != 11 {
		t.Fatalf("pruned receipt says %+v; want cut-off %v and count 11", sum, cut)
	}
	// Again: nothing left to remove, and the act is recorded all the same.
	if n, err := p.Prune(ctx, pr); err != nil || n != 0 {
		t.Fatalf("second Prune = %d, %v; want 0", n, err)
	}
	if got := prunes(t, s, pr.Reason); len(got) != 2 || summary(t, got[1]).Count != 0 {
		t.Fatalf("after a second prune: %d pruned receipts (%+v), want 2, the second counting 0", len(got), got)
	}
}

// testPruneBesideClaims prunes while claims on old keys and new ones commit: no
// call fails, every claim keeps its receipt (its key has a record), and what the
// prune removed is exactly what is gone.
func testPruneBesideClaims(t *testing.T, s store.Store, k *keys) {
	ctx := context.Background()
	p := pruner(t, s)
	base := pastBase()
	const old, claims = 40, 20
	for i := range old {
		if err := s.Append(ctx, store.Receipt{Time: base, Key: k.key(fmt.Sprint("k", i)), Decision: store.DecisionRan}); err != nil {
			t.Fatal(err)
		}
	}
	var (
		wg      sync.WaitGroup
		removed int
		perr    error
	)
	start := make(chan struct{})
	wg.Go(func() {
		<-start
		removed, perr = p.Prune(ctx, store.Prune{Before: base.Add(time.Hour), Now: base.Add(2 * time.Hour), Actor: "ops",
			Reason: k.key("beside"), Batch: 2})
	})
	errs := make([]error, claims)
	for i := range claims {
		wg.Go(func() {
			<-start
			// Half re-claim a key with an old receipt, half claim a new key; all
			// at the old time, so only their records keep their receipts.
			key := k.key(fmt.Sprint("k", i*2))
			if i%2 == 1 {
				key = k.key(fmt.Sprint("fresh", i))
			}
			o, _, err := s.Begin(ctx, claim(key, "a", "h1", base.Add(time.Minute)))
			if err == nil && o != store.OutcomeClaimed {
				err = fmt.Errorf("Begin(%s) = %s", key, o)
			}
			errs[i] = err
		})
	}
	close(start)
	wg.Wait()
	if perr != nil {
		t.Fatalf("Prune beside claims: %v", perr)
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("claim %d beside a prune: %v", i, err)
		}
	}
	left := 0
	for i := range old {
		key := k.key(fmt.Sprint("k", i))
		rs, err := s.Receipts(ctx, store.ReceiptFilter{Key: key})
		if err != nil {
			t.Fatal(err)
		}
		claimed := i%2 == 0 && i/2 < claims && (i/2)%2 == 0
		var olds, claimReceipts int
		for _, r := range rs {
			switch r.Decision {
			case store.DecisionRan:
				olds++
			case store.DecisionClaimed:
				claimReceipts++
			}
		}
		if !claimed && olds != 0 {
			t.Fatalf("%s has no record but kept its old receipt", key)
		}
		if claimed && claimReceipts != 1 {
			t.Fatalf("%s was claimed beside the prune but has %d claim receipts, want 1", key, claimReceipts)
		}
		left += olds
	}
	for i := 1; i < claims; i += 2 {
		if c := countKey(t, s, k.key(fmt.Sprint("fresh", i))); c != 1 {
			t.Fatalf("fresh%d was claimed beside the prune but has %d receipts, want its claim receipt", i, c)
		}
	}
	if removed != old-left {
		t.Fatalf("Prune reported %d removed, but %d of the %d old receipts are gone", removed, old-left, old)
	}
	if got := prunes(t, s, k.key("beside")); len(got) != 1 {
		t.Fatalf("%d pruned receipts for one prune, want 1", len(got))
	}
}

// Evidence that the key left through a keyed transport (store.ApplySent) is
// recorded for the claim's current owner only, tagged with it, once per vendor,
// and kept by the moves after it; a takeover keeps it too (store.Decide: see
// TakeoverKeepsEveryClaimsEvidence).
func testSentEvidence(t *testing.T, s store.Gate, k *keys) {
	ctx := context.Background()
	key := k.key("sent")
	e1 := store.Sent{Via: "idemhttp:stripe", Host: "api.stripe.com", Window: 24 * time.Hour}
	e2 := store.Sent{Via: "mcp:shop", Host: "shop.example:8443", Window: time.Duration(1<<63 - 1)}
	of := func(e store.Sent, owner string) store.Sent { e.Owner = owner; return e }
	if err := s.RecordSent(ctx, key, "a", e1); !errors.Is(err, store.ErrNotOwner) {
		t.Fatalf("RecordSent without a record = %v, want ErrNotOwner", err)
	}
	rec := begin(t, s, claim(key, "a", "h1", t0), store.OutcomeClaimed)
	if len(rec.Sent) != 0 {
		t.Fatalf("a fresh claim carries evidence %v", rec.Sent)
	}
	if err := s.RecordSent(ctx, key, "b", e1); !errors.Is(err, store.ErrNotOwner) {
		t.Fatalf("RecordSent by another owner = %v, want ErrNotOwner", err)
	}
	for _, e := range []store.Sent{e1, e1, e2, e1} {
		if err := s.RecordSent(ctx, key, "a", e); err != nil {
			t.Fatalf("RecordSent(%v): %v", e, err)
		}
	}
	want, _, _ := store.ApplySent(rec, "a", e1)
	want, _, _ = store.ApplySent(want, "a", e2)
	mine := []store.Sent{of(e1, "a"), of(e2, "a")}
	if got := get(t, s, key); !sameRecord(got, want) || !reflect.DeepEqual(got.Sent, mine) {
		t.Fatalf("after RecordSent the record is %+v, want store.ApplySent's %+v", got, want)
	}
	if err := s.Abandon(ctx, tr(key, "a", t0.Add(time.Second), store.DecisionUnknown)); err != nil {
		t.Fatal(err)
	}
	if got := get(t, s, key); !reflect.DeepEqual(got.Sent, mine) {
		t.Fatalf("Abandon lost the evidence: %v", got.Sent)
	}
	if err := s.RecordSent(ctx, key, "a", e1); !errors.Is(err, store.ErrNotOwner) {
		t.Fatalf("RecordSent on an unknown record = %v, want ErrNotOwner", err)
	}
	if w, ok := store.ResendWindow(get(t, s, key), 48*time.Hour); !ok || w != 24*time.Hour {
		t.Fatalf("ResendWindow = %v, %v; want the shortest window of the evidence, 24h", w, ok)
	}
}

// A takeover keeps the evidence of every claim before it (store.Decide), each
// tagged with its claim, and a blank for a claim that recorded none: a re-send
// relying on the vendors' windows (store.ResendWindow) needs evidence from every
// claim since the first, and takes the shortest window of all (atk-wit finding 1:
// an activity writes to P, 24 h, and Q, 1 h; attempt 1 reaches both, attempt 2
// re-sends, reaches P only; the record must still name Q).
func testTakeoverKeepsEvidence(t *testing.T, s store.Gate, k *keys) {
	ctx := context.Background()
	key := k.key("sent-kept")
	p := store.Sent{Via: "idemhttp:p", Host: "p.example", Window: 24 * time.Hour}
	q := store.Sent{Via: "idemhttp:q", Host: "q.example", Window: time.Hour}
	of := func(e store.Sent, owner string) store.Sent { e.Owner = owner; return e }
	takeOver := func(owner string, at time.Time, attempt int32) store.Record {
		t.Helper()
		c := claim(key, owner, "h1", at)
		c.TakeOver, c.Attempt, c.RunID = true, attempt, "run-"+owner
		return begin(t, s, c, store.OutcomeTakenOver)
	}
	sendAll := func(owner string, es ...store.Sent) {
		t.Helper()
		for _, e := range es {
			if err := s.RecordSent(ctx, key, owner, e); err != nil {
				t.Fatalf("RecordSent(%s, %v): %v", owner, e, err)
			}
		}
	}
	abandon := func(owner string, at time.Time) {
		t.Helper()
		if err := s.Abandon(ctx, tr(key, owner, at, store.DecisionUnknown)); err != nil {
			t.Fatal(err)
		}
	}
	resend := func(want time.Duration, wantOK bool) {
		t.Helper()
		r := get(t, s, key)
		if w, ok := store.ResendWindow(r, 48*time.Hour); ok != wantOK || w != want {
			t.Fatalf("ResendWindow = %s, %v on %+v; want %s, %v", w, ok, r.Sent, want, wantOK)
		}
	}
	begin(t, s, claim(key, "a", "h1", t0), store.OutcomeClaimed)
	sendAll("a", p, q)
	abandon("a", t0.Add(time.Second))
	kept := []store.Sent{of(p, "a"), of(q, "a")}
	if rec := takeOver("b", t0.Add(30*time.Minute), 2); !reflect.DeepEqual(rec.Sent, kept) {
		t.Fatalf("the takeover returned evidence %+v, want a's kept: %+v", rec.Sent, kept)
	}
	if got := get(t, s, key); !reflect.DeepEqual(got.Sent, kept) {
		t.Fatalf("after the takeover the record's evidence is %+v, want %+v", got.Sent, kept)
	}
	resend(0, false) // b recorded nothing yet: it may send without the keyed transport
	sendAll("b", p, p)
	abandon("b", t0.Add(31*time.Minute))
	kept = append(kept, of(p, "b"))
	if got := get(t, s, key); !reflect.DeepEqual(got.Sent, kept) {
		t.Fatalf("b's evidence: the record holds %+v, want %+v", got.Sent, kept)
	}
	resend(time.Hour, true) // q's hour: a reached q, though b did not

	// c takes over and dies before its keyed transport records anything; d's
	// takeover leaves a blank for c, and no evidence of d's makes up for it.
	takeOver("c", t0.Add(40*time.Minute), 3)
	abandon("c", t0.Add(41*time.Minute))
	kept = append(kept, store.Sent{Owner: "c"})
	if rec := takeOver("d", t0.Add(50*time.Minute), 4); !reflect.DeepEqual(rec.Sent, kept) {
		t.Fatalf("the takeover of a claim without evidence returned %+v, want %+v", rec.Sent, kept)
	}
	sendAll("d", p, q)
	abandon("d", t0.Add(51*time.Minute))
	resend(0, false)
	if got := get(t, s, key); !reflect.DeepEqual(got.Sent, append(kept, of(p, "d"), of(q, "d"))) {
		t.Fatalf("the record's evidence is %+v", got.Sent)
	}
}

// A store has an identity: not empty, and the same on every call.
func testIdentity(t *testing.T, s store.Gate, _ *keys) {
	id := s.Identity()
	if id == "" || s.Identity() != id {
		t.Fatalf("Identity() = %q, then %q; want one non-empty identity", id, s.Identity())
	}
}

// testWitnessSettle checks store.Settleable through Resolve: a witness settles
// "sent" once the owner is gone (its lease passed, no margin), "not sent" only
// when it was asked at or after the owner's lease; a person keeps the margin.
func testWitnessSettle(t *testing.T, s store.Store, k *keys) {
	ctx := context.Background()
	base := farBase()
	witness := func(key, owner string, now, asked time.Time, res string) store.Transition {
		tr := resolveTr(key, owner, now, res)
		tr.Witness, tr.AskedAt = "temporal", asked
		tr.Receipt.Actor, tr.Receipt.Reason = "witness:temporal", "history event 7"
		return tr
	}
	claimed := func(name string) (string, store.Claim) {
		key := k.key(name)
		c := claim(key, "a", "h1", base)
		c.Lease = base.Add(10 * time.Second)
		begin(t, s, c, store.OutcomeClaimed)
		return key, c
	}

	// Sent: not while the owner's lease runs; from the lease on, without the margin.
	key, c := claimed("sent")
	early := c.Lease.Add(-time.Microsecond)
	if err := s.Resolve(ctx, witness(key, "a", early, early, store.ResolvedSent), store.StateCompleted); !errors.Is(err, store.ErrNotOwner) {
		t.Fatalf("witness sent before the lease = %v, want ErrNotOwner", err)
	}
	wt := witness(key, "a", c.Lease, c.Lease, store.ResolvedSent)
	wt.Result = []byte("from-history")
	if err := s.Resolve(ctx, wt, store.StateCompleted); err != nil {
		t.Fatalf("witness sent at the lease: %v", err)
	}
	if r := get(t, s, key); r.State != store.StateCompleted || string(r.Result) != "from-history" {
		t.Fatalf("after a witness's sent: state %q result %q", r.State, r.Result)
	}
	rs, err := s.Receipts(ctx, store.ReceiptFilter{Key: key, Decision: store.DecisionResolved})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || rs[0].Actor != "witness:temporal" || rs[0].Reason != "history event 7" || rs[0].Resolution != store.ResolvedSent {
		t.Fatalf("witness receipt = %+v", rs)
	}

	// Not sent: an answer asked before the lease plus LeaseMargin proves nothing (the
	// attempt may still reach the vendor until then), even delivered after it.
	key, c = claimed("not-sent")
	from := c.Lease.Add(store.LeaseMargin)
	late := from.Add(time.Minute)
	if err := s.Resolve(ctx, witness(key, "a", late, early, store.ResolvedNotSent), store.StateReleased); !errors.Is(err, store.ErrNotOwner) {
		t.Fatalf("witness not-sent asked before the lease = %v, want ErrNotOwner", err)
	}
	if err := s.Resolve(ctx, witness(key, "a", late, from.Add(-time.Microsecond), store.ResolvedNotSent), store.StateReleased); !errors.Is(err, store.ErrNotOwner) {
		t.Fatalf("witness not-sent asked a microsecond before lease+LeaseMargin = %v, want ErrNotOwner", err)
	}
	if err := s.Resolve(ctx, witness(key, "a", late, time.Time{}, store.ResolvedNotSent), store.StateReleased); !errors.Is(err, store.ErrNotOwner) {
		t.Fatalf("witness not-sent without the time it was asked = %v, want ErrNotOwner", err)
	}
	if r := get(t, s, key); r.State != store.StateClaimed {
		t.Fatalf("refused settlements moved the record to %q", r.State)
	}
	if err := s.Resolve(ctx, witness(key, "a", late, from, store.ResolvedNotSent), store.StateReleased); err != nil {
		t.Fatalf("witness not-sent asked at lease+LeaseMargin: %v", err)
	}
	if r := get(t, s, key); r.State != store.StateReleased || r.MayHaveSent {
		t.Fatalf("after a witness's not-sent: state %q may-have-sent %v", r.State, r.MayHaveSent)
	}

	// An abandoned owner (StateUnknown) whose lease has not passed: sent settles,
	// not sent waits for the lease.
	key, c = claimed("abandoned")
	if err := s.Abandon(ctx, tr(key, "a", base.Add(time.Second), store.DecisionUnknown)); err != nil {
		t.Fatal(err)
	}
	at := base.Add(2 * time.Second)
	if err := s.Resolve(ctx, witness(key, "a", at, at, store.ResolvedNotSent), store.StateReleased); !errors.Is(err, store.ErrNotOwner) {
		t.Fatalf("witness not-sent of an abandoned claim before its lease = %v, want ErrNotOwner", err)
	}
	if err := s.Resolve(ctx, witness(key, "a", at, at, store.ResolvedSent), store.StateCompleted); err != nil {
		t.Fatalf("witness sent of an abandoned claim: %v", err)
	}

	// A person keeps the margin for a claim whose owner never came back.
	key, c = claimed("person")
	if err := s.Resolve(ctx, resolveTr(key, "a", from.Add(-time.Microsecond), store.ResolvedNotSent), store.StateReleased); !errors.Is(err, store.ErrNotOwner) {
		t.Fatalf("a person's not-sent inside the margin = %v, want ErrNotOwner", err)
	}
	// A person's not-sent of an abandoned claim waits like a witness's (atk-op
	// finding 4): the attempt that gave up may have a request still on its way until
	// its lease plus LeaseMargin. Sent settles at once.
	{
		key, c := claimed("person-abandoned")
		if err := s.Abandon(ctx, tr(key, "a", base.Add(time.Second), store.DecisionUnknown)); err != nil {
			t.Fatal(err)
		}
		at := base.Add(2 * time.Second)
		notSentFrom := c.Lease.Add(store.LeaseMargin)
		if got := store.NotSentFrom(get(t, s, key)); !got.Equal(notSentFrom) {
			t.Fatalf("NotSentFrom of an abandoned claim = %v, want its lease plus LeaseMargin %v", got, notSentFrom)
		}
		for _, now := range []time.Time{at, notSentFrom.Add(-time.Microsecond)} {
			if err := s.Resolve(ctx, resolveTr(key, "a", now, store.ResolvedNotSent), store.StateReleased); !errors.Is(err, store.ErrNotOwner) {
				t.Fatalf("a person's not-sent of an abandoned claim at %v (not-sent from %v) = %v, want ErrNotOwner", now, notSentFrom, err)
			}
		}
		if r := get(t, s, key); r.State != store.StateUnknown {
			t.Fatalf("after refused not-sents: state %q, want unknown", r.State)
		}
		if rs, err := s.Receipts(ctx, store.ReceiptFilter{Key: key, Decision: store.DecisionResolved}); err != nil || len(rs) != 0 {
			t.Fatalf("refused not-sents wrote receipts %+v, %v", rs, err)
		}
		if err := s.Resolve(ctx, resolveTr(key, "a", notSentFrom, store.ResolvedNotSent), store.StateReleased); err != nil {
			t.Fatalf("a person's not-sent of an abandoned claim at its lease plus LeaseMargin: %v", err)
		}
		sent, _ := claimed("person-abandoned-sent")
		if err := s.Abandon(ctx, tr(sent, "a", base.Add(time.Second), store.DecisionUnknown)); err != nil {
			t.Fatal(err)
		}
		if err := s.Resolve(ctx, resolveTr(sent, "a", at, store.ResolvedSent), store.StateCompleted); err != nil {
			t.Fatalf("a person's sent of an abandoned claim at once: %v", err)
		}
	}
	// Another owner: nothing moves.
	if err := s.Resolve(ctx, witness(key, "b", late, late, store.ResolvedNotSent), store.StateReleased); !errors.Is(err, store.ErrNotOwner) {
		t.Fatalf("a witness's settlement for another owner = %v, want ErrNotOwner", err)
	}

	// A lease between two microseconds (an attempt's deadline has nanoseconds): a
	// store that keeps microseconds must not move it earlier. Before it another
	// claim is in flight; a not-sent asked before it plus LeaseMargin moves nothing,
	// from the next microsecond on it settles.
	key = k.key("sub-micro")
	c = claim(key, "a", "h1", base)
	c.Lease = base.Add(10*time.Second + 500*time.Nanosecond)
	begin(t, s, c, store.OutcomeClaimed)
	before := c.Lease.Add(-400 * time.Nanosecond)
	other := claim(key, "b", "h1", before)
	other.Lease = before.Add(time.Minute)
	begin(t, s, other, store.OutcomeInFlight)
	before = before.Add(store.LeaseMargin)
	if err := s.Resolve(ctx, witness(key, "a", before, before, store.ResolvedNotSent), store.StateReleased); !errors.Is(err, store.ErrNotOwner) {
		t.Fatalf("witness not-sent asked 400ns before a sub-microsecond lease plus LeaseMargin = %v, want ErrNotOwner", err)
	}
	after := base.Add(10*time.Second + time.Microsecond).Add(store.LeaseMargin)
	if err := s.Resolve(ctx, witness(key, "a", after, after, store.ResolvedNotSent), store.StateReleased); err != nil {
		t.Fatalf("witness not-sent asked at the microsecond after the lease plus LeaseMargin: %v", err)
	}
}

// testPruneThroughID: a prune bounded by receipt ID (Prune.ThroughID, the
// horizon an export read through) removes only receipts at or below it; a
// receipt stored after the horizon with a time before the cut-off (a read's
// receipt appended late by the gate's queue) stays, and the prune's receipt
// records the bound.
func testPruneThroughID(t *testing.T, s store.Store, k *keys) {
	ctx := context.Background()
	p := pruner(t, s)
	hz, ok := s.(store.ReceiptHorizoner)
	if !ok {
		t.Skipf("%T does not implement store.ReceiptHorizoner (optional)", s)
	}
	base := pastBase()
	for i := range 3 {
		if err := s.Append(ctx, store.Receipt{Time: base.Add(time.Duration(i) * time.Second), Key: k.key(fmt.Sprint("w", i)),
			Activity: "ChargeCard", Effect: "destructive", Decision: store.DecisionRan}); err != nil {
			t.Fatal(err)
		}
	}
	h, err := hz.ReceiptHorizon(ctx)
	if err != nil {
		t.Fatal(err)
	}
	archived := 0
	for i := range 3 {
		rs, err := s.Receipts(ctx, store.ReceiptFilter{Key: k.key(fmt.Sprint("w", i))})
		if err != nil || len(rs) != 1 {
			t.Fatalf("w%d: %d receipts (%v), want 1", i, len(rs), err)
		}
		if rs[0].ID > h {
			t.Fatalf("receipt %d was stored before ReceiptHorizon returned %d, but lies above it", rs[0].ID, h)
		}
		archived++
	}
	late := k.key("late-read")
	if err := s.Append(ctx, store.Receipt{Time: base.Add(time.Second / 2), Key: late, Activity: "GetBalance", Effect: "read",
		Decision: store.DecisionRan}); err != nil {
		t.Fatal(err)
	}
	if rs, err := s.Receipts(ctx, store.ReceiptFilter{Key: late}); err != nil || len(rs) != 1 || rs[0].ID <= h {
		t.Fatalf("the receipt appended after the horizon %d: %+v (%v); want one with a greater ID", h, rs, err)
	}
	if _, err := p.Prune(ctx, store.Prune{Before: base.Add(time.Hour), Now: base.Add(2 * time.Hour), Reason: "r", ThroughID: -1}); err == nil {
		t.Fatal("a prune through a negative ID was accepted")
	}
	pr := store.Prune{Before: base.Add(time.Hour), Now: base.Add(2 * time.Hour), Actor: "ops", Reason: k.key("through"), ThroughID: h}
	n, err := p.Prune(ctx, pr)
	if err != nil {
		t.Fatal(err)
	}
	if n != archived {
		t.Fatalf("Prune through %d removed %d receipts, want the %d stored before it", h, n, archived)
	}
	if c := countKey(t, s, late); c != 1 {
		t.Fatal("the prune through the horizon removed the receipt stored after it")
	}
	got := prunes(t, s, pr.Reason)
	if len(got) != 1 || summary(t, got[0]).ThroughID != h || summary(t, got[0]).Count != int64(archived) {
		t.Fatalf("pruned receipts %+v; want one saying through %d, count %d", got, h, archived)
	}
	// Without the bound the late receipt goes too.
	pr.ThroughID, pr.Reason = 0, k.key("unbounded")
	if n, err := p.Prune(ctx, pr); err != nil || n != 1 {
		t.Fatalf("Prune without a bound = %d, %v; want the late receipt", n, err)
	}
}

// pageAll reads every page of f from s until one is Done, checking each page's
// contract, and returns the receipts and how many pages it took.
func pageAll(t *testing.T, s store.ReceiptPager, f store.ReceiptFilter) ([]store.Receipt, int) {
	t.Helper()
	var out []store.Receipt
	// Generous: with a small Scan, the pages of a range number the receipts in it
	// (a shared database holds other subtests' receipts).
	for pages := 1; pages <= 1_000_000; pages++ {
		p, err := s.ReceiptPage(context.Background(), f)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Receipts) > f.PageLimit() {
			t.Fatalf("a page of %+v returned %d receipts, over its limit %d", f, len(p.Receipts), f.PageLimit())
		}
		for i, r := range p.Receipts {
			if !f.Match(r) {
				t.Fatalf("page of %+v returned %+v, which it does not match", f, r)
			}
			if i > 0 {
				prev := p.Receipts[i-1]
				byTime := !p.Next.AfterTime.IsZero()
				if !byTime && r.ID <= prev.ID || byTime && (r.Time.Before(prev.Time) || r.Time.Equal(prev.Time) && r.ID <= prev.ID) {
					t.Fatalf("page of %+v out of its order: %d (%v) after %d (%v)", f, r.ID, r.Time, prev.ID, prev.Time)
				}
			}
		}
		out = append(out, p.Receipts...)
		if p.Done {
			return out, pages
		}
		if p.Next.AfterID == f.AfterID && p.Next.AfterTime.Equal(f.AfterTime) {
			t.Fatalf("a page of %+v that is not Done left its cursor where it was", f)
		}
		f = p.Next
	}
	t.Fatalf("paging %+v never ends", f)
	return nil, 0
}

// testReceiptPages: a page examines at most Scan receipts, so a filter that no
// index selects (the activity alone) ends a page short, even empty, with Done
// false and a cursor that goes on; paging on finds every match once, in order.
// Pages of a filter an index selects (the workflow) walk that index only.
func testReceiptPages(t *testing.T, s store.Store, k *keys) {
	ctx := context.Background()
	pg, ok := s.(store.ReceiptPager)
	if !ok {
		t.Skipf("%T does not implement store.ReceiptPager (optional)", s)
	}
	wf, common, rare := k.key("wf"), k.key("Common"), k.key("Rare")
	if err := s.Append(ctx, store.Receipt{Time: t0, Key: k.key("mark"), Activity: common, Decision: store.DecisionRan, WorkflowID: wf}); err != nil {
		t.Fatal(err)
	}
	mark, err := s.Receipts(ctx, store.ReceiptFilter{Key: k.key("mark")})
	if err != nil || len(mark) != 1 {
		t.Fatalf("mark: %v %v", mark, err)
	}
	var rs []store.Receipt
	for i := range 20 {
		rs = append(rs, store.Receipt{Time: t0.Add(time.Duration(i+1) * time.Millisecond), Key: k.key(fmt.Sprint("c", i)),
			Activity: common, Decision: store.DecisionRan, WorkflowID: wf})
	}
	rs = append(rs, store.Receipt{Time: t0.Add(time.Second), Key: k.key("r"), Activity: rare, Decision: store.DecisionRan, WorkflowID: wf})
	if err := store.AppendReceipts(ctx, s, rs); err != nil {
		t.Fatal(err)
	}
	after := mark[0].ID
	first, err := pg.ReceiptPage(ctx, store.ReceiptFilter{Activity: rare, AfterID: after, Scan: 5, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(first.Receipts); n != 0 {
		t.Fatalf("a page examining 5 receipts found %d of the activity stored after 20 others", n)
	}
	if first.Done {
		t.Fatal("a page that examined 5 of the 21 receipts after its cursor said Done")
	}
	got, pages := pageAll(t, pg, store.ReceiptFilter{Activity: rare, AfterID: after, Scan: 5, Limit: 10})
	if len(got) != 1 || got[0].Key != k.key("r") || pages < 5 {
		t.Fatalf("paged the rare activity 5 receipts at a time: %d receipts in %d pages; want its one, in at least 5 pages", len(got), pages)
	}
	// An indexed filter's pages: the workflow's 22 receipts, 7 at a time.
	got, _ = pageAll(t, pg, store.ReceiptFilter{WorkflowID: wf, Limit: 7, Scan: 3})
	if len(got) != 22 || got[0].ID != after || got[21].Key != k.key("r") {
		t.Fatalf("paged the workflow: %d receipts; want its 22 in ID order", len(got))
	}
	// A page that stops at its limit goes on from its last receipt.
	p, err := pg.ReceiptPage(ctx, store.ReceiptFilter{WorkflowID: wf, Activity: common, Limit: 2})
	if err != nil || len(p.Receipts) != 2 || p.Done || p.Next.AfterID != p.Receipts[1].ID {
		t.Fatalf("a page of 2: %+v (%v); want 2 receipts, not Done, its cursor at the second", p, err)
	}
	// Through an ID: nothing after it.
	got, _ = pageAll(t, pg, store.ReceiptFilter{WorkflowID: wf, ThroughID: got[9].ID})
	if len(got) != 10 {
		t.Fatalf("paged through the 10th receipt's ID: %d receipts, want 10", len(got))
	}
}

// testReceiptPagesSince: pages with Since (the time walk on PostgreSQL, the ID
// range elsewhere) find every receipt of the range once, the late one (appended
// after others, stamped earlier) included, and none before it, whatever the
// page's Scan.
func testReceiptPagesSince(t *testing.T, s store.Store, k *keys) {
	ctx := context.Background()
	pg, ok := s.(store.ReceiptPager)
	if !ok {
		t.Skipf("%T does not implement store.ReceiptPager (optional)", s)
	}
	// A time of its own, after every other subtest's: the range holds ours only.
	base := t0.AddDate(50+rand.IntN(800), 0, 0)
	act := k.key("Act")
	for i, at := range []time.Duration{-time.Minute, 10 * time.Second, 20 * time.Second, 30 * time.Second, 5 * time.Second, 20 * time.Second} {
		if err := s.Append(ctx, store.Receipt{Time: base.Add(at), Key: k.key(fmt.Sprint("s", i)), Activity: act,
			Decision: store.DecisionRan}); err != nil {
			t.Fatal(err)
		}
	}
	for _, scan := range []int{2, 7, 1000} {
		for _, limit := range []int{1, 4, 100} {
			got, _ := pageAll(t, pg, store.ReceiptFilter{Since: base, Activity: act, Limit: limit, Scan: scan})
			var keys []string
			for _, r := range got {
				keys = append(keys, strings.TrimPrefix(r.Key, k.prefix+"/"))
			}
			slices.Sort(keys)
			if fmt.Sprint(keys) != "[s1 s2 s3 s4 s5]" {
				t.Fatalf("paged since the base (scan %d, limit %d): %v; want s1 to s5 once each, the late s4 included", scan, limit, keys)
			}
		}
	}
	// Until as well: the receipts before 20 s.
	got, _ := pageAll(t, pg, store.ReceiptFilter{Since: base, Until: base.Add(20 * time.Second), Activity: act, Limit: 1, Scan: 3})
	if len(got) != 2 {
		t.Fatalf("paged from the base until 20 s: %d receipts, want s1 and s4", len(got))
	}
}
