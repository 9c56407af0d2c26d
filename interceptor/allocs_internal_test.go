//go:build !race

// Allocation counts: the race detector changes them (sync.Pool drops items at random).

package interceptor

import (
	"testing"

	commonpb "go.temporal.io/api/common/v1"
)

// The header is decoded once per attempt, on every activity: without encoding/json's
// scan and reflection it allocates only the strings it returns.
func TestReadHeaderAllocs(t *testing.T) {
	// As a workflow worker writes it: the scope's NULs escaped.
	fields := map[string]*commonpb.Payload{headerKey: {Metadata: jsonPlain,
		Data: []byte(`{"k":"5f0c9a6e-1d2b-5c3a-8e4f-6a7b8c9d0e1f","s":"execution\u0000wf-1\u0000run-1\u00000","st":"memory-1","rt":"wf-1"}`)}}
	var h callHeader
	var ok bool
	if n := testing.AllocsPerRun(200, func() { h, ok = readHeader(fields) }); n > 4 {
		t.Fatalf("readHeader allocates %.0f times per header; want at most 4 (its four strings)", n)
	}
	if want := (callHeader{Key: "5f0c9a6e-1d2b-5c3a-8e4f-6a7b8c9d0e1f", Scope: "execution\x00wf-1\x00run-1\x000",
		Store: "memory-1", Root: "wf-1"}); !ok || h != want {
		t.Fatalf("readHeader = %+v, %v; want %+v", h, ok, want)
	}
}

// A write's result is encoded once per activity, on the gate's own time: the
// default converter's payload marshalled, and the digest receipts show.
func TestEncodeResultAllocs(t *testing.T) {
	var data []byte
	var ref string
	n := testing.AllocsPerRun(200, func() {
		var err error
		if data, ref, err = EncodeResult(nil, "order 4217"); err != nil {
			t.Fatal(err)
		}
	})
	if len(data) == 0 || ref == "" {
		t.Fatal("nothing encoded")
	}
	if n > encodeResultAllocs {
		t.Fatalf("EncodeResult of a string allocates %.0f times; want at most %d", n, encodeResultAllocs)
	}
}

// encodeResultAllocs is what EncodeResult of a string allocates: the SDK's payload
// (ToPayloads: 10), its marshal (1), the digest (1).
const encodeResultAllocs = 12
