package cpuclock

import (
	"runtime"
	"testing"
	"time"
)

// TestProcessCountsWork: busy work adds CPU time on a Unix, and the clock never goes back. The
// loop spins until the clock has moved by 20 ms rather than for a fixed wall time: on a loaded
// machine 50 ms of wall time may hold only a few ms of this process's CPU. It fails if the clock
// has not moved by then after a minute of spinning, or if any reading is below the one before.
func TestProcessCountsWork(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" || runtime.GOOS == "js" || runtime.GOOS == "wasip1" {
		t.Skip("no getrusage")
	}
	const want = 20 * time.Millisecond
	before := Process()
	last := before
	turns := 0
	for start := time.Now(); last-before < want; turns++ {
		if time.Since(start) > time.Minute {
			t.Fatalf("a minute of busy loop (%d turns) added %s of CPU time, want %s", turns, last-before, want)
		}
		for i := 0; i < 10000; i++ {
			x := i * i
			_ = x
		}
		now := Process()
		if now < last {
			t.Fatalf("the CPU clock went back from %s to %s", last, now)
		}
		last = now
	}
	if turns == 0 {
		t.Fatal("the loop never ran")
	}
}
