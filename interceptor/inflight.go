package interceptor

import (
	"context"
	"sync"
	"time"
)

// inflight counts the gate's work that still needs the store: attempts running
// through ExecuteActivity (a write stores its outcome after the body returns, a
// read appends its receipt) and give-backs retried in the background. The plugin
// closes the store (PluginOptions.CloseStore) only once it is empty, or once every
// entry's lease has passed — after that the claim is no longer this attempt's to
// settle, and a retry on another worker handles it.
type inflight struct {
	mu     sync.Mutex
	leases map[uint64]time.Time
	next   uint64
	wake   chan struct{} // one wake-up for the waiter after a removal
}

// init makes the map and the wake-up channel on first use; f.mu is held.
func (f *inflight) init() {
	if f.leases == nil {
		f.leases, f.wake = map[uint64]time.Time{}, make(chan struct{}, 1)
	}
}

// add registers one piece of work that may use the store until lease; done(id)
// removes it.
func (f *inflight) add(lease time.Time) (id uint64) {
	f.mu.Lock()
	f.init()
	f.next++
	id = f.next
	f.leases[id] = lease
	f.mu.Unlock()
	return id
}

// done removes the work add registered as id.
func (f *inflight) done(id uint64) {
	f.mu.Lock()
	delete(f.leases, id)
	wake := f.wake
	f.mu.Unlock()
	select {
	case wake <- struct{}{}:
	default:
	}
}

// pending returns how many entries are left whose lease has not passed at now,
// and the latest of their leases.
func (f *inflight) pending(now time.Time) (n int, until time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, l := range f.leases {
		if l.After(now) {
			n++
			if l.After(until) {
				until = l
			}
		}
	}
	return n, until
}

// wait returns once no entry is left whose lease has not passed, or when ctx is
// done. waiting is called once, before the first wait, with the number pending
// and the latest lease.
func (f *inflight) wait(ctx context.Context, now func() time.Time, waiting func(n int, until time.Time)) {
	f.mu.Lock()
	f.init()
	wake := f.wake
	f.mu.Unlock()
	first := true
	for {
		n, until := f.pending(now())
		if n == 0 {
			return
		}
		if first {
			waiting(n, until)
			first = false
		}
		// Wake at the next removal, or at the latest lease — at least every second,
		// since Options.Now need not follow the wall clock.
		t := time.NewTimer(min(max(until.Sub(now()), time.Millisecond), time.Second))
		select {
		case <-wake:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
		t.Stop()
	}
}
