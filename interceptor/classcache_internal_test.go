package interceptor

import (
	"fmt"
	"testing"

	"github.com/idemgate/idemgate/store/memory"
)

// With Options.ToolNames the name a call is classified by comes from the arguments a
// model writes: a model that invents a new tool name on every call must not grow the
// gate's memory for as long as the worker runs. The classification stays right
// past the cache's bound.
func TestClassificationCacheBounded(t *testing.T) {
	o, err := Options{Store: memory.New()}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	r := newRoot(o)
	for i := range 3 * maxCachedClasses {
		name := fmt.Sprintf("crm.delete_contact_%d", i)
		if got := r.classify(name).Effect; got != Destructive {
			t.Fatalf("%s classified %s, want destructive", name, got)
		}
	}
	n := 0
	r.classes.Range(func(any, any) bool { n++; return true })
	if n > maxCachedClasses {
		t.Fatalf("%d classifications cached after %d distinct names; want at most %d", n, 3*maxCachedClasses, maxCachedClasses)
	}
	if got := r.classify("crm.get_contact").Effect; got != Read {
		t.Fatalf("crm.get_contact past the bound classified %s, want read", got)
	}
}
