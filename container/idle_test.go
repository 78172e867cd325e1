package container

import (
	"testing"
	"time"
)

// TestIdleDelay: the wait before the read after n idle reads doubles from the batch wait and
// stops at IdleReadMax.
func TestIdleDelay(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		wait time.Duration
		n    int
		want time.Duration
	}{
		{200 * ms, 1, 200 * ms},
		{200 * ms, 2, 400 * ms},
		{200 * ms, 3, 800 * ms},
		{200 * ms, 4, IdleReadMax},
		{200 * ms, maxIdleDoublings, IdleReadMax},
		{ms, maxIdleDoublings, 128 * ms},
		{20 * ms, maxIdleDoublings, IdleReadMax},
		{5 * time.Second, 1, IdleReadMax}, // a batch wait above the cap is capped too
	}
	for _, tt := range tests {
		if got := idleDelay(tt.wait, tt.n); got != tt.want {
			t.Errorf("idleDelay(%v, %d) = %v, want %v", tt.wait, tt.n, got, tt.want)
		}
	}
}
