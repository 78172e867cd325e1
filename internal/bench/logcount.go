package bench

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"sync"
)

// Warning is a log message at warning level and how many times it was logged.
type Warning struct {
	Message string
	Count   int
}

// warnCounter is a slog.Handler that counts warning messages instead of printing them and passes
// errors on to next: a runner in trouble (leases lost under load, say) logs one warning per shard
// and event, which would bury the tables. Safe for concurrent use.
type warnCounter struct {
	next  slog.Handler
	state *warnState
}

type warnState struct {
	mu     sync.Mutex
	counts map[string]int
}

func newWarnCounter(next slog.Handler) *warnCounter {
	return &warnCounter{next: next, state: &warnState{counts: map[string]int{}}}
}

func (h *warnCounter) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (h *warnCounter) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelError {
		return h.next.Handle(ctx, r)
	}
	h.state.mu.Lock()
	h.state.counts[r.Message]++
	h.state.mu.Unlock()
	return nil
}

func (h *warnCounter) WithAttrs(as []slog.Attr) slog.Handler {
	return &warnCounter{next: h.next.WithAttrs(as), state: h.state}
}

func (h *warnCounter) WithGroup(name string) slog.Handler {
	return &warnCounter{next: h.next.WithGroup(name), state: h.state}
}

// warnings returns the counted messages, most frequent first, then by message.
func (h *warnCounter) warnings() []Warning {
	h.state.mu.Lock()
	defer h.state.mu.Unlock()
	out := make([]Warning, 0, len(h.state.counts))
	for m, n := range h.state.counts {
		out = append(out, Warning{Message: m, Count: n})
	}
	slices.SortFunc(out, func(a, b Warning) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Message, b.Message))
	})
	return out
}
