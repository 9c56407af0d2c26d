package witness

import (
	"crypto/sha256"
	"encoding/hex"

	commonpb "go.temporal.io/api/common/v1"
	"google.golang.org/protobuf/proto"
)

// marshalPayloads stores payloads as the gate stores a result (deterministic).
func marshalPayloads(p *commonpb.Payloads) ([]byte, error) {
	return proto.MarshalOptions{Deterministic: true}.Marshal(p)
}

// ResultRef is the digest receipts show for a stored result (as the gate's).
func ResultRef(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:8])
}
