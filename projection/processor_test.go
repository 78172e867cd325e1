package projection_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/deadletter"
	"github.com/projhost/projhost/event"
	"github.com/projhost/projhost/host"
	"github.com/projhost/projhost/internal/dynamotest"
	"github.com/projhost/projhost/internal/flightcheck"
	"github.com/projhost/projhost/internal/storetest"
	"github.com/projhost/projhost/internal/testwasm"
	"github.com/projhost/projhost/projection"
	"github.com/projhost/projhost/store"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

const shard = "shard-000000"

var quiet = slog.New(slog.DiscardHandler)

func load(t *testing.T, name string) *host.Module { return loadWith(t, name, quiet) }

// loadWith loads the testwasm module name on a runtime logging to logger.
func loadWith(t *testing.T, name string, logger *slog.Logger, opts ...host.ModuleOption) *host.Module {
	t.Helper()
	ctx := context.Background()
	rt, err := host.NewRuntime(ctx, host.WithLogger(logger))
	require.NoError(t, err)
	t.Cleanup(func() { rt.Close(ctx) })
	wasm, err := os.ReadFile(testwasm.Path(t, name))
	require.NoError(t, err)
	m, err := rt.Load(ctx, name, wasm, opts...)
	require.NoError(t, err)
	return m
}

// openFlights opens the shard of a processor running flightdelays-as on st under pol.
func openFlights(t *testing.T, st *store.Stores, pol projection.Policy) (*projection.Shard, *recorder) {
	t.Helper()
	var rec recorder
	p := newProc(t, st, projection.Fixed(load(t, testwasm.FlightDelaysAS)), func(c *projection.Config) {
		c.Hooks = rec.hooks()
		c.Policy = pol
	})
	sh, err := p.Open(context.Background(), shard, 1, projection.ShardOptions{})
	require.NoError(t, err)
	return sh, &rec
}

// indexesOf returns the indexes of the flights from origin.
func indexesOf(fs []flightcheck.Flight, origin string) []int {
	var out []int
	for i, f := range fs {
		if f.Origin == origin {
			out = append(out, i)
		}
	}
	return out
}

// events are flights as the events of one shard, seq 1..n; the indexes in quoted get the
// malformed form.
func events(fs []flightcheck.Flight, quoted ...int) []event.Event {
	bad := map[int]bool{}
	for _, i := range quoted {
		bad[i] = true
	}
	out := make([]event.Event, len(fs))
	for i, f := range fs {
		d := f.JSON()
		if bad[i] {
			d = f.QuotedJSON()
		}
		out[i] = event.Event{ShardID: shard, Seq: fmt.Sprint(i + 1), PartitionKey: f.Origin, ArrivalMs: 1_700_000_000_000, Data: d}
	}
	return out
}

func without(fs []flightcheck.Flight, skip ...int) []flightcheck.Flight {
	out := append([]flightcheck.Flight(nil), fs...)
	for i := len(skip) - 1; i >= 0; i-- {
		out = append(out[:skip[i]], out[skip[i]+1:]...)
	}
	return out
}

// swap is a ModuleProvider whose module can be changed (a deploy).
type swap struct{ m atomic.Pointer[host.Module] }

func (s *swap) Module() *host.Module { return s.m.Load() }

func newSwap(m *host.Module) *swap {
	s := &swap{}
	s.m.Store(m)
	return s
}

// recorder records hook calls.
type recorder struct {
	mu      sync.Mutex
	flushes []projection.FlushInfo
	errs    []projection.HandlerErrorInfo
	dead    []deadletter.Letter
	stopped []string
	events  int
}

func (r *recorder) hooks() projection.Hooks {
	return projection.Hooks{
		Batch:        func(i projection.BatchInfo) { r.mu.Lock(); r.events += i.Events; r.mu.Unlock() },
		Flush:        func(i projection.FlushInfo) { r.mu.Lock(); r.flushes = append(r.flushes, i); r.mu.Unlock() },
		HandlerError: func(i projection.HandlerErrorInfo) { r.mu.Lock(); r.errs = append(r.errs, i); r.mu.Unlock() },
		DeadLettered: func(l deadletter.Letter) { r.mu.Lock(); r.dead = append(r.dead, l); r.mu.Unlock() },
		Stopped: func(_ projection.ShardInfo, why string) {
			r.mu.Lock()
			r.stopped = append(r.stopped, why)
			r.mu.Unlock()
		},
	}
}

func newProc(t *testing.T, st *store.Stores, mods projection.ModuleProvider, mut func(*projection.Config)) *projection.Processor {
	t.Helper()
	cfg := projection.Config{Projection: "flights", Stores: st, Modules: mods, Logger: quiet,
		CursorEveryEvents: 300, RetryMin: time.Millisecond, RetryMax: 5 * time.Millisecond}
	if mut != nil {
		mut(&cfg)
	}
	p, err := projection.New(cfg)
	require.NoError(t, err)
	return p
}

func push(t *testing.T, sh *projection.Shard, evs []event.Event, size int) {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < len(evs); i += size {
		require.NoError(t, sh.Handle(ctx, evs[i:min(i+size, len(evs))]))
	}
	require.NoError(t, sh.Flush(ctx))
}

func check(t *testing.T, st *store.Stores, fs []flightcheck.Flight) {
	t.Helper()
	docs, err := st.ReadModel.Scan(context.Background(), "flights", "")
	require.NoError(t, err)
	flightcheck.Check(t, fs, docs)
}

func cursor(t *testing.T, st *store.Stores) string {
	t.Helper()
	c, err := st.Cursors.Get(context.Background(), "flights", shard)
	require.NoError(t, err)
	return c.Seq
}

// The processor alone, driven with pushed batches as Lambda mode will (no lease manager),
// gives the exact read model; a redelivered range changes nothing; a newer epoch fences the
// older one.
func TestPushedBatches(t *testing.T) {
	fs := flightcheck.Load(t, flightcheck.DataPath("flights-2k.json"))[:1200]
	evs := events(fs)
	mod := load(t, testwasm.FlightDelaysAS)
	for _, b := range storetest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			st := b.Open(t)
			var rec recorder
			p := newProc(t, st, projection.Fixed(mod), func(c *projection.Config) { c.Hooks = rec.hooks() })
			sh, err := p.Open(ctx, shard, 1, projection.ShardOptions{})
			require.NoError(t, err)
			push(t, sh, evs[:600], 100)
			push(t, sh, evs[500:700], 100) // redelivery of 500..600: skipped
			push(t, sh, evs[700:], 77)
			sh.Close(ctx)
			check(t, st, fs)
			require.Equal(t, "1200", cursor(t, st))
			require.Equal(t, 1200, rec.events, "every event handled once")
			require.Equal(t, "1200", rec.flushes[len(rec.flushes)-1].Seq)

			// A new owner continues from the cursor; the old epoch is fenced.
			sh2, err := p.Open(ctx, shard, 2, projection.ShardOptions{})
			require.NoError(t, err)
			require.Equal(t, "1200", sh2.Position())
			sh2.Close(ctx)
			_, err = p.Open(ctx, shard, 1, projection.ShardOptions{})
			require.ErrorIs(t, err, projection.ErrLost)
		})
	}
}

// Retry with ShardOptions.YieldRetries (Lambda mode): after MaxAttempts the failing event is
// found by bisection, the events before it are committed and it is handed back (ErrYielded);
// nothing is recorded, so its next delivery is tried again, and once it is fixed the shard goes on.
// withFailingEvent runs f on every backend over flights 0..299 as events, #123 malformed
// (seq 124), with a processor running the strict flightdelays under pol (zero: the default
// policy); fix swaps in the lenient build, which takes #123.
func withFailingEvent(t *testing.T, pol projection.Policy,
	f func(t *testing.T, fs []flightcheck.Flight, evs []event.Event, st *store.Stores, p *projection.Processor, rec *recorder, fix func())) {
	fs := flightcheck.Load(t, flightcheck.DataPath("flights-2k.json"))[:300]
	evs := events(fs, 123)
	strict, lenient := load(t, testwasm.FlightDelaysAS), load(t, testwasm.FlightDelaysGoLenient)
	for _, b := range storetest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			st := b.Open(t)
			var rec recorder
			mods := newSwap(strict)
			p := newProc(t, st, mods, func(c *projection.Config) {
				c.Hooks = rec.hooks()
				if pol != (projection.Policy{}) {
					c.Policy = pol
				}
			})
			f(t, fs, evs, st, p, &rec, func() { mods.m.Store(lenient) })
		})
	}
}

func TestYieldRetries(t *testing.T) {
	withFailingEvent(t, projection.Policy{OnError: projection.Retry, MaxAttempts: 2}, func(t *testing.T, fs []flightcheck.Flight,
		evs []event.Event, st *store.Stores, p *projection.Processor, rec *recorder, fix func()) {
		ctx := context.Background()
		yield := projection.ShardOptions{YieldRetries: true}
		sh, err := p.Open(ctx, shard, 1, yield)
		require.NoError(t, err)
		err = sh.Handle(ctx, evs[:200])
		require.ErrorIs(t, err, projection.ErrYielded)
		require.Contains(t, err.Error(), "at seq 124")
		require.Equal(t, "123", sh.Committed())
		require.Equal(t, "123", cursor(t, st), "events before the failing one are committed")
		check(t, st, fs[:123])
		require.Empty(t, rec.stopped)
		sh.Close(ctx)

		// Delivered again: handed back again; not stopped.
		sh, err = p.Open(ctx, shard, 2, yield)
		require.NoError(t, err)
		require.Empty(t, sh.Stopped())
		require.ErrorIs(t, sh.Handle(ctx, evs[123:]), projection.ErrYielded)
		sh.Close(ctx)

		fix()
		sh, err = p.Open(ctx, shard, 3, yield)
		require.NoError(t, err)
		push(t, sh, evs[123:], 50)
		check(t, st, fs)
		sh.Close(ctx)
	})
}

// Dead-letter policy: the malformed events are found by bisection, stored whole with the
// handler's error, and skipped; everything else is applied once. After a fixed handler is
// deployed (the provider swaps it at a batch boundary), a replay applies them exactly once,
// and a second replay changes nothing.
func TestDeadLetterAndReplay(t *testing.T) {
	fs := flightcheck.Load(t, flightcheck.DataPath("flights-2k.json"))[:600]
	poison := []int{57, 58, 401}
	evs := events(fs, poison...)
	strict, lenient := load(t, testwasm.FlightDelaysAS), load(t, testwasm.FlightDelaysGoLenient)
	for _, b := range storetest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			st := b.Open(t)
			var rec recorder
			mods := newSwap(strict)
			p := newProc(t, st, mods, func(c *projection.Config) {
				c.Hooks = rec.hooks()
				c.Policy = projection.Policy{OnError: projection.DeadLetter, MaxAttempts: 2}
			})
			sh, err := p.Open(ctx, shard, 1, projection.ShardOptions{})
			require.NoError(t, err)
			push(t, sh, evs, 100)
			check(t, st, without(fs, poison...))
			require.Equal(t, "600", cursor(t, st))
			ls, err := st.DeadLetters.List(ctx, "flights", deadletter.Filter{})
			require.NoError(t, err)
			require.Len(t, ls, 3)
			for i, l := range ls {
				ev := evs[poison[i]]
				require.Equal(t, ev.Seq, l.Seq)
				require.Equal(t, ev.Data, l.Data)
				require.Equal(t, ev.PartitionKey, l.PartitionKey)
				require.Equal(t, deadletter.StateFailed, l.State)
				require.Equal(t, projection.KindFail, l.ErrorKind)
				require.Contains(t, l.Error, `field "delay" missing or not an integer`)
				require.GreaterOrEqual(t, l.Attempts, 3, "2 attempts of the batch, then the bisection")
			}
			require.Len(t, rec.dead, 3)

			// Deploy the fixed handler and replay.
			mods.m.Store(lenient)
			for _, l := range ls {
				require.NoError(t, st.DeadLetters.Transition(ctx, "flights", l.ShardID, l.Seq,
					[]deadletter.State{deadletter.StateFailed}, deadletter.StateReplayRequested, ""))
				l.State = deadletter.StateReplayRequested
			}
			stale := append([]deadletter.Letter(nil), ls...)
			for i := range stale {
				stale[i].State = deadletter.StateReplayRequested
			}
			require.NoError(t, sh.Replay(ctx, stale))
			check(t, st, fs)
			ls, err = st.DeadLetters.List(ctx, "flights", deadletter.Filter{State: deadletter.StateReplayed})
			require.NoError(t, err)
			require.Len(t, ls, 3)
			require.Equal(t, "600", ls[0].ReplayedSeq)
			// A second replay (a stale list) changes nothing.
			require.NoError(t, sh.Replay(ctx, stale))
			check(t, st, fs)
			sh.Close(ctx)
		})
	}
}

// Stop policy: the events before the malformed one are committed, the shard stops with the
// error on its cursor, and after a resume (with the fixed handler) it continues from there.
func TestStopAndResume(t *testing.T) {
	withFailingEvent(t, projection.Policy{}, func(t *testing.T, fs []flightcheck.Flight,
		evs []event.Event, st *store.Stores, p *projection.Processor, rec *recorder, fix func()) {
		ctx := context.Background()
		require.Equal(t, projection.Stop, p.Config().Policy.OnError)
		sh, err := p.Open(ctx, shard, 1, projection.ShardOptions{})
		require.NoError(t, err)
		err = sh.Handle(ctx, evs[:200])
		require.ErrorIs(t, err, projection.ErrStopped)
		require.ErrorIs(t, sh.Handle(ctx, evs[200:]), projection.ErrStopped)
		require.Equal(t, "123", cursor(t, st), "events before the failing one are committed")
		check(t, st, fs[:123])
		c, err := st.Cursors.Get(ctx, "flights", shard)
		require.NoError(t, err)
		require.Contains(t, c.Stopped, "at seq 124")
		require.Len(t, rec.stopped, 1)
		// 5 attempts of the batch of 200; bisection probes failing: 100..149, 100..124, 123 alone.
		require.Len(t, rec.errs, projection.DefaultMaxAttempts+3)

		// Stopped across owners too.
		sh.Close(ctx)
		sh, err = p.Open(ctx, shard, 2, projection.ShardOptions{})
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(sh.Stopped(), "handler fail at seq 124"), sh.Stopped())
		ok, err := sh.CheckResumed(ctx)
		require.NoError(t, err)
		require.False(t, ok)

		fix()
		require.NoError(t, st.Cursors.Resume(ctx, "flights", shard))
		ok, err = sh.CheckResumed(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, "123", sh.Position())
		push(t, sh, evs[123:], 50)
		check(t, st, fs)
		sh.Close(ctx)
	})
}

// A mutation the read model cannot store (store.Stores.CheckMutation) is the handler's bad
// output, charged to the event that produced it, not a commit retried for ever.
func TestUnstorableMutationIsChargedToItsEvent(t *testing.T) {
	fs := flightcheck.Load(t, flightcheck.DataPath("flights-2k.json"))[:200]
	evs := events(fs)
	st := *storetest.Backends()[0].Open(t)
	st.CheckMutation = func(_ string, m event.Mutation) error {
		if m.Key == "ORD" {
			return errors.New("too big for this store")
		}
		return nil
	}
	sh, rec := openFlights(t, &st, projection.Policy{OnError: projection.DeadLetter, MaxAttempts: 1})
	ctx := context.Background()
	push(t, sh, evs, 50)
	ord := indexesOf(fs, "ORD")
	require.NotEmpty(t, ord)
	require.Len(t, rec.dead, len(ord), "every ORD event dead-lettered")
	for _, l := range rec.dead {
		require.Equal(t, projection.KindBadOutput, l.ErrorKind)
		require.Contains(t, l.Error, "airports/ORD cannot be stored in the read model: too big for this store")
	}
	check(t, &st, without(fs, ord...))
	sh.Close(ctx)
}
