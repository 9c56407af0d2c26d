package memory_test

import (
	"testing"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memory"
	"github.com/idemgate/idemgate/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return memory.New() })
}

// A backend that implements only store.Gate passes RunGate.
func TestGateConformance(t *testing.T) {
	storetest.RunGate(t, func(t *testing.T) store.Gate { return struct{ store.Gate }{memory.New()} })
}
