package interceptor_test

import (
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
