package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/idemgate/idemgate/store"
)

// A listing of reads only (`receipts --activity GetBalance`, a read key's story)
// lists them at their time too: two workers' batches store them out of order.
func TestAtkReadqReadsOnlyListAtTheirTime(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	var rs []store.Receipt
	for i, at := range []int{2, 1, 3} {
		rs = append(rs, store.Receipt{ID: int64(i + 1), Time: t0.Add(time.Duration(at) * time.Millisecond),
			Activity: "GetBalance", Effect: "read", Decision: store.DecisionRan, Key: fmt.Sprint("k", at)})
	}
	var keys []string
	for _, r := range store.ReadsAtTheirTime(rs) {
		keys = append(keys, r.Key)
	}
	if fmt.Sprint(keys) != "[k1 k2 k3]" {
		t.Fatalf("reads only listed %v; want them at their time, [k1 k2 k3]", keys)
	}
	if rs[0].Key != "k2" {
		t.Fatal("ReadsAtTheirTime changed its argument")
	}
}
