package interceptor

import (
	"slices"
	"unicode/utf8"

	commonpb "go.temporal.io/api/common/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// marshalPayloads is proto.MarshalOptions{Deterministic: true}.Marshal(p), byte for
// byte: a write's result is stored in it, and a repeat of CompleteAsync compares
// results by the digest of these bytes. The fields commonpb.Payloads has
// (TestPayloadFieldsKnown) are written here, without the reflection protobuf reads a
// map with (most of the cost of marshalling one small result); a message it does
// not know all of — unknown fields, a nil element, a metadata key that is not
// UTF-8 (which proto refuses) — goes to proto (TestMarshalPayloadsIsProto,
// FuzzMarshalPayloads).
func marshalPayloads(p *commonpb.Payloads) ([]byte, error) {
	if n, ok := payloadsSize(p); ok {
		return appendPayloads(make([]byte, 0, n), p), nil
	}
	return proto.MarshalOptions{Deterministic: true}.Marshal(p)
}

// Field tags: commonpb.Payloads.payloads (1), Payload.metadata (1), Payload.data (2),
// Payload.external_payloads (3), a map entry's key (1) and value (2), and
// Payload_ExternalPayloadDetails.size_bytes (1, varint).
var (
	tagPayloads  = protowire.AppendTag(nil, 1, protowire.BytesType)[0]
	tagMetadata  = protowire.AppendTag(nil, 1, protowire.BytesType)[0]
	tagData      = protowire.AppendTag(nil, 2, protowire.BytesType)[0]
	tagExternal  = protowire.AppendTag(nil, 3, protowire.BytesType)[0]
	tagEntryKey  = protowire.AppendTag(nil, 1, protowire.BytesType)[0]
	tagEntryVal  = protowire.AppendTag(nil, 2, protowire.BytesType)[0]
	tagSizeBytes = protowire.AppendTag(nil, 1, protowire.VarintType)[0]
)

// payloadsSize is the encoded size of p, and whether appendPayloads writes all of it.
func payloadsSize(p *commonpb.Payloads) (int, bool) {
	if p == nil || len(p.ProtoReflect().GetUnknown()) > 0 {
		return 0, false
	}
	n := 0
	for _, x := range p.Payloads {
		s, ok := payloadSize(x)
		if !ok {
			return 0, false
		}
		n += 1 + protowire.SizeBytes(s)
	}
	return n, true
}

func payloadSize(x *commonpb.Payload) (int, bool) {
	if x == nil || len(x.ProtoReflect().GetUnknown()) > 0 {
		return 0, false
	}
	n := 0
	for k, v := range x.Metadata {
		if !utf8.ValidString(k) {
			return 0, false
		}
		n += 1 + protowire.SizeBytes(entrySize(k, v))
	}
	if len(x.Data) > 0 {
		n += 1 + protowire.SizeBytes(len(x.Data))
	}
	for _, e := range x.ExternalPayloads {
		if e == nil || len(e.ProtoReflect().GetUnknown()) > 0 {
			return 0, false
		}
		n += 1 + protowire.SizeBytes(externalSize(e))
	}
	return n, true
}

func entrySize(k string, v []byte) int {
	return 1 + protowire.SizeBytes(len(k)) + 1 + protowire.SizeBytes(len(v))
}

func externalSize(e *commonpb.Payload_ExternalPayloadDetails) int {
	if e.SizeBytes == 0 {
		return 0
	}
	return 1 + protowire.SizeVarint(uint64(e.SizeBytes))
}

// appendPayloads writes p as payloadsSize found it writable: fields in number order,
// map entries sorted by key (Deterministic), key and value always written,
// proto3 scalars only when not zero.
func appendPayloads(b []byte, p *commonpb.Payloads) []byte {
	for _, x := range p.Payloads {
		s, _ := payloadSize(x)
		b = append(b, tagPayloads)
		b = protowire.AppendVarint(b, uint64(s))
		b = appendMetadata(b, x.Metadata)
		if len(x.Data) > 0 {
			b = append(b, tagData)
			b = protowire.AppendBytes(b, x.Data)
		}
		for _, e := range x.ExternalPayloads {
			b = append(b, tagExternal)
			b = protowire.AppendVarint(b, uint64(externalSize(e)))
			if e.SizeBytes != 0 {
				b = append(b, tagSizeBytes)
				b = protowire.AppendVarint(b, uint64(e.SizeBytes))
			}
		}
	}
	return b
}

func appendMetadata(b []byte, m map[string][]byte) []byte {
	entry := func(b []byte, k string, v []byte) []byte {
		b = append(b, tagMetadata)
		b = protowire.AppendVarint(b, uint64(entrySize(k, v)))
		b = append(b, tagEntryKey)
		b = protowire.AppendString(b, k)
		b = append(b, tagEntryVal)
		return protowire.AppendBytes(b, v)
	}
	if len(m) == 1 { // the default converters' one entry, "encoding": nothing to sort
		for k, v := range m {
			b = entry(b, k, v)
		}
		return b
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b = entry(b, k, m[k])
	}
	return b
}
