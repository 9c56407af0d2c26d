package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/idemgate/idemgate/integration/soak/soakwf"
	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/vendorsim"
)

// The adversarial review of the checker (docs/review/atk-check.md): each case is a
// real break of the promise that the checker once let through. The checker reports
// that kind, for that call.
func TestCheckerAttacks(t *testing.T) {
	refuse := func(in *Input, i int, call *interceptor.WithheldCall) {
		o := &in.Runs[0].Result.Calls[i]
		o.Done, o.Result, o.Err = false, nil, "refused"
		o.Refusal = &soakwf.Refusal{Type: interceptor.ErrTypeInFlight, Message: "idemgate: refused", Call: call}
	}
	cases := []breakCase{
		{"a refused-in-flight receipt without its withheld call", KindRefusal, "tk-w1-2", func(in *Input) {
			in.Receipts = append(in.Receipts, store.Receipt{ID: 99, Key: "k2", Activity: "SendEmail", Effect: "destructive",
				Decision: store.DecisionRefusedInFlight, Error: "idemgate: refused", ArgsHash: "hk2"})
		}},
		{"a refusal withholding another call whose token starts with this call's", KindRefusal, "tk-w1-1", func(in *Input) {
			// tk-w1-12's arguments contain the text tk-w1-1.
			refuse(in, 1, &interceptor.WithheldCall{Activity: "ChargeCard", Key: "k1",
				Args: json.RawMessage(`{"amount":100,"currency":"usd","customer":"cus_tk-w1-12"}`)})
		}},
		{"a refusal withholding its call under another call's key", KindRefusal, "tk-w1-2", func(in *Input) {
			in.Ledger = append(in.Ledger[:1:1], in.Ledger[2:]...) // the e-mail was not sent
			in.Receipts = dropReceipts(in.Receipts, "k2", store.DecisionRan)
			in.Records[1].State = store.StateUnknown
			refuse(in, 2, &interceptor.WithheldCall{Activity: "SendEmail", Key: "k1", Args: in.Calls[2].Args})
		}},
		{"an idempotent write withheld under a second key", KindIdempotentTwoKeys, "tk-w1-3", func(in *Input) {
			refuse(in, 3, &interceptor.WithheldCall{Activity: "CreateTicket", Key: "k3-other", Args: in.Calls[3].Args})
		}},
		{"a vendor effect naming no call of the workload", KindEffects, "tk-w1-99", func(in *Input) {
			// An e-mail sent twice for a call the harness did not record: without this
			// check no invariant looks at it.
			for seq := 2; seq <= 3; seq++ {
				in.Ledger = append(in.Ledger, vendorsim.Entry{Seq: seq, Vendor: "email", Key: "msg:bb", Path: "/v3/mail/send",
					Body: json.RawMessage(`{"subject":"s tk-w1-99"}`), RecordID: "msg-" + string(rune('0'+seq))})
			}
		}},
		{"a vendor effect naming no call at all", KindEffects, "", func(in *Input) {
			in.Ledger = append(in.Ledger, vendorsim.Entry{Seq: 2, Vendor: "email", Key: "msg:cc", Path: "/v3/mail/send",
				Body: json.RawMessage(`{"subject":"no token"}`), RecordID: "msg-2"})
		}},
		{"a completion receipt whose record was left claimed (the store forgot the record's completion)", KindReceiptLost, "tk-w1-2", func(in *Input) {
			in.Records[1].State = store.StateClaimed // SendEmail: no witness, so nothing else looks
		}},
		{"a key settled as sent that the vendor never performed", KindReceiptLost, "tk-w1-2", func(in *Input) {
			in.Ledger = append(in.Ledger[:1:1], in.Ledger[2:]...)
			in.Receipts = dropReceipts(in.Receipts, "k2", store.DecisionRan)
			in.Receipts = append(in.Receipts,
				store.Receipt{ID: 98, Key: "k2", Activity: "SendEmail", Effect: "destructive", Decision: store.DecisionUnknown, ArgsHash: "hk2"},
				store.Receipt{ID: 99, Key: "k2", Activity: "SendEmail", Effect: "destructive", Decision: store.DecisionResolved,
					Resolution: store.ResolvedSent, Actor: "soak-operator", ArgsHash: "hk2"})
			refuse(in, 2, &interceptor.WithheldCall{Activity: "SendEmail", Key: "k2", Args: in.Calls[2].Args})
		}},
		{"a destructive key the store ended not sent although the vendor performed it under that key", KindReceiptLost, "tk-w1-1", func(in *Input) {
			in.Receipts = dropReceipts(in.Receipts, "k1", store.DecisionRan)
			in.Receipts = dropReceipts(in.Receipts, "k1", store.DecisionReplayed)
			in.Receipts = append(in.Receipts,
				store.Receipt{ID: 98, Key: "k1", Activity: "ChargeCard", Effect: "destructive", Decision: store.DecisionUnknown, ArgsHash: "hk1"},
				store.Receipt{ID: 99, Key: "k1", Activity: "ChargeCard", Effect: "destructive", Decision: store.DecisionResolved,
					Resolution: store.ResolvedNotSent, Actor: "witness:payments-lookup", ArgsHash: "hk1"})
			in.Records[0].State = store.StateReleased
			refuse(in, 1, &interceptor.WithheldCall{Activity: "ChargeCard", Key: "k1", Args: in.Calls[1].Args})
		}},
		{"a destructive key taken over and sent again without the vendor's dedup as witness (hidden by the vendor)", KindDestructiveTwice, "tk-w1-1", func(in *Input) {
			for i, d := range []store.Decision{store.DecisionUnknown, store.DecisionTakenOver, store.DecisionRan} {
				in.Receipts = append(in.Receipts, store.Receipt{ID: int64(90 + i), Key: "k1", Activity: "ChargeCard", Effect: "idempotent-write",
					Decision: d, ArgsHash: "hk1", WorkflowID: "soak-w1", RunID: "r1", Attempt: 2})
			}
		}},
		{"a replay returning a result other than the key's stored one", KindReplayOtherArgs, "tk-w1-1", func(in *Input) {
			for i := range in.Receipts {
				switch r := &in.Receipts[i]; {
				case r.Key == "k1" && r.Decision == store.DecisionRan:
					r.ResultRef = "sha256:00000000000000a1"
				case r.Key == "k1" && r.Decision == store.DecisionReplayed:
					r.ResultRef = "sha256:00000000000000a7" // k7's charge
				}
			}
		}},
	}
	runBreakCases(t, cases, false)
}

// Legitimate histories the checks added above must not flag: a takeover, a
// vendor-dedup re-send, a witness's "sent", a release after a declined request
// followed by a run, a pause's refusal before the claim, an in-flight refusal with
// its call, a record expired and claimed again, and a call refused for good whose
// key a person settled as not sent (nothing was performed).
func TestCheckerAttacksLegitimateHistories(t *testing.T) {
	in := healthy()
	id := int64(100)
	add := func(key, act, effect string, d store.Decision, f func(r *store.Receipt)) {
		id++
		r := store.Receipt{ID: id, Time: t0.Add(time.Duration(id) * time.Second), Key: key, Activity: act, Effect: effect,
			Decision: d, ArgsHash: "h" + key, WorkflowID: "soak-w1", RunID: "r2", Attempt: 2}
		if f != nil {
			f(&r)
		}
		in.Receipts = append(in.Receipts, r)
	}
	withCall := func(args json.RawMessage) func(r *store.Receipt) {
		return func(r *store.Receipt) { r.Call, r.Error = args, "idemgate: refused" }
	}
	// Rebuild the receipts of k1 (ChargeCard), k3 (CreateTicket), k6 (ChargeCardAsync)
	// and k2 (SendEmail) with the longer, legitimate, histories.
	for _, k := range []string{"k1", "k2", "k3", "k6"} {
		in.Receipts = dropReceipts(in.Receipts, k, store.DecisionClaimed)
		in.Receipts = dropReceipts(in.Receipts, k, store.DecisionRan)
		in.Receipts = dropReceipts(in.Receipts, k, store.DecisionReplayed)
	}
	// k1: paused first (gated before the claim), then claimed, unknown, taken over,
	// re-sent under the vendor's dedup (the vendor answered from its store: one
	// ledger line), ran, later replayed to a reset run.
	add("k1", "ChargeCard", "destructive", store.DecisionGated, withCall(in.Calls[1].Args))
	add("k1", "ChargeCard", "destructive", store.DecisionClaimed, nil)
	add("k1", "ChargeCard", "destructive", store.DecisionRefusedInFlight, withCall(in.Calls[1].Args))
	add("k1", "ChargeCard", "destructive", store.DecisionUnknown, nil)
	add("k1", "ChargeCard", "destructive", store.DecisionTakenOver, nil)
	add("k1", "ChargeCard", "destructive", store.DecisionResent, func(r *store.Receipt) { r.Actor = "witness:vendor-dedup" })
	ref := func(r *store.Receipt) { r.ResultRef = "sha256:00000000000000a1" }
	add("k1", "ChargeCard", "destructive", store.DecisionRan, ref)
	add("k1", "ChargeCard", "destructive", store.DecisionReplayed, ref)
	// k7 (ChargeCard by an update): an attempt's takeover whose reply was lost, given
	// back as unknown without running; then the next attempt's takeover, re-send, run.
	add("k7", "ChargeCard", "destructive", store.DecisionUnknown, nil)
	add("k7", "ChargeCard", "destructive", store.DecisionTakenOver, nil)
	add("k7", "ChargeCard", "destructive", store.DecisionUnknown, nil)
	add("k7", "ChargeCard", "destructive", store.DecisionTakenOver, func(r *store.Receipt) { r.Attempt = 3 })
	add("k7", "ChargeCard", "destructive", store.DecisionResent, func(r *store.Receipt) { r.Attempt = 3 })
	add("k7", "ChargeCard", "destructive", store.DecisionRan, func(r *store.Receipt) { r.Attempt = 3 })
	// k2: claimed, released (the request was rejected), claimed again, ran.
	add("k2", "SendEmail", "destructive", store.DecisionClaimed, nil)
	add("k2", "SendEmail", "destructive", store.DecisionReleased, nil)
	add("k2", "SendEmail", "destructive", store.DecisionClaimed, nil)
	add("k2", "SendEmail", "destructive", store.DecisionRan, nil)
	// k3: claimed, the owner killed, taken over, ran.
	add("k3", "CreateTicket", "idempotent-write", store.DecisionClaimed, nil)
	add("k3", "CreateTicket", "idempotent-write", store.DecisionTakenOver, nil)
	add("k3", "CreateTicket", "idempotent-write", store.DecisionRan, nil)
	// k6: claimed, handed off, the completer killed after the charge, the witness said sent.
	add("k6", "ChargeCardAsync", "destructive", store.DecisionClaimed, nil)
	add("k6", "ChargeCardAsync", "destructive", store.DecisionHandedOff, nil)
	add("k6", "ChargeCardAsync", "destructive", store.DecisionResolved, func(r *store.Receipt) {
		r.Resolution, r.Actor, r.ResultRef = store.ResolvedSent, "witness:payments-lookup", "sha256:00000000000000a6"
	})
	add("k6", "ChargeCardAsync", "destructive", store.DecisionReplayed, func(r *store.Receipt) { r.ResultRef = "sha256:00000000000000a6" })
	// A ninth call, a charge refused for good (its owner gone without proof, never
	// performed), which a person then settled as not sent.
	c8 := soakwf.Call{Token: "tk-w1-8", Tool: "ChargeCard", Effect: "destructive", Args: json.RawMessage(`{"customer":"cus_tk-w1-8","amount":300,"currency":"usd"}`)}
	in.Calls = append(in.Calls, c8)
	add("k8", "ChargeCard", "destructive", store.DecisionClaimed, nil)
	add("k8", "ChargeCard", "destructive", store.DecisionUnknown, nil)
	add("k8", "ChargeCard", "destructive", store.DecisionRefusedInFlight, withCall(c8.Args))
	add("k8", "ChargeCard", "destructive", store.DecisionResolved, func(r *store.Receipt) {
		r.Resolution, r.Actor = store.ResolvedNotSent, "soak-operator"
	})
	in.Records = append(in.Records, store.Record{Key: "k8", Activity: "ChargeCard", Effect: "destructive", ArgsHash: "hk8", Args: c8.Args,
		State: store.StateReleased, Owner: "o-k8", Lease: t0.Add(time.Minute), WorkflowID: "soak-w1", Attempt: 1, CreatedAt: t0,
		ExpiresAt: t0.Add(time.Hour)})
	res := in.Runs[0].Result
	res.Calls = append(res.Calls, soakwf.Outcome{Token: "tk-w1-8", Tool: "ChargeCard", Err: "refused",
		Refusal: &soakwf.Refusal{Type: interceptor.ErrTypeInFlight, Message: "idemgate: refused for good",
			Call: &interceptor.WithheldCall{Activity: "ChargeCard", Key: "k8", Effect: "destructive", Args: c8.Args}}})
	if vs := Check(in); len(vs) != 0 {
		t.Fatalf("violations in a legitimate history:\n%s", Report(in.Seed, vs))
	}

	// A workflow of ten calls or more: tk-w1-1 and tk-w1-12 are different calls,
	// and a refusal of tk-w1-12 with its own call is complete.
	in = healthy()
	c12 := soakwf.Call{Token: "tk-w1-12", Tool: "SendEmail", Effect: "destructive",
		Args: json.RawMessage(`{"to":"a@example.com","subject":"s tk-w1-12","body":"b"}`)}
	in.Calls = append(in.Calls, c12)
	in.Receipts = append(in.Receipts,
		store.Receipt{ID: 201, Key: "k12", Activity: "SendEmail", Effect: "destructive", Decision: store.DecisionGated,
			ArgsHash: "hk12", Call: c12.Args, Error: "idemgate: paused"})
	in.Runs[0].Result.Calls = append(in.Runs[0].Result.Calls, soakwf.Outcome{Token: "tk-w1-12", Tool: "SendEmail", Err: "gated",
		Refusal: &soakwf.Refusal{Type: interceptor.ErrTypeWriteGated, Message: "idemgate: paused",
			Call: &interceptor.WithheldCall{Activity: "SendEmail", Key: "k12", Effect: "destructive", Args: c12.Args}}})
	if vs := Check(in); len(vs) != 0 {
		t.Fatalf("violations in a legitimate history:\n%s", Report(in.Seed, vs))
	}
}

// Breaks the review tried that the checker already reported; kept so that it goes on
// reporting them.
func TestCheckerAttacksHeld(t *testing.T) {
	cases := []breakCase{
		{"a destructive call performed under a second key (the vendor deduplicated nothing)", KindDestructiveTwice, "tk-w1-1", func(in *Input) {
			e := in.Ledger[0]
			e.Seq, e.Key, e.RecordID = 9, "k1-other", "ch_000009"
			in.Ledger = append(in.Ledger, e)
			in.Receipts = append(in.Receipts, store.Receipt{ID: 99, Key: "k1-other", Decision: store.DecisionClaimed, ArgsHash: "hk1"})
		}},
		{"an idempotent write's keyed ledger line under a key the store never saw", KindIdempotentTwoKeys, "tk-w1-3", func(in *Input) {
			e := in.Ledger[2]
			e.Seq, e.Key = 2, "k3-unknown"
			in.Ledger = append(in.Ledger, e)
		}},
		{"the same: and without a claim receipt", KindReceiptLost, "tk-w1-3", func(in *Input) {
			e := in.Ledger[2]
			e.Seq, e.Key = 2, "k3-unknown"
			in.Ledger = append(in.Ledger, e)
		}},
		{"a call done with another call's stored result (its own write never performed)", KindEffects, "tk-w1-7", func(in *Input) {
			in.Ledger = in.Ledger[:6]
			in.Updates = nil
			in.Runs[0].Result.Calls[7].Result = json.RawMessage(`{"id":"ch_000001","amount":100}`)
		}},
		{"a pending witnessed record whose workflow completed long ago", KindPendingSettleable, "tk-w1-6", func(in *Input) {
			in.Records[5].State = store.StateUnknown
			in.Receipts = dropReceipts(in.Receipts, "k6", store.DecisionRan)
			in.Runs[0].Result.Calls[6] = soakwf.Outcome{Token: "tk-w1-6", Tool: "ChargeCardAsync", Err: "refused",
				Refusal: &soakwf.Refusal{Type: interceptor.ErrTypeInFlight, Message: "idemgate: refused",
					Call: &interceptor.WithheldCall{Activity: "ChargeCardAsync", Key: "k6", Args: in.Calls[6].Args}}}
			in.Witnessed["ChargeCardAsync"] = true
			in.Now = store.NotSentFrom(in.Records[5]).Add(in.Grace + time.Second)
		}},
	}
	runBreakCases(t, cases, false)
}
