package postgres_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/postgres"
)

func ExampleOpen() {
	// For example postgres://idemgate:secret@db.internal:5432/idemgate
	s, err := postgres.Open(context.Background(), os.Getenv("IDEMGATE_POSTGRES_DSN"))
	if err != nil {
		log.Fatal(err) // wraps store.ErrUnavailable when the server cannot be reached
	}
	defer s.Close()

	now := time.Now()
	outcome, rec, err := s.Begin(context.Background(), store.Claim{Key: "order-4217/charge",
		Activity: "ChargeCard", Effect: "destructive", ArgsHash: "h1", Owner: "attempt-1",
		Lease: now.Add(time.Minute), Window: 24 * time.Hour, Now: now})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(outcome, rec.State)
}

func ExampleOpenWith() {
	// 32 concurrent activities per worker: one connection each.
	s, err := postgres.OpenWith(context.Background(), os.Getenv("IDEMGATE_POSTGRES_DSN"), postgres.Options{MaxConns: 32})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
}
