package interceptor_test

import (
	"testing"

	"github.com/idemgate/idemgate/interceptor"
)

// TestHintsKeepANounVerbLastDestructive (found by the attack on issue 18's item 7):
// in a resource-first name the verb stands last; a word that is both noun and verb
// there, with no other verb in the name, is the verb ("capture" in charges_capture),
// as "process" is in ProcessPayment. DESIGN's floor is the most severe verb-list word
// the name contains, so readOnlyHint must not lower these to a read: a read is not
// gated, and a capture whose outcome is unknown would run again.
func TestHintsKeepANounVerbLastDestructive(t *testing.T) {
	yes := true
	ro := interceptor.Hints{ReadOnly: &yes, From: "mcp server pay"}
	for _, n := range []string{"charges_capture", "payment_intents_capture", "cards_charge", "orders_refund",
		"accounts_credit", "files_push", "deployments_trigger", "messages_post", "payments.refund"} {
		got := interceptor.Options{Hints: map[string]interceptor.Hints{n: ro}}.Classify(n)
		if got.Effect == interceptor.Read {
			t.Errorf("%s with readOnlyHint: %s (%s); a hint must not lower it below the verb it ends with", n, got.Effect, got.Reason())
		}
	}
	// The issue's own examples still read: another verb stands in the name.
	for _, n := range []string{"actions_get", "issue_read", "pods_list", "namespaces_list"} {
		if got := (interceptor.Options{Hints: map[string]interceptor.Hints{n: ro}}).Classify(n); got.Effect != interceptor.Read {
			t.Errorf("%s with readOnlyHint: %s (%s); want read", n, got.Effect, got.Reason())
		}
	}
}
