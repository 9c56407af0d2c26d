package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/integration/soak/soakwf"
	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/vendorsim"
)

var t0 = time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)

// healthy is a run with nothing wrong: one workflow (w1) with a read, a keyed
// destructive write (ChargeCard), an unkeyed one (SendEmail), a keyed idempotent
// write (CreateTicket) and an unkeyed one (UpsertContact), a refund through the MCP
// server (keyed, its ledger like a vendor's), a charge completed asynchronously and
// a charge made by an update (the client got its outcome), all done, each claimed,
// performed once and completed; the first charge was replayed once to a reset run.
func healthy() Input {
	call := func(i, tool, effect, args string) soakwf.Call {
		return soakwf.Call{Token: "tk-w1-" + i, Tool: tool, Effect: effect, Args: json.RawMessage(args)}
	}
	calls := []soakwf.Call{
		call("0", "GetCustomer", "read", `{"customer_id":"cus_tk-w1-0"}`),
		call("1", "ChargeCard", "destructive", `{"customer":"cus_tk-w1-1","amount":100,"currency":"usd"}`),
		call("2", "SendEmail", "destructive", `{"to":"a@example.com","subject":"s tk-w1-2","body":"b"}`),
		call("3", "CreateTicket", "idempotent-write", `{"subject":"t tk-w1-3","requester":"a@example.com"}`),
		call("4", "UpsertContact", "idempotent-write", `{"email":"tk-w1-4@example.com","name":"n"}`),
		call("5", "mcp.soak.refund_payment", "destructive", `{"payment":"py_tk-w1-5","amount":100}`),
		call("6", "ChargeCardAsync", "destructive", `{"customer":"cus_tk-w1-6","amount":100,"currency":"usd"}`),
		call("7", "ChargeCard", "destructive", `{"customer":"cus_tk-w1-7","amount":200,"currency":"usd"}`),
	}
	calls[7].Via = soakwf.ViaUpdate
	ledger := []vendorsim.Entry{
		{Seq: 1, Vendor: "payments", Key: "k1", Keyed: true, Path: "/v1/charges", Body: json.RawMessage(`{"customer":"cus_tk-w1-1","amount":100}`), RecordID: "ch_000001"},
		{Seq: 1, Vendor: "email", Key: "msg:aa", Path: "/v3/mail/send", Body: json.RawMessage(`{"subject":"s tk-w1-2"}`), RecordID: "msg-1"},
		{Seq: 1, Vendor: "tickets", Key: "k3", Keyed: true, Path: "/tickets", Body: json.RawMessage(`{"subject":"t tk-w1-3"}`), RecordID: "T-1001"},
		{Seq: 1, Vendor: "crm", Key: "tk-w1-4@example.com", Path: "/contacts/tk-w1-4@example.com", Body: json.RawMessage(`{"name":"n"}`), RecordID: "tk-w1-4@example.com"},
		{Seq: 1, Vendor: "mcp", Key: "k5", Keyed: true, Path: "tools/call refund_payment", Body: json.RawMessage(`{"payment":"py_tk-w1-5","amount":100}`), RecordID: "rf_000001"},
		{Seq: 2, Vendor: "payments", Key: "k6", Keyed: true, Path: "/v1/charges", Body: json.RawMessage(`{"customer":"cus_tk-w1-6","amount":100}`), RecordID: "ch_000002"},
		{Seq: 3, Vendor: "payments", Key: "k7", Keyed: true, Path: "/v1/charges", Body: json.RawMessage(`{"customer":"cus_tk-w1-7","amount":200}`), RecordID: "ch_000003"},
	}
	var rs []store.Receipt
	var recs []store.Record
	id := int64(0)
	add := func(key, act, effect string, d store.Decision, hash string) {
		id++
		rs = append(rs, store.Receipt{ID: id, Time: t0.Add(time.Duration(id) * time.Second), Key: key, Activity: act, Effect: effect,
			Decision: d, ArgsHash: hash, WorkflowID: "soak-w1", RunID: "r1", Attempt: 1})
	}
	for i, c := range calls[1:] {
		key := []string{"k1", "k2", "k3", "k4", "k5", "k6", "k7"}[i]
		hash := "h" + key
		add(key, c.Tool, c.Effect, store.DecisionClaimed, hash)
		add(key, c.Tool, c.Effect, store.DecisionRan, hash)
		recs = append(recs, store.Record{Key: key, Activity: c.Tool, Effect: c.Effect, ArgsHash: hash, Args: c.Args,
			State: store.StateCompleted, Owner: "o-" + key, Lease: t0.Add(time.Minute), WorkflowID: "soak-w1", Attempt: 1,
			CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)})
	}
	add("k1", "ChargeCard", "destructive", store.DecisionReplayed, "hk1")
	res := &soakwf.Result{Calls: []soakwf.Outcome{
		{Token: "tk-w1-0", Tool: "GetCustomer", Done: true, Result: json.RawMessage(`{"id":"cus_tk-w1-0"}`)},
		{Token: "tk-w1-1", Tool: "ChargeCard", Done: true, Result: json.RawMessage(`{"id":"ch_000001","amount":100}`)},
		{Token: "tk-w1-2", Tool: "SendEmail", Done: true, Result: json.RawMessage(`{"message_id":"msg-1"}`)},
		{Token: "tk-w1-3", Tool: "CreateTicket", Done: true, Result: json.RawMessage(`{"id":"T-1001"}`)},
		{Token: "tk-w1-4", Tool: "UpsertContact", Done: true, Result: json.RawMessage(`{"email":"tk-w1-4@example.com"}`)},
		{Token: "tk-w1-5", Tool: "mcp.soak.refund_payment", Done: true, Result: json.RawMessage(`{"text":"refund rf_000001","structured":{"id":"rf_000001"}}`)},
		{Token: "tk-w1-6", Tool: "ChargeCardAsync", Done: true, Result: json.RawMessage(`{"id":"ch_000002","amount":100}`)},
		{Token: "tk-w1-7", Tool: "ChargeCard", Done: true, Result: json.RawMessage(`{"id":"ch_000003","amount":200}`)},
	}}
	upd := soakwf.Outcome{Token: "tk-w1-7", Tool: "ChargeCard", Done: true, Result: json.RawMessage(`{"id":"ch_000003","amount":200}`)}
	return Input{Seed: 7, Calls: calls, Ledger: ledger, Receipts: rs, Records: recs,
		Runs:      []Run{{WorkflowID: "soak-w1", RunID: "r2", Status: "completed", Result: res}},
		Updates:   []Update{{WorkflowID: "soak-w1", Outcome: upd}},
		Witnessed: map[string]bool{"ChargeCard": true}, Now: t0.Add(2 * time.Minute), Grace: time.Minute}
}

func TestCheckerHealthyRunHasNoViolations(t *testing.T) {
	if vs := Check(healthy()); len(vs) != 0 {
		t.Fatalf("violations in a healthy run:\n%s", Report(7, vs))
	}
}

// Each case breaks one invariant by hand; the checker reports exactly that kind,
// naming the call, with the seed and the call's history.
func TestCheckerCatchesEachInvariant(t *testing.T) {
	cases := []breakCase{
		{"a keyed destructive write performed twice", KindDestructiveTwice, "tk-w1-1", func(in *Input) {
			e := in.Ledger[0]
			e.Seq, e.RecordID = 2, "ch_000002"
			in.Ledger = append(in.Ledger, e)
		}},
		{"an unkeyed destructive write performed twice (a reset run re-sent it)", KindDestructiveTwice, "tk-w1-2", func(in *Input) {
			e := in.Ledger[1]
			e.Seq, e.RecordID = 2, "msg-2"
			in.Ledger = append(in.Ledger, e)
		}},
		{"an idempotent write sent under a second key", KindIdempotentTwoKeys, "tk-w1-3", func(in *Input) {
			e := in.Ledger[2]
			e.Seq, e.Key = 2, "k3-other"
			in.Ledger = append(in.Ledger, e)
			in.Receipts = append(in.Receipts, store.Receipt{ID: 99, Key: "k3-other", Decision: store.DecisionClaimed, ArgsHash: "hk3"})
		}},
		{"an idempotent write claimed under a second key", KindIdempotentTwoKeys, "tk-w1-4", func(in *Input) {
			r := in.Records[3]
			r.Key = "k4-other"
			in.Records = append(in.Records, r)
			in.Receipts = append(in.Receipts, store.Receipt{ID: 99, Key: "k4-other", Decision: store.DecisionClaimed, ArgsHash: "hk4"})
		}},
		{"a call reported done that the vendor never performed", KindEffects, "tk-w1-2", func(in *Input) {
			in.Ledger = append(in.Ledger[:1], in.Ledger[2:]...)
		}},
		{"a done call's result names another record", KindEffects, "tk-w1-1", func(in *Input) {
			in.Runs[0].Result.Calls[1].Result = json.RawMessage(`{"id":"ch_000777"}`)
		}},
		{"a completed workflow without an outcome for a call", KindEffects, "tk-w1-4", func(in *Input) {
			in.Runs[0].Result.Calls = in.Runs[0].Result.Calls[:4]
		}},
		{"a refusal without its withheld call", KindRefusal, "tk-w1-2", func(in *Input) {
			o := &in.Runs[0].Result.Calls[2]
			o.Done, o.Result = false, nil
			o.Refusal = &soakwf.Refusal{Type: interceptor.ErrTypeInFlight, Message: "idemgate: refused"}
		}},
		{"a refusal without a reason", KindRefusal, "tk-w1-2", func(in *Input) {
			o := &in.Runs[0].Result.Calls[2]
			o.Done, o.Result = false, nil
			o.Refusal = &soakwf.Refusal{Type: interceptor.ErrTypeInFlight, Call: &interceptor.WithheldCall{Activity: "SendEmail", Key: "k2", Args: in.Calls[2].Args}}
		}},
		{"a refusal withholding another call", KindRefusal, "tk-w1-2", func(in *Input) {
			o := &in.Runs[0].Result.Calls[2]
			o.Done, o.Result = false, nil
			o.Refusal = &soakwf.Refusal{Type: interceptor.ErrTypeInFlight, Message: "refused",
				Call: &interceptor.WithheldCall{Activity: "SendEmail", Key: "k2", Args: in.Calls[1].Args}}
		}},
		{"a gated receipt without its call", KindRefusal, "tk-w1-2", func(in *Input) {
			in.Receipts = append(in.Receipts, store.Receipt{ID: 99, Key: "k2", Activity: "SendEmail", Decision: store.DecisionGated, Error: "paused"})
		}},
		{"a vendor effect without a claim receipt (the gate was bypassed)", KindReceiptLost, "tk-w1-1", func(in *Input) {
			in.Receipts = dropReceipts(in.Receipts, "k1", store.DecisionClaimed)
		}},
		{"an unkeyed effect without a claim receipt under any key", KindReceiptLost, "tk-w1-2", func(in *Input) {
			in.Receipts = dropReceipts(in.Receipts, "k2", store.DecisionClaimed)
		}},
		{"a done write without the receipt of its completion (the store forgot it)", KindReceiptLost, "tk-w1-3", func(in *Input) {
			in.Receipts = dropReceipts(in.Receipts, "k3", store.DecisionRan)
			in.Records[2].State = store.StateClaimed
		}},
		{"a stored result replayed to a call with other arguments", KindReplayOtherArgs, "tk-w1-1", func(in *Input) {
			in.Receipts[len(in.Receipts)-1].ArgsHash = "h-other"
		}},
		{"a witnessed write still pending long past the time its witness's answer counts", KindPendingSettleable, "tk-w1-1", func(in *Input) {
			in.Records[0].State = store.StateClaimed
			in.Now = store.NotSentFrom(in.Records[0]).Add(2 * in.Grace)
		}},
		{"an MCP tool performed twice under one key (its server's Dedup bypassed)", KindDestructiveTwice, "tk-w1-5", func(in *Input) {
			e := in.Ledger[4]
			e.Seq, e.RecordID = 2, "rf_000002"
			in.Ledger = append(in.Ledger, e)
		}},
		{"an MCP effect without a claim receipt", KindReceiptLost, "tk-w1-5", func(in *Input) {
			in.Receipts = dropReceipts(in.Receipts, "k5", store.DecisionClaimed)
		}},
		{"a charge completed asynchronously without the receipt of its completion", KindReceiptLost, "tk-w1-6", func(in *Input) {
			in.Receipts = dropReceipts(in.Receipts, "k6", store.DecisionRan)
			in.Records[5].State = store.StateClaimed
		}},
		{"an update answered done that the vendor never performed", KindEffects, "tk-w1-7", func(in *Input) {
			in.Runs = nil // the workflow did not complete: only the client's answer says done
			in.Ledger = in.Ledger[:6]
		}},
		{"an update's answer naming another record", KindEffects, "tk-w1-7", func(in *Input) {
			in.Updates[0].Outcome.Result = json.RawMessage(`{"id":"ch_000999"}`)
		}},
		{"an update refused without its withheld call", KindRefusal, "tk-w1-7", func(in *Input) {
			in.Runs = nil
			in.Updates[0].Outcome = soakwf.Outcome{Token: "tk-w1-7", Tool: "ChargeCard",
				Refusal: &soakwf.Refusal{Type: interceptor.ErrTypeInFlight, Message: "idemgate: refused"}}
		}},
		{"the workflow lists an update's call not done although the client got it done", KindUpdateDiffers, "tk-w1-7", func(in *Input) {
			o := &in.Runs[0].Result.Calls[7]
			o.Done, o.Result, o.Err = false, nil, "activity error"
		}},
		{"the workflow lists an update's call timed out although its key was left claimed", KindUpdateDiffers, "tk-w1-7", func(in *Input) {
			o := &in.Runs[0].Result.Calls[7]
			o.Done, o.Result, o.TimedOut, o.Err = false, nil, true, "activity error: ScheduleToClose"
			for i := range in.Records {
				if in.Records[i].Key == "k7" {
					in.Records[i].State = store.StateClaimed
				}
			}
		}},
		{"the workflow lists an update's call refused after its time ran out", KindUpdateDiffers, "tk-w1-7", func(in *Input) {
			o := &in.Runs[0].Result.Calls[7]
			o.Done, o.Result, o.TimedOut, o.Err = false, nil, true, "activity error: ScheduleToClose"
			o.Refusal = &soakwf.Refusal{Type: interceptor.ErrTypeInFlight, Message: "idemgate: refused",
				Call: &interceptor.WithheldCall{Activity: "ChargeCard", Key: "k7", Effect: "destructive", Args: in.Calls[7].Args}}
		}},
		{"the workflow lists an update's call done with another record than the client got", KindUpdateDiffers, "tk-w1-7", func(in *Input) {
			in.Ledger = append(in.Ledger, vendorsim.Entry{Seq: 4, Vendor: "payments", Key: "k7", Keyed: true, Path: "/v1/charges",
				Body: json.RawMessage(`{"customer":"cus_tk-w1-7","amount":200}`), RecordID: "ch_000004"})
			in.Runs[0].Result.Calls[7].Result = json.RawMessage(`{"id":"ch_000004","amount":200}`)
		}},
	}
	runBreakCases(t, cases, true)
}

// A reset re-ran an update's call and Temporal's time for it ran out before the
// gate answered (the activity kept its first scheduling time, so its
// ScheduleToClose was spent): the workflow lists it failed, timed out, while the
// client's first update got it done and the key's record is completed. No other
// outcome was given: not update-differs (the first one-hour runs' 5 reports).
func TestCheckerUpdateReRunThatTimedOutIsNoViolation(t *testing.T) {
	in := healthy()
	o := &in.Runs[0].Result.Calls[7]
	o.Done, o.Result, o.TimedOut = false, nil, true
	o.Err = "activity error (type: ChargeCard, scheduledEventID: 12, startedEventID: 28, identity: ): Not enough time to " +
		"schedule next retry before activity ScheduleToClose timeout, giving up retrying (type: ScheduleToClose)"
	if vs := Check(in); len(vs) != 0 {
		t.Fatalf("violations:\n%s", Report(in.Seed, vs))
	}
	// The same for a read an update made (it has no key: nothing is stored).
	in = healthy()
	read := soakwf.Call{Token: "tk-w1-8", Tool: "GetCustomer", Effect: "read", Via: soakwf.ViaUpdate,
		Args: json.RawMessage(`{"customer_id":"cus_tk-w1-8"}`)}
	in.Calls = append(in.Calls, read)
	in.Updates = append(in.Updates, Update{WorkflowID: "soak-w1", Outcome: soakwf.Outcome{Token: "tk-w1-8", Tool: "GetCustomer",
		Done: true, Result: json.RawMessage(`{"id":"cus_tk-w1-8"}`)}})
	in.Runs[0].Result.Calls = append(in.Runs[0].Result.Calls, soakwf.Outcome{Token: "tk-w1-8", Tool: "GetCustomer",
		TimedOut: true, Err: "activity error (type: GetCustomer): Not enough time to schedule next retry before activity ScheduleToClose timeout"})
	if vs := Check(in); len(vs) != 0 {
		t.Fatalf("violations (read):\n%s", Report(in.Seed, vs))
	}
}

// A witnessed record inside its grace, and an unwitnessed one however old, are not
// reported pending-settleable: only a person could settle the second.
func TestCheckerPendingOnlyWhereAWitnessCouldTell(t *testing.T) {
	in := healthy()
	in.Records[0].State = store.StateClaimed // ChargeCard, witnessed
	in.Records[1].State = store.StateUnknown // SendEmail, no witness
	// Their outcomes are open, so no receipt completes them and the workflow is still
	// waiting (a ran receipt with a pending record is the store losing the record's
	// completion: receipt-lost, atk-check finding 6).
	in.Receipts = dropReceipts(in.Receipts, "k1", store.DecisionRan)
	in.Receipts = dropReceipts(in.Receipts, "k1", store.DecisionReplayed)
	in.Receipts = dropReceipts(in.Receipts, "k2", store.DecisionRan)
	in.Runs[0].Status, in.Runs[0].Result = "running", nil
	in.Now = store.NotSentFrom(in.Records[0]).Add(in.Grace / 2)
	if vs := Check(in); len(vs) != 0 {
		t.Fatalf("violations:\n%s", Report(in.Seed, vs))
	}
}

func dropReceipts(rs []store.Receipt, key string, d store.Decision) []store.Receipt {
	var out []store.Receipt
	for _, r := range rs {
		if r.Key == key && r.Decision == d {
			continue
		}
		out = append(out, r)
	}
	return out
}

// breakCase breaks one invariant of healthy() by hand: the checker must report a
// violation of kind naming the call token.
type breakCase struct {
	name   string
	kind   string
	token  string
	break_ func(in *Input)
}

// runBreakCases runs each case on a fresh healthy() input: a violation of its kind
// naming its call, and a report with the seed to replay it (and, with history, the
// call's history: a call of the workload's).
func runBreakCases(t *testing.T, cases []breakCase, history bool) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := healthy()
			c.break_(&in)
			vs := Check(in)
			rep := Report(in.Seed, vs)
			if !slices.ContainsFunc(vs, func(v Violation) bool { return v.Kind == c.kind && v.Token == c.token }) {
				t.Fatalf("want a %s violation of call %q, got:\n%s", c.kind, c.token, rep)
			}
			if !strings.Contains(rep, "seed 7") || !strings.Contains(rep, "-seed 7") {
				t.Fatalf("the report lacks the seed:\n%s", rep)
			}
			if history && !strings.Contains(rep, "call "+c.token+":") {
				t.Fatalf("the report lacks the call's history:\n%s", rep)
			}
		})
	}
}
