package interceptor

import (
	"encoding/json"
	"reflect"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
)

// headerSeeds are headers as gates write them, and near misses of the fast path's
// subset: each must decode exactly as json.Unmarshal decodes it.
var headerSeeds = []string{
	`{"k":"5f0c9a6e-1d2b-5c3a-8e4f-6a7b8c9d0e1f","s":"bench"}`,
	`{"k":"5f0c9a6e-1d2b-5c3a-8e4f-6a7b8c9d0e1f","s":"execution\u0000agent\u0000x","st":"sqlite-1","rt":"wf-1"}`,
	`{"k":"","s":"","b":"order-4217/charge","hb":true}`,
	`{"k":"a","s":"b","hb":false}`,
	`{"k":"a","s":"b","r":{"AllowWrites":true}}`,
	`{"k":"a","s":"b","sa":"act-1"}`,
	`{"k":"a","k":"b"}`,
	`{"K":"a"}`,
	`{"k":"a", "s":"b"}`,
	`{"k":"caf\u00e9 <b>"}`,
	"{\"k\":\"caf\xc3\xa9\"}",
	"{\"k\":\"bad \xff utf-8\"}",
	`{"k":"a\"b"}`,
	`{"k":null}`,
	`{"hb":1}`,
	`{"hb":truex}`,
	`{"k":"a"}x`,
	`{"k":"a"}}`,
	`{"unknown":"x","k":"a"}`,
	`{}`,
	`{`,
	``,
	`null`,
	`[]`,
	`{"k":"a",}`,
	`{"k""a"}`,
	`{"k":"a" }`,
	`{"k":"a","s":"execution\u0000wf-1\u0000run-1\u00000","st":"sqlite-1","rt":"wf-1"}`,
	`{"s":"a\/b\n\t\"\\ \b\f\r \u00e9\u00E9 \u2028"}`,
	`{"s":"\ud83d\ude00"}`,
	`{"s":"\ud83d"}`,
	`{"s":"\uZZZZ"}`,
	`{"s":"\u00"}`,
	`{"s":"\x"}`,
	`{"s":"\`,
	"{\"s\":\"\xc3\\u00a9\"}",
	"{\"s\":\"\\u00e9\xa9\"}",
	"{\"s\":\"tab\there\"}",
}

// What a gate writes, read back through the fast path, is what it wrote.
func TestReadHeaderRoundTrip(t *testing.T) {
	for _, h := range []callHeader{
		{Key: "5f0c9a6e-1d2b-5c3a-8e4f-6a7b8c9d0e1f", Scope: "execution\x00agent-7f3a\x00run\x000"},
		{Business: "order-4217/charge-card", HasBusiness: true, Store: "sqlite-9c1e", Root: "wf-root"},
		{Standalone: "act-7", Scope: "caf\u00e9 <&> \u2028"},
		{Key: "k", Rerun: &RerunPolicy{AllowWrites: true}},
	} {
		p, err := h.payload()
		if err != nil {
			t.Fatal(err)
		}
		got, ok := readHeader(map[string]*commonpb.Payload{headerKey: p})
		if !ok || !reflect.DeepEqual(got, h) {
			t.Fatalf("readHeader(%s) = %+v, %v; want %+v", p.Data, got, ok, h)
		}
		if _, fast := decodeHeader(p.Data); fast != (h.Rerun == nil) {
			t.Fatalf("decodeHeader(%s) took it: %v; want %v (every header without a rerun policy)", p.Data, fast, h.Rerun == nil)
		}
	}
}

// Every header a gate writes without a rerun policy takes the fast path, and reads
// back as json.Unmarshal reads it.
func FuzzHeaderRoundTrip(f *testing.F) {
	f.Add("5f0c9a6e-1d2b-5c3a-8e4f-6a7b8c9d0e1f", "execution\x00wf\x00run\x000", "", false, "", "sqlite-1", "wf")
	f.Add("", "", "order-4217/charge <&>", true, "act\u2028", "", "\xff\xfe")
	f.Fuzz(func(t *testing.T, key, scope, business string, hasBusiness bool, standalone, st, root string) {
		h := callHeader{Key: key, Scope: scope, Business: business, HasBusiness: hasBusiness, Standalone: standalone,
			Store: st, Root: root}
		p, err := h.payload()
		if err != nil {
			t.Fatal(err)
		}
		var want callHeader
		if err := json.Unmarshal(p.Data, &want); err != nil {
			t.Fatal(err)
		}
		got, ok := decodeHeader(p.Data)
		if !ok || got != want {
			t.Fatalf("decodeHeader(%s) = %+v, %v; json.Unmarshal = %+v", p.Data, got, ok, want)
		}
	})
}

func FuzzDecodeHeaderMatchesJSON(f *testing.F) {
	for _, s := range headerSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var want callHeader
		werr := json.Unmarshal(data, &want)
		got, ok := readHeader(map[string]*commonpb.Payload{headerKey: {Data: data}})
		if ok != (werr == nil) || ok && !reflect.DeepEqual(got, want) {
			t.Fatalf("readHeader(%q) = %+v, %v; json.Unmarshal = %+v, %v", data, got, ok, want, werr)
		}
		if fast, ok := decodeHeader(data); ok && (werr != nil || !reflect.DeepEqual(fast, want)) {
			t.Fatalf("decodeHeader(%q) = %+v; json.Unmarshal = %+v, %v", data, fast, want, werr)
		}
	})
}
