package sqlite_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/sqlite"
)

func ExampleOpen() {
	dir, err := os.MkdirTemp("", "idemgate-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(dir, "idemgate.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	c := store.Claim{Key: "order-4217/charge", Activity: "ChargeCard", Effect: "destructive", ArgsHash: "h1",
		Owner: "attempt-1", Lease: now.Add(time.Minute), Window: 24 * time.Hour, Now: now}
	first, _, err := s.Begin(ctx, c)
	if err != nil {
		log.Fatal(err) // wraps store.ErrUnavailable when the file is locked or unwritable
	}
	c.Owner = "attempt-2"
	second, _, err := s.Begin(ctx, c)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(first, second)
	// Output: claimed in-flight
}

func ExampleOpenWith() {
	dir, err := os.MkdirTemp("", "idemgate-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	// Several worker processes share the file: wait up to 10s for another's lock.
	s, err := sqlite.OpenWith(context.Background(), filepath.Join(dir, "idemgate.db"), sqlite.Options{BusyTimeout: 10 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	_, err = s.Get(context.Background(), "no-such-key")
	fmt.Println(err == store.ErrNotFound)
	// Output: true
}
