package faults

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memory"
	"github.com/idemgate/idemgate/witness"
)

// The matrix's own checks: a settlement that contradicts the vendor's ledger is
// counted wrong, whoever made it, and a share below 90 % where a witness exists is
// a violation.
func TestSettlementCheckedAgainstTheLedger(t *testing.T) {
	charge, email := Tools[2], Tools[3]
	if charge.Name != "ChargeCard" || !charge.Witness || email.Name != "SendEmail" || email.Witness {
		t.Fatalf("Tools changed: %+v %+v", charge, email)
	}
	cases := []struct {
		name          string
		actor, res    string
		effectsBefore int
		by            string
		person, wrong bool
	}{
		{"witness not sent, nothing performed", "witness:lookup", store.ResolvedNotSent, 0, "witness lookup (not sent)", false, false},
		{"witness not sent, but the vendor performed it", "witness:lookup", store.ResolvedNotSent, 1, "witness lookup (not sent)", false, true},
		{"witness sent, performed", "witness:lookup", store.ResolvedSent, 1, "witness lookup (sent)", false, false},
		{"witness sent, never performed", "witness:lookup", store.ResolvedSent, 0, "witness lookup (sent)", false, true},
		{"person not sent, but performed", "ops@example.com", store.ResolvedNotSent, 1, "", true, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			st := memory.New()
			now := time.Now()
			for _, r := range []store.Receipt{
				{Time: now, Key: "k", Activity: charge.Name, Decision: store.DecisionClaimed, WorkflowID: "wf"},
				{Time: now, Key: "k", Activity: charge.Name, Decision: store.DecisionResolved, WorkflowID: "wf", Actor: c.actor, Resolution: c.res},
				{Time: now, Key: "other", Activity: charge.Name, Decision: store.DecisionResolved, WorkflowID: "another", Actor: "witness:x", Resolution: store.ResolvedSent},
			} {
				if err := st.Append(ctx, r); err != nil {
					t.Fatal(err)
				}
			}
			tr := Trial{EffectsBefore: c.effectsBefore}
			if err := tr.settlement(ctx, st, charge, "wf"); err != nil {
				t.Fatal(err)
			}
			if !tr.Unknown || tr.SettledBy != c.by || tr.ByPerson != c.person || tr.Wrong != c.wrong {
				t.Fatalf("%+v; want unknown, settled by %q, by a person %v, wrong %v", tr, c.by, c.person, c.wrong)
			}
		})
	}

	cell := func(tool Tool, b int) CellResult {
		return CellResult{Cell: Cell{Boundary: Boundaries[b-1], Tool: tool, Store: "sqlite"}, Trials: 10}
	}
	ok := cell(charge, 2)
	ok.Succeeded, ok.Effects, ok.Unknown, ok.Settled = 10, 10, 10, map[string]int{"witness payments-lookup (not sent)": 10}
	held := cell(charge, 3)
	held.Succeeded, held.Effects, held.Replays, held.Unknown, held.Settled = 10, 10, 10, 10, map[string]int{"vendor dedup (re-sent with the key)": 7}
	v := strings.Join(Violations([]CellResult{ok, held}), "\n")
	if !strings.Contains(v, "17+0 of 20 unknown outcomes, below 90 %") {
		t.Fatalf("violations %q: want the share below 90 %% reported", v)
	}
	held.Settled["vendor dedup (re-sent with the key)"] = 10
	held.Wrong = 1
	v = strings.Join(Violations([]CellResult{ok, held}), "\n")
	if !strings.Contains(v, "1 wrong settlements") || strings.Contains(v, "below 90") {
		t.Fatalf("violations %q: want the wrong settlement alone", v)
	}
}

// The harness names the witness whose early "not sent" a held refusal quotes
// (witness.Said.String, as the gate's message carries it), and nothing else.
func TestEarlyNotSentNamedFromTheRefusal(t *testing.T) {
	at := time.Date(2026, 12, 2, 3, 35, 22, 0, time.UTC)
	early := witness.Said{Witness: "payments-lookup", Answer: witness.Answer{Verdict: witness.NotSent}, Early: true, CountsFrom: at}
	for _, c := range []struct {
		said []witness.Said
		want string
	}{
		{[]witness.Said{early}, "payments-lookup"},
		{[]witness.Said{{Witness: "temporal-history", Answer: witness.Answer{Verdict: witness.CannotTell}}, early}, "payments-lookup"},
		{[]witness.Said{{Witness: "ledger", Answer: witness.Answer{Verdict: witness.NotSent}}}, ""},
		{[]witness.Said{{Witness: "ledger", Answer: witness.Answer{Verdict: witness.Sent}, Early: true}}, ""},
		{[]witness.Said{{Witness: "ledger", Err: errors.New("payments-lookup: not sent")}}, ""},
	} {
		msg := "idemgate: refused … Witnesses asked: " + witness.Report{Said: c.said}.Summary() + ". Held: …"
		if got := earlyNotSentBy(msg); got != c.want {
			t.Errorf("earlyNotSentBy(%q) = %q, want %q", msg, got, c.want)
		}
	}
}

// A trial ended when its witness's early "not sent" had its retry scheduled counts
// as scheduled, not settled: it satisfies the cell's rules (the write is to be
// settled by the witness) and the share, and the table and the share say so apart
// from the settled ones.
func TestScheduledCountedApart(t *testing.T) {
	charge := Tools[2]
	cell := func(b int) CellResult {
		return CellResult{Cell: Cell{Boundary: Boundaries[b-1], Tool: charge, Store: "sqlite"}, Trials: 3, Unknown: 3}
	}
	b2 := cell(2)
	b2.Scheduled = map[string]int{"witness payments-lookup (not sent)": 2}
	b2.Settled = map[string]int{"witness payments-lookup (not sent)": 1}
	b2.Succeeded, b2.Effects = 1, 1
	if v := Violations([]CellResult{b2}); len(v) != 0 {
		t.Fatalf("violations %q; want none", v)
	}
	sh := Shares([]CellResult{b2}).WithWitness
	if sh.Settled != 1 || sh.Scheduled != 2 || !strings.Contains(sh.String(), "1 settled without a person (33 %), 2 scheduled to be settled by a witness") {
		t.Fatalf("share %+v: %s", sh, sh)
	}
	if md := Markdown([]CellResult{b2}); !strings.Contains(md, "| 1: 1 witness payments-lookup (not sent) | 2: 2 witness payments-lookup (not sent) |") {
		t.Fatalf("table does not show settled and scheduled apart:\n%s", md)
	}
	// Neither finished nor scheduled: the keyed write did not finish.
	b2.Scheduled = nil
	v := strings.Join(Violations([]CellResult{b2}), "\n")
	if !strings.Contains(v, "1 of 3 succeeded, 0 scheduled") || !strings.Contains(v, "1 of 3 settled or scheduled to be settled by the processor's lookup") {
		t.Fatalf("violations %q", v)
	}
}
