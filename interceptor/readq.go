package interceptor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/client"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"

	"github.com/idemgate/idemgate/store"
)

// The read receipt queue. Under store.DurabilityClaim a read writes nothing on the
// activity's path: its receipt (stamped with the read's time) is queued here and a
// flusher appends the queued receipts in batches (store.AppendReceipts: one
// transaction, one round trip) at most readFlushEvery after the first of them was
// queued, at once when a batch is full, and when the gate is flushed (Flush, the
// plugin's StopWorker). A crash of the process loses at most the receipts still
// queued — reads that ran, never a claim or a write's receipt, which stay on the
// path. A full queue makes the next read wait for room (back-pressure), bounded by
// its context; only when the store is failing, refuses the receipt, or the read's
// context ends, is a receipt dropped — logged and counted, never silently.

const (
	// DefaultReadReceiptQueue is the queue's bound when Options.ReadReceiptQueue is 0.
	DefaultReadReceiptQueue = 4096
	// readFlushEvery bounds how long a queued read receipt waits for its batch.
	readFlushEvery = 100 * time.Millisecond
	// readBatch bounds the receipts appended in one batch.
	readBatch = 256
	// readAppendTimeout bounds one batch's append.
	readAppendTimeout = 10 * time.Second
	// readRetryFirst and readRetryMax are the backoff of a batch the store did not take.
	readRetryFirst = 50 * time.Millisecond
	readRetryMax   = 5 * time.Second
)

// Metrics of the read receipt queue, counted through the worker's metrics handler.
const (
	// MetricReadReceiptsWaited counts reads that waited for room in a full read
	// receipt queue (back-pressure), tagged activity_type.
	MetricReadReceiptsWaited = "idemgate_read_receipts_waited"
	// MetricReadReceiptsDropped counts read receipts that were not stored: the queue
	// was full while the store failed, the read's context ended while it waited
	// for room, the store refused one (an error not store.ErrUnavailable), or the
	// store was closed before the flusher could append them.
	MetricReadReceiptsDropped = "idemgate_read_receipts_dropped"
	// MetricReadReceiptFlushFailures counts batches of read receipts the store did
	// not take; each is kept and retried with backoff.
	MetricReadReceiptFlushFailures = "idemgate_read_receipt_flush_failures"
)

// readStats are the queue's counters, for tests.
type readStats struct {
	queued, appended, waited, dropped, failures atomic.Int64
}

type readQueue struct {
	st    store.Gate
	cap   int
	every time.Duration
	// appendSome appends rs in order and says how many from the front the store
	// took: all or none through store.ReceiptBatcher, else one Append at a time up
	// to the first error (a retry goes on from there, appending none twice).
	appendSome func(ctx context.Context, rs []store.Receipt) (int, error)
	// batcher: the store appends a batch all or none (store.ReceiptBatcher).
	batcher bool
	stats   readStats

	mu     sync.Mutex
	queued []store.Receipt
	// held counts the receipts queued or in the batch being appended: the bound.
	held    int
	running bool // a flusher goroutine runs
	failing bool // the last batch was not taken; it is retried
	urgent  int  // Flush calls waiting: append without waiting for the interval
	stopped bool // stop was called: nothing is retried any more
	// lost counts the queued receipts dropped (refused, or the store closed): a
	// Flush that saw some go says so.
	lost    int64
	room    chan struct{}
	drained chan struct{}
	kick    chan struct{}
	halt    chan struct{}
	logger  log.Logger
	metrics client.MetricsHandler
}

func newReadQueue(st store.Gate, capacity int) *readQueue {
	q := &readQueue{st: st, cap: capacity, every: readFlushEvery, room: make(chan struct{}), drained: make(chan struct{}),
		kick: make(chan struct{}, 1), halt: make(chan struct{}), logger: log.NewStructuredLogger(slog.Default()),
		metrics: client.MetricsNopHandler}
	_, q.batcher = st.(store.ReceiptBatcher)
	q.appendSome = appendOf(st)
	return q
}

// appendOf appends a batch to st in one step when st is a store.ReceiptBatcher,
// else one Append at a time, reporting how many it stored before an error: a
// retry must not append those twice.
func appendOf(st store.Gate) func(ctx context.Context, rs []store.Receipt) (int, error) {
	if b, ok := st.(store.ReceiptBatcher); ok {
		return func(ctx context.Context, rs []store.Receipt) (int, error) {
			if err := b.AppendReceipts(ctx, rs); err != nil {
				return 0, err
			}
			return len(rs), nil
		}
	}
	return func(ctx context.Context, rs []store.Receipt) (int, error) {
		for i, r := range rs {
			if err := st.Append(ctx, r); err != nil {
				return i, err
			}
		}
		return len(rs), nil
	}
}

// push queues r, the receipt of a read that ran. When the queue is full it waits
// for room until ctx ends; it drops r (logged and counted) only when ctx ends first
// or the store is failing. logger and metrics are the read's.
func (q *readQueue) push(ctx context.Context, r store.Receipt, logger log.Logger, metrics client.MetricsHandler) {
	q.mu.Lock()
	q.metrics = metrics
	waited := false
	for q.held >= q.cap && !q.stopped {
		if q.failing {
			q.mu.Unlock()
			q.drop(r, logger, metrics, "the read receipt queue is full and the store does not take its batches")
			return
		}
		if !waited {
			waited = true
			q.stats.waited.Add(1)
			metrics.Counter(MetricReadReceiptsWaited).Inc(1)
		}
		// Full: the flusher appends now, not at the end of its interval (a queue
		// smaller than a batch never fills one).
		q.signal()
		room := q.room
		q.mu.Unlock()
		select {
		case <-room:
		case <-ctx.Done():
			q.drop(r, logger, metrics, "the read receipt queue is full and the read's context ended while it waited for room")
			return
		}
		q.mu.Lock()
	}
	if q.stopped {
		// The gate stopped (its store may be closing): append on the path, as strict does.
		q.mu.Unlock()
		if err := q.st.Append(context.WithoutCancel(ctx), r); err != nil {
			q.drop(r, logger, metrics, "the gate stopped and the store did not take it: "+err.Error())
		}
		return
	}
	q.queued = append(q.queued, r)
	q.held++
	q.stats.queued.Add(1)
	if !q.running {
		q.running = true
		go q.flush()
	}
	if len(q.queued) >= readBatch || q.held >= q.cap {
		q.signal()
	}
	q.mu.Unlock()
}

func (q *readQueue) drop(r store.Receipt, logger log.Logger, metrics client.MetricsHandler, why string) {
	q.stats.dropped.Add(1)
	metrics.Counter(MetricReadReceiptsDropped).Inc(1)
	logger.Warn("idemgate: read receipt not stored (the read ran): "+why, "activity", r.Activity, "key", r.Key,
		"workflowID", r.WorkflowID, "attempt", r.Attempt)
}

// signal wakes the flusher; q.mu is held.
func (q *readQueue) signal() {
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

// flush is the flusher: it runs while receipts are queued.
func (q *readQueue) flush() {
	for {
		q.mu.Lock()
		urgent := q.urgent > 0 || len(q.queued) >= readBatch || q.held >= q.cap
		q.mu.Unlock()
		if !urgent {
			t := time.NewTimer(q.every)
			select {
			case <-t.C:
			case <-q.kick:
			case <-q.halt:
			}
			t.Stop()
		}
		q.mu.Lock()
		if len(q.queued) == 0 {
			q.running = false
			q.mu.Unlock()
			return
		}
		n := min(len(q.queued), readBatch)
		batch := make([]store.Receipt, n)
		copy(batch, q.queued)
		q.queued = append(q.queued[:0], q.queued[n:]...)
		q.mu.Unlock()
		if !q.appendKept(batch) {
			return
		}
	}
}

// appendKept appends batch, retrying with backoff while the store is unavailable
// (store.ErrUnavailable, or the append's deadline): what the store took is not
// appended again. A receipt the store refuses (any other error: PostgreSQL's text
// refuses a NUL byte from a vendor's error) is dropped alone, logged and counted,
// as on the read's path: the batch is then appended one receipt at a time, so the
// one it refuses holds back no other. false: the queue stopped or the store was
// closed; what it still held is dropped (counted) and the flusher ends.
func (q *readQueue) appendKept(batch []store.Receipt) bool {
	delay := readRetryFirst
	single := false
	for len(batch) > 0 {
		part := batch
		if single {
			part = batch[:1]
		}
		ctx, cancel := context.WithTimeout(context.Background(), readAppendTimeout)
		n, err := q.appendSome(ctx, part)
		cancel()
		q.mu.Lock()
		if n > 0 {
			q.stats.appended.Add(int64(n))
			q.release(n)
			batch = batch[n:]
		}
		if err == nil {
			q.failing = false
			q.mu.Unlock()
			continue
		}
		stopped := q.stopped || errors.Is(err, store.ErrClosed)
		transient := errors.Is(err, store.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) ||
			errors.Is(err, context.Canceled)
		q.failing = transient
		logger, metrics := q.logger, q.metrics
		q.mu.Unlock()
		q.stats.failures.Add(1)
		metrics.Counter(MetricReadReceiptFlushFailures).Inc(1)
		if stopped {
			q.dropAll(batch, err)
			return false
		}
		if !transient {
			if len(part)-n > 1 && q.batcher {
				// All or none: find the receipt it refuses, one at a time.
				single = true
				continue
			}
			r := batch[0]
			batch = batch[1:]
			q.mu.Lock()
			q.lost++
			q.release(1)
			q.mu.Unlock()
			q.stats.dropped.Add(1)
			metrics.Counter(MetricReadReceiptsDropped).Inc(1)
			logger.Warn("idemgate: read receipt not stored (the read ran): the store refused it", "activity", r.Activity,
				"key", r.Key, "workflowID", r.WorkflowID, "attempt", r.Attempt, "error", err)
			continue
		}
		logger.Warn(fmt.Sprintf("idemgate: a batch of %d read receipts was not stored; it is kept and retried in %s", len(batch), delay),
			"error", err)
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-q.halt:
		}
		t.Stop()
		delay = min(2*delay, readRetryMax)
	}
	return true
}

// dropAll drops batch and everything queued, once the store cannot take them.
func (q *readQueue) dropAll(batch []store.Receipt, err error) {
	q.mu.Lock()
	n := len(batch) + len(q.queued)
	q.queued = nil
	q.lost += int64(n)
	q.release(n)
	q.running = false
	logger, metrics := q.logger, q.metrics
	q.mu.Unlock()
	q.stats.dropped.Add(int64(n))
	metrics.Counter(MetricReadReceiptsDropped).Inc(int64(n))
	logger.Warn(fmt.Sprintf("idemgate: %d read receipts not stored (the reads ran): the gate stopped or the store was closed first", n),
		"error", err)
}

// release frees n receipts' room; q.mu is held.
func (q *readQueue) release(n int) {
	q.held -= n
	close(q.room)
	q.room = make(chan struct{})
	if q.held == 0 {
		close(q.drained)
		q.drained = make(chan struct{})
	}
}

// wait appends everything queued now, without waiting for the interval, and
// returns once nothing is held, or with an error when ctx ends first.
func (q *readQueue) wait(ctx context.Context) error {
	q.mu.Lock()
	if q.held == 0 {
		q.mu.Unlock()
		return nil
	}
	q.urgent++
	drained, lost := q.drained, q.lost
	q.signal()
	q.mu.Unlock()
	defer func() {
		q.mu.Lock()
		q.urgent--
		q.mu.Unlock()
	}()
	select {
	case <-drained:
		q.mu.Lock()
		n := q.lost - lost
		q.mu.Unlock()
		if n > 0 {
			what := "receipts were"
			if n == 1 {
				what = "receipt was"
			}
			return fmt.Errorf("idemgate: %d read %s not stored (the store refused them or was closed; the log names them)", n, what)
		}
		return nil
	case <-ctx.Done():
		q.mu.Lock()
		n := q.held
		q.mu.Unlock()
		return fmt.Errorf("idemgate: %d read receipts are not stored yet: %w", n, ctx.Err())
	}
}

// setLogger makes the flusher log through l (the plugin's workers' logger).
func (q *readQueue) setLogger(l log.Logger) {
	q.mu.Lock()
	q.logger = l
	q.mu.Unlock()
}

// stop ends the queue for a store about to close: later reads append on their
// path, and a batch still retried is dropped (counted) instead.
func (q *readQueue) stop() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.stopped {
		q.stopped = true
		close(q.halt)
		close(q.room) // readers waiting for room append on their path
		q.room = make(chan struct{})
	}
}

// Flush stores the read receipts gate still holds in its queue (see
// Options.ReadReceiptQueue) and returns once they are stored, or with an error
// when ctx ends first or some of them were dropped (the store refused them or was
// closed; the log names each). Call it after the worker stopped and before the store is
// closed: receipts still queued when the process exits are lost. gate is what New
// returned (or Plugin.WorkerInterceptor; the plugin flushes by itself when its
// last worker stops). A gate that queues nothing (a strict store,
// Options.SkipReadReceipts) returns at once.
func Flush(ctx context.Context, gate sdkinterceptor.WorkerInterceptor) error {
	r, ok := gate.(*root)
	if !ok {
		return fmt.Errorf("idemgate: Flush: %T is not a gate made by interceptor.New", gate)
	}
	return r.flushReads(ctx)
}

// flushReads stores the queued read receipts (see Flush).
func (r *root) flushReads(ctx context.Context) error {
	if r.reads == nil {
		return nil
	}
	return r.reads.wait(ctx)
}
