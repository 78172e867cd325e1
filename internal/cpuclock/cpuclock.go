// Package cpuclock reads the process's CPU time, for benchmarks that report CPU per event: on a
// shared, loaded machine the CPU a piece of work takes is steadier than its wall time.
package cpuclock

import (
	"testing"
	"time"
)

// Process returns the user+system CPU time of this process so far, every thread counted (the
// GC's too); 0 where the platform does not tell (not a Unix).
func Process() time.Duration { return process() }

// ReportPerEvent reports on b the events/s of its timed loop (wall time, b.Elapsed) and the
// CPU per event since cpu0 (a Process value taken before the loop) in ns: the metrics
// "events/s" and "cpu-ns/event".
func ReportPerEvent(b *testing.B, events int, cpu0 time.Duration) {
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(Process()-cpu0)/float64(events), "cpu-ns/event")
}
