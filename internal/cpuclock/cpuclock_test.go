package cpuclock

import (
	"runtime"
	"testing"
	"time"
)

// TestProcessCountsWork: a busy loop of 50 ms of wall time adds CPU time on a Unix (at least
// 10 ms: the clock ticks in ms or coarser), and the clock never goes back.
func TestProcessCountsWork(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" || runtime.GOOS == "js" || runtime.GOOS == "wasip1" {
		t.Skip("no getrusage")
	}
	before := Process()
	x := 0
	for start := time.Now(); time.Since(start) < 50*time.Millisecond; {
		x++
	}
	after := Process()
	if after-before < 10*time.Millisecond {
		t.Fatalf("50 ms of busy loop (%d turns) added %s of CPU time", x, after-before)
	}
}
