package idemgatetest_test

import (
	"strings"
	"testing"

	"github.com/idemgate/idemgate/idemgatetest"
	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/store/memory"
)

// The newcomer's check (issue 20): a Store passed in WithOptions was replaced by
// the kit's without a word, so `idemgate pending` on the user's file found nothing.
// The kit now refuses it, saying what to do instead.
func TestWithOptionsStoreIsRefusedNotIgnored(t *testing.T) {
	rec := newRecorder(t)
	func() {
		defer func() { _ = recover() }() // the recorder's Fatal panics to stop New
		idemgatetest.New(rec, idemgatetest.WithOptions(interceptor.Options{Store: memory.New()}))
	}()
	errs := rec.finish()
	if len(errs) != 1 || !strings.Contains(errs[0], "Options.Store is set") || !strings.Contains(errs[0], "Next step:") ||
		!strings.Contains(errs[0], "Kit.Store") {
		t.Fatalf("New with a Store reported %q, want one failure that names Options.Store and the next step", errs)
	}
}
