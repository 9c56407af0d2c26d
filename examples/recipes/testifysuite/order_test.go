package testifysuite_test

import (
	"testing"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/suite"
	"go.temporal.io/sdk/testsuite"

	"github.com/idemgate/idemgate/examples/recipes/testifysuite"
	"github.com/idemgate/idemgate/idemgatetest"
	"github.com/idemgate/idemgate/interceptor"
)

// ReceiptSuite is the samples' suite shape with the kit: SetupTest makes one kit
// (one in-memory claim store) and one workflow environment per test, from the kit,
// not from the embedded WorkflowTestSuite (whose environments have no gate).
type ReceiptSuite struct {
	suite.Suite
	testsuite.WorkflowTestSuite

	kit    *idemgatetest.Kit
	env    *testsuite.TestWorkflowEnvironment
	mailer *testifysuite.Mailer
}

func (s *ReceiptSuite) SetupTest() {
	// s.T() is this test's T here: the kit's end-of-test checks run when it ends.
	s.kit = idemgatetest.New(s.T())
	s.env = s.kit.NewWorkflowEnvironment()
	s.mailer = &testifysuite.Mailer{}
	s.env.RegisterWorkflow(testifysuite.ReceiptWorkflow)
	s.env.RegisterActivity(&testifysuite.Shop{Mailer: s.mailer})
}

func (s *ReceiptSuite) AfterTest(_, _ string) { s.env.AssertExpectations(s.T()) }

func (s *ReceiptSuite) TestSendsOnce() {
	s.env.ExecuteWorkflow(testifysuite.ReceiptWorkflow, "order-4217")

	s.True(s.env.IsWorkflowCompleted())
	s.NoError(s.env.GetWorkflowError())
	s.Len(s.mailer.Sent(), 1)
	s.Equal([]string{"ran"}, decisions(s.kit, "SendReceipt"))
}

// The receipt's first attempt reached the mailer, then the worker died. The mailer
// takes no key, so nothing can tell whether the e-mail left: the gate refuses the
// retry (IdempotencyInFlight, non-retryable) and the workflow fails with it. One
// e-mail, and a pending key for a person (`idemgate pending`).
func (s *ReceiptSuite) TestCrashAfterVendorIsRefused() {
	s.kit.CrashAfterVendor("SendReceipt")

	s.env.ExecuteWorkflow(testifysuite.ReceiptWorkflow, "order-4217")

	s.True(s.env.IsWorkflowCompleted())
	err := s.env.GetWorkflowError()
	s.Require().Error(err)
	s.Equal(interceptor.ErrTypeInFlight, interceptor.ErrorType(err))
	s.Contains(err.Error(), "Next step")
	s.Len(s.mailer.Sent(), 1, "the crashed attempt's e-mail, and no second one")
	s.Equal([]string{"unknown", "refused-in-flight"}, decisions(s.kit, "SendReceipt"))
	s.Equal(1, s.kit.BodyRuns("SendReceipt"))
}

// A person checked with the mailer and resolved the key as sent: the retry returns
// the recorded message ID and sends nothing.
func (s *ReceiptSuite) TestResolvedAsSentReturnsTheRecordedResult() {
	s.kit.ResolvedAsSent("SendReceipt", "msg-checked-by-ops")

	s.env.ExecuteWorkflow(testifysuite.ReceiptWorkflow, "order-4217")

	s.NoError(s.env.GetWorkflowError())
	var msg string
	s.NoError(s.env.GetWorkflowResult(&msg))
	s.Equal("msg-checked-by-ops", msg)
	s.Len(s.mailer.Sent(), 1)
	s.Equal([]string{"unknown", "replayed"}, decisions(s.kit, "SendReceipt"))
}

// A mocked activity goes through the gate too (the kit runs the mock's values
// behind it). Give a mock that a retry must reach no Once or Times: testify counts
// every attempt, refused ones included.
func (s *ReceiptSuite) TestMockedActivityIsGated() {
	s.kit.CrashAfterVendor("SendReceipt")
	s.env.OnActivity("SendReceipt", mock.Anything, mock.Anything).Return("msg-mocked", nil)

	s.env.ExecuteWorkflow(testifysuite.ReceiptWorkflow, "order-4217")

	s.Equal(interceptor.ErrTypeInFlight, interceptor.ErrorType(s.env.GetWorkflowError()))
	s.Empty(s.mailer.Sent(), "the mock ran instead of the mailer")
	s.Equal(1, s.kit.BodyRuns("SendReceipt"))
}

func TestReceiptSuite(t *testing.T) { suite.Run(t, new(ReceiptSuite)) }

// decisions lists what the gate decided for activity, one word per attempt.
func decisions(k *idemgatetest.Kit, activity string) []string {
	var out []string
	for _, d := range k.Decisions(activity) {
		out = append(out, d.Decision)
	}
	return out
}
