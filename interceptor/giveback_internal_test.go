package interceptor

import (
	"sync"
	"testing"
	"time"
)

// stopGiveBacks ends the background give-backs of a gate (those started before and
// after), and may be called more than once, concurrently.
func TestStopGiveBacks(t *testing.T) {
	r := newRoot(Options{})
	before := r.giveBacks.stopped()
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(r.stopGiveBacks)
	}
	wg.Wait()
	for _, ch := range []<-chan struct{}{before, r.giveBacks.stopped()} {
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatal("a give-back was not told to stop")
		}
	}
}
