package container_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/container"
	"github.com/projhost/projhost/internal/flightcheck"
	"github.com/projhost/projhost/projection"
	"github.com/projhost/projhost/source"
	"github.com/projhost/projhost/source/memsource"
	"github.com/projhost/projhost/store/sqlite"
)

// probeSource is a memsource stream seen as Kinesis is: no Header, a Prober (from the stream's
// heads: More when events follow the position, MillisBehind 0 only then not).
type probeSource struct {
	s      *memsource.Stream
	probes atomic.Int64
}

func (p *probeSource) Shards(ctx context.Context) ([]source.Shard, error) { return p.s.Shards(ctx) }
func (p *probeSource) Open(ctx context.Context, id, after string) (source.ShardReader, error) {
	return p.s.Open(ctx, id, after)
}

func (p *probeSource) Probe(ctx context.Context, id, after string) (source.Probe, error) {
	p.probes.Add(1)
	head, err := p.s.Head(ctx, id)
	if err != nil {
		return source.Probe{}, err
	}
	if source.CompareSeq(head, after) > 0 {
		return source.Probe{More: true, MillisBehind: 1}, nil
	}
	return source.Probe{MillisBehind: 0}, nil
}

// TestUntilCaughtUpByProbes: a worker with UntilCaughtUp over a source without a Header returns
// only once the shards another worker holds are committed to their tip (it probes them from
// their saved cursors), so the read model is exact when it returns; it probed, and not more
// than once per shard per container.ProbeInterval.
func TestUntilCaughtUpByProbes(t *testing.T) {
	fs := flightcheck.Load(t, flightcheck.DataPath("flights-2k.json"))
	ms := memsource.New(4)
	src := &probeSource{s: ms}
	st, err := sqlite.Open(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	mod := load(t, "flightdelays-as")
	newRunner := func(id string, until bool) *container.Runner {
		r, err := container.New(container.Config{
			Config: projection.Config{Projection: "flights", Stores: st, Modules: projection.Fixed(mod), Logger: quiet,
				CursorEvery: 300 * time.Millisecond},
			WorkerID: id, Source: src, BatchSize: 50, BatchWait: 10 * time.Millisecond,
			LeaseDuration: 30 * time.Second, ShardSync: 100 * time.Millisecond, UntilCaughtUp: until,
		})
		require.NoError(t, err)
		return r
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	w1 := newRunner("w1", false)
	done := make(chan error, 1)
	go func() { done <- w1.Run(ctx) }()
	require.Eventually(t, func() bool { return len(w1.Owned()) == 4 }, 30*time.Second, 10*time.Millisecond)

	recs := make([]memsource.Record, len(fs))
	for i, f := range fs {
		recs[i] = memsource.Record{PartitionKey: f.Origin, Data: f.JSON()}
	}
	_, err = ms.Append(ctx, recs)
	require.NoError(t, err)
	// w2 takes its share (2 shards) from w1; w1 keeps 2, which w2 knows only by probes.
	w2 := newRunner("w2", true)
	start := time.Now()
	require.NoError(t, w2.Run(ctx))
	elapsed := time.Since(start)

	docs, err := st.ReadModel.Scan(context.Background(), "flights", "")
	require.NoError(t, err)
	flightcheck.Check(t, fs, docs)
	n := src.probes.Load()
	require.Positive(t, n, "w2 probed w1's shards")
	require.LessOrEqual(t, n, 4*(int64(elapsed/container.ProbeInterval)+1), "probes in %v", elapsed)
	cancel()
	require.NoError(t, <-done)
}

// notDueReader is a reader as Kinesis' is between two calls: every other Read returns an empty
// batch at once, its lag unknown (MillisBehind and EventsBehind -1), without reading.
type notDueReader struct {
	source.ShardReader
	n int
}

func (r *notDueReader) Read(ctx context.Context, max int, wait time.Duration) (source.Batch, error) {
	r.n++
	if r.n%2 == 0 {
		return source.Batch{MillisBehind: -1, EventsBehind: -1}, nil
	}
	b, err := r.ShardReader.Read(ctx, max, wait)
	b.EventsBehind = -1 // Kinesis cannot tell
	return b, err
}

// notDueSource is probeSource with notDueReaders.
type notDueSource struct{ probeSource }

func (p *notDueSource) Open(ctx context.Context, id, after string) (source.ShardReader, error) {
	r, err := p.s.Open(ctx, id, after)
	if err != nil {
		return nil, err
	}
	return &notDueReader{ShardReader: r}, nil
}

// TestUntilCaughtUpNotByUnknownLag: over a source without a Header, a worker's own shard is
// caught up only by an empty read known to be at the tip (MillisBehind 0), not by an empty one
// whose lag is unknown (-1: a Kinesis reader whose next call was not due, after a page of
// records): with every other read such, UntilCaughtUp returns only once the read model is
// exact.
func TestUntilCaughtUpNotByUnknownLag(t *testing.T) {
	fs := flightcheck.Load(t, flightcheck.DataPath("flights-2k.json"))
	ms := memsource.New(2)
	recs := make([]memsource.Record, len(fs))
	for i, f := range fs {
		recs[i] = memsource.Record{PartitionKey: f.Origin, Data: f.JSON()}
	}
	_, err := ms.Append(context.Background(), recs)
	require.NoError(t, err)
	st, err := sqlite.Open(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	r, err := container.New(container.Config{
		Config: projection.Config{Projection: "flights", Stores: st, Modules: projection.Fixed(load(t, "flightdelays-as")), Logger: quiet,
			CursorEveryEvents: 50},
		WorkerID: "w1", Source: &notDueSource{probeSource{s: ms}}, BatchSize: 50, BatchWait: 10 * time.Millisecond,
		LeaseDuration: 30 * time.Second, UntilCaughtUp: true,
	})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	require.NoError(t, r.Run(ctx))
	require.NoError(t, ctx.Err(), "caught up within 60 s")
	docs, err := st.ReadModel.Scan(context.Background(), "flights", "")
	require.NoError(t, err)
	flightcheck.Check(t, fs, docs)
}
