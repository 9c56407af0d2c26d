package faults_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/integration/faults"
)

var (
	prodOnce sync.Once
	prodBin  string
	prodErr  error
)

// productionBin builds the worker process without the kill seam (the price's build)
// once per test run.
func productionBin(t *testing.T) string {
	t.Helper()
	prodOnce.Do(func() {
		dir, err := os.MkdirTemp("", "idemgate-faults-prod")
		if err != nil {
			prodErr = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		prodBin, prodErr = faults.BuildWorker(ctx, dir, false)
	})
	if prodErr != nil {
		t.Fatal(prodErr)
	}
	return prodBin
}

// The price run profiles exactly the workflows it measures (issue 21: where a gated
// worker's CPU goes): one CPU profile per measured workflow and configuration, named
// for its tool and kind, none for the warm-up; the selection narrows the run to the
// named tools and kinds; and every row carries the worker's context switches.
func TestPriceProfilesTheMeasuredWorkflows(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	profiles := filepath.Join(dir, "profiles")
	o := faults.PriceOptions{HostPort: server.GetFrontendHostPort(), Namespace: server.GetDefaultNamespace(),
		Client: server.GetDefaultClient(), Bin: productionBin(t), N: 5, Rounds: 2,
		Stores:     []faults.PriceStore{{Name: "sqlite", Spec: filepath.Join(dir, "price.db")}},
		ProfileDir: profiles, ProfileWindows: true, Tools: []string{"GetCustomer"}, Kinds: []string{"local"}}
	res, err := faults.Price(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 1 || res.Rows[0].Tool != "GetCustomer" || !res.Rows[0].Local || res.Rows[0].Store != "sqlite" {
		t.Fatalf("rows = %+v, want one: GetCustomer, local, sqlite", res.Rows)
	}
	if r := res.Rows[0]; r.BareSwitches <= 0 || r.GateSwitches <= 0 {
		t.Errorf("context switches per activity: bare %v, gated %v; want both read from the workers' getrusage", r.BareSwitches, r.GateSwitches)
	}
	for _, cfg := range []string{"bare", "sqlite"} {
		files, err := filepath.Glob(filepath.Join(profiles, cfg, "*.pprof"))
		if err != nil {
			t.Fatal(err)
		}
		// Two rounds, one measured workflow each; the warm-up is not profiled.
		if len(files) != 2 {
			t.Fatalf("%s: profiles %v, want 2 (one per measured workflow, none for the warm-up)", cfg, files)
		}
		for _, f := range files {
			if !strings.HasPrefix(filepath.Base(f), "GetCustomer-local-window-") {
				t.Errorf("%s: profile %s not named for its tool and kind", cfg, f)
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) { // a pprof profile is gzipped protobuf
				t.Errorf("%s: %s is not a written profile (%d bytes)", cfg, f, len(b))
			}
		}
	}
	if _, err := faults.Price(ctx, faults.PriceOptions{HostPort: o.HostPort, Namespace: o.Namespace, Client: o.Client,
		Bin: o.Bin, Tools: []string{"NoSuchTool"}}); err == nil || !strings.Contains(err.Error(), "NoSuchTool") {
		t.Errorf("an unknown tool: err = %v, want one naming it", err)
	}
}
