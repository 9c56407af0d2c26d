package memory_test

import (
	"context"
	"fmt"
	"time"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memory"
)

// An in-process store for tests: claim a key, and a second claim of it is in flight.
func ExampleNew() {
	st := memory.New()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	c := store.Claim{Key: "k", Activity: "ChargeCard", Effect: "destructive", ArgsHash: "h", Owner: "attempt-1",
		Lease: now.Add(time.Minute), Window: 24 * time.Hour, Now: now}
	first, _, _ := st.Begin(context.Background(), c)
	c.Owner = "attempt-2"
	second, _, _ := st.Begin(context.Background(), c)
	fmt.Println(first, second)
	// Output: claimed in-flight
}
