package idemhttp_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/attempt"
)

// activityKey is what the gate would put in the context: a UUID, the same on every attempt.
const activityKey = "5f0c8a4e-3b1d-4c2e-9f6a-7b8c9d0e1f2a"

var firstClaimed = time.Date(2026, 11, 29, 9, 30, 0, 0, time.UTC)

// seen is one request as the server received it.
type seen struct {
	Method string
	Path   string
	Query  url.Values
	Header http.Header
	Body   []byte
}

// vendor is an httptest server that records what arrived and answers with reply.
type vendor struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []seen
}

func newVendor(t *testing.T, reply http.HandlerFunc) *vendor {
	t.Helper()
	v := &vendor{}
	v.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		v.mu.Lock()
		v.reqs = append(v.reqs, seen{r.Method, r.URL.Path, r.URL.Query(), r.Header.Clone(), body})
		v.mu.Unlock()
		if reply != nil {
			reply(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"obj_1"}`)
	}))
	t.Cleanup(v.Close)
	return v
}

func (v *vendor) requests() []seen {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]seen(nil), v.reqs...)
}

// gated returns a context carrying a fresh attempt, as the gate would set it up.
func gated(key, effect string, retry bool) (context.Context, *attempt.State) {
	st := &attempt.State{Key: key, Activity: "ChargeCard", Effect: effect, FirstClaimed: firstClaimed, Retry: retry}
	return attempt.NewContext(context.Background(), st), st
}

func post(t *testing.T, ctx context.Context, c *http.Client, rawURL, body string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rawURL, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err == nil {
		t.Cleanup(func() { resp.Body.Close() })
	}
	return resp, err
}

// onlyObservation returns the attempt's single observation.
func onlyObservation(t *testing.T, st *attempt.State) attempt.Observation {
	t.Helper()
	obs := st.Observations()
	if len(obs) != 1 {
		t.Fatalf("observations = %+v, want exactly one", obs)
	}
	return obs[0]
}
