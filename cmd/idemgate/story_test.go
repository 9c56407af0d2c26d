package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/worker"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/store"
)

// receipts --key shows the key's whole story with a summary line: a hold's many
// refusals never push its resolution out of the listing. With --limit, the newest.
func TestReceiptsKeyShowsTheWholeStory(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		st := openStore(t, b)
		ctx := context.Background()
		now := time.Now()
		const key, refusals = "key-held-story", 150
		seed(t, st, key, "wf-held", now.Add(-time.Hour), now.Add(-50*time.Minute), "abandon")
		seed(t, st, "key-other-0001", "wf-other", now.Add(-time.Hour), now.Add(time.Hour), "complete")
		for i := range refusals {
			if err := st.Append(ctx, store.Receipt{Time: now.Add(-40 * time.Minute).Add(time.Duration(i) * time.Second), Key: key,
				Activity: "ChargeCard", Effect: "destructive", Decision: store.DecisionRefusedInFlight, ArgsHash: "hash-" + key,
				WorkflowID: "wf-held", RunID: "run-wf-held", Attempt: int32(i + 2), Error: "Held: Temporal retries"}); err != nil {
				t.Fatal(err)
			}
		}
		res := writeFile(t, "charge.json", `{"id": "ch_1", "amount": 4200}`)
		ok(t, "resolve", key, "--store", b.spec, "--sent", "--result", res, "--reason", "dashboard shows ch_1", "--actor", "alice")

		story := decodeJSON[[]receiptJSON](t, ok(t, "receipts", "--store", b.spec, "--json", "--key", key))
		if n := len(story); n != refusals+3 || story[0].Decision != "claimed" || story[n-1].Decision != "resolved" || story[n-1].Actor != "alice" {
			t.Fatalf("the key's story has %d receipts, first %+v last %+v; want all %d, from the claim to the resolution",
				n, story[0], story[n-1], refusals+3)
		}
		table := ok(t, "receipts", "--store", b.spec, "--key", key)
		summary := fmt.Sprintf("key %s: %d receipts from %s to %s: claimed 1, unknown 1, refused-in-flight %d, resolved (sent) 1; now completed",
			key, refusals+3, ts(story[0].Time), ts(story[len(story)-1].Time), refusals)
		for _, want := range []string{"resolved (sent)", "by alice: dashboard shows ch_1", summary} {
			if !strings.Contains(table.stdout, want) {
				t.Fatalf("receipts --key lacks %q:\n%s", want, table.stdout[max(0, len(table.stdout)-2000):])
			}
		}
		if strings.Contains(table.stderr, "showing the first") {
			t.Fatalf("receipts --key cut the story:\n%s", table.stderr)
		}
		newest := ok(t, "receipts", "--store", b.spec, "--key", key, "--limit", "2", "--json")
		if rs := decodeJSON[[]receiptJSON](t, newest); len(rs) != 2 || rs[0].Decision != "refused-in-flight" || rs[1].Decision != "resolved" {
			t.Fatalf("receipts --key --limit 2 = %+v; want the newest two", rs)
		}
		limited := ok(t, "receipts", "--store", b.spec, "--key", key, "--limit", "2")
		if !strings.Contains(limited.stderr, fmt.Sprintf("showing the newest 2 of the key's %d receipts", refusals+3)) ||
			!strings.Contains(limited.stdout, summary) {
			t.Fatalf("receipts --key --limit 2:\n%s", limited)
		}
	})
}

// The plugin's store check at every worker start (two receipts of activity
// idemgate.probe) stays out of receipts and pending unless asked for.
func TestProbesStayOutOfTheListings(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		st := openStore(t, b)
		ctx := context.Background()
		pl, err := interceptor.NewPlugin(interceptor.Options{Store: st}, interceptor.PluginOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w := worker.New(server.GetDefaultClient(), "probes-"+t.Name(), worker.Options{Plugins: []worker.Plugin{pl}})
		w.RegisterActivity(&vendor{})
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		w.Stop()
		now := time.Now()
		seed(t, st, "key-real-00001", "wf-1", now.Add(-time.Minute), now.Add(time.Hour), "complete")
		// A probe whose worker died between its claim and its release: owner gone.
		if o, _, err := st.Begin(ctx, store.Claim{Key: "idemgate-probe:dead-worker", Activity: interceptor.ProbeActivity,
			Effect: "idempotent-write", ArgsHash: "probe", Args: []byte("null"), Owner: "dead", Lease: now.Add(-time.Minute),
			Window: time.Minute, Now: now.Add(-2 * time.Minute)}); err != nil || o != store.OutcomeClaimed {
			t.Fatalf("a stuck probe: %v %v", o, err)
		}

		all := decodeJSON[[]receiptJSON](t, ok(t, "receipts", "--store", b.spec, "--json"))
		if len(all) != 2 || all[0].Key != "key-real-00001" {
			t.Fatalf("receipts = %+v; want only the real write's two, no probe rows", all)
		}
		if table := ok(t, "receipts", "--store", b.spec); strings.Contains(table.stdout, interceptor.ProbeActivity) {
			t.Fatalf("receipts table lists probe rows:\n%s", table)
		}
		with := decodeJSON[[]receiptJSON](t, ok(t, "receipts", "--store", b.spec, "--json", "--probes"))
		asked := decodeJSON[[]receiptJSON](t, ok(t, "receipts", "--store", b.spec, "--json", "--activity", interceptor.ProbeActivity))
		if len(with) != 5 || len(asked) != 3 {
			t.Fatalf("--probes: %d receipts, --activity %s: %d; want 5 and 3 (the worker's check, the stuck claim)",
				len(with), interceptor.ProbeActivity, len(asked))
		}
		if p := decodeJSON[[]recordJSON](t, ok(t, "pending", "--store", b.spec, "--json")); len(p) != 0 {
			t.Fatalf("pending = %+v; want no probe", p)
		}
		if p := decodeJSON[[]recordJSON](t, ok(t, "pending", "--store", b.spec, "--json", "--probes")); len(p) != 1 || p[0].Activity != interceptor.ProbeActivity {
			t.Fatalf("pending --probes = %+v; want the stuck probe", p)
		}
	})
}
