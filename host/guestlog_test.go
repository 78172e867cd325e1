package host

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/projhost/projhost/internal/testwasm"
)

// TestGuestLogRateLimit: a guest writing 200,000 projhost.log messages and as many stdout lines
// in one batch gets GuestLogBurst lines (plus what the rate refills meanwhile) into the host
// log; the rest are dropped, counted by LogDropped and summed up in "N guest log lines
// dropped" warnings, at most one per GuestLogReportEvery and one at Close.
func TestGuestLogRateLimit(t *testing.T) {
	rt, rec := newTestRuntime(t)
	// A long deadline: 400,000 host calls take seconds under the race detector.
	h := load(t, rt, "logflood", fixture(t, testwasm.LogFlood), WithBatchDeadline(time.Minute)).NewHandler("s1")
	const calls = 200_000 // logflood: 100 log calls and 100 stdout lines per byte of event data
	start := time.Now()
	if _, err := h.Handle(context.Background(), evs("s1", 1, "k", strings.Repeat("x", calls/100)), NewMemReadModel()); err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	if err := h.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	logged := len(rec.find("flood"))
	bound := GuestLogBurst + int(elapsed.Seconds()*GuestLogRate) + 1
	if logged < GuestLogBurst || logged > bound {
		t.Fatalf("%d guest lines logged in %v, want %d..%d", logged, elapsed, GuestLogBurst, bound)
	}
	dropped := h.LogDropped()
	if int(dropped) != 2*calls-logged {
		t.Fatalf("LogDropped = %d, want %d (%d lines written, %d logged)", dropped, 2*calls-logged, 2*calls, logged)
	}
	var reported uint64
	warnings := rec.find("guest log lines dropped")
	for _, r := range warnings {
		n := r.Attrs["dropped"]
		var v uint64
		for _, c := range n {
			v = 10*v + uint64(c-'0')
		}
		if r.Msg != n+" guest log lines dropped" {
			t.Fatalf("warning %q does not lead with its count %s", r.Msg, n)
		}
		reported += v
	}
	if maxWarnings := 2 + int(elapsed/GuestLogReportEvery); len(warnings) > maxWarnings || reported != dropped {
		t.Fatalf("%d warnings reporting %d dropped lines in %v, want at most %d reporting %d", len(warnings), reported, elapsed, maxWarnings, dropped)
	}
}
