package faults

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memory"
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
	if !strings.Contains(v, "17 of 20 unknown outcomes, below 90 %") {
		t.Fatalf("violations %q: want the share below 90 %% reported", v)
	}
	held.Settled["vendor dedup (re-sent with the key)"] = 10
	held.Wrong = 1
	v = strings.Join(Violations([]CellResult{ok, held}), "\n")
	if !strings.Contains(v, "1 wrong settlements") || strings.Contains(v, "below 90") {
		t.Fatalf("violations %q: want the wrong settlement alone", v)
	}
}
