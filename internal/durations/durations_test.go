package durations_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/projhost/projhost/internal/durations"
)

func TestSaturating(t *testing.T) {
	for _, c := range []struct {
		name string
		got  time.Duration
		want time.Duration
	}{
		{"add", durations.Add(2*time.Second, 3*time.Second), 5 * time.Second},
		{"add at the edge", durations.Add(math.MaxInt64-1, 1), math.MaxInt64},
		{"add over", durations.Add(math.MaxInt64-1, 2), math.MaxInt64},
		{"mul", durations.Mul(5*time.Second, 3), 15 * time.Second},
		{"mul by 0", durations.Mul(math.MaxInt64, 0), 0},
		{"mul over", durations.Mul(math.MaxInt64/2+1, 2), math.MaxInt64},
		{"mul of many", durations.Mul(10*time.Second, math.MaxInt), math.MaxInt64},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestSleep(t *testing.T) {
	if !durations.Sleep(context.Background(), time.Millisecond) {
		t.Error("Sleep of 1ms did not wait in full")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if durations.Sleep(ctx, time.Hour) {
		t.Error("Sleep with an ended context waited in full")
	}
}
