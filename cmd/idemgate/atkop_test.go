package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/store"
)

// CheckoutLast is CheckoutKeyed with a retry policy of at most attempts attempts:
// the refusal on its last attempt is its final failure.
func CheckoutLast(ctx workflow.Context, amount int, key string, attempts int32) (ChargeResult, error) {
	ctx = workflow.WithActivityOptions(interceptor.WithKey(ctx, key), workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: 100 * time.Millisecond, BackoffCoefficient: 1, MaximumAttempts: attempts},
	})
	var r ChargeResult
	err := workflow.ExecuteActivity(ctx, "ChargeCard", amount).Get(ctx, &r)
	return r, err
}

// An expected refusal is benign — no `ERROR Activity error.`, no failure counted —
// because Temporal retries it. On the last attempt its retry policy allows nothing
// retries it: the refusal is the activity's final failure and the workflow gets it.
// It must be loud then (ERROR and the failure metric), like any failure that ends an
// activity. The family, each on its last attempt: the live claim (inFlight), the
// pause (pausedWrite), the held unknown outcome (refuseUnknown with HoldUnknown).
func TestAtkOpLastAttemptRefusalIsLoud(t *testing.T) {
	for _, tc := range []struct{ name, typ, says string }{
		{"in-flight", interceptor.ErrTypeInFlight, "holds the claim"},
		{"paused", interceptor.ErrTypeWriteGated, "idemgate: paused"},
		{"held", interceptor.ErrTypeInFlight, "Held"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := backends(t)[0] // the gate's choice of category does not depend on the store
			logs := &captureLogger{}
			metrics := &countingMetrics{counts: map[string]int64{}}
			c := server.NewClientWithOptions(client.Options{Logger: logs, MetricsHandler: metrics})
			v := &vendor{crashFirst: tc.name == "held"}
			r := newRigWith(t, b, v, c)
			ctx := context.Background()
			attempts := int32(1)
			if tc.name == "held" {
				attempts = 2
			}
			biz := "order-atkop-" + tc.name + "/charge"
			switch tc.name {
			case "in-flight":
				// The args hash of ChargeCard(4200), from a charge that ran.
				if _, err := outcome(t, r.start("atkop-hash")); err != nil {
					t.Fatal(err)
				}
				claimed := decodeJSON[[]receiptJSON](t, ok(t, "receipts", "--store", b.spec, "--json", "--workflow", "atkop-hash-"+b.name,
					"--decision", "claimed", "--activity", "ChargeCard"))
				if len(claimed) != 1 {
					t.Fatalf("claimed receipts of the charge: %+v", claimed)
				}
				st := openStore(t, b)
				key := interceptor.BusinessKey(server.GetDefaultNamespace(), "ChargeCard", biz)
				now := time.Now()
				if o, _, err := st.Begin(ctx, store.Claim{Key: key, Activity: "ChargeCard", Effect: "destructive", ArgsHash: claimed[0].ArgsHash,
					Owner: "another-worker", Lease: now.Add(time.Hour), Window: time.Hour, WorkflowID: "elsewhere", Attempt: 1,
					Now: now}); err != nil || o != store.OutcomeClaimed {
					t.Fatalf("hold the key: %v %v", o, err)
				}
			case "paused":
				ok(t, "pause", "--store", b.spec, "--activity", "ChargeCard", "--reason", "incident", "--actor", "alice")
			}
			run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "atkop-last-" + tc.name, TaskQueue: r.queue,
				WorkflowExecutionTimeout: 3 * time.Minute}, CheckoutLast, 4200, biz, attempts)
			if err != nil {
				t.Fatal(err)
			}
			_, werr := outcome(t, run)
			var app *temporal.ApplicationError
			if !errors.As(werr, &app) || app.Type() != tc.typ || !strings.Contains(app.Message(), tc.says) {
				t.Fatalf("workflow error %v; want the %s refusal (%q)", werr, tc.typ, tc.says)
			}
			if app.Category() == temporal.ApplicationErrorCategoryBenign {
				t.Errorf("the last attempt's refusal reached the workflow as benign, although nothing retried it: %s", app.Message())
			}
			if strings.Contains(app.Message(), "Temporal retries in") && !strings.Contains(app.Message(), "last attempt") {
				t.Errorf("the last attempt's refusal promises a retry that does not come: %s", app.Message())
			}
			var loud bool
			for _, l := range logs.activityErrors("ERROR", "ChargeCard") {
				loud = loud || strings.Contains(fmt.Sprint(l.kv), tc.says)
			}
			if !loud {
				t.Errorf("no `ERROR Activity error.` for the final refusal (%q); ERROR lines %v, DEBUG lines %v", tc.says,
					logs.activityErrors("ERROR", "ChargeCard"), logs.activityErrors("DEBUG", "ChargeCard"))
			}
			want := int64(1) // the final refusal
			if tc.name == "held" {
				want = 2 // and the connection reset of attempt 1
			}
			if n := metrics.count(activityFailed); n != want {
				t.Errorf("%s = %d, want %d: the final refusal is a failure", activityFailed, n, want)
			}
			if want := map[string]int{"in-flight": 1, "paused": 0, "held": 1}[tc.name]; v.count() != want {
				t.Errorf("vendor count %d", v.count())
			}
		})
	}
}

// The claim model's TestPersonWhoLookedEarlySettlesWrong: a person who looks the
// write up at the vendor before the owner's lease plus store.LeaseMargin, sees
// nothing, and types `resolve --not-sent` once the margin passed, is let through —
// and the attempt's late request may have landed in between: a second charge. The
// store cannot know when they looked; the CLI must tell them to look only from then
// on. It told them the opposite: `resolve` before the margin said "check with the
// vendor meanwhile, and run this resolve again at or after T", and `pending` "Check
// each with the vendor, then (from RESOLVE FROM on): resolve".
func TestAtkOpPersonIsToldToLookOnlyFromResolveFrom(t *testing.T) {
	b := backends(t)[0]
	st := openStore(t, b)
	now := time.Now()
	const key = "key-looked-early-0001"
	lease := now.Add(-time.Minute) // the owner is gone; resolve accepts it from lease + 5 min
	seed(t, st, key, "wf-early", now.Add(-10*time.Minute), lease, "")
	from := ts(lease.Add(store.LeaseMargin))

	early := idem(t, "resolve", key, "--store", b.spec, "--not-sent", "--reason", "nothing at the vendor")
	if early.code == 0 {
		t.Fatalf("resolve inside the margin succeeded: %s", early)
	}
	if strings.Contains(early.stderr, "meanwhile") || !strings.Contains(early.stderr, "look the write up at the vendor at or after "+from) {
		t.Errorf("resolve inside the margin must send the person to the vendor only at or after %s (a look before "+
			"then can miss the attempt's late request):\n%s", from, early.stderr)
	}

	pending := ok(t, "pending", "--store", b.spec)
	if strings.Contains(pending.stdout, "Check each with the vendor, then (from RESOLVE FROM on)") ||
		!strings.Contains(pending.stdout, "look each up at the vendor from its RESOLVE FROM on") {
		t.Errorf("pending must say to look at the vendor only from RESOLVE FROM on:\n%s", pending.stdout)
	}
}

// `receipts --key K` ends with a summary line that quotes the key (and a store
// error's text) raw: the one line of the key's story that escape never saw. The
// key with controls is the one TestTextOutputEscapesControls stores.
func TestAtkOpReceiptsKeySummaryEscapes(t *testing.T) {
	b := backends(t)[0]
	st := openStore(t, b)
	now := time.Now()
	key := "key-" + hostile
	seed(t, st, key, "wf-summary", now.Add(-time.Hour), now.Add(-50*time.Minute), "abandon")
	out := ok(t, "receipts", "--store", b.spec, "--key", key)
	if !strings.Contains(out.stdout, "receipts from") {
		t.Fatalf("no summary line:\n%s", out)
	}
	if bad := rawControls(out.stdout + out.stderr); len(bad) > 0 {
		t.Errorf("receipts --key prints %d raw control(s), first %s:\n%q", len(bad), bad[0], out.stdout)
	}
}

// atk-op finding 4 (fixed): a person could resolve an abandoned (unknown) record
// --not-sent at once, while the same "not sent" from a witness counts only when
// asked at or after the owner's lease plus LeaseMargin (store.NotSentFrom). A
// request the attempt wrote just before it gave up can land at the vendor after
// the person looked (claimmodel's TestPersonNotSentOnAnAbandonedKeyWaitsForTheMargin).
// Now `resolve --not-sent` waits for NotSentFrom too and says so; `pending` says
// when; --sent is taken at once.
func TestAtkOpPersonNotSentOnAbandonedBeforeNotSentFrom(t *testing.T) {
	b := backends(t)[0]
	st := openStore(t, b)
	now := time.Now()
	const key = "key-abandoned-early-01"
	lease := now.Add(time.Minute) // the attempt gave up at once; its lease still runs
	seed(t, st, key, "wf-abandoned", now.Add(-2*time.Second), lease, "abandon")
	rec, err := st.Get(context.Background(), key)
	if err != nil || rec.State != store.StateUnknown {
		t.Fatalf("seed: %+v %v", rec, err)
	}
	// A witness's "not sent", asked now, does not count.
	w := store.Transition{Key: key, Owner: rec.Owner, Now: now, Witness: "lookup", AskedAt: now}
	if store.Settleable(rec, store.StateReleased, w) {
		t.Fatalf("a witness's early not-sent counts; the premise changed")
	}
	res := idem(t, "resolve", key, "--store", b.spec, "--not-sent", "--reason", "nothing at the vendor yet")
	if res.code == 0 {
		t.Errorf("resolve --not-sent of an abandoned key before %s (its lease plus %s, when a witness's not-sent "+
			"first counts) was accepted:\n%s", ts(store.NotSentFrom(rec)), store.LeaseMargin, res)
	} else if !strings.Contains(res.stderr, ts(store.NotSentFrom(rec))) {
		t.Errorf("the refusal does not say from when: %s", res)
	}
	if got, err := st.Get(context.Background(), key); err != nil || got.State != store.StateUnknown {
		t.Fatalf("after the refused --not-sent: %+v %v, want unknown", got, err)
	}
	var pend []recordJSON
	for _, r := range decodeJSON[[]recordJSON](t, ok(t, "pending", "--store", b.spec, "--json")) {
		if r.Key == key {
			pend = append(pend, r)
		}
	}
	if len(pend) != 1 || !pend[0].NotSentFrom.Equal(store.NotSentFrom(rec)) || !pend[0].ResolvableFrom.IsZero() {
		t.Errorf("pending --json: %+v, want not_sent_from %s and resolvable_from omitted (sent: now)", pend, ts(store.NotSentFrom(rec)))
	}
	if text := ok(t, "pending", "--store", b.spec).stdout; !strings.Contains(text, "sent: now; not sent: "+ts(store.NotSentFrom(rec))) {
		t.Errorf("pending does not say when --not-sent counts:\n%s", text)
	}
	// Once the margin passed (the person types later), it counts.
	typeAt(t, store.NotSentFrom(rec))
	ok(t, "resolve", key, "--store", b.spec, "--not-sent", "--reason", "nothing at the vendor after the margin")
}
