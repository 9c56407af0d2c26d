package patient_test

import (
	"log/slog"
	"testing"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/idemgate/idemgate/internal/testutil/patient"
)

// A workflow task that a busy machine did not run for 1.5 s is not a deadlock in
// the repository's testsuite environments. The sleep stands for the machine's
// delay; it synchronises nothing.
func TestSlowWorkflowTaskIsNotADeadlock(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := patient.Env(s.NewTestWorkflowEnvironment())
	env.SetWorkerOptions(patient.WorkerOptions())
	env.RegisterWorkflowWithOptions(func(ctx workflow.Context) error {
		time.Sleep(1500 * time.Millisecond)
		return nil
	}, workflow.RegisterOptions{Name: "slowTask"})
	env.ExecuteWorkflow("slowTask")
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("completed %v, error %v", env.IsWorkflowCompleted(), env.GetWorkflowError())
	}
}
