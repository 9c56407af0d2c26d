package console

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.temporal.io/server/temporaltest"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/internal/testutil/pgtest"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/postgres"
)

// The browser tests drive Debian's chromium (scripts/chromium.sh installs it) with
// chromedp against the console on a real store, with workers on the in-process
// Temporal server. Without chromium they skip, except under CI=true.

var (
	serverOnce sync.Once
	tserver    *temporaltest.TestServer
)

func TestMain(m *testing.M) {
	code := m.Run()
	if tserver != nil {
		tserver.Stop()
	}
	os.Exit(code)
}

func temporalClient(t *testing.T) client.Client {
	t.Helper()
	serverOnce.Do(func() {
		quiet := log.NewStructuredLogger(slog.New(slog.DiscardHandler))
		tserver = temporaltest.NewServer(temporaltest.WithBaseClientOptions(client.Options{Logger: quiet}))
	})
	return tserver.GetDefaultClient()
}

// chromium finds the browser: $CHROMIUM, else chromium or chromium-browser on PATH.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	for _, n := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is missing under CI=true: run scripts/chromium.sh (it installs Debian's chromium) or set CHROMIUM")
	}
	t.Skip("chromium is missing: scripts/chromium.sh installs it (or set CHROMIUM); the console's browser tests skip")
	return ""
}

// newBrowser starts a headless chromium for the test and returns its tab.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	path := chromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 900), chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx)
	if err := chromedp.Do(ctx); err != nil { // start the browser without a timeout (see chromedp.Run)
		cancelC()
		cancelA()
		t.Fatalf("start chromium %s: %v", path, err)
	}
	t.Cleanup(func() { cancelC(); cancelA() })
	return ctx
}

// do runs browser actions under a generous deadline.
func do(t *testing.T, tab context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, 2*time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func run[T any](t *testing.T, tab context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, 2*time.Minute)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// screenshot saves the tab into docs/console/NAME.png when IDEMGATE_SCREENSHOTS is
// set (the docs' pictures are made this way; ordinary runs leave docs alone).
func screenshot(t *testing.T, tab context.Context, name string) {
	t.Helper()
	if os.Getenv("IDEMGATE_SCREENSHOTS") == "" {
		return
	}
	png := run(t, tab, "screenshot "+name, chromedp.FullScreenshot(100))
	dir := filepath.Join("..", "docs", "console")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// eachStore runs fn on SQLite and, with IDEMGATE_POSTGRES_DSN (scripts/with-postgres.sh),
// on PostgreSQL; without it the PostgreSQL run skips, except under CI=true.
func eachStore(t *testing.T, fn func(t *testing.T, st store.Store)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, sqliteStore(t)) })
	t.Run("postgres", func(t *testing.T) {
		dsn := pgtest.DSN(t, "./console/")
		st, err := postgres.Open(context.Background(), pgtest.Schema(t, dsn, "idemgate_console"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		fn(t, st)
	})
}

// Charge is the destructive write of the browser tests.
type Charge struct {
	Customer string `json:"customer"`
	Amount   int    `json:"amount"`
}

// card is a card processor that counts charges and can hold one mid-charge.
type card struct {
	charges atomic.Int32
	// hold, when set, makes the first attempt charge and then wait until its
	// worker stops (the answer never leaves); it receives once when the charge is made.
	hold chan struct{}
}

func (c *card) ChargeCard(ctx context.Context, in Charge) (string, error) {
	n := c.charges.Add(1)
	if c.hold != nil && activity.GetInfo(ctx).Attempt == 1 {
		c.hold <- struct{}{}
		<-ctx.Done() // mid-charge: the worker is stopped before the answer
		return "", ctx.Err()
	}
	return fmt.Sprintf("ch_%d", n), nil
}

// ChargeOnce charges once and returns the charge ID.
func ChargeOnce(ctx workflow.Context, in Charge) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 3 * time.Second,
		ScheduleToCloseTimeout: 5 * time.Minute,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: 200 * time.Millisecond, BackoffCoefficient: 1, MaximumInterval: time.Second}})
	var id string
	err := workflow.ExecuteActivity(ctx, "ChargeCard", in).Get(ctx, &id)
	return id, err
}

type rig struct {
	t     *testing.T
	c     client.Client
	gate  sdkinterceptor.WorkerInterceptor
	card  *card
	queue string
	w     worker.Worker
}

func newRig(t *testing.T, st store.Store, c *card) *rig {
	t.Helper()
	gate, err := interceptor.New(interceptor.Options{Store: st, HoldUnknown: 500 * time.Millisecond, PauseRefresh: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, c: temporalClient(t), gate: gate, card: c, queue: fmt.Sprintf("console-%d", time.Now().UnixNano())}
	r.startWorker()
	t.Cleanup(func() {
		if r.w != nil {
			r.w.Stop()
		}
	})
	return r
}

func (r *rig) startWorker() {
	w := worker.New(r.c, r.queue, worker.Options{Interceptors: []sdkinterceptor.WorkerInterceptor{r.gate},
		WorkerStopTimeout: 200 * time.Millisecond})
	w.RegisterWorkflow(ChargeOnce)
	w.RegisterActivity(r.card)
	if err := w.Start(); err != nil {
		r.t.Fatal(err)
	}
	r.w = w
}

func (r *rig) start(id string, in Charge) (client.WorkflowRun, chan error, *string) {
	r.t.Helper()
	run, err := r.c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: id, TaskQueue: r.queue,
		WorkflowExecutionTimeout: 5 * time.Minute}, ChargeOnce, in)
	if err != nil {
		r.t.Fatal(err)
	}
	done := make(chan error, 1)
	var out string
	go func() { done <- run.Get(context.Background(), &out) }()
	return run, done, &out
}

func wait(t *testing.T, what string, done chan error) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(3 * time.Minute):
		t.Fatalf("%s: not within 3 minutes", what)
	}
}

// A charge made while its worker is stopped mid-call shows on the page as a
// blocked write; settling it there as sent lets the workflow finish with the
// result the person gave, and the card is charged once.
func TestConsoleBrowserSettlesAChargeStoppedMidCall(t *testing.T) {
	eachStore(t, func(t *testing.T, st store.Store) {
		tab := newBrowser(t)
		c := &card{hold: make(chan struct{}, 1)}
		r := newRig(t, st, c)
		s := serve(t, st, Options{Now: time.Now, Refresh: 300 * time.Millisecond, TemporalUIBase: "http://localhost:8233"})
		wid := fmt.Sprintf("charge-%d", time.Now().UnixNano())
		_, done, out := r.start(wid, Charge{Customer: "cus_7", Amount: 19900})
		select {
		case <-c.hold:
		case err := <-done:
			t.Fatalf("the workflow ended before the charge: %v", err)
		case <-time.After(2 * time.Minute):
			t.Fatal("the charge did not start within 2 minutes")
		}
		do(t, tab, "open the page before the worker stops", chromedp.Navigate(s.srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#live")))
		r.w.Stop() // mid-charge: the answer never leaves
		r.w = nil
		r.startWorker()
		// The page refreshes itself: the blocked write appears without a reload.
		do(t, tab, "the blocked write appears", chromedp.WaitVisible(chromedp.CSS(`section.blocked a.mono`)))
		text := run(t, tab, "read the card", chromedp.Text(chromedp.CSS(`section.blocked`)))
		for _, want := range []string{"ChargeCard", wid, `ChargeCard([{"amount":19900,"customer":"cus_7"}])`, "open in the Temporal UI"} {
			if !strings.Contains(text, want) {
				t.Errorf("the blocked write's card lacks %q:\n%s", want, text)
			}
		}
		screenshot(t, tab, "blocked")
		do(t, tab, "open the key's page", chromedp.Click(chromedp.CSS(`section.blocked a.mono`)), chromedp.WaitVisible(chromedp.CSS(`#settle-sent`)))
		screenshot(t, tab, "key")
		if got := c.charges.Load(); got != 1 {
			t.Fatalf("charges %d before settling, want 1", got)
		}
		do(t, tab, "settle as sent",
			chromedp.SendKeys(chromedp.CSS(`#settle-sent textarea[name=result]`), `"ch_from_dashboard"`),
			chromedp.SendKeys(chromedp.CSS(`#settle-sent input[name=reason]`), "the processor's dashboard shows the charge"),
			chromedp.Click(chromedp.CSS(`#settle-sent button`)),
			chromedp.WaitVisible(chromedp.CSS(`#done`)))
		msg := run(t, tab, "read the result", chromedp.Text(chromedp.CSS(`#done`)))
		if !strings.Contains(msg, "as sent by console") {
			t.Fatalf("after settling: %s", msg)
		}
		wait(t, "the workflow finishes once settled", done)
		if *out != "ch_from_dashboard" || c.charges.Load() != 1 {
			t.Fatalf("the workflow returned %q after %d charge(s); want the settled result after 1", *out, c.charges.Load())
		}
		rs, _ := st.Receipts(context.Background(), store.ReceiptFilter{WorkflowID: wid, Decision: store.DecisionResolved})
		if len(rs) != 1 || rs[0].Actor != "console" || rs[0].Resolution != store.ResolvedSent {
			t.Fatalf("resolution receipts %+v", rs)
		}
		do(t, tab, "the workflow's page", chromedp.Navigate(s.srv.URL+"/workflow?id="+wid), chromedp.WaitVisible(chromedp.CSS(`table.writes`)))
		screenshot(t, tab, "workflow")
	})
}

// A pause set on the page stops the write (the workers refuse it) and resuming it
// on the page lets it go.
func TestConsoleBrowserPauseStopsAWriteAndResumeLetsItGo(t *testing.T) {
	eachStore(t, func(t *testing.T, st store.Store) {
		tab := newBrowser(t)
		c := &card{}
		r := newRig(t, st, c)
		s := serve(t, st, Options{Now: time.Now, Refresh: 300 * time.Millisecond})
		do(t, tab, "pause ChargeCard",
			chromedp.Navigate(s.srv.URL+"/pauses"),
			chromedp.SendKeys(chromedp.CSS(`#pause-activity input[name=activity]`), "ChargeCard"),
			chromedp.SendKeys(chromedp.CSS(`#pause-activity input[name=reason]`), "card network incident"),
			chromedp.Click(chromedp.CSS(`#pause-activity button`)),
			chromedp.WaitVisible(chromedp.CSS(`#done`)))
		wid := fmt.Sprintf("paused-%d", time.Now().UnixNano())
		_, done, out := r.start(wid, Charge{Customer: "cus_9", Amount: 500})
		deadline := time.Now().Add(2 * time.Minute)
		for {
			rs, err := st.Receipts(context.Background(), store.ReceiptFilter{WorkflowID: wid, Decision: store.DecisionGated})
			if err != nil {
				t.Fatal(err)
			}
			if len(rs) > 0 {
				if !strings.Contains(rs[0].Error, "card network incident") {
					t.Errorf("the refusal does not quote the pause: %s", rs[0].Error)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the paused write was not refused within 2 minutes")
			}
			time.Sleep(50 * time.Millisecond) // polling the store for a condition, not a synchronisation by time
		}
		if n := c.charges.Load(); n != 0 {
			t.Fatalf("%d charge(s) while paused", n)
		}
		do(t, tab, "the pause is listed", chromedp.Navigate(s.srv.URL+"/pauses"), chromedp.WaitVisible(chromedp.CSS(`table.pauses form.resume button`)))
		screenshot(t, tab, "pauses")
		do(t, tab, "resume", chromedp.Click(chromedp.CSS(`table.pauses form.resume button`)), chromedp.WaitVisible(chromedp.CSS(`#done`)))
		wait(t, "the workflow finishes once resumed", done)
		if *out != "ch_1" || c.charges.Load() != 1 {
			t.Fatalf("after resume: %q, %d charge(s)", *out, c.charges.Load())
		}
	})
}

// Arguments and errors are text from outside: a <script> in them, an event handler
// or terminal escapes render as visible text, and nothing of them runs — neither on
// load nor when the page refreshes itself.
func TestConsoleBrowserRendersHostileTextInert(t *testing.T) {
	eachStore(t, func(t *testing.T, st store.Store) {
		tab := newBrowser(t)
		args := []byte(`[{"customer":"<script>window.pwned=1</script>","note":"<img src=x onerror=\"window.pwned=2\">\u001b]0;owned\u0007"}]`)
		seedUnknown(t, st, "k-hostile", args, hostile)
		s := serve(t, st, Options{Refresh: 200 * time.Millisecond})
		for _, p := range []string{"/", "/key?k=k-hostile"} {
			do(t, tab, "open "+p, chromedp.Navigate(s.srv.URL+p), chromedp.WaitVisible(chromedp.CSS(`pre.earlier`)))
			// Wait until the page has refreshed itself at least once (the script ran, under the CSP).
			run(t, tab, "a refresh", chromedp.Poll[bool](`document.getElementById("refreshed").textContent.startsWith("refreshed")`))
			if pwned := run(t, tab, "read window.pwned", chromedp.Evaluate[string](`String(window.pwned)`)); pwned != "undefined" {
				t.Fatalf("%s: a script from the store ran: window.pwned = %s", p, pwned)
			}
			if n := run(t, tab, "count images", chromedp.Evaluate[int](`document.images.length`)); n != 0 {
				t.Errorf("%s: an <img> from the store was rendered", p)
			}
			earlier := run(t, tab, "read the error", chromedp.Text(chromedp.CSS(`pre.earlier`)))
			argsText := run(t, tab, "read the arguments", chromedp.Text(chromedp.CSS(`pre.args`)))
			for _, want := range []string{`<script>window.pwned=1</script>`, `\x1b]0;owned\x07`, `\x1b[2J`, `\u202eevil`} {
				if !strings.Contains(earlier, want) {
					t.Errorf("%s: the error does not show %q as text: %q", p, want, earlier)
				}
			}
			for _, want := range []string{`<script>window.pwned=1</script>`, `\u001b]0;owned\u0007`} {
				if !strings.Contains(argsText, want) {
					t.Errorf("%s: the arguments do not show %q as text: %q", p, want, argsText)
				}
			}
			if strings.ContainsAny(earlier+argsText, "\x1b\x07\u202e") {
				t.Errorf("%s: a control character reached the page raw", p)
			}
		}
		screenshot(t, tab, "hostile")
	})
}
