package faults_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"
	_ "modernc.org/sqlite"

	"github.com/idemgate/idemgate/activities"
	"github.com/idemgate/idemgate/integration/faults/faultwf"
	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/internal/testutil/pgtest"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/postgres"
	"github.com/idemgate/idemgate/store/sqlite"
	"github.com/idemgate/idemgate/vendorsim"
)

// outage runs a job mix on st while the store goes down and comes back: a sequence of
// writes already running, a read and one write of each kind started during the outage.
// Writes fail closed (IdempotencyStoreUnavailable, retryable) and reach no vendor while
// the store is down; reads run; after recovery every workflow finishes, no duplicate.
func outage(t *testing.T, st store.Store, down, up func()) {
	world, err := vendorsim.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer world.Close()
	tools, err := activities.New(activities.Endpoints{Docs: world.Docs.URL, CRM: world.CRM.URL, Tickets: world.Tickets.URL,
		Payments: world.Payments.URL, Email: world.Email.URL, Chat: world.Chat.URL})
	if err != nil {
		t.Fatal(err)
	}
	gate, err := interceptor.New(activities.GateOptions(st))
	if err != nil {
		t.Fatal(err)
	}
	c := server.GetDefaultClient()
	queue := fmt.Sprintf("outage-%s-%d", t.Name(), time.Now().UnixNano())
	w := worker.New(c, queue, worker.Options{Interceptors: []sdkinterceptor.WorkerInterceptor{gate}})
	w.RegisterWorkflow(faultwf.Job)
	w.RegisterWorkflow(faultwf.Sequence)
	w.RegisterActivity(tools)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := func(name string, wf any, in any) client.WorkflowRun {
		run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: queue + "-" + name, TaskQueue: queue,
			WorkflowExecutionTimeout: 3 * time.Minute}, wf, in)
		if err != nil {
			t.Fatal(err)
		}
		return run
	}
	const seqN = 20
	seq := start("sequence", faultwf.Sequence, faultwf.SequenceInput{Tool: "CreateTicket", N: seqN, Timeout: 3 * time.Second,
		ArgsTemplate: map[string]string{"subject": "outage %d", "requester": "o%d@example.com"}})
	waitFor(t, 30*time.Second, "5 tickets before the outage", func() bool { return world.Tickets.Records() >= 5 })

	down()
	t.Log("store down")
	read := start("read", faultwf.Job, faultwf.JobInput{Tool: "GetCustomer", Args: map[string]any{"customer_id": "cus_1"}, Timeout: 3 * time.Second})
	rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
	var got json.RawMessage
	if err := read.Get(rctx, &got); err != nil {
		t.Fatalf("a read during the outage: %v; reads must keep running", err)
	}
	rcancel()
	writes := map[string]faultwf.JobInput{
		"charge": {Tool: "ChargeCard", Args: map[string]any{"customer": "cus_outage", "amount": 500, "currency": "usd"}},
		"email":  {Tool: "SendEmail", Args: map[string]any{"to": "outage@example.com", "subject": "s", "body": "b"}},
		"upsert": {Tool: "UpsertContact", Args: map[string]any{"email": "outage@example.com", "name": "Outage"}},
		"ticket": {Tool: "CreateTicket", Args: map[string]any{"subject": "during the outage", "requester": "outage@example.com"}},
	}
	runs := map[string]client.WorkflowRun{}
	before := map[string]int{}
	for _, v := range world.Vendors() {
		before[v.Name] = v.Total()
	}
	for name, in := range writes {
		in.Timeout = 3 * time.Second
		runs[name] = start(name, faultwf.Job, in)
	}
	for name := range writes {
		waitFor(t, time.Minute, name+" failing closed with "+interceptor.ErrTypeStoreUnavailable, func() bool {
			d, err := c.DescribeWorkflowExecution(ctx, queue+"-"+name, "")
			if err != nil || len(d.GetPendingActivities()) == 0 {
				return false
			}
			f := d.GetPendingActivities()[0].GetLastFailure()
			return f.GetApplicationFailureInfo().GetType() == interceptor.ErrTypeStoreUnavailable &&
				!f.GetApplicationFailureInfo().GetNonRetryable()
		})
	}
	for _, v := range []*vendorsim.Vendor{world.Payments, world.Email, world.CRM} {
		if v.Total() != before[v.Name] {
			t.Fatalf("%s performed %d side effects while the store was down", v.Name, v.Total()-before[v.Name])
		}
	}

	up()
	t.Log("store up")
	for name, run := range runs {
		if err := run.Get(ctx, &got); err != nil {
			t.Fatalf("%s after recovery: %v", name, err)
		}
	}
	var n int
	if err := seq.Get(ctx, &n); err != nil || n != seqN {
		t.Fatalf("sequence after recovery: %d, %v", n, err)
	}
	for _, v := range world.Vendors() {
		if d := v.Duplicates(); len(d) > 0 {
			t.Errorf("%s: duplicates %v", v.Name, d)
		}
	}
	if world.Payments.Total() != 1 || world.Email.Total() != 1 || world.CRM.Records() != 1 || world.Tickets.Records() != seqN+1 {
		t.Fatalf("after recovery: payments %d, email %d, contacts %d, tickets %d; want 1, 1, 1, %d",
			world.Payments.Total(), world.Email.Total(), world.CRM.Records(), world.Tickets.Records(), seqN+1)
	}
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond) // poll interval, not a wait for an outcome
	}
}

// The SQLite file locked by another process's connection (BEGIN EXCLUSIVE) past the
// store's busy timeout.
func TestOutageSQLiteLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "idemgate.db")
	st, err := sqlite.OpenWith(context.Background(), path, sqlite.Options{BusyTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	locked := false
	outage(t, st, func() {
		if _, err := conn.ExecContext(context.Background(), "BEGIN EXCLUSIVE"); err != nil {
			t.Fatal(err)
		}
		locked = true
	}, func() {
		if _, err := conn.ExecContext(context.Background(), "ROLLBACK"); err != nil {
			t.Fatal(err)
		}
		locked = false
	})
	if locked {
		t.Fatal("still locked")
	}
}

// PostgreSQL stopped mid-run and started again. It runs in a child process on a
// private server (scripts/with-postgres.sh once more), so the shared server other
// packages' tests use never goes down.
func TestOutagePostgres(t *testing.T) {
	postgresDSN(t)
	pgtest.RunOnPrivateServer(t, filepath.Join("..", ".."), "TestOutagePostgresChild")
}

func TestOutagePostgresChild(t *testing.T) {
	pgctl := pgtest.PrivateServer(t, "TestOutagePostgres")
	st, err := postgres.OpenWith(context.Background(), postgresDSN(t), postgres.Options{ConnectTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctl := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(pgctl, args...).CombinedOutput(); err != nil {
			t.Fatalf("pg_ctl %v: %v\n%s", args, err, out)
		}
	}
	running := true
	t.Cleanup(func() {
		if !running {
			_ = exec.Command(pgctl, "start").Run()
		}
	})
	outage(t, st, func() { ctl("stop", "-m", "fast"); running = false }, func() { ctl("start"); running = true })
}
