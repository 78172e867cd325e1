package host

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
)

// maxLogLine is the longest guest stdout/stderr line logged as one record; longer lines are split.
const maxLogLine = 4096

// maxCapture is how many bytes of a call's stderr are kept for the error message of an exit.
const maxCapture = 4096

// lineWriter turns a guest's WASI stdout or stderr into slog records, one per line, and keeps the
// start of what was written during the current call (for ErrExit messages). It is only written
// from inside a call into the guest, which the Handler serializes.
type lineWriter struct {
	logger  *slog.Logger
	level   slog.Level
	stream  string
	partial []byte
	capture []byte // first maxCapture bytes written since resetCapture
}

func (w *lineWriter) Write(p []byte) (int, error) {
	n := len(p)
	if room := maxCapture - len(w.capture); room > 0 {
		w.capture = append(w.capture, p[:min(room, len(p))]...)
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			w.partial = append(w.partial, p...)
			if len(w.partial) >= maxLogLine {
				w.emit(w.partial)
				w.partial = w.partial[:0]
			}
			break
		}
		if len(w.partial) > 0 {
			w.partial = append(w.partial, p[:i]...)
			w.emit(w.partial)
			w.partial = w.partial[:0]
		} else {
			w.emit(p[:i])
		}
		p = p[i+1:]
	}
	return n, nil
}

func (w *lineWriter) emit(line []byte) {
	line = bytes.TrimRight(line, "\r")
	if w.logger.Enabled(context.Background(), w.level) {
		w.logger.Log(context.Background(), w.level, string(line), "source", w.stream)
	}
}

// flush logs a pending partial line.
func (w *lineWriter) flush() {
	if len(w.partial) > 0 {
		w.emit(w.partial)
		w.partial = w.partial[:0]
	}
}

func (w *lineWriter) resetCapture() { w.capture = w.capture[:0] }

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
	s := strings.Join(parts, " | ")
	if len(s) > 600 {
		s = strings.ToValidUTF8(s[:600], "") + "..."
	}
	return s
}
