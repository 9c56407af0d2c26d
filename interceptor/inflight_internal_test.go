package interceptor

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// TestInflightWaitsForWorkOrItsLease: the store closes once the work in flight is
// done, or once every lease has passed (by Options.Now), never before.
func TestInflightWaitsForWorkOrItsLease(t *testing.T) {
	var f inflight
	var now atomic.Int64
	now.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	f.wait(context.Background(), clock, func(int, time.Time) { t.Fatal("waited with nothing in flight") })

	done := f.add(clock().Add(time.Hour))
	f.done(f.add(clock().Add(2 * time.Hour)))
	f.add(clock().Add(-time.Minute)) // lease already passed: not waited for
	returned := make(chan struct{})
	var waited atomic.Int32
	go func() {
		f.wait(context.Background(), clock, func(n int, _ time.Time) { waited.Store(int32(n)) })
		close(returned)
	}()
	select {
	case <-returned:
		t.Fatal("wait returned with an attempt in flight inside its lease")
	case <-time.After(50 * time.Millisecond): // a negative check: nothing may happen
	}
	f.done(done)
	select {
	case <-returned:
	case <-time.After(time.Minute):
		t.Fatal("wait did not return when the attempt finished")
	}
	if n := waited.Load(); n != 1 {
		t.Errorf("waiting reported %d in flight, want 1", n)
	}

	// An attempt that never returns is waited for until its lease passes.
	f.add(clock().Add(time.Hour))
	returned = make(chan struct{})
	waiting := make(chan struct{})
	go func() { f.wait(context.Background(), clock, func(int, time.Time) { close(waiting) }); close(returned) }()
	<-waiting
	now.Add(int64(2 * time.Hour))
	select {
	case <-returned:
	case <-time.After(time.Minute):
		t.Fatal("wait did not return after the lease passed")
	}
}
