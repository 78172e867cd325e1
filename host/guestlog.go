package host

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"golang.org/x/time/rate"
)

// Guest log rate limit: each Handler (one shard's guest instance, and the instances replacing
// it) may write GuestLogBurst lines at once, then GuestLogRate lines per second, counting
// projhost.log messages and WASI stdout/stderr lines together and only lines the logger would
// write (a debug message with the logger at info costs nothing). Lines past it are dropped
// and counted (Handler.LogDropped; projection.Hooks.LogDropped); a warning "N guest log lines
// dropped" is logged at the end of the first call that dropped lines, then at most once per
// GuestLogReportEvery while lines are dropped, and when the handler closes. A handler logging a line per event at 200,000 events/s thus writes about 100
// lines/s instead of 200,000 (about 20 KB/s of host log instead of 20 MB/s).
const (
	GuestLogRate        = 100  // lines per second, sustained
	GuestLogBurst       = 1000 // lines at once
	GuestLogReportEvery = 10 * time.Second
)

// logLimiter is a Handler's guest log token bucket. It is used only from inside calls into the
// guest and from Close, which the Handler serializes.
type logLimiter struct {
	lim        *rate.Limiter
	logger     *slog.Logger
	dropped    uint64 // lines dropped since the handler was created
	unreported uint64 // ... since the last "dropped" warning
	lastReport time.Time
}

func newLogLimiter(logger *slog.Logger) *logLimiter {
	return &logLimiter{lim: rate.NewLimiter(GuestLogRate, GuestLogBurst), logger: logger}
}

// allow takes a token for one line; false: drop the line (counted).
func (l *logLimiter) allow() bool {
	if l.lim.Allow() {
		return true
	}
	l.dropped++
	l.unreported++
	if !l.lastReport.IsZero() { // the first report waits for the end of the call: one line, the full count
		l.report(false)
	}
	return false
}

// report logs the count of lines dropped since the last report, at most once per
// GuestLogReportEvery unless force.
func (l *logLimiter) report(force bool) {
	if l.unreported == 0 {
		return
	}
	now := time.Now()
	if !force && !l.lastReport.IsZero() && now.Sub(l.lastReport) < GuestLogReportEvery {
		return
	}
	l.logger.Warn(fmt.Sprintf("%d guest log lines dropped", l.unreported), "dropped", l.unreported,
		"rate", GuestLogRate, "burst", GuestLogBurst)
	l.unreported, l.lastReport = 0, now
}

// maxLogLine is the longest guest stdout/stderr line logged as one record; longer lines are split.
const maxLogLine = 4096

// maxCapture is how many bytes of a call's stderr are kept for the error message of an exit.
const maxCapture = 4096

// lineWriter turns a guest's WASI stdout or stderr into slog records, one per line, and keeps the
// start of what was written during the current call (for ErrExit messages). It is only written
// from inside a call into the guest, which the Handler serializes.
type lineWriter struct {
	logger  *slog.Logger
	limit   *logLimiter
	level   slog.Level
	stream  string
	partial []byte // the current line's pending bytes, fewer than maxLogLine
	split   bool   // part of the current line was logged already
	capture []byte // first maxCapture bytes written since resetCapture
	tail    []byte // the last maxTail (to 2*maxTail) bytes written since resetCapture
}

// maxTail is how many of the last bytes of a call's output are kept: TinyGo prints a panic's
// message to stdout as the last thing before it traps (see panicText).
const maxTail = 1024

func (w *lineWriter) Write(p []byte) (int, error) {
	n := len(p)
	if room := maxCapture - len(w.capture); room > 0 {
		w.capture = append(w.capture, p[:min(room, len(p))]...)
	}
	// The tail grows to 2*maxTail before its last maxTail bytes move to the front: one copy per
	// maxTail bytes written, however small the writes (a guest flooding stdout writes many).
	if len(p) >= maxTail {
		w.tail = append(w.tail[:0], p[len(p)-maxTail:]...)
	} else if w.tail = append(w.tail, p...); len(w.tail) > 2*maxTail {
		w.tail = w.tail[:copy(w.tail, w.tail[len(w.tail)-maxTail:])]
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		seg := p
		if i >= 0 {
			seg = p[:i]
		}
		// A line is logged in records of at most maxLogLine bytes, each taking a token: the
		// pending part never holds more, however long the guest writes without a newline.
		for len(seg) > 0 {
			k := min(maxLogLine-len(w.partial), len(seg))
			if len(w.partial) == 0 && k == maxLogLine {
				w.emit(seg[:k])
			} else if w.partial = append(w.partial, seg[:k]...); len(w.partial) == maxLogLine {
				w.emit(w.partial)
				w.partial = w.partial[:0]
			} else {
				break // k == len(seg): the rest of the line is pending
			}
			w.split = true
			seg = seg[k:]
		}
		if i < 0 {
			break
		}
		if len(w.partial) > 0 || !w.split { // an empty line is logged too, a split line's end only if any
			w.emit(w.partial)
			w.partial = w.partial[:0]
		}
		w.split = false
		p = p[i+1:]
	}
	return n, nil
}

func (w *lineWriter) emit(line []byte) {
	line = bytes.TrimRight(line, "\r")
	if w.logger.Enabled(context.Background(), w.level) && w.limit.allow() {
		w.logger.Log(context.Background(), w.level, string(line), "source", w.stream)
	}
}

// flush logs a pending partial line.
func (w *lineWriter) flush() {
	if len(w.partial) > 0 {
		w.emit(w.partial)
		w.partial = w.partial[:0]
	}
	w.split = false
}

func (w *lineWriter) resetCapture() { w.capture, w.tail = w.capture[:0], w.tail[:0] }

// panicText returns the panic a Go guest built with TinyGo printed as the last lines it wrote in
// the call: from the last line starting "panic: " or "fatal error: " (TinyGo's runtime.
// _panic, runtimePanicAt and runtimeFatal print one such line, then trap) to the end, at most
// maxLines lines joined with " | " and about 600 bytes; "" when there is none.
func (w *lineWriter) panicText(maxLines int) string {
	t := w.tail[max(0, len(w.tail)-maxTail):]
	lines := strings.Split(strings.TrimRight(string(t), "\r\n"), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(l, "panic: ") && !strings.HasPrefix(l, "fatal error: ") {
			continue
		}
		var parts []string
		for _, l := range lines[i:min(len(lines), i+maxLines)] {
			if l = strings.TrimSpace(l); l != "" {
				parts = append(parts, l)
			}
		}
		return cut600(strings.Join(parts, " | "))
	}
	return ""
}

// cut600 cuts s to about 600 bytes (valid UTF-8, "..." marking the cut).
func cut600(s string) string {
	if len(s) > 600 {
		s = strings.ToValidUTF8(s[:600], "") + "..."
	}
	return s
}

// summary returns up to maxLines non-empty lines of the captured output joined with " | ", cut
// to about 600 bytes: enough for "panic: ..." and the first frames of a Go guest's trace.
func (w *lineWriter) summary(maxLines int) string {
	var parts []string
	for _, l := range strings.Split(string(w.capture), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			parts = append(parts, l)
			if len(parts) == maxLines {
				break
			}
		}
	}
	return cut600(strings.Join(parts, " | "))
}
