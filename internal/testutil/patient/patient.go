// Package patient gives the repository's testsuite environments (go.temporal.io/sdk/testsuite)
// what they need to pass on a busy machine.
//
// The testsuite's workflow environment fails a workflow task that runs longer than
// the deadlock detection timeout, 1 s of wall clock by default (TMPRL1101). The
// first activity a test binary schedules makes the SDK compute its binary checksum:
// an MD5 of the whole test executable (over 100 MB under -race), read inside that
// workflow task. That alone takes 0.3 s on an idle machine under -race and well
// over a second on a loaded one. WorkerOptions computes the checksum first, on
// the test's goroutine, and raises the timeout for whatever scheduling delay remains.
package patient

import (
	"sync"
	"time"

	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// DeadlockDetectionTimeout replaces the SDK's 1 s: a workflow task of a test never
// needs it, a workflow that really blocks still fails, later.
const DeadlockDetectionTimeout = time.Minute

// TestTimeout replaces the testsuite's idle timeout (3 s of wall clock).
const TestTimeout = 5 * time.Minute

var warm sync.Once

// Warm computes the SDK's binary checksum, once per process, outside any workflow task.
func Warm() {
	warm.Do(func() { _ = (&workflow.Info{}).GetBinaryChecksum() })
}

// WorkerOptions returns worker options with these interceptors for a testsuite
// environment, after Warm.
func WorkerOptions(interceptors ...sdkinterceptor.WorkerInterceptor) worker.Options {
	Warm()
	return worker.Options{Interceptors: interceptors, DeadlockDetectionTimeout: DeadlockDetectionTimeout}
}

// Env sets env's idle timeout to TestTimeout and returns env.
func Env(env *testsuite.TestWorkflowEnvironment) *testsuite.TestWorkflowEnvironment {
	env.SetTestTimeout(TestTimeout)
	return env
}
