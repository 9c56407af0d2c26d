package idemgatetest_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"

	"github.com/idemgate/idemgate/idemgatetest"
	"github.com/idemgate/idemgate/store"
)

// A test that watches local activities with its own listener, and mocks one with a
// value: the local activity still passes the gate (the testsuite runs a local
// activity's mock inside the worker's interceptors), so the kit has nothing to
// report.
func TestOwnLocalListenerWithAPlainLocalMock(t *testing.T) {
	r := newRecorder(t)
	k := idemgatetest.New(r)
	env := k.NewWorkflowEnvironment()
	env.RegisterWorkflow(localNoteWorkflow)
	env.RegisterActivity(&lookup{})
	var started []string
	env.SetOnLocalActivityStartedListener(func(info *activity.Info, _ context.Context, _ []any) {
		started = append(started, info.ActivityType.Name)
	})
	env.OnActivity("SendNote", mock.Anything, "ada").Return("mock ada", nil)
	env.ExecuteWorkflow(localNoteWorkflow)
	var s string
	if err := env.GetWorkflowResult(&s); err != nil || s != "mock ada" {
		t.Fatalf("result %q, %v", s, err)
	}
	if ds := k.Decisions("SendNote"); len(ds) != 1 || ds[0].Decision != string(store.DecisionRan) || len(started) != 1 {
		t.Fatalf("decisions %+v, started %v: want one ran", ds, started)
	}
	if errs := r.finish(); len(errs) != 0 {
		t.Fatalf("the kit failed a gated local activity: %q", errs)
	}
}
