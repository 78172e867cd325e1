package host

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
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

// TestLineWriterSplitsLongLines: stdout/stderr bytes become records of at most maxLogLine
// bytes, each taking a token, however long a guest writes without a newline (100 MiB in one
// fd_write logged one 100 MiB record before); the pending part stays below maxLogLine.
func TestLineWriterSplitsLongLines(t *testing.T) {
	long := strings.Repeat("a", 3*maxLogLine+5)
	for _, c := range []struct {
		name   string
		writes []string
		want   []int // record lengths
	}{
		{"short lines", []string{"ab\ncd\n"}, []int{2, 2}},
		{"empty line", []string{"\n"}, []int{0}},
		{"line across writes", []string{"ab", "cd\n"}, []int{4}},
		{"exactly one record", []string{strings.Repeat("b", maxLogLine) + "\n"}, []int{maxLogLine}},
		{"long line in one write", []string{long + "\n"}, []int{maxLogLine, maxLogLine, maxLogLine, 5}},
		{"long line in small writes", chunks(long+"\n", 1000), []int{maxLogLine, maxLogLine, maxLogLine, 5}},
		{"no newline: pending part logged at flush", []string{long}, []int{maxLogLine, maxLogLine, maxLogLine, 5}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := newLogRecorder()
			lg := slog.New(rec)
			w := &lineWriter{logger: lg, limit: newLogLimiter(lg), level: slog.LevelInfo, stream: "stdout"}
			for _, s := range c.writes {
				if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
					t.Fatalf("Write = %d, %v", n, err)
				}
				if len(w.partial) >= maxLogLine {
					t.Fatalf("%d bytes pending, want < %d", len(w.partial), maxLogLine)
				}
			}
			w.flush()
			var got []int
			for _, r := range rec.records() {
				got = append(got, len(r.Msg))
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("record lengths %v, want %v", got, c.want)
			}
		})
	}
	// 100 MiB without a newline: records of maxLogLine, rate-limited like lines.
	rec := newLogRecorder()
	lg := slog.New(rec)
	lim := newLogLimiter(lg)
	w := &lineWriter{logger: lg, limit: lim, level: slog.LevelInfo, stream: "stdout"}
	big := bytes.Repeat([]byte("a"), 100<<20)
	w.Write(big)
	w.flush()
	if n := len(rec.records()); n < GuestLogBurst || n > GuestLogBurst+GuestLogRate*10 {
		t.Fatalf("%d records for 100 MiB without a newline, want about the burst %d", n, GuestLogBurst)
	}
	if want := uint64((100<<20)/maxLogLine - len(rec.records())); lim.dropped != want {
		t.Fatalf("dropped %d records, want %d", lim.dropped, want)
	}
}

func chunks(s string, n int) []string {
	var out []string
	for len(s) > n {
		out, s = append(out, s[:n]), s[n:]
	}
	return append(out, s)
}

// TestLineWriterPanicText: what a TinyGo guest printed last in a call before it trapped is found
// however much it wrote before, in one write or many.
func TestLineWriterPanicText(t *testing.T) {
	noise := strings.Repeat("a line of output\n", 1000)
	for _, c := range []struct {
		name   string
		writes []string
		want   string
	}{
		{"nothing written", nil, ""},
		{"no panic", []string{"hello\nworld\n"}, ""},
		{"panic alone", []string{"panic: boom\n"}, "panic: boom"},
		{"after 17 KB of output", []string{noise, "panic: boom at seq 4\n"}, "panic: boom at seq 4"},
		{"in small writes", chunks(noise+"panic: runtime error: index out of range\n", 7), "panic: runtime error: index out of range"},
		{"fatal error", []string{"x\n", "fatal error: out of memory\n"}, "fatal error: out of memory"},
		{"the last panic line and what follows it", []string{"panic: old\n", "panic: new\n", "[recovered]\n"}, "panic: new | [recovered]"},
		{"without a final newline", []string{"panic: ", "boom"}, "panic: boom"},
		{"a panic line cut at the tail's start is not one", []string{"panic: " + strings.Repeat("x", maxTail)}, ""},
		{"long message cut to 600 bytes", []string{"panic: " + strings.Repeat("é", 400) + "\n"}, "panic: " + strings.Repeat("é", 296) + "..."},
	} {
		t.Run(c.name, func(t *testing.T) {
			lg := slog.New(newLogRecorder())
			w := &lineWriter{logger: lg, limit: newLogLimiter(lg), level: slog.LevelInfo, stream: "stdout"}
			w.Write([]byte("panic: from an earlier call\n"))
			w.resetCapture()
			for _, s := range c.writes {
				w.Write([]byte(s))
			}
			if got := w.panicText(4); got != c.want {
				t.Errorf("panicText = %q, want %q", got, c.want)
			}
		})
	}
}
