package shardmap

import (
	"sync"
	"time"
)

// Clock is a monotonic clock: Now returns the time elapsed since an arbitrary fixed origin.
// The Manager only ever subtracts two readings of its own clock, so the origin, the wall-clock
// time and other workers' clocks never matter (DESIGN §4). Implementations are safe for
// concurrent use.
type Clock interface {
	Now() time.Duration
}

// monoClock reads Go's monotonic clock (time.Since keeps running across a SIGSTOP pause, which
// is exactly what lease validity needs).
type monoClock struct{ start time.Time }

func (c monoClock) Now() time.Duration { return time.Since(c.start) }

// ManualClock is a Clock that moves only when told to, for tests. The zero value reads 0.
// It is safe for concurrent use.
type ManualClock struct {
	mu  sync.Mutex
	now time.Duration
}

// NewManualClock returns a clock reading start.
func NewManualClock(start time.Duration) *ManualClock { return &ManualClock{now: start} }

// Now returns the current reading.
func (c *ManualClock) Now() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d (negative d is ignored: a monotonic clock never goes
// back) and returns the new reading.
func (c *ManualClock) Advance(d time.Duration) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d > 0 {
		c.now += d
	}
	return c.now
}
