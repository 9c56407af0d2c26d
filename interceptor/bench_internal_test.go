package interceptor

import (
	"testing"

	"github.com/google/uuid"

	"github.com/idemgate/idemgate/interceptor/internal/canon"
)

type fiveFields struct {
	Customer string  `json:"customer"`
	Amount   int64   `json:"amount"`
	Currency string  `json:"currency"`
	Note     string  `json:"note"`
	Rate     float64 `json:"rate"`
}

// BenchmarkKeyPath measures what the gate adds before the store: classification,
// key minting and the canonical args hash of a five-field struct — together and
// one by one. Target: under 2 µs and 10 allocations together.
func BenchmarkKeyPath(b *testing.B) {
	args := []any{fiveFields{"cus_123", 4200, "eur", "order 4217", 0.25}}
	scope := "execution\x00agent-7f3a\x00" + "2f1c9a5e-8d3b-4c1a-9e2f-7a6b5c4d3e2f" + "\x000"
	b.Run("all-three", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if Classify("ChargeCard").Effect != Destructive {
				b.Fatal("misclassified")
			}
			_ = occurrenceKey("default", scope, "ChargeCard", 3)
			if _, _, err := canon.EncodeHash(args); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("classify", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = Classify("crm.contacts.UpsertContact")
		}
	})
	b.Run("mint", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = occurrenceKey("default", scope, "ChargeCard", 3)
		}
	})
	b.Run("hash", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := canon.EncodeHash(args); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func TestMintIsUUIDv5(t *testing.T) {
	for _, parts := range [][]string{{"a"}, {"ns", "scope\x00x", "ChargeCard", "1"}, {string(make([]byte, 600))}} {
		name := "v1\x00kind"
		for _, p := range parts {
			name += "\x00" + p
		}
		want := uuid.NewSHA1(keyNamespace, []byte(name)).String()
		if got := mint("kind", parts...); got != want {
			t.Fatalf("mint(%q) = %s, want %s", parts, got, want)
		}
	}
}
