package faults_test

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/idemgate/idemgate/integration/faults"
	"github.com/idemgate/idemgate/store"
)

// TestFaultMatrix kills a worker process with SIGKILL at each boundary of each kind of
// write, on each store, -trials times, and fails on a duplicate of a destructive or
// vendor-keyed write, a lost write, a refusal without its withheld call, a wrong
// settlement, or fewer than 90 % of the unknown outcomes settled without a person
// where a witness exists. A trial whose held write a witness will settle "not sent"
// once its answer counts (lease + store.LeaseMargin) ends when that retry is
// scheduled (faults.Env.Scheduled); -wait-not-sent really waits for it.
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
			limit := 12 * time.Minute
			if *wait {
				limit += 2 * store.LeaseMargin * time.Duration(*trials)
			}
			ctx, cancel := context.WithTimeout(context.Background(), limit)
			defer cancel()
			var cells []faults.Cell
			for _, c := range faults.Cells([]string{st}) {
				if *cellsRE == "" || regexp.MustCompile(*cellsRE).MatchString(fmt.Sprintf("%s/b%d/%s", c.Store, c.Boundary.N, c.Tool.Name)) {
					cells = append(cells, c)
				}
			}
			start := time.Now()
			res := e.RunMatrix(ctx, cells, *trials, *parallel, nil)
			t.Logf("%d trials per cell in %s\n%s\n%s", *trials, time.Since(start).Round(time.Second), faults.Markdown(res), faults.SharesMarkdown(res))
			for _, v := range faults.Violations(res) {
				t.Error(v)
			}
		})
	}
}
