package interceptor_test

import (
	"go/parser"
	"go/token"
	"strings"
	"testing"
)

// packageDoc is the package comment `go doc` shows.
func packageDoc(t *testing.T) string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "doc.go", nil, parser.PackageClauseOnly|parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	return f.Doc.Text()
}

// `go doc ./interceptor` shows the plugin first, in the form the README's "Add it
// to a worker" uses, and New as the lower-level form after it.
func TestPackageDocWiresThePluginFirst(t *testing.T) {
	doc := packageDoc(t)
	plugin := strings.Index(doc, "interceptor.NewPlugin(interceptor.Options{Store: st},")
	worker := strings.Index(doc, "worker.Options{Plugins: []worker.Plugin{gate}}")
	bare := strings.Index(doc, "interceptor.New(interceptor.Options{Store: st})")
	lower := strings.Index(doc, "New is the lower-level form")
	if plugin < 0 || worker < 0 || bare < 0 || lower < 0 || !(plugin < worker && worker < lower && lower < bare) {
		t.Fatalf("the package doc must wire the plugin first (NewPlugin at %d, Plugins at %d) and then call New the "+
			"lower-level form (%d, New at %d):\n%s", plugin, worker, lower, bare, doc)
	}
}
