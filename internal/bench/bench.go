// Package bench measures projhost's figures for `projhost bench`: handler throughput through
// host.Module/Handler against an in-memory read model (by batch size, with and without the batch
// deadline), module compile, instantiate and memory costs, the native (non-WebAssembly) baseline
// of a Go handler compiled into the host (host.NewNativeModule: the same host path as a module),
// and end-to-end journal append and container.Runner projection rates on a fresh local journal
// and embedded store.
//
// Throughputs are wall-clock events per second of one goroutine (one core), measured over
// repeated passes over the events until a duration elapses, and reported as the median of the
// passes. Measurements compared with each other (wasm/native, deadline on/off, handler/baseline)
// run interleaved, in turns of 10 ms, so that they sample the same moments of the machine.
// Numbers depend on the machine and its load; they are printed, never asserted.
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

// turnDuration is how long a member of measureInterleaved runs before the next member's turn.
const turnDuration = 10 * time.Millisecond

// member is one of the measurements measureInterleaved interleaves: a pass over its events is
// steps calls step(0), ..., step(steps-1) (e.g. one batch each).
type member struct {
	steps int // at least 1
	step  func(i int) error
}

// measureInterleaved measures members (each pass handling events events) in rounds: in a round,
// every member in turn runs its next steps for turnDuration (at least one step), going on with
// its pass where its last turn stopped and starting a new pass after the last step. A pass's
// rate is events over the time of its steps. It runs until len(members)*d has elapsed and every
// member has finished a pass, and returns each member's median pass rate and its number of
// finished passes (an unfinished last pass is dropped).
//
// Short turns make the rates of all members samples of the same moments: this shared machine's
// speed changes by 2x from one second to the next, and passes of whole files (up to a second
// each) left ratios to chance. A member starts each turn with caches the others used; 10 ms
// turns keep that small and alike for all.
//
// The first error, or ctx's end (checked before every turn), stops it.
func measureInterleaved(ctx context.Context, d time.Duration, events int, members ...member) ([]Rate, error) {
	type state struct {
		next     int           // the step of the pass to run next
		passTime time.Duration // the time of the pass's steps so far
		rates    []float64     // of the finished passes
	}
	st := make([]state, len(members))
	total := d * time.Duration(len(members))
	start := time.Now()
	done := func() bool {
		if time.Since(start) < total {
			return false
		}
		for i := range st {
			if len(st[i].rates) == 0 {
				return false
			}
		}
		return true
	}
	for !done() {
		for i, m := range members {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			s := &st[i]
			turnStart := time.Now()
			t := turnStart
			for {
				if err := m.step(s.next); err != nil {
					return nil, err
				}
				now := time.Now()
				s.passTime += now.Sub(t)
				t = now
				if s.next++; s.next == m.steps {
					s.rates = append(s.rates, float64(events)/max(s.passTime, time.Nanosecond).Seconds())
					s.next, s.passTime = 0, 0
				}
				if now.Sub(turnStart) >= turnDuration {
					break
				}
			}
		}
	}
	out := make([]Rate, len(members))
	for i, s := range st {
		out[i] = Rate{Passes: len(s.rates), EventsPerSec: median(s.rates)}
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
