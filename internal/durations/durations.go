// Package durations holds the few time.Duration helpers several packages need: saturating
// arithmetic (a sum of attempts and backoffs computed from configuration must not overflow
// into a negative time) and a sleep that ends with its context.
package durations

import (
	"context"
	"math"
	"time"
)

// Add is a+b for a, b >= 0, or the largest time.Duration when that overflows.
func Add(a, b time.Duration) time.Duration {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// Mul is d*n for d, n >= 0, or the largest time.Duration when that overflows.
func Mul(d time.Duration, n int) time.Duration {
	if n != 0 && d > math.MaxInt64/time.Duration(n) {
		return math.MaxInt64
	}
	return d * time.Duration(n)
}

// Sleep waits d, or until ctx ends; it reports whether it waited d in full.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
