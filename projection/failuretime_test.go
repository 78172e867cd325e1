package projection_test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/deadletter"
	"github.com/projhost/projhost/internal/flightcheck"
	"github.com/projhost/projhost/internal/storetest"
	"github.com/projhost/projhost/internal/testwasm"
	"github.com/projhost/projhost/projection"
)

func TestFailureTime(t *testing.T) {
	const s = time.Second
	for _, c := range []struct {
		cfg  projection.Config
		n    int
		call time.Duration
		want time.Duration
	}{
		// Defaults: 5 attempts, backoff 100ms, 200ms, 400ms, 800ms.
		{projection.Config{}, 1, 5 * s, 25*s + 1500*time.Millisecond},
		{projection.Config{}, 2, 5 * s, 35*s + 1500*time.Millisecond},   // 1 probe, 1 confirmation
		{projection.Config{}, 500, 5 * s, 75*s + 1500*time.Millisecond}, // 9 probes
		{projection.Config{}, 512, 5 * s, 75*s + 1500*time.Millisecond}, // 9
		{projection.Config{}, 513, 5 * s, 80*s + 1500*time.Millisecond}, // 10
		{projection.Config{Policy: projection.Policy{MaxAttempts: 1}}, 1, s, s},
		{projection.Config{Policy: projection.Policy{MaxAttempts: 3}, RetryMin: time.Millisecond}, 4, 200 * time.Millisecond,
			6*200*time.Millisecond + 3*time.Millisecond},
		// The backoff stops doubling at RetryMax.
		{projection.Config{Policy: projection.Policy{MaxAttempts: 6}, RetryMin: s, RetryMax: 3 * s}, 1, 0, s + 2*s + 3*s + 3*s + 3*s},
		// Saturated, not overflowed, and without a loop per attempt.
		{projection.Config{Policy: projection.Policy{MaxAttempts: math.MaxInt}}, 1, 5 * s, math.MaxInt64},
		{projection.Config{Policy: projection.Policy{MaxAttempts: 300_000_000}}, 1, 0, 100*time.Millisecond + 200*time.Millisecond +
			400*time.Millisecond + 800*time.Millisecond + 1600*time.Millisecond + 3200*time.Millisecond + 6400*time.Millisecond +
			(300_000_000-8)*10*s},
		{projection.Config{}, 1, math.MaxInt64 / 2, math.MaxInt64},
		{projection.Config{RetryMin: math.MaxInt64 / 2, RetryMax: math.MaxInt64}, 1, 0, math.MaxInt64},
		// RetryMax under RetryMin counts as RetryMin, as Validate makes it.
		{projection.Config{Policy: projection.Policy{MaxAttempts: 3}, RetryMin: 2 * s, RetryMax: s}, 1, 0, 4 * s},
	} {
		t.Run(fmt.Sprintf("%+v n=%d", c.cfg.Policy, c.n), func(t *testing.T) {
			require.Equal(t, c.want, c.cfg.FailureTime(c.n, c.call))
		})
	}
}

// TestFailureTimeCalls: the handler calls the core makes on a range of n events failing at
// one of them, until the policy acts on it, never exceed the calls FailureTime counts, and
// reach them for the last event (the longest bisection).
func TestFailureTimeCalls(t *testing.T) {
	fs := flightcheck.Load(t, flightcheck.DataPath("flights-2k.json"))
	st := *storetest.Backends()[0].Open(t)
	mod := projection.Fixed(load(t, testwasm.FlightDelaysAS))
	seq := 0
	for _, n := range []int{1, 2, 3, 5, 8, 100, 257} {
		for _, at := range []int{0, n / 3, n - 1} {
			calls, settled := 0, false
			p := newProc(t, &st, mod, func(c *projection.Config) {
				c.Policy = projection.Policy{OnError: projection.DeadLetter, MaxAttempts: 3}
				c.Hooks.Batch = func(projection.BatchInfo) {
					if !settled {
						calls++
					}
				}
				c.Hooks.HandlerError = func(projection.HandlerErrorInfo) { calls++ }
				c.Hooks.DeadLettered = func(deadletter.Letter) { settled = true }
			})
			sh, err := p.Open(context.Background(), shard, int64(seq+1), projection.ShardOptions{})
			require.NoError(t, err)
			evs := events(fs[:seq+n], seq+at)[seq:]
			require.NoError(t, sh.Handle(context.Background(), evs))
			require.True(t, settled)
			max := int(p.Config().FailureTime(n, time.Hour) / time.Hour)
			require.LessOrEqual(t, calls, max, "n=%d, failing at %d", n, at)
			if at == n-1 {
				require.Equal(t, max, calls, "n=%d, failing at the last event", n)
			}
			require.NoError(t, sh.Flush(context.Background()))
			sh.Close(context.Background())
			seq += n
		}
	}
}
