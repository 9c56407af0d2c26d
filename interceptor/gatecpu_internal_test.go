package interceptor

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// The stored result is the deterministic marshal of its payloads, whichever way
// encodeResult gets there: a repeat of CompleteAsync compares results by the digest
// of these bytes.
func TestEncodeResultDeterministic(t *testing.T) {
	meta := func(n int) map[string][]byte {
		m := map[string][]byte{}
		for i := range n {
			m[string(rune('a'+i))+"-key"] = []byte{byte(i)}
		}
		return m
	}
	for _, p := range []*commonpb.Payloads{
		{},
		{Payloads: []*commonpb.Payload{{Data: []byte("x")}}},
		{Payloads: []*commonpb.Payload{{Metadata: meta(1), Data: []byte(`"ok"`)}}},
		{Payloads: []*commonpb.Payload{{Metadata: meta(1)}, {Metadata: meta(8), Data: []byte("y")}}},
		{Payloads: []*commonpb.Payload{{Metadata: meta(12), Data: []byte("z"),
			ExternalPayloads: []*commonpb.Payload_ExternalPayloadDetails{{SizeBytes: 7}}}}},
	} {
		want, err := proto.MarshalOptions{Deterministic: true}.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		for range 20 { // map order varies from run to run
			got, err := encodeResult(nil, p)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("encodeResult(%v) = %x, want the deterministic %x", p, got, want)
			}
		}
	}
	got, err := encodeResult(nil, "ok")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := proto.MarshalOptions{Deterministic: true}.Marshal(&commonpb.Payloads{Payloads: []*commonpb.Payload{
		{Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: []byte(`"ok"`)}}})
	if !bytes.Equal(got, want) {
		t.Fatalf("encodeResult(\"ok\") = %x, want %x", got, want)
	}
}

// encodeResult marshals without sorting map keys only because a payload's metadata
// is the one map in commonpb.Payloads: a Temporal API that adds another must make
// singleEntryMetadata look at it too.
func TestPayloadMapsAreMetadata(t *testing.T) {
	var maps []string
	seen := map[protoreflect.FullName]bool{}
	var walk func(md protoreflect.MessageDescriptor)
	walk = func(md protoreflect.MessageDescriptor) {
		if seen[md.FullName()] {
			return
		}
		seen[md.FullName()] = true
		fs := md.Fields()
		for i := range fs.Len() {
			f := fs.Get(i)
			if f.IsMap() {
				maps = append(maps, string(f.FullName()))
				if v := f.MapValue(); v.Message() != nil {
					walk(v.Message())
				}
				continue
			}
			if f.Message() != nil {
				walk(f.Message())
			}
		}
	}
	walk((&commonpb.Payloads{}).ProtoReflect().Descriptor())
	if len(maps) != 1 || maps[0] != "temporal.api.common.v1.Payload.metadata" {
		t.Fatalf("map fields in commonpb.Payloads: %v; want only temporal.api.common.v1.Payload.metadata", maps)
	}
}

func TestResultRef(t *testing.T) {
	for _, b := range [][]byte{nil, []byte("x"), bytes.Repeat([]byte("payload"), 100)} {
		sum := sha256.Sum256(b)
		if got, want := resultRef(b), "sha256:"+hex.EncodeToString(sum[:8]); got != want {
			t.Fatalf("resultRef = %q, want %q", got, want)
		}
	}
}

// identifyingKey hashes the values in place: the same key as mint of them as a string.
func TestIdentifyingKeyIsMint(t *testing.T) {
	for _, values := range []string{`{"note":"order 4217"}`, `{}`, string(bytes.Repeat([]byte(`{"a":"x"}`), 100))} {
		got := identifyingKey("default", "execution\x00wf\x00run\x000", "ChargeCard", []byte(values))
		if want := mint("identifying", "default", "execution\x00wf\x00run\x000", "ChargeCard", values); got != want {
			t.Fatalf("identifyingKey(%.40s) = %s, want %s", values, got, want)
		}
	}
}
