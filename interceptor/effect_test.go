package interceptor_test

import (
	"os"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/interceptor"
)

func TestClassify(t *testing.T) {
	cases := []struct {
		name   string
		effect interceptor.Effect
		review bool
	}{
		{"GetCustomer", interceptor.Read, false},
		{"SearchDocs", interceptor.Read, false},
		{"list_invoices", interceptor.Read, false},
		{"crm.contacts.search", interceptor.Read, false},
		{"UpsertContact", interceptor.IdempotentWrite, false},
		{"CreateTicket", interceptor.IdempotentWrite, false},
		{"crm.contacts.create", interceptor.IdempotentWrite, false},
		{"set-feature-flag", interceptor.IdempotentWrite, false},
		{"ChargeCard", interceptor.Destructive, false},
		{"SendEmail", interceptor.Destructive, false},
		{"PostSlackMessage", interceptor.Destructive, false},
		{"delete_user", interceptor.Destructive, false},
		{"payments.refund", interceptor.Destructive, false},
		// Acronyms stay together and the verb after them is found.
		{"HTTPGetURL", interceptor.Read, false},
		{"SMSSendOTP", interceptor.Destructive, false},
		{"GetS3Object", interceptor.Read, false},
		// The most severe verb wins.
		{"GetAndDeleteSession", interceptor.Destructive, false},
		{"fetch-then-update-record", interceptor.IdempotentWrite, false},
		{"SearchAndSendDigest", interceptor.Destructive, false},
		// The names: a read verb no longer hides a write verb …
		{"GetAndRotateKeys", interceptor.Destructive, false},
		{"VerifyAndActivateAccount", interceptor.Destructive, true},
		{"CheckAndApplyDiscount", interceptor.Destructive, false},
		{"LookupAndUnsubscribe", interceptor.IdempotentWrite, false},
		// … and a noun that is also a verb decides only where the verb stands.
		{"GetOrder", interceptor.Read, false},
		{"GetBasketOrder", interceptor.Read, false},
		{"UpdateOrderStatus", interceptor.IdempotentWrite, false},
		{"RegisterEmail", interceptor.IdempotentWrite, false},
		{"InsertOrder", interceptor.IdempotentWrite, false},
		{"OrderApple", interceptor.Destructive, false},
		{"GetRefund", interceptor.Read, false},
		{"EmailCustomer", interceptor.Destructive, false},
		{"get_order", interceptor.Read, false},
		{"get-basket-order", interceptor.Read, false},
		{"shop.orders.get", interceptor.Read, false},
		{"shop.orders.order", interceptor.Destructive, false},
		{"crm.contacts.delete.v2", interceptor.Destructive, false},
		// Compound names in every style; a part with no verb flags the whole.
		{"get_and_rotate_keys", interceptor.Destructive, false},
		{"lookup-and-unsubscribe", interceptor.IdempotentWrite, false},
		{"keys.getAndRotate", interceptor.Destructive, false},
		{"GetOrCreateUser", interceptor.IdempotentWrite, false},
		{"ListPlusDelete", interceptor.Destructive, false},
		{"SignalWithStartWorkflow", interceptor.Destructive, false},
		{"GetUserWithRoles", interceptor.Read, false},
		{"GetUsersAndGroups", interceptor.Destructive, true},
		// Adversarial: names that read like reads and are not.
		{"CheckIn", interceptor.Destructive, true},
		{"CheckOut", interceptor.Destructive, true},
		{"LookUpUser", interceptor.Read, false},
		{"PingUser", interceptor.Destructive, true},
		{"FetchNextJob", interceptor.Destructive, true},
		{"GetNextPage", interceptor.Destructive, true},
		{"VerifyEmail", interceptor.Destructive, true},
		{"TestWebhook", interceptor.Destructive, true},
		{"ExtractTransformLoad", interceptor.Destructive, true},
		{"WatchRepo", interceptor.Destructive, true},
		{"LoadConfig", interceptor.Destructive, true},
		{"ConvertLead", interceptor.Destructive, true},
		{"ReceiveMessage", interceptor.Destructive, true},
		{"WaitForDecision", interceptor.Destructive, true},
		{"GenerateInvoice", interceptor.Destructive, true},
		{"SayHello", interceptor.Destructive, true},
		{"ProcessPayment", interceptor.Destructive, true},
		{"GetSet", interceptor.IdempotentWrite, true},
		{"GetUpdate", interceptor.IdempotentWrite, true},
		{"GetUserDelete", interceptor.Destructive, true},
		{"CreditCheck", interceptor.Destructive, true},
		{"OrderCreate", interceptor.Destructive, true},
		{"UserDelete", interceptor.Destructive, true},
		{"FederalCriminalSearch", interceptor.Destructive, true},
		{"DryRunDeploy", interceptor.Destructive, true},
		{"deploy.status.get", interceptor.Destructive, true}, // a write verb anywhere: never read
		{"crm.contacts.get", interceptor.Read, false},
		{"CreateStripeCharge", interceptor.Destructive, false},
		{"stripe.payouts.create", interceptor.Destructive, false},
		{"CreatePaymentIntent", interceptor.Destructive, false},
		{"UpdatePaymentMethod", interceptor.IdempotentWrite, false},
		{"SSNTrace", interceptor.Read, false},
		{"SMSUser", interceptor.Destructive, false},
		{"DoPoll", interceptor.Read, false},
		{"PlanNextStep", interceptor.Read, false},
		{"SampleActivity1", interceptor.Destructive, true},
		// Plurals and nouns are not verbs: no match means destructive, flagged.
		{"Payments", interceptor.Destructive, true},
		{"DoTheThing", interceptor.Destructive, true},
		{"", interceptor.Destructive, true},
		{"x", interceptor.Destructive, true},
	}
	for _, c := range cases {
		got := interceptor.Classify(c.name)
		if got.Effect != c.effect || got.Review != c.review {
			t.Errorf("Classify(%q) = %v review=%v (verb %q), want %v review=%v", c.name, got.Effect, got.Review, got.Verb, c.effect, c.review)
		}
		if c.review && got.Effect == interceptor.Read {
			t.Errorf("Classify(%q): an unknown name must never be read", c.name)
		}
	}
}

func TestEffectStrings(t *testing.T) {
	for e, s := range map[interceptor.Effect]string{interceptor.Read: "read", interceptor.IdempotentWrite: "idempotent-write", interceptor.Destructive: "destructive"} {
		if e.String() != s {
			t.Errorf("%d.String() = %q, want %q", e, e.String(), s)
		}
		back, err := interceptor.ParseEffect(s)
		if err != nil || back != e {
			t.Errorf("ParseEffect(%q) = %v, %v", s, back, err)
		}
	}
	if _, err := interceptor.ParseEffect("write"); err == nil || !strings.Contains(err.Error(), "idempotent-write") {
		t.Errorf("ParseEffect(write) = %v, want an error listing the effects", err)
	}
}

func TestOverridesCorrectBothWays(t *testing.T) {
	o := interceptor.Options{Effects: map[string]interceptor.Effect{
		"GetAndRotateKey": interceptor.Destructive,     // tighten a misread read
		"SendHeartbeat":   interceptor.Read,            // loosen a harmless "send"
		"DoTheThing":      interceptor.IdempotentWrite, // settle a flagged name
	}}
	for name, want := range o.Effects {
		if got := o.Classify(name); got.Effect != want || !got.Override || got.Review {
			t.Errorf("Options.Classify(%q) = %+v, want override %v", name, got, want)
		}
	}
}

func TestCensus(t *testing.T) {
	names := []string{"SearchDocs", "GetCustomer", "UpsertContact", "CreateTicket", "ChargeCard", "SendEmail", "Frobnicate", "Zap", "SearchDocs"}
	c := interceptor.Census(names)
	want := "effects: read=2 idempotent-write=2 destructive=4; review: Frobnicate, Zap"
	if got := c.String(); !strings.HasPrefix(got, want) {
		t.Fatalf("Census = %q, want prefix %q", got, want)
	}
	clean := interceptor.Census([]string{"GetCustomer", "ChargeCard"}).String()
	if clean != "effects: read=1 idempotent-write=0 destructive=1" {
		t.Fatalf("Census without review = %q", clean)
	}
	o := interceptor.Options{Effects: map[string]interceptor.Effect{"Frobnicate": interceptor.Read}}
	if got := o.Census(names); got.Read != 3 || len(got.Review) != 1 || got.Review[0] != "Zap" {
		t.Fatalf("Options.Census with an override = %s", got)
	}
}

// TestClassifyCorpus classifies real activity names from public Temporal Go code
// (testdata/activity_names.txt) and holds every one to what the activity does: the
// classifier may be more careful than the truth, never less — no false read, no
// destructive call taken for an idempotent one.
func TestClassifyCorpus(t *testing.T) {
	data, err := os.ReadFile("testdata/activity_names.txt")
	if err != nil {
		t.Fatal(err)
	}
	var lines, exact, flagged, careful int
	for i, line := range strings.Split(string(data), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 3 || f[2] == "" {
			t.Fatalf("line %d: want Name<TAB>effect<TAB>source, got %q", i+1, line)
		}
		want, err := interceptor.ParseEffect(f[1])
		if err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		lines++
		got := interceptor.Classify(f[0])
		switch {
		case got.Effect < want:
			t.Errorf("%s (%s): classified %v, but the activity is %v: %s", f[0], f[2], got.Effect, want, got.Reason())
		case got.Effect == want:
			exact++
		case got.Review:
			flagged++
		default:
			careful++
			t.Logf("more careful than needed, not flagged: %s is %v, classified %v: %s", f[0], want, got.Effect, got.Reason())
		}
	}
	t.Logf("%d names: %d exact, %d more careful and flagged for review, %d more careful unflagged", lines, exact, flagged, careful)
	if lines < 100 {
		t.Fatalf("corpus has %d names, want at least 100", lines)
	}
	// Pinned: a change that makes the classifier needlessly careful shows here.
	if exact < lines*6/10 || careful > 6 {
		t.Errorf("exact %d of %d, unflagged over-careful %d: the classifier got worse", exact, lines, careful)
	}
}

// TestClassifyReasons pins which rule and which word decided, and that the reason
// says so in words.
func TestClassifyReasons(t *testing.T) {
	cases := []struct {
		name        string
		source      interceptor.Source
		word, other string
		parts       int
		reason      string
	}{
		{"GetOrder", interceptor.SourceVerb, "get", "", 1, `"get" is the verb: read`},
		{"GetAndRotateKeys", interceptor.SourceVerb, "rotate", "", 2, `compound name (2 parts, the most severe counts): "rotate" is the verb: destructive`},
		{"GetUsersAndGroups", interceptor.SourceNone, "", "Groups", 2, `no known verb in "groups"`},
		{"CheckIn", interceptor.SourcePhrasal, "check", "in", 1, `"check" "in" is a phrasal verb, not the read "check"`},
		{"FetchNextJob", interceptor.SourceDequeue, "fetch", "next", 1, `takes work off a queue`},
		{"VerifyEmail", interceptor.SourceReadOrWrite, "verify", "", 1, `"verify" reads or writes depending on what it acts on`},
		{"GetSet", interceptor.SourceSecondVerb, "set", "get", 1, `"set" stands beside the verb "get"`},
		{"CreditCheck", interceptor.SourceNounVerbFirst, "credit", "check", 1, `"credit" stands first and is a verb there, but "check" ends the name`},
		{"FederalCriminalSearch", interceptor.SourceVerbLater, "search", "Federal", 1, `no verb where the verb stands ("federal"); "search" comes later`},
		{"CreateStripeCharge", interceptor.SourceMoney, "create", "charge", 1, `"create" with the object "charge" moves money: destructive`},
		{"Frobnicate", interceptor.SourceNone, "", "Frobnicate", 1, "no known verb"},
	}
	for _, c := range cases {
		got := interceptor.Classify(c.name)
		if got.Source != c.source || got.Word != c.word || got.Other != c.other || got.Parts != c.parts {
			t.Errorf("Classify(%q) = source %v word %q other %q parts %d, want %v %q %q %d",
				c.name, got.Source, got.Word, got.Other, got.Parts, c.source, c.word, c.other, c.parts)
		}
		if r := got.Reason(); !strings.Contains(r, c.reason) {
			t.Errorf("Classify(%q).Reason() = %q, want it to contain %q", c.name, r, c.reason)
		}
		if got.Review && !strings.Contains(got.Reason(), "Options.Effects") {
			t.Errorf("Classify(%q) is flagged but its reason names no next step: %q", c.name, got.Reason())
		}
	}
	// A flagged part that did not decide still shows in the reason.
	if got := interceptor.Classify("DeleteSessionAndGetSet"); !got.Review || got.Word != "delete" ||
		!strings.Contains(got.Reason(), `also "set" stands beside the verb "get"`) {
		t.Errorf("DeleteSessionAndGetSet = %+v, reason %q", got, got.Reason())
	}
	o := interceptor.Options{Effects: map[string]interceptor.Effect{"CheckIn": interceptor.IdempotentWrite}}
	if got := o.Classify("CheckIn"); got.Source != interceptor.SourceOverride || got.Reason() != "set by Options.Effects" {
		t.Errorf("override: %+v %q", got, got.Reason())
	}
}

// TestClassifyObjectDecides: verbs whose object decides whether anything outside
// changes are flagged, never read — a model call is not refused for good unnoticed,
// and turning monitoring on or claiming a task is not a read.
func TestClassifyObjectDecides(t *testing.T) {
	cases := []struct {
		name   string
		effect interceptor.Effect
		review bool
		source interceptor.Source
	}{
		// Model calls: destructive (a second call may act again) and named for review.
		{"InvokeModel", interceptor.Destructive, true, interceptor.SourceReadOrWrite},
		{"StreamCompletion", interceptor.Destructive, true, interceptor.SourceReadOrWrite},
		{"CallLLM", interceptor.Destructive, true, interceptor.SourceReadOrWrite},
		{"ExecuteQuery", interceptor.Destructive, true, interceptor.SourceReadOrWrite},
		// Two false reads and their family.
		{"aws.ec2.MonitorInstances", interceptor.Destructive, true, interceptor.SourceReadOrWrite},
		{"aws.sfn.GetActivityTask", interceptor.Destructive, true, interceptor.SourceDequeue},
		{"swf.PollForDecisionTask", interceptor.Destructive, true, interceptor.SourceDequeue},
		{"PollActivityTaskQueue", interceptor.Destructive, true, interceptor.SourceDequeue},
		{"FetchJobs", interceptor.Destructive, true, interceptor.SourceDequeue},
		{"FormatDisk", interceptor.Destructive, true, interceptor.SourceReadOrWrite},
		// The same words as nouns, or objects that claim nothing, still read.
		{"GetMonitor", interceptor.Read, false, interceptor.SourceVerb},
		{"datadog.monitors.get", interceptor.Read, false, interceptor.SourceVerb},
		{"GetWorkerSpecificTaskQueue", interceptor.Read, false, interceptor.SourceVerb},
		{"GetJobStatus", interceptor.Read, false, interceptor.SourceVerb},
		{"bigquery.jobs.get", interceptor.Read, false, interceptor.SourceVerb},
		{"GetStream", interceptor.Read, false, interceptor.SourceVerb},
	}
	for _, c := range cases {
		got := interceptor.Classify(c.name)
		if got.Effect != c.effect || got.Review != c.review || got.Source != c.source {
			t.Errorf("Classify(%q) = %v review=%v source=%s (%s), want %v review=%v source=%s",
				c.name, got.Effect, got.Review, got.Source, got.Reason(), c.effect, c.review, c.source)
		}
	}
}
