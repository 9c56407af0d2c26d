package faults_test

import (
	"context"
	"flag"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/server/temporaltest"

	"github.com/idemgate/idemgate/integration/faults"
	"github.com/idemgate/idemgate/internal/testutil/pgtest"
)

var (
	trials   = flag.Int("trials", 3, "trials per cell of the fault matrix (the documented report uses 20: go run ./integration/faults/faultreport)")
	parallel = flag.Int("parallel", 8, "trials run at once")
	wait     = flag.Bool("wait-not-sent", false, "really wait (lease + store.LeaseMargin, 5 min) for a witness's early not-sent to count, "+
		"instead of ending the trial once its retry is scheduled then (faults.Env.Scheduled)")
	cellsRE = flag.String("cells", "", "run only the matrix cells whose \"store/bN/tool\" matches this regexp (e.g. 'b2/ChargeCard')")
)

var server *temporaltest.TestServer

func TestMain(m *testing.M) {
	flag.Parse()
	quiet := log.NewStructuredLogger(slog.New(slog.DiscardHandler))
	server = temporaltest.NewServer(temporaltest.WithBaseClientOptions(client.Options{Logger: quiet}))
	code := m.Run()
	server.Stop()
	os.Exit(code)
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	buildDir  string
)

// workerBin builds the worker process with the kill seam once per test run.
func workerBin(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "idemgate-faults-bin")
		if buildErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		binPath, buildErr = faults.BuildWorker(ctx, buildDir, true)
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// postgresDSN returns the test server's DSN, or skips (t.Fatal when CI=true).
func postgresDSN(t *testing.T) string { return pgtest.DSN(t, "./integration/faults/") }

func env(t *testing.T) *faults.Env {
	return &faults.Env{HostPort: server.GetFrontendHostPort(), Namespace: server.GetDefaultNamespace(),
		Client: server.GetDefaultClient(), Bin: workerBin(t), Dir: t.TempDir(), Scheduled: !*wait}
}
