package faults_test

import (
	"context"
	"testing"
	"time"

	"github.com/idemgate/idemgate/integration/faults"
)

// TestFaultMatrix kills a worker process with SIGKILL at each boundary of each kind of
// write, on each store, -trials times, and fails on a duplicate of a destructive or
// vendor-keyed write, a lost write, a refusal without its withheld call, a wrong
// settlement, or fewer than 90 % of the unknown outcomes settled without a person
// where a witness exists.
func TestFaultMatrix(t *testing.T) {
	for _, st := range faults.Stores {
		t.Run(st, func(t *testing.T) {
			e := env(t)
			if st == "postgres" {
				dsn, drop, err := faults.PostgresSchema(context.Background(), postgresDSN(t))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(drop)
				e.PostgresDSN = dsn
			}
			ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
			defer cancel()
			start := time.Now()
			res := e.RunMatrix(ctx, faults.Cells([]string{st}), *trials, *parallel, nil)
			t.Logf("%d trials per cell in %s\n%s\n%s", *trials, time.Since(start).Round(time.Second), faults.Markdown(res), faults.SharesMarkdown(res))
			for _, v := range faults.Violations(res) {
				t.Error(v)
			}
		})
	}
}
