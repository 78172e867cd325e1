package host

import (
	"context"
	"testing"
	"time"
)

// waitFor polls cond every millisecond for up to 10 s (a loaded machine delays timers).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for start := time.Now(); !cond(); time.Sleep(time.Millisecond) {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("%s: not within 10 s", what)
		}
	}
}

// TestInterrupterPause: a pause moves the deadline by its length without touching the timer;
// the timer going off during a pause interrupts nothing and is set again by resume for the
// time left; the deadline then passes and interrupts the call; disarm reports it.
func TestInterrupterPause(t *testing.T) {
	var it interrupter
	const d = 20 * time.Millisecond
	it.arm(context.Background(), d)
	armed := it.deadline
	it.pause()
	paused := it.paused
	it.pause() // a second pause is a no-op
	if it.paused != paused || paused.IsZero() {
		t.Fatalf("paused at %v, then %v", paused, it.paused)
	}
	waitFor(t, "the timer going off during the pause", func() bool {
		it.mu.Lock()
		defer it.mu.Unlock()
		return it.idle
	})
	if it.interrupted() {
		t.Fatal("interrupted during a pause")
	}
	before := time.Now()
	it.resume()
	if moved := it.deadline.Sub(armed); moved < before.Sub(paused) {
		t.Fatalf("the deadline moved by %v, less than the %v pause", moved, before.Sub(paused))
	}
	if it.idle || !it.paused.IsZero() {
		t.Fatal("resume left the timer idle or the clock paused")
	}
	waitFor(t, "the interruption after the moved deadline", it.interrupted)
	if time.Now().Before(it.deadline) {
		t.Fatalf("interrupted before the deadline %v", it.deadline)
	}
	if !it.disarm() || it.disarm() {
		t.Fatal("disarm did not report the interruption once")
	}

	// A call without a pause is interrupted at its deadline; a late timer of it finds the
	// next call's deadline ahead and does not interrupt that call.
	it.arm(context.Background(), d)
	waitFor(t, "the interruption", it.interrupted)
	it.disarm()
	it.arm(context.Background(), time.Hour)
	it.timerFired() // as if the earlier call's timer ran late
	if it.interrupted() {
		t.Fatal("a late timer interrupted the next call")
	}
	it.disarm()
}

// TestInterrupterContext: the caller's context ends the call at once, paused or not; a pause of
// a call without a deadline (trusted) is a no-op.
func TestInterrupterContext(t *testing.T) {
	var it interrupter
	ctx, cancel := context.WithCancel(context.Background())
	it.arm(ctx, 0)
	it.pause()
	if !it.paused.IsZero() {
		t.Fatal("paused a call without a deadline")
	}
	cancel()
	waitFor(t, "the interruption by the context", it.interrupted)
	if !it.disarm() {
		t.Fatal("disarm did not report the interruption")
	}
}
