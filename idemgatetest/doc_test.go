package idemgatetest_test

import (
	"go/parser"
	"go/token"
	"regexp"
	"strings"
	"testing"
)

// `go doc ./idemgatetest` opens with a test a user can copy: the library's own
// names only (not the demo's activities package), and says in plain words what
// Options.VendorWindows decides — a crash re-sent to a vendor that dedups by the
// key, or refused.
func TestPackageDocTestUsesLibraryNamesAndExplainsVendorWindows(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "doc.go", nil, parser.PackageClauseOnly|parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	doc := f.Doc.Text()
	first, _, _ := strings.Cut(doc, "\n# ")
	for _, want := range []string{"idemgatetest.New(t, idemgatetest.WithOptions(interceptor.Options{", "VendorWindows:",
		"k.CrashAfterVendor(", "k.NewWorkflowEnvironment()", "k.Decisions("} {
		if !strings.Contains(first, want) {
			t.Errorf("the package doc's opening test lacks %q:\n%s", want, first)
		}
	}
	if regexp.MustCompile(`\b(activities|workflows)\.[A-Z]`).MatchString(doc) {
		t.Errorf("the package doc uses the demo's packages (activities, workflows):\n%s", doc)
	}
	for _, want := range []string{"# Your options decide what a crash turns into", "Re-send it with the same key, if Options.VendorWindows",
		"Refuse it otherwise", "IdempotencyInFlight"} {
		if !strings.Contains(doc, want) {
			t.Errorf("the package doc does not explain the VendorWindows choice (%q)", want)
		}
	}
}
