package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/store"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReceipts(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		st := openStore(t, b)
		now := time.Now()
		seed(t, st, "key-done-0001", "wf-a", now.Add(-2*time.Hour), now.Add(-time.Hour), "complete")
		seed(t, st, "key-unknown-01", "wf-b", now.Add(-time.Minute), now.Add(time.Minute), "abandon")
		biz := interceptor.BusinessKey("default", "ChargeCard", "order-4217/charge")
		seed(t, st, biz, "wf-c", now.Add(-time.Minute), now.Add(time.Minute), "")

		all := decodeJSON[[]receiptJSON](t, ok(t, "receipts", "--store", b.spec, "--json"))
		if len(all) != 5 {
			t.Fatalf("%d receipts, want 5 (claimed+ran, claimed+unknown, claimed): %+v", len(all), all)
		}
		r := all[1]
		if r.Key != "key-done-0001" || r.Decision != "ran" || r.Activity != "ChargeCard" || r.Effect != "destructive" ||
			r.WorkflowID != "wf-a" || r.RunID != "run-wf-a" || r.Attempt != 1 || r.ArgsHash != "hash-key-done-0001" {
			t.Fatalf("receipt = %+v", r)
		}
		if r := decodeJSON[[]receiptJSON](t, ok(t, "receipts", "--store", b.spec, "--json", "--workflow", "wf-b")); len(r) != 2 || r[1].Error != "connection reset" {
			t.Fatalf("--workflow wf-b: %+v", r)
		}
		if r := decodeJSON[[]receiptJSON](t, ok(t, "receipts", "--store", b.spec, "--json", "--key", "key-unknown-01", "--decision", "unknown")); len(r) != 1 {
			t.Fatalf("--key --decision: %+v", r)
		}
		if r := decodeJSON[[]receiptJSON](t, ok(t, "receipts", "--store", b.spec, "--json", "--since", "30m")); len(r) != 3 {
			t.Fatalf("--since 30m: %d receipts, want the 3 of the last minute", len(r))
		}
		if r := decodeJSON[[]receiptJSON](t, ok(t, "receipts", "--store", b.spec, "--json", "--key", "order-4217/charge",
			"--namespace", "default", "--activity", "ChargeCard")); len(r) != 1 || r[0].Key != biz {
			t.Fatalf("business key: %+v", r)
		}
		limited := ok(t, "receipts", "--store", b.spec, "--limit", "2")
		if !strings.Contains(limited.stderr, "showing the first 2 receipts") || strings.Count(limited.stdout, "\n") != 3 {
			t.Fatalf("--limit 2: %s", limited)
		}
		table := ok(t, "receipts", "--store", b.spec, "--key", "key-unknown-01")
		for _, want := range []string{"TIME", "DECISION", "key-unknown-01", "ChargeCard", "destructive", "wf-b/run-wf-b", "unknown", "connection reset"} {
			if !strings.Contains(table.stdout, want) {
				t.Fatalf("table lacks %q:\n%s", want, table)
			}
		}
		if r := idem(t, "receipts", "--store", b.spec, "--decision", "exploded"); r.code != exitUsage || !strings.Contains(r.stderr, "unknown decision") {
			t.Fatalf("bad --decision: %s", r)
		}
		if r := idem(t, "receipts", "--store", b.spec, "--namespace", "default", "--key", "x"); r.code != exitUsage || !strings.Contains(r.stderr, "--activity") {
			t.Fatalf("--namespace without --activity: %s", r)
		}
	})
}

// The receipts say what decided each effect: --json and the export carry
// effect_source; the table marks an effect the name did not decide.
func TestReceiptsShowEffectSource(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		st := openStore(t, b)
		ctx := context.Background()
		now := time.Now().Add(-time.Hour)
		c := store.Claim{Key: "key-hinted-01", Activity: "UpsertContact", Effect: "destructive", EffectSource: store.EffectByHint,
			ArgsHash: "h", Args: testArgs, Owner: "o", Lease: now.Add(time.Minute), Window: time.Hour, Now: now}
		if o, _, err := st.Begin(ctx, c); err != nil || o != store.OutcomeClaimed {
			t.Fatalf("Begin: %s, %v", o, err)
		}
		for _, r := range []store.Receipt{
			{Key: "key-override-1", Activity: "GetBalance", Effect: "idempotent-write", EffectSource: store.EffectByOverride},
			{Key: "key-named-0001", Activity: "ChargeCard", Effect: "destructive", EffectSource: store.EffectByName},
			{Key: "key-older-0001", Activity: "ChargeCard", Effect: "destructive"},
		} {
			r.Time, r.Decision = now.Add(time.Second), store.DecisionRan
			if err := st.Append(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		wantJSON := []string{"hint", "override", "name", ""}
		all := decodeJSON[[]receiptJSON](t, ok(t, "receipts", "--store", b.spec, "--json"))
		exported := readLines(t, ok(t, "receipts", "export", "--store", b.spec, "--before", "1m").stdout)
		for name, rs := range map[string][]receiptJSON{"--json": all, "export": exported} {
			if len(rs) != len(wantJSON) {
				t.Fatalf("%s: %d receipts, want %d: %+v", name, len(rs), len(wantJSON), rs)
			}
			for i, r := range rs {
				if r.EffectSource != wantJSON[i] {
					t.Errorf("%s: receipt of %s has effect_source %q, want %q", name, r.Key, r.EffectSource, wantJSON[i])
				}
			}
		}
		table := ok(t, "receipts", "--store", b.spec).stdout
		for key, want := range map[string]string{"key-hinted-01": "destructive (hint)", "key-override-1": "idempotent-write (override)",
			"key-named-0001": "destructive ", "key-older-0001": "destructive "} {
			line := ""
			for _, l := range strings.Split(table, "\n") {
				if strings.Contains(l, key) {
					line = l
				}
			}
			if !strings.Contains(line, want) || strings.Contains(line, "(name)") {
				t.Errorf("table row of %s = %q; want its effect shown as %q", key, line, strings.TrimSpace(want))
			}
		}
	})
}

func TestPendingAndResolve(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		st := openStore(t, b)
		ctx := context.Background()
		now := time.Now()
		seed(t, st, "key-unknown-01", "wf-1", now.Add(-10*time.Minute), now.Add(time.Hour), "abandon")
		seed(t, st, "key-lease-gone", "wf-2", now.Add(-7*time.Minute), now.Add(-store.LeaseMargin-time.Minute), "")
		seed(t, st, "key-live-claim", "wf-3", now.Add(-time.Minute), now.Add(time.Hour), "")
		seed(t, st, "key-completed1", "wf-4", now.Add(-time.Minute), now.Add(time.Hour), "complete")

		pending := decodeJSON[[]recordJSON](t, ok(t, "pending", "--store", b.spec, "--json"))
		if len(pending) != 2 || pending[0].Key != "key-unknown-01" || pending[1].Key != "key-lease-gone" {
			t.Fatalf("pending = %+v, want the unknown then the lease-passed claim", pending)
		}
		var args bytes.Buffer
		if err := json.Compact(&args, pending[0].Args); err != nil {
			t.Fatal(err)
		}
		if p := pending[0]; p.State != "unknown" || args.String() != string(testArgs) || p.Call != "ChargeCard("+string(testArgs)+")" || p.WorkflowID != "wf-1" {
			t.Fatalf("pending record = %+v", p)
		}
		// Both may have charged: the abandoned attempt, and the claim whose owner
		// vanished (a worker killed mid-charge). Only the first was abandoned by an
		// attempt before the owner's.
		if !pending[0].MayHaveSent || !pending[1].MayHaveSent {
			t.Fatalf("may_have_sent = %v, %v; want true for both: each body may have reached the vendor",
				pending[0].MayHaveSent, pending[1].MayHaveSent)
		}
		if !pending[0].EarlierMayHaveSent || pending[1].EarlierMayHaveSent {
			t.Fatalf("earlier_attempt_may_have_sent = %v, %v; want true for the abandoned attempt, false for the first attempt's claim",
				pending[0].EarlierMayHaveSent, pending[1].EarlierMayHaveSent)
		}
		if !pending[0].ResolvableFrom.IsZero() || !pending[1].ResolvableFrom.IsZero() || !pending[0].MayStillRunUntil.IsZero() {
			t.Fatalf("pending = %+v; want both resolvable now, neither running", pending)
		}
		table := ok(t, "pending", "--store", b.spec)
		for _, want := range []string{"key-unknown-01", "key-lease-gone", "claimed, owner gone: lease passed", `ChargeCard([{"amount":4200`, "idemgate resolve KEY"} {
			if !strings.Contains(table.stdout, want) {
				t.Fatalf("pending table lacks %q:\n%s", want, table)
			}
		}
		if strings.Contains(table.stdout, "key-live-claim") || strings.Contains(table.stdout, "key-completed1") {
			t.Fatalf("pending lists a live or completed claim:\n%s", table)
		}

		// --sent with a result: stored as the gate stores results.
		resFile := writeFile(t, "result.json", "{\n  \"id\": \"ch_by_hand\",\n  \"amount\": 4200\n}\n")
		out := decodeJSON[map[string]any](t, ok(t, "resolve", "key-unknown-01", "--store", b.spec, "--sent", "--result", resFile,
			"--reason", "Stripe dashboard shows ch_by_hand", "--actor", "alice", "--json"))
		if out["resolution"] != "sent" || out["state"] != "completed" || !strings.HasPrefix(out["result_ref"].(string), "sha256:") {
			t.Fatalf("resolve --json = %v", out)
		}
		rec, err := st.Get(ctx, "key-unknown-01")
		if err != nil || rec.State != store.StateCompleted {
			t.Fatalf("after resolve --sent: %+v %v", rec, err)
		}
		var ps commonpb.Payloads
		if err := proto.Unmarshal(rec.Result, &ps); err != nil || len(ps.Payloads) != 1 {
			t.Fatalf("stored result is not one payload: %v (%d)", err, len(ps.Payloads))
		}
		p := ps.Payloads[0]
		var got struct {
			ID     string `json:"id"`
			Amount int    `json:"amount"`
		}
		if err := converter.GetDefaultDataConverter().FromPayload(p, &got); err != nil || got.ID != "ch_by_hand" || got.Amount != 4200 {
			t.Fatalf("stored result decodes to %+v (%v)", got, err)
		}
		if enc := string(p.Metadata["encoding"]); enc != "json/plain" {
			t.Fatalf("stored payload encoding %q, want json/plain as a fresh result", enc)
		}

		// --not-sent: released, the next attempt runs.
		ok(t, "resolve", "--store", b.spec, "key-lease-gone", "--not-sent", "--reason", "no charge at the vendor", "--actor", "bob")
		if rec, err := st.Get(ctx, "key-lease-gone"); err != nil || rec.State != store.StateReleased {
			t.Fatalf("after resolve --not-sent: %+v %v", rec, err)
		}
		if r := decodeJSON[[]recordJSON](t, ok(t, "pending", "--store", b.spec, "--json")); len(r) != 0 {
			t.Fatalf("pending after resolving both: %+v", r)
		}
		if r := ok(t, "pending", "--store", b.spec); !strings.Contains(r.stdout, "nothing pending") {
			t.Fatalf("empty pending: %s", r)
		}
		resolved := decodeJSON[[]receiptJSON](t, ok(t, "receipts", "--store", b.spec, "--decision", "resolved", "--json"))
		if len(resolved) != 2 || resolved[0].Actor != "alice" || resolved[0].Resolution != "sent" ||
			resolved[0].Reason != "Stripe dashboard shows ch_by_hand" || resolved[0].ResultRef != out["result_ref"] ||
			resolved[1].Actor != "bob" || resolved[1].Resolution != "not-sent" || resolved[1].WorkflowID != "wf-2" {
			t.Fatalf("resolved receipts = %+v", resolved)
		}
	})
}

// pending lists a blocked key at once: a claim whose lease passed a moment ago
// (the workflow's retry was already refused for good), and a live claim on which an
// attempt was refused, with when its owner may still run and when resolve accepts it.
func TestPendingListsBlockedKeyAtOnce(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		st := openStore(t, b)
		ctx := context.Background()
		now := time.Now()
		// A worker killed mid-charge: its lease passed a minute ago, inside the margin.
		seed(t, st, "key-just-gone1", "wf-1", now.Add(-2*time.Minute), now.Add(-time.Minute), "")
		// A live claim on which a retry was refused, and one nobody waits on.
		seed(t, st, "key-refused-01", "wf-2", now.Add(-time.Minute), now.Add(time.Hour), "")
		seed(t, st, "key-quiet-0001", "wf-3", now.Add(-time.Minute), now.Add(time.Hour), "")
		if err := st.Append(ctx, store.Receipt{Time: now, Key: "key-refused-01", Activity: "ChargeCard", Effect: "destructive",
			Decision: store.DecisionRefusedInFlight, ArgsHash: "hash-key-refused-01", WorkflowID: "wf-2", RunID: "run-wf-2", Attempt: 2,
			Error: "attempt 1 holds the claim and may still be running"}); err != nil {
			t.Fatal(err)
		}
		pending := decodeJSON[[]recordJSON](t, ok(t, "pending", "--store", b.spec, "--json"))
		if len(pending) != 2 || pending[0].Key != "key-just-gone1" || pending[1].Key != "key-refused-01" {
			t.Fatalf("pending = %+v, want the claim whose lease passed and the refused live claim", pending)
		}
		gone, live := pending[0], pending[1]
		if !gone.MayHaveSent || !gone.MayStillRunUntil.IsZero() || !sameSecond(gone.ResolvableFrom, now.Add(-time.Minute+store.LeaseMargin)) {
			t.Fatalf("the claim whose owner is gone = %+v; want may_have_sent, not running, resolvable from lease+margin", gone)
		}
		if !live.MayHaveSent || !sameSecond(live.MayStillRunUntil, now.Add(time.Hour)) ||
			!sameSecond(live.ResolvableFrom, now.Add(time.Hour+store.LeaseMargin)) {
			t.Fatalf("the refused live claim = %+v; want may_have_sent, running until its lease, resolvable from lease+margin", live)
		}
		table := ok(t, "pending", "--store", b.spec)
		for _, want := range []string{"RESOLVE FROM", "claimed, owner gone: lease passed " + ts(now.Add(-time.Minute)),
			ts(now.Add(-time.Minute + store.LeaseMargin)), "the owner may still be running until " + ts(now.Add(time.Hour)),
			ts(now.Add(time.Hour + store.LeaseMargin))} {
			if !strings.Contains(table.stdout, want) {
				t.Fatalf("pending table lacks %q:\n%s", want, table)
			}
		}
		if strings.Contains(table.stdout, "key-quiet-0001") {
			t.Fatalf("pending lists a live claim nobody was refused on:\n%s", table)
		}
		help := idem(t, "pending", "--help")
		for _, want := range []string{"its lease (the attempt's deadline plus twice the clock skew) passed; listed from that moment on",
			"an attempt was already refused", "from its lease plus 5m0s", "may_have_sent is true"} {
			if !strings.Contains(help.stdout+help.stderr, want) {
				t.Fatalf("pending --help lacks %q:\n%s", want, help)
			}
		}
	})
}

// sameSecond compares times as the CLI prints them (RFC 3339, whole seconds).
func sameSecond(a, b time.Time) bool { return ts(a) == ts(b) }

// Bad input: a clear error naming what and the fix, a non-zero exit, and the store
// exactly as it was.
func TestResolveRefusesBadInput(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		st := openStore(t, b)
		now := time.Now()
		keys := []string{"key-unknown-01", "key-live-claim", "key-completed1", "key-released01", "key-in-margin1", "key-abandoned1"}
		seed(t, st, keys[0], "wf-1", now.Add(-time.Minute), now.Add(time.Hour), "abandon")
		seed(t, st, keys[1], "wf-2", now.Add(-time.Minute), now.Add(time.Hour), "")
		seed(t, st, keys[2], "wf-3", now.Add(-time.Minute), now.Add(time.Hour), "complete")
		// Abandoned with its lease plus store.LeaseMargin passed: --not-sent counts.
		seed(t, st, keys[3], "wf-4", now.Add(-time.Hour), now.Add(-time.Minute-store.LeaseMargin), "abandon")
		// Its lease passed a minute ago: inside store.LeaseMargin its worker may still send.
		seed(t, st, keys[4], "wf-5", now.Add(-2*time.Minute), now.Add(-time.Minute), "")
		// Abandoned a minute ago, its lease a minute ago: a request it wrote just before
		// it gave up may still land until the lease plus store.LeaseMargin (atk-op finding 4).
		seed(t, st, keys[5], "wf-6", now.Add(-2*time.Minute), now.Add(-time.Minute), "abandon")
		ok(t, "resolve", keys[3], "--store", b.spec, "--not-sent", "--reason", "first resolution")
		good := writeFile(t, "good.json", `"ch_1"`)
		bad := writeFile(t, "bad.json", `ch_1 was charged`)
		empty := writeFile(t, "empty.json", "  \n")
		before := snap(t, st, keys...)

		for _, tc := range []struct {
			name string
			args []string
			code int
			want []string
		}{
			{"unknown key", []string{"resolve", "no-such-key-000", "--not-sent", "--reason", "r"}, exitFail,
				[]string{"no record for key no-such-key-000", "idemgate pending"}},
			{"already resolved", []string{"resolve", keys[3], "--sent", "--result", good, "--reason", "r"}, exitFail,
				[]string{"already released", "receipts --key " + keys[3]}},
			{"completed", []string{"resolve", keys[2], "--not-sent", "--reason", "r"}, exitFail,
				[]string{"already completed", "nothing to resolve"}},
			{"live claim", []string{"resolve", keys[1], "--not-sent", "--reason", "r"}, exitFail,
				[]string{"may still be running until its lease", "at " + ts(now.Add(time.Hour)),
					"may resolve this key from " + ts(now.Add(time.Hour+store.LeaseMargin)), "the lease plus 5m0s", "Next step:"}},
			{"lease passed, inside the margin", []string{"resolve", keys[4], "--not-sent", "--reason", "r"}, exitFail,
				[]string{"its lease (the attempt's deadline plus twice the clock skew) passed at " + ts(now.Add(-time.Minute)),
					"clock runs behind", "may resolve this key from " + ts(now.Add(-time.Minute+store.LeaseMargin)), "Next step:"}},
			{"abandoned, not sent inside the margin", []string{"resolve", keys[5], "--not-sent", "--reason", "r"}, exitFail,
				[]string{"ended without proof", "may still land until " + ts(now.Add(-time.Minute+store.LeaseMargin)),
					"--sent may be given now", "--not-sent only from " + ts(now.Add(-time.Minute+store.LeaseMargin)), "Nothing changed", "Next step:"}},
			{"no reason", []string{"resolve", keys[0], "--not-sent"}, exitUsage, []string{"--reason is required"}},
			{"blank reason", []string{"resolve", keys[0], "--not-sent", "--reason", "  "}, exitUsage, []string{"--reason is required"}},
			{"result not JSON", []string{"resolve", keys[0], "--sent", "--result", bad, "--reason", "r"}, exitUsage,
				[]string{"not valid JSON", "a string needs quotes"}},
			{"empty result", []string{"resolve", keys[0], "--sent", "--result", empty, "--reason", "r"}, exitUsage,
				[]string{"is empty", "null"}},
			{"missing result file", []string{"resolve", keys[0], "--sent", "--result", filepath.Join(t.TempDir(), "nope.json"), "--reason", "r"}, exitFail,
				[]string{"read the result", "no such file"}},
			{"sent without result", []string{"resolve", keys[0], "--sent", "--reason", "r"}, exitUsage, []string{"--sent needs --result"}},
			{"both", []string{"resolve", keys[0], "--sent", "--not-sent", "--result", good, "--reason", "r"}, exitUsage, []string{"exactly one"}},
			{"neither", []string{"resolve", keys[0], "--reason", "r"}, exitUsage, []string{"--sent", "--not-sent"}},
			{"no key", []string{"resolve", "--not-sent", "--reason", "r"}, exitUsage, []string{"which key"}},
			{"result with not-sent", []string{"resolve", keys[0], "--not-sent", "--result", good, "--reason", "r"}, exitUsage, []string{"--result goes with --sent"}},
			{"unknown flag", []string{"resolve", keys[0], "--not-sent", "--reason", "r", "--force"}, exitUsage, []string{"flag provided but not defined: -force", "Usage: idemgate resolve"}},
			{"pause read", []string{"pause", "--effect", "read"}, exitUsage, []string{"reads are never paused"}},
			{"pause both", []string{"pause", "--effect", "destructive", "--activity", "ChargeCard"}, exitUsage, []string{"exactly one"}},
			{"resume not paused", []string{"resume", "--activity", "ChargeCard"}, exitFail, []string{"activity ChargeCard is not paused", "idemgate pauses"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := idem(t, append(tc.args, "--store", b.spec)...)
				if r.code != tc.code {
					t.Fatalf("exit %d, want %d\n%s", r.code, tc.code, r)
				}
				for _, w := range tc.want {
					if !strings.Contains(r.stderr, w) {
						t.Fatalf("stderr lacks %q\n%s", w, r)
					}
				}
				if r.stdout != "" {
					t.Fatalf("a refused command printed to stdout\n%s", r)
				}
				unchanged(t, before, st, keys...)
			})
		}
	})
}

func TestCommandLineErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no command", nil, exitUsage, "Usage: idemgate COMMAND"},
		{"unknown command", []string{"resovle", "k"}, exitUsage, `unknown command "resovle"`},
		{"unknown flag", []string{"pending", "--all"}, exitUsage, "flag provided but not defined: -all"},
		{"stray argument", []string{"pending", "now"}, exitUsage, `unexpected argument "now"`},
		{"no sqlite file", []string{"pending", "--store", filepath.Join(t.TempDir(), "missing.db")}, exitFail, "no store at"},
		{"sqlite dir missing", []string{"receipts", "--store", "/nonexistent-dir/idemgate.db"}, exitFail, "no store at"},
		{"postgres unreachable", []string{"pending", "--store", "postgres://nobody@127.0.0.1:1/idemgate?connect_timeout=2"}, exitFail, "cannot reach PostgreSQL"},
		{"census without names", []string{"census"}, exitUsage, "give the activity names"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := idem(t, tc.args...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("want exit %d and %q\n%s", tc.code, tc.want, r)
			}
		})
	}
	// A missing default store is not created behind the operator's back.
	dir := t.TempDir()
	wd, _ := os.Getwd()
	if err := os.Chdir(dir); err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(wd)
	t.Setenv("IDEMGATE_STORE", "")
	if r := idem(t, "pending"); r.code != exitFail || !strings.Contains(r.stderr, `no store at "idemgate.db"`) {
		t.Fatalf("default store missing: %s", r)
	}
	if _, err := os.Stat(filepath.Join(dir, "idemgate.db")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the CLI created the default store: %v", err)
	}
	if r := idem(t, "help"); r.code != 0 || !strings.Contains(r.stderr, "resolve") {
		t.Fatalf("help: %s", r)
	}
}

// A store other users can read is served with a warning, printed like every message
// of the command: "idemgate COMMAND: ", once.
func TestStorePermissionWarning(t *testing.T) {
	path := backends(t)[0].spec
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	r := ok(t, "pending", "--store", path)
	if !strings.HasPrefix(r.stderr, "idemgate pending: warning: other users can access") ||
		strings.Count(r.stderr, "idemgate pending:") != 1 || strings.Count(r.stderr, "warning:") != 1 {
		t.Fatalf("want the warning after the command's name, once\n%s", r)
	}
}

func TestPauseResume(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		r := ok(t, "pause", "--store", b.spec, "--activity", "ChargeCard", "--reason", "card network incident", "--actor", "alice")
		if !strings.Contains(r.stdout, "paused writes of activity ChargeCard") || !strings.Contains(r.stdout, "idemgate resume --activity ChargeCard") {
			t.Fatalf("pause: %s", r)
		}
		ok(t, "pause", "--store", b.spec, "--effect", "idempotent-write", "--actor", "bob")
		ps := decodeJSON[[]pauseJSON](t, ok(t, "pauses", "--store", b.spec, "--json"))
		if len(ps) != 2 || ps[0].Activity != "ChargeCard" || ps[0].Actor != "alice" || ps[0].Reason != "card network incident" ||
			ps[1].Effect != "idempotent-write" || ps[1].Actor != "bob" {
			t.Fatalf("pauses = %+v", ps)
		}
		if r := ok(t, "pauses", "--store", b.spec); !strings.Contains(r.stdout, "activity ChargeCard") || !strings.Contains(r.stdout, "effect idempotent-write") {
			t.Fatalf("pauses table: %s", r)
		}
		if r := ok(t, "pause", "--store", b.spec, "--activity", "GetBalance", "--actor", "x"); !strings.Contains(r.stderr, "reads are never paused") {
			t.Fatalf("pausing a read warns: %s", r)
		}
		ok(t, "resume", "--store", b.spec, "--activity", "GetBalance")
		ok(t, "resume", "--store", b.spec, "--activity", "ChargeCard", "--reason", "incident closed", "--actor", "carol")
		ok(t, "resume", "--store", b.spec, "--effect", "idempotent-write")
		if r := ok(t, "pauses", "--store", b.spec); !strings.Contains(r.stdout, "nothing is paused") {
			t.Fatalf("after resume: %s", r)
		}
		rs := decodeJSON[[]receiptJSON](t, ok(t, "receipts", "--store", b.spec, "--activity", "ChargeCard", "--json"))
		if len(rs) != 2 || rs[0].Decision != "paused" || rs[1].Decision != "resumed" || rs[1].Actor != "carol" || rs[1].Reason != "incident closed" {
			t.Fatalf("pause receipts = %+v", rs)
		}
	})
}

func TestCensus(t *testing.T) {
	r := ok(t, "census", "ChargeCard", "GetBalance", "crm.contacts.create", "Frobnicate", "ChargeCard")
	for _, want := range []string{"ChargeCard", "destructive", "charge", "Frobnicate", "needs review", "effects: read=1 idempotent-write=1 destructive=2"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("census lacks %q: %s", want, r)
		}
	}
	c := decodeJSON[censusJSON](t, ok(t, "census", "--json", "GetBalance", "Frobnicate"))
	if c.Read != 1 || c.Destructive != 1 || len(c.Review) != 1 || c.Review[0] != "Frobnicate" || len(c.Activities) != 2 || !c.Activities[1].Review {
		t.Fatalf("census --json = %+v", c)
	}
	if r := idem(t, "census", "--strict", "GetBalance", "Frobnicate"); r.code != exitFail || !strings.Contains(r.stderr, "need review: Frobnicate") {
		t.Fatalf("--strict with a name to review: %s", r)
	}
	ok(t, "census", "--strict", "GetBalance", "SendInvoice")
}

// census reads grammar: it prints the deciding word and reason, and --strict fails on
// every name whose grammar cannot tell — also names that hold a known verb.
func TestCensusGrammar(t *testing.T) {
	r := ok(t, "census", "--strict", "GetOrder", "GetAndRotateKeys", "UpdateOrderStatus")
	for _, want := range []string{"REASON", `"get" is the verb: read`, `"rotate" is the verb: destructive`,
		"effects: read=1 idempotent-write=1 destructive=1"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("census lacks %q: %s", want, r)
		}
	}
	c := decodeJSON[censusJSON](t, ok(t, "census", "--json", "GetBasketOrder", "CheckIn"))
	if a := c.Activities; len(a) != 2 || a[0].Effect != "read" || a[0].Word != "get" || a[0].Rule != "verb" ||
		a[1].Rule != "phrasal" || !a[1].Review || !strings.Contains(a[1].Reason, "phrasal verb") {
		t.Fatalf("census --json = %+v", c)
	}
	r = idem(t, "census", "--strict", "GetOrder", "CheckIn", "VerifyEmail", "CreditCheck", "GetAndRotateKeys")
	if r.code != exitFail || !strings.Contains(r.stderr, "3 name(s) need review: CheckIn, CreditCheck, VerifyEmail") ||
		!strings.Contains(r.stderr, `VerifyEmail: "verify" reads or writes`) || !strings.Contains(r.stderr, `CheckIn: "check" "in" is a phrasal verb`) {
		t.Fatalf("--strict with grammar flags: %s", r)
	}
}

func TestSweep(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		st := openStore(t, b)
		ctx := context.Background()
		old := time.Now().Add(-48 * time.Hour)
		for _, k := range []string{"key-idem-old-01", "key-idem-old-02", "key-idem-old-03"} {
			c := store.Claim{Key: k, Activity: "UpsertContact", Effect: "idempotent-write", ArgsHash: "h", Args: testArgs,
				Owner: "o-" + k, Lease: old.Add(time.Minute), Window: 24 * time.Hour, WorkflowID: "wf-old", Now: old}
			if o, _, err := st.Begin(ctx, c); err != nil || o != store.OutcomeClaimed {
				t.Fatalf("seed %s: %v %v", k, o, err)
			}
			if err := st.Complete(ctx, store.Transition{Key: k, Owner: c.Owner, Now: old, Window: 24 * time.Hour,
				Receipt: store.Receipt{Key: k, Activity: c.Activity, Effect: c.Effect, Decision: store.DecisionRan}}); err != nil {
				t.Fatal(err)
			}
		}
		seed(t, st, "key-fresh-0001", "wf-new", time.Now(), time.Now().Add(time.Minute), "complete")
		out := decodeJSON[map[string]any](t, ok(t, "sweep", "--store", b.spec, "--limit", "2", "--json"))
		if out["removed"] != float64(2) {
			t.Fatalf("sweep --limit 2 = %v", out)
		}
		if r := ok(t, "sweep", "--store", b.spec); !strings.Contains(r.stdout, "removed 1 expired record") {
			t.Fatalf("second sweep: %s", r)
		}
		for _, k := range []string{"key-idem-old-01", "key-idem-old-02", "key-idem-old-03"} {
			if _, err := st.Get(ctx, k); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("%s after sweeping: %v", k, err)
			}
		}
		if _, err := st.Get(ctx, "key-fresh-0001"); err != nil {
			t.Fatalf("sweep removed a live record: %v", err)
		}
		if rs, _ := st.Receipts(ctx, store.ReceiptFilter{Key: "key-idem-old-01"}); len(rs) != 2 {
			t.Fatalf("receipts of a swept key: %d, want them kept", len(rs))
		}
	})
}

// F2 of the gate attack on issue 18: a child's record names the child's workflow ID,
// but a reset of its root re-creates the child (under a new ID when the SDK
// generates it) with the same keys. The sweep asks Temporal about the record's root
// and its own workflow, and forgets the record only when Temporal has neither: a
// child gone while its root runs is kept; a child that runs while its root is gone
// is kept; a child whose root and itself are gone is forgotten.
func TestSweepAsksAboutTheRootWorkflow(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		st := openStore(t, b)
		ctx := context.Background()
		old := time.Now().Add(-48 * time.Hour)
		start := func(id string) string {
			t.Helper()
			run, err := server.GetDefaultClient().ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id,
				TaskQueue: "nobody-polls-" + id}, "Anything")
			if err != nil {
				t.Fatal(err)
			}
			return run.GetRunID()
		}
		// run is the run ID the gate records: a real one where the workflow runs, so
		// the sweep can confirm the namespace (it believes a NotFound only there).
		seedChild := func(key, wf, run, root string) {
			t.Helper()
			c := store.Claim{Key: key, Activity: "ChargeCard", Effect: "destructive", ArgsHash: "hash-" + key, Args: testArgs,
				Owner: "owner-" + key, Lease: old.Add(time.Minute), Window: 24 * time.Hour, WorkflowID: wf, RunID: run,
				RootWorkflowID: root, Attempt: 1, Now: old}
			if o, _, err := st.Begin(ctx, c); err != nil || o != store.OutcomeClaimed {
				t.Fatalf("seed %s: %v %v", key, o, err)
			}
			if err := st.Complete(ctx, store.Transition{Key: key, Owner: c.Owner, Now: old.Add(time.Second), Window: 24 * time.Hour,
				Result: []byte("stored"), Receipt: store.Receipt{Key: key, Activity: c.Activity, Effect: c.Effect,
					ArgsHash: c.ArgsHash, WorkflowID: wf, RunID: c.RunID, Attempt: 1, Decision: store.DecisionRan}}); err != nil {
				t.Fatal(err)
			}
		}
		n := time.Now().UnixNano()
		root := fmt.Sprintf("wf-root-%s-%d", b.name, n)
		child := fmt.Sprintf("wf-child-running-%s-%d", b.name, n)
		start(root)
		childRun := start(child)
		gone := fmt.Sprintf("run-of-%s_1", root)
		seedChild("key-root-running-1", gone, "run-"+gone, root)                                                 // the child is gone, its root runs
		seedChild("key-root-running-2", child, childRun, fmt.Sprintf("wf-root-gone-%s-%d", b.name, n))           // the child runs, its root is gone
		seedChild("key-root-gone-0001", "wf-child-gone-"+b.name, "run-gone-"+b.name, "wf-root-gone-too-"+b.name) // both gone
		out := decodeJSON[map[string]any](t, ok(t, "sweep", "--store", b.spec, "--temporal-address", server.GetFrontendHostPort(),
			"--namespace", server.GetDefaultNamespace(), "--json"))
		if out["forgotten"] != float64(1) || out["held"] != float64(2) {
			t.Fatalf("sweep asking Temporal = %v; want the record whose root and workflow are gone forgotten, 2 held", out)
		}
		for _, k := range []string{"key-root-running-1", "key-root-running-2"} {
			if _, err := st.Get(ctx, k); err != nil {
				t.Fatalf("%s: forgotten although Temporal can still reset its root or its workflow (%v): the reset sends again", k, err)
			}
		}
		if _, err := st.Get(ctx, "key-root-gone-0001"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("key-root-gone-0001 after Temporal said its root and workflow are gone: %v", err)
		}
	})
}

// Issue 18, item 14: a finished destructive write past its window is kept while its
// workflow can still be reset. A plain sweep keeps it (and says so); a sweep with
// --temporal-address asks Temporal by workflow ID and forgets only the records of
// workflows Temporal no longer has.
func TestSweepKeepsFinishedDestructiveWritesWhileResettable(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		st := openStore(t, b)
		ctx := context.Background()
		old := time.Now().Add(-48 * time.Hour)
		for _, k := range []string{"key-gone-wf-0001", "key-gone-wf-0002", "key-gone-wf-0003"} {
			seed(t, st, k, "wf-gone-"+k, old, old.Add(time.Minute), "complete")
		}
		running := fmt.Sprintf("wf-running-%s-%d", b.name, time.Now().UnixNano())
		run, err := server.GetDefaultClient().ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: running,
			TaskQueue: "nobody-polls-" + running}, "Anything")
		if err != nil {
			t.Fatal(err)
		}
		seedRun(t, st, "key-running-wf-01", running, run.GetRunID(), old, old.Add(time.Minute), "complete")

		out := decodeJSON[map[string]any](t, ok(t, "sweep", "--store", b.spec, "--json"))
		if out["removed"] != float64(0) || out["held"] != float64(4) || out["forgotten"] != float64(0) {
			t.Fatalf("sweep without Temporal = %v; want nothing removed, 4 held", out)
		}
		if r := ok(t, "sweep", "--store", b.spec); !strings.Contains(r.stdout, "kept 4 finished destructive record(s)") ||
			!strings.Contains(r.stdout, "Next step: pass --temporal-address") {
			t.Fatalf("sweep without Temporal: %s", r)
		}
		if r := idem(t, "sweep", "--store", b.spec, "--temporal-address", server.GetFrontendHostPort()); r.code != exitUsage {
			t.Fatalf("--temporal-address without --namespace: %s", r)
		}
		if r := idem(t, "sweep", "--store", b.spec, "--temporal-address", server.GetFrontendHostPort(), "--namespace", "no-such-namespace"); r.code == 0 ||
			!strings.Contains(r.stderr, "Nothing held was forgotten") {
			t.Fatalf("an unknown namespace: %s", r)
		}
		for _, k := range []string{"key-gone-wf-0001", "key-running-wf-01"} {
			if _, err := st.Get(ctx, k); err != nil {
				t.Fatalf("%s after sweeps without Temporal's word: %v", k, err)
			}
		}
		out = decodeJSON[map[string]any](t, ok(t, "sweep", "--store", b.spec, "--temporal-address", server.GetFrontendHostPort(),
			"--namespace", server.GetDefaultNamespace(), "--json"))
		if out["forgotten"] != float64(3) || out["held"] != float64(1) {
			t.Fatalf("sweep asking Temporal = %v; want the 3 records of unknown workflows forgotten, the running one held", out)
		}
		for _, k := range []string{"key-gone-wf-0001", "key-gone-wf-0002", "key-gone-wf-0003"} {
			if _, err := st.Get(ctx, k); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("%s after Temporal said its workflow is gone: %v", k, err)
			}
		}
		if _, err := st.Get(ctx, "key-running-wf-01"); err != nil {
			t.Fatalf("the running workflow's record was forgotten: %v", err)
		}
	})
}
