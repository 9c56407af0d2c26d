package stripemock_test

import (
	"testing"

	"github.com/idemgate/idemgate/internal/testutil/stripemock"
)

// Two stripe-mocks run at once (two packages' tests, two test runs on one machine):
// given only -http-addr, each also bound stripe-mock's default HTTPS port, the second
// exited, and Start then waited for ever in its cleanup.
func TestTwoAtOnce(t *testing.T) {
	a, b := stripemock.Start(t), stripemock.Start(t)
	if a == b {
		t.Fatalf("both stripe-mocks answer at %s", a)
	}
}
