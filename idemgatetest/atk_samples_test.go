package idemgatetest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/suite"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/idemgate/idemgate/idemgatetest"
)

// expense is samples-go's expense pattern: the decision activity hands its task
// token to a person (here a channel) and returns ErrResultPending; the person
// completes it later through the client (here env.CompleteActivity).
type expense struct {
	tokens   chan []byte
	payments int
}

func (e *expense) CreateExpense(_ context.Context, id string) error { return nil }

func (e *expense) WaitForDecision(ctx context.Context, id string) (string, error) {
	e.tokens <- activity.GetInfo(ctx).TaskToken
	return "", activity.ErrResultPending
}

func (e *expense) Payment(_ context.Context, id string) error {
	e.payments++
	return nil
}

func expenseWorkflow(ctx workflow.Context, id string) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Minute})
	if err := workflow.ExecuteActivity(ctx, "CreateExpense", id).Get(ctx, nil); err != nil {
		return "", err
	}
	var status string
	if err := workflow.ExecuteActivity(ctx, "WaitForDecision", id).Get(ctx, &status); err != nil {
		return "", err
	}
	if status != "APPROVED" {
		return "REJECTED", nil
	}
	if err := workflow.ExecuteActivity(ctx, "Payment", id).Get(ctx, nil); err != nil {
		return "", err
	}
	return "COMPLETED", nil
}

// samples-go's expense test completes the decision activity asynchronously with
// env.CompleteActivity: a sound test, which the kit must pass.
func TestExpenseAsyncCompletionPasses(t *testing.T) {
	r := newRecorder(t)
	k := idemgatetest.New(r)
	e := &expense{tokens: make(chan []byte, 1)}
	env := k.NewWorkflowEnvironment()
	env.RegisterWorkflow(expenseWorkflow)
	env.RegisterActivity(e)
	var completeErr error
	env.RegisterDelayedCallback(func() {
		completeErr = env.CompleteActivity(<-e.tokens, "APPROVED", nil)
	}, time.Minute)
	env.ExecuteWorkflow(expenseWorkflow, "expense-1")
	if completeErr != nil {
		t.Fatalf("CompleteActivity: %v", completeErr)
	}
	var status string
	if err := env.GetWorkflowResult(&status); err != nil || status != "COMPLETED" || e.payments != 1 {
		t.Fatalf("result %q, %v; payments %d", status, err, e.payments)
	}
	if errs := r.finish(); len(errs) != 0 {
		t.Fatalf("the kit failed a sound async-completion test: %q", errs)
	}
	if ds := k.Decisions("WaitForDecision"); len(ds) == 0 {
		t.Fatalf("no decision for the async activity")
	}
}

// files is samples-go's fileprocessing activities, as struct methods.
type files struct{ uploads int }

func (f *files) DownloadFile(_ context.Context, name string) (string, error) {
	return "/tmp/" + name, nil
}
func (f *files) ProcessFile(_ context.Context, path string) (string, error) {
	return path + ".out", nil
}
func (f *files) UploadFile(_ context.Context, path string) error {
	f.uploads++
	return nil
}

func fileWorkflow(ctx workflow.Context, name string) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute, HeartbeatTimeout: 2 * time.Second})
	sctx, err := workflow.CreateSession(ctx, &workflow.SessionOptions{CreationTimeout: time.Minute, ExecutionTimeout: time.Minute})
	if err != nil {
		return err
	}
	defer workflow.CompleteSession(sctx)
	var f *files
	var path, out string
	if err := workflow.ExecuteActivity(sctx, f.DownloadFile, name).Get(sctx, &path); err != nil {
		return err
	}
	if err := workflow.ExecuteActivity(sctx, f.ProcessFile, path).Get(sctx, &out); err != nil {
		return err
	}
	return workflow.ExecuteActivity(sctx, f.UploadFile, out).Get(sctx, nil)
}

// fileSuite is samples-go's testify suite shape: SetupTest makes the kit and the
// environment, AfterTest asserts the mocks, each test sets its worker options.
type fileSuite struct {
	suite.Suite
	k   *idemgatetest.Kit
	env *testsuite.TestWorkflowEnvironment
	f   *files
}

func (s *fileSuite) SetupTest() {
	s.k = idemgatetest.New(s.T())
	s.env = s.k.NewWorkflowEnvironment()
	s.env.SetWorkerOptions(s.k.WorkerOptions(worker.Options{EnableSessionWorker: true}))
	s.f = &files{}
	s.env.RegisterWorkflow(fileWorkflow)
	s.env.RegisterActivity(s.f)
}

func (s *fileSuite) AfterTest(_, _ string) { s.env.AssertExpectations(s.T()) }

func (s *fileSuite) TestReal() {
	s.env.ExecuteWorkflow(fileWorkflow, "a.txt")
	s.True(s.env.IsWorkflowCompleted())
	s.NoError(s.env.GetWorkflowError())
	s.Equal(1, s.f.uploads)
	s.Len(s.k.Decisions("UploadFile"), 1)
}

func (s *fileSuite) TestMocked() {
	s.env.OnActivity(s.f.DownloadFile, mock.Anything, "b.txt").Return("/mock/b", nil).Once()
	s.env.OnActivity(s.f.ProcessFile, mock.Anything, "/mock/b").Return("/mock/b.out", nil).Once()
	s.env.OnActivity(s.f.UploadFile, mock.Anything, "/mock/b.out").Return(nil).Once()
	s.env.ExecuteWorkflow(fileWorkflow, "b.txt")
	s.True(s.env.IsWorkflowCompleted())
	s.NoError(s.env.GetWorkflowError())
	s.Equal(0, s.f.uploads)
	s.Len(s.k.Decisions("UploadFile"), 1)
	s.Len(s.k.Decisions("DownloadFile"), 1)
}

func TestFileProcessingSuite(t *testing.T) { suite.Run(t, new(fileSuite)) }
