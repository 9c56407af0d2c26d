package interceptor_test

import (
	"os"
	"testing"

	"github.com/idemgate/idemgate/internal/testutil/patient"
)

// TestMain computes the SDK's binary checksum before any test or example runs a
// workflow: the SDK otherwise reads the whole test executable inside the first
// workflow task that schedules an activity, against the deadlock detector's 1 s
// (the examples keep the SDK's default options, as a user would).
func TestMain(m *testing.M) {
	patient.Warm()
	os.Exit(m.Run())
}
