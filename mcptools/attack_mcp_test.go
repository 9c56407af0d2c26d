package mcptools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/workflow"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/internal/attempt"
	"github.com/idemgate/idemgate/internal/testutil/patient"
	"github.com/idemgate/idemgate/mcptools"
	"github.com/idemgate/idemgate/store/memory"
)

// refusedPosts sends, once on, every POST to a closed loopback port (the dial is
// refused: nothing leaves), the rest (the session's GET stream) to the server.
type refusedPosts struct{ on atomic.Bool }

func (r *refusedPosts) RoundTrip(req *http.Request) (*http.Response, error) {
	if r.on.Load() && req.Method == http.MethodPost {
		c := req.Clone(req.Context())
		c.URL.Host, c.Host = "127.0.0.1:1", ""
		return http.DefaultTransport.RoundTrip(c)
	}
	return http.DefaultTransport.RoundTrip(req)
}

// dialRefusedCall dials s over streamable HTTP at its URL plus suffix, makes the
// next tools/call's dial be refused, and calls send_payment.
func dialRefusedCall(t *testing.T, s *testServer, suffix string) (*attempt.State, error) {
	t.Helper()
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.srv }, nil))
	t.Cleanup(hs.Close)
	rt := &refusedPosts{}
	tr := &mcp.StreamableClientTransport{Endpoint: hs.URL + "/mcp" + suffix, MaxRetries: -1, HTTPClient: &http.Client{Transport: rt}}
	b, err := mcptools.Dial(context.Background(), "pay", tr, mcptools.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Session().Close() })
	rt.on.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st := &attempt.State{Key: "k-" + t.Name()}
	_, err = b.Call(attempt.NewContext(ctx, st), "mcp.pay.send_payment", map[string]any{"amount": 5})
	if err == nil {
		t.Fatal("the call succeeded with its dial refused")
	}
	return st, err
}

// TestCallErrorHidesCredentials: the URL's credentials must not reach a tool
// activity's error (stored in Temporal's history, printed by the worker) or the
// gate's observation (in the receipt) when a call fails after Dial.
func TestCallErrorHidesCredentials(t *testing.T) {
	const pw = "Zq7-CALLPW"
	s := newTestServer(t, nil, toolSpec{name: "send_payment"})
	for _, suffix := range []string{"?access_token=" + pw, "?api_key=" + pw, "?sig=" + pw} {
		st, err := dialRefusedCall(t, s, suffix)
		if strings.Contains(err.Error(), pw) {
			t.Errorf("%s: the call's error shows the credential: %v", suffix, err)
		}
		for _, o := range st.Observations() {
			if strings.Contains(o.Detail, pw) {
				t.Errorf("%s: the observation shows the credential: %q", suffix, o.Detail)
			}
		}
	}
	if _, n := s.seen(); n["send_payment"] != 0 {
		t.Errorf("the tool ran %d times with every dial refused", n["send_payment"])
	}
}

// TestRefusedDialIsNotSent: a tools/call whose connection was refused never left
// this process. Read as unknown, a destructive tool called while its server
// restarts is refused for good (idemgate resolve) although nothing happened.
func TestRefusedDialIsNotSent(t *testing.T) {
	s := newTestServer(t, nil, toolSpec{name: "send_payment"})
	st, err := dialRefusedCall(t, s, "")
	obs := st.Observations()
	if len(obs) != 1 || !obs[0].Outcome.Definite() {
		t.Errorf("observations %+v (error %v); want one definite (not sent)", obs, err)
	}
	if _, n := s.seen(); n["send_payment"] != 0 {
		t.Errorf("the tool ran %d times with its dial refused", n["send_payment"])
	}
}

// TestDedupCodesFromAServerWithoutDedup: CodeConflict and CodeInFlight are Dedup's
// answers, but -32041 and -32040 are implementation-defined codes any server may use
// for its own errors. A bridge whose server does not run Dedup (no DedupWindow)
// read a handler's -32041 after it acted as "key used with other arguments", a
// definite outcome: the gate released the key and the same write (the same business
// key, a workflow that tries again) was sent a second time.
func TestDedupCodesFromAServerWithoutDedup(t *testing.T) {
	for _, code := range []int64{mcptools.CodeConflict, mcptools.CodeInFlight} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			s := newTestServer(t, nil, toolSpec{name: "send_payment",
				handle: failAfterActing(&jsonrpc.Error{Code: code, Message: "ledger replica lagging"})})
			b, err := mcptools.Dial(context.Background(), "pay", s.inMemory(t), mcptools.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Session().Close()
			o := interceptor.Options{Store: memory.New()}
			b.Apply(&o)
			gate, err := interceptor.New(o)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 2 {
				env := patient.Env(quietSuite().NewTestWorkflowEnvironment())
				env.SetWorkerOptions(patient.WorkerOptions(gate))
				env.RegisterWorkflowWithOptions(keyedCall, workflow.RegisterOptions{Name: "keyed"})
				b.Register(env)
				env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: fmt.Sprint("run-", i), TaskQueue: "q"})
				env.ExecuteWorkflow("keyed", "mcp.pay.send_payment", "order-4217/payment", json.RawMessage(`{"amount":5}`))
				if env.GetWorkflowError() == nil {
					t.Fatalf("run %d succeeded", i)
				}
			}
			if _, n := s.seen(); n["send_payment"] != 1 {
				t.Errorf("the tool acted %d times under one key; want 1 (its error came after it acted)", n["send_payment"])
			}
		})
	}
}
