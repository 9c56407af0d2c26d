package interceptor

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// The stored result is the deterministic marshal of its payloads, byte for byte,
// whichever way marshalPayloads gets there: a repeat of CompleteAsync compares
// results by the digest of these bytes.
func TestMarshalPayloadsIsProto(t *testing.T) {
	meta := func(n int) map[string][]byte {
		m := map[string][]byte{}
		for i := range n {
			m[string(rune('a'+i))+"-key"] = bytes.Repeat([]byte{byte(i)}, i*40)
		}
		return m
	}
	withUnknown := &commonpb.Payload{Data: []byte("u")}
	withUnknown.ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 99, protowire.VarintType), 7))
	extUnknown := &commonpb.Payload_ExternalPayloadDetails{SizeBytes: 1}
	extUnknown.ProtoReflect().SetUnknown(protowire.AppendTag(nil, 9, protowire.VarintType))
	outer := &commonpb.Payloads{Payloads: []*commonpb.Payload{{Data: []byte("o")}}}
	outer.ProtoReflect().SetUnknown(protowire.AppendBytes(protowire.AppendTag(nil, 5, protowire.BytesType), []byte("x")))
	for i, p := range []*commonpb.Payloads{
		nil,
		{},
		{Payloads: []*commonpb.Payload{{}}},
		{Payloads: []*commonpb.Payload{{Data: []byte("x")}}},
		{Payloads: []*commonpb.Payload{{Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: []byte(`"ok"`)}}},
		{Payloads: []*commonpb.Payload{{Metadata: map[string][]byte{"": nil}}}},
		{Payloads: []*commonpb.Payload{{Metadata: meta(1)}, {Metadata: meta(8), Data: bytes.Repeat([]byte("y"), 300)}}},
		{Payloads: []*commonpb.Payload{{Metadata: meta(12), Data: []byte("z"), ExternalPayloads: []*commonpb.Payload_ExternalPayloadDetails{
			{SizeBytes: 7}, {}, {SizeBytes: -1}, {SizeBytes: 1 << 40}}}}},
		{Payloads: []*commonpb.Payload{withUnknown}},
		{Payloads: []*commonpb.Payload{{ExternalPayloads: []*commonpb.Payload_ExternalPayloadDetails{extUnknown}}}},
		outer,
	} {
		want, err := proto.MarshalOptions{Deterministic: true}.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		for range 20 { // map order varies from run to run
			got, err := marshalPayloads(p)
			if err != nil {
				t.Fatalf("%d: %v", i, err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%d: marshalPayloads(%v) = %x, want the deterministic %x", i, p, got, want)
			}
		}
	}
	// What proto refuses, marshalPayloads refuses: a metadata key that is not UTF-8.
	bad := &commonpb.Payloads{Payloads: []*commonpb.Payload{{Metadata: map[string][]byte{"\xff": nil}}}}
	if _, err := proto.Marshal(bad); err == nil {
		t.Fatal("proto took a key that is not UTF-8")
	}
	if _, err := marshalPayloads(bad); err == nil {
		t.Fatal("marshalPayloads took a key that is not UTF-8; proto refuses it")
	}
	// A nil element: as proto writes it.
	nilElem := &commonpb.Payloads{Payloads: []*commonpb.Payload{nil, {Data: []byte("n")}}}
	want, wantErr := proto.MarshalOptions{Deterministic: true}.Marshal(nilElem)
	if got, err := marshalPayloads(nilElem); !bytes.Equal(got, want) || (err == nil) != (wantErr == nil) {
		t.Fatalf("marshalPayloads(nil element) = %x, %v; proto %x, %v", got, err, want, wantErr)
	}
}

func FuzzMarshalPayloads(f *testing.F) {
	f.Add("encoding", []byte("json/plain"), "", []byte(nil), []byte(`"ok"`), int64(0), 1)
	f.Add("encoding", []byte("binary/protobuf"), "messageType", []byte("x.Y"), []byte{0, 1, 2}, int64(-5), 2)
	f.Add("\xff", []byte(nil), "a", []byte("b"), []byte(nil), int64(1<<62), 0)
	f.Fuzz(func(t *testing.T, k1 string, v1 []byte, k2 string, v2, data []byte, size int64, n int) {
		x := &commonpb.Payload{Metadata: map[string][]byte{k1: v1, k2: v2}, Data: data}
		if size != 0 {
			x.ExternalPayloads = []*commonpb.Payload_ExternalPayloadDetails{{SizeBytes: size}}
		}
		p := &commonpb.Payloads{}
		for range n % 4 {
			p.Payloads = append(p.Payloads, x)
		}
		want, wantErr := proto.MarshalOptions{Deterministic: true}.Marshal(p)
		got, err := marshalPayloads(p)
		if (err == nil) != (wantErr == nil) || !bytes.Equal(got, want) {
			t.Fatalf("marshalPayloads = %x, %v; proto %x, %v", got, err, want, wantErr)
		}
	})
}

// marshalPayloads writes the fields of commonpb.Payloads itself: a Temporal API that
// adds a field (or changes one) must be written there too, or left to proto.
func TestPayloadFieldsKnown(t *testing.T) {
	var got []string
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
			d := fmt.Sprintf("%s=%d %s %s presence=%v", f.FullName(), f.Number(), f.Cardinality(), f.Kind(), f.HasPresence())
			if f.IsMap() {
				d += fmt.Sprintf(" map<%s,%s>", f.MapKey().Kind(), f.MapValue().Kind())
				got = append(got, d)
				continue
			}
			got = append(got, d)
			if f.Message() != nil {
				walk(f.Message())
			}
		}
	}
	walk((&commonpb.Payloads{}).ProtoReflect().Descriptor())
	want := []string{
		"temporal.api.common.v1.Payloads.payloads=1 repeated message presence=false",
		"temporal.api.common.v1.Payload.metadata=1 repeated message presence=false map<string,bytes>",
		"temporal.api.common.v1.Payload.data=2 optional bytes presence=false",
		"temporal.api.common.v1.Payload.external_payloads=3 repeated message presence=false",
		"temporal.api.common.v1.Payload.ExternalPayloadDetails.size_bytes=1 optional int64 presence=false",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("commonpb.Payloads has the fields\n%s\nmarshalPayloads writes\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
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
