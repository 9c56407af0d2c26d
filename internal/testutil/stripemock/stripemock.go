// Package stripemock starts stripe-mock (Stripe's OpenAPI-validating mock server) for a
// test. stripe-mock reflects the Idempotency-Key it received in the response header of the
// same name and does not deduplicate.
package stripemock

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// Version is the stripe-mock the project tests against.
const Version = "v0.203.0"

// Install is the command that installs it (scripts/stripe-mock.sh runs it when missing).
const Install = "go install github.com/stripe/stripe-mock@" + Version

// Binary returns the path of the stripe-mock binary: $STRIPE_MOCK, PATH, then
// $(go env GOBIN) and $(go env GOPATH)/bin.
func Binary() (string, error) {
	if p := os.Getenv("STRIPE_MOCK"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("idemgate/internal/testutil/stripemock: STRIPE_MOCK=%s: %w; install it: %s", p, err, Install)
		}
		return p, nil
	}
	if p, err := exec.LookPath("stripe-mock"); err == nil {
		return p, nil
	}
	if out, err := exec.Command("go", "env", "GOBIN", "GOPATH").Output(); err == nil {
		lines := bytes.SplitN(bytes.TrimSpace(out), []byte("\n"), 2)
		dirs := []string{string(bytes.TrimSpace(lines[0]))}
		if len(lines) == 2 {
			for _, gopath := range filepath.SplitList(string(bytes.TrimSpace(lines[1]))) {
				dirs = append(dirs, filepath.Join(gopath, "bin"))
			}
		}
		for _, dir := range dirs {
			p := filepath.Join(dir, "stripe-mock")
			if _, err := os.Stat(p); dir != "" && err == nil {
				return p, nil
			}
		}
	}
	return "", fmt.Errorf("idemgate/internal/testutil/stripemock: stripe-mock not found in $STRIPE_MOCK, PATH or $(go env GOPATH)/bin; install it: %s (or run scripts/stripe-mock.sh)", Install)
}

// Start runs stripe-mock on a free loopback port until the test ends and returns its base
// URL once it answers. Without the binary the test is skipped, except under CI=true,
// where it fails.
func Start(t testing.TB) string {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	// -https-addr too: given only -http-addr, stripe-mock also listens for HTTPS on its
	// default port 12112, so a second stripe-mock on the machine (another package's
	// tests, another run) failed to start.
	cmd := exec.CommandContext(ctx, bin, "-http-addr", "127.0.0.1:"+strconv.Itoa(port), "-https-addr", "127.0.0.1:0")
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start %s: %v", bin, err)
	}
	// exited is closed when the process ended (waitErr says how): a channel of one
	// value, read by the loop below, left the cleanup waiting for ever.
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cancel()
		<-exited
	})

	url := "http://127.0.0.1:" + strconv.Itoa(port)
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		req, _ := http.NewRequest(http.MethodGet, url+"/v1/balance", nil)
		req.Header.Set("Authorization", "Bearer sk_test_123")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return url
			}
		}
		select {
		case <-exited:
			t.Fatalf("stripe-mock exited before answering: %v\n%s", waitErr, logs.String())
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			t.Fatalf("stripe-mock did not answer on %s within 30s\n%s", url, logs.String())
		}
	}
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
