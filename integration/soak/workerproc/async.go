package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/idemgate/idemgate/idemhttp"
	"github.com/idemgate/idemgate/interceptor"
)

// AsyncTool is the activity name of the tool that completes asynchronously.
const AsyncTool = "ChargeCardAsync"

// asyncCharger is ChargeCardAsync: a charge whose activity hands its task token (and
// the gate's key and owner, interceptor.AsyncToken) to a completer goroutine and
// returns activity.ErrResultPending. The completer waits a moment (so that a SIGKILL
// of the worker can land between the hand-off and the charge, or between the charge
// and its completion; a graceful stop waits for the completers, see wait), charges the card processor with the key (Stripe-style, as
// idemhttp.Stripe forwards it: the processor's lookup, ChargeCard's witness, answers
// for it too), and completes through interceptor.CompleteAsync: the outcome stored
// under the key first, then client.CompleteActivity.
type asyncCharger struct {
	payments string // the processor's base URL
	complete interceptor.AsyncCompleter
	opts     interceptor.Options // the worker's gate options (Store, DataConverter, Now)
	gated    bool
	http     *http.Client
	log      *slog.Logger
	running  sync.WaitGroup // the completers
}

// wait waits, up to d, for the completers still running (a graceful stop lets them
// finish; a SIGKILL does not).
func (a *asyncCharger) wait(d time.Duration) {
	done := make(chan struct{})
	go func() {
		a.running.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(d):
		a.log.Warn("soak: ChargeCardAsync: stopping with completers still running")
	}
}

// ChargeCardAsync hands the charge to a completer and returns ErrResultPending.
func (a *asyncCharger) ChargeCardAsync(ctx context.Context, args map[string]any) (json.RawMessage, error) {
	h, err := interceptor.AsyncToken(ctx)
	if err != nil {
		return nil, interceptor.NotCommitted(err)
	}
	body, err := json.Marshal(args)
	if err != nil {
		return nil, interceptor.NotCommitted(temporal.NewNonRetryableApplicationError("soak: ChargeCardAsync: encode: "+err.Error(), "BadRequest", nil))
	}
	a.running.Go(func() { a.completer(h, body, time.Duration(rand.IntN(1000))*time.Millisecond) })
	return nil, activity.ErrResultPending
}

func (a *asyncCharger) completer(h interceptor.HandOff, body []byte, delay time.Duration) {
	time.Sleep(delay) // workload timing, not synchronisation: a kill may land here
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	result, cause := a.charge(ctx, h, body)
	var err error
	if a.gated {
		err = interceptor.CompleteAsync(ctx, a.complete, a.opts, h, result, cause)
	} else {
		err = a.complete.CompleteActivity(ctx, h.TaskToken, result, cause)
	}
	if err != nil {
		a.log.Warn("soak: ChargeCardAsync: completion failed", "key", h.Key, "attempt", h.Attempt, "error", err)
	}
}

// charge sends the charge with the hand-off's key: the vendor's answer, or an error
// (NotCommitted when the processor rejected it: nothing was charged).
func (a *asyncCharger) charge(ctx context.Context, h interceptor.HandOff, body []byte) (json.RawMessage, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.payments+"/v1/charges", bytes.NewReader(body))
	if err != nil {
		return nil, interceptor.NotCommitted(temporal.NewNonRetryableApplicationError("soak: ChargeCardAsync: "+err.Error(), "BadRequest", nil))
	}
	req.Header.Set("Content-Type", "application/json")
	if h.Key != "" {
		vk, err := idemhttp.Stripe.VendorKey(h.Key)
		if err != nil {
			return nil, interceptor.NotCommitted(temporal.NewNonRetryableApplicationError("soak: ChargeCardAsync: "+err.Error(), "BadRequest", nil))
		}
		req.Header.Set("Idempotency-Key", vk)
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("soak: ChargeCardAsync: %w", err) // may have reached the processor: unknown
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	switch {
	case err != nil:
		return nil, fmt.Errorf("soak: ChargeCardAsync: reading the answer: %w", err)
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return json.RawMessage(raw), nil
	case resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != http.StatusConflict &&
		resp.StatusCode != http.StatusTooManyRequests:
		return nil, interceptor.NotCommitted(temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("soak: ChargeCardAsync: the processor rejected the charge (%d): %s", resp.StatusCode, raw), "VendorRejected", nil))
	default:
		return nil, fmt.Errorf("soak: ChargeCardAsync: the processor answered %d: %s", resp.StatusCode, raw)
	}
}
