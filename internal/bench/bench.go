// Package bench measures projhost's figures for `projhost bench`: handler throughput through
// host.Module/Handler against an in-memory read model (by batch size, with and without the batch
// deadline), module compile, instantiate and memory costs, the native (non-WebAssembly) baseline
// of a Go handler compiled into the host (host.NewNativeModule: the same host path as a module),
// and end-to-end journal append and container.Runner projection rates on a fresh local journal
// and embedded store.
//
// Throughputs are wall-clock events per second of one goroutine (one core), measured over
// repeated passes over the events until a duration elapses, and reported as the median of the
// passes. Numbers depend on the machine and its load; they are printed, never asserted.
//
// Nothing in the package is safe for concurrent use unless said otherwise: benchmarks run one at
// a time.
package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/projhost/projhost/host"
	"github.com/projhost/projhost/source"
)

// ErrArgs is wrapped by every error about a bad argument or option (a batch size list that does
// not parse, a non-positive duration, ...).
var ErrArgs = errors.New("bench: bad argument")

// Defaults of the options.
const (
	DefaultDuration = 2 * time.Second // measuring time per throughput cell
	DefaultKeyField = "origin"
)

// DefaultBatchSizes are the batch sizes measured by default.
var DefaultBatchSizes = []int{1, 100, 1000}

// DefaultShardCounts are the shard counts of the end-to-end benchmark by default.
var DefaultShardCounts = []int{4, 16, 100}

// ParseInts parses a comma-separated list of positive integers such as "1,100,1000" (spaces
// around the numbers are allowed) and returns them in the order given, without duplicates.
// Errors wrap ErrArgs: an empty list, an element that is not a positive decimal integer.
func ParseInts(s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("%w: empty list (want e.g. 1,100,1000)", ErrArgs)
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%w: %q in %q is not a positive integer", ErrArgs, f, s)
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out, nil
}

// LoadEvents reads the events file at path with host.ReadEvents (a JSON array or JSON lines,
// gzip detected; partition key = the top-level field keyField) and replicates its events repeat
// times (repeat <= 1: once), renumbering the sequence numbers 1..N so every event stays distinct.
// All events are on host.TestShardID. Errors: unreadable file, ReadEvents errors (wrapping
// eventfile.ErrBadInput), an empty file (ErrArgs).
func LoadEvents(path, keyField string, repeat int) ([]source.Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("bench: reading events: %w", err)
	}
	defer f.Close()
	evs, err := host.ReadEvents(f, keyField)
	if err != nil {
		return nil, fmt.Errorf("bench: events file %s: %w", path, err)
	}
	if len(evs) == 0 {
		return nil, fmt.Errorf("%w: events file %s holds no events", ErrArgs, path)
	}
	return Repeat(evs, repeat), nil
}

// Repeat returns evs replicated n times (n <= 1: evs itself) with sequence numbers renumbered
// 1..len(evs)*n. The event data is shared between the copies.
func Repeat(evs []source.Event, n int) []source.Event {
	if n <= 1 {
		return evs
	}
	out := make([]source.Event, 0, len(evs)*n)
	for r := range n {
		for i, e := range evs {
			e.Seq = strconv.Itoa(r*len(evs) + i + 1)
			out = append(out, e)
		}
	}
	return out
}

// Rate is a measured throughput: the median events/s of the timed passes.
type Rate struct {
	EventsPerSec float64 // median over the passes; wall clock, one goroutine
	Passes       int     // timed passes (at least 1)
}

// measure calls pass (which handles events events) repeatedly until d has elapsed, at least
// once, and returns the median rate of the passes. The first error, or ctx's end, stops it.
func measure(ctx context.Context, d time.Duration, events int, pass func() error) (Rate, error) {
	rs, err := measureInterleaved(ctx, d, events, pass)
	if err != nil {
		return Rate{}, err
	}
	return rs[0], nil
}

// measureInterleaved measures several passes (each handling events events) in rounds, one pass
// of each per round, until len(passes)*d has elapsed (at least one round), and returns each
// one's median rate. Interleaving spreads a shared machine's changing load over all of them
// alike. The first error, or ctx's end, stops it.
func measureInterleaved(ctx context.Context, d time.Duration, events int, passes ...func() error) ([]Rate, error) {
	rates := make([][]float64, len(passes))
	total := d * time.Duration(len(passes))
	start := time.Now()
	for round := 0; round == 0 || time.Since(start) < total; round++ {
		for i, pass := range passes {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			t0 := time.Now()
			if err := pass(); err != nil {
				return nil, err
			}
			el := max(time.Since(t0), time.Nanosecond)
			rates[i] = append(rates[i], float64(events)/el.Seconds())
		}
	}
	out := make([]Rate, len(passes))
	for i, rs := range rates {
		out[i] = Rate{Passes: len(rs), EventsPerSec: median(rs)}
	}
	return out, nil
}

// median returns the median of xs (the mean of the middle two for an even count; 0 when empty).
// xs is sorted in place.
func median[T float64 | time.Duration](xs []T) T {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	m := len(xs) / 2
	if len(xs)%2 == 1 {
		return xs[m]
	}
	return (xs[m-1] + xs[m]) / 2
}

// batches calls fn with consecutive slices of at most size events of evs.
func batches(evs []source.Event, size int, fn func([]source.Event) error) error {
	for start := 0; start < len(evs); start += size {
		if err := fn(evs[start:min(start+size, len(evs))]); err != nil {
			return err
		}
	}
	return nil
}
