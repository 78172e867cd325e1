package container_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/container"
	"github.com/projhost/projhost/internal/flightcheck"
	"github.com/projhost/projhost/internal/reshardcheck"
	"github.com/projhost/projhost/projection"
	"github.com/projhost/projhost/source/memsource"
	"github.com/projhost/projhost/store/sqlite"
)

// A live shard set: two workers run while the in-memory stream is split and merged under them.
// New shards get leases without a restart, every closed parent is finished by its owner, no
// child event is handled before every parent is finished (so each key's parent events are
// applied before its child events), and the read model is exact.
func TestLiveShardSetResharding(t *testing.T) {
	fs := flightcheck.Load(t, flightcheck.DataPath("flights-2k.json"))
	src := memsource.New(2)
	st, err := sqlite.Open(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	mod := load(t, "flightdelays-as")
	ord := reshardcheck.New()
	hooks := ord.Hooks()
	appendFlights := func(part []flightcheck.Flight) {
		recs := make([]memsource.Record, len(part))
		for i, f := range part {
			recs[i] = memsource.Record{PartitionKey: f.Origin, Data: f.JSON()}
		}
		_, err := src.Append(context.Background(), recs)
		require.NoError(t, err)
	}
	newRunner := func(id string, until bool) *container.Runner {
		r, err := container.New(container.Config{
			Config: projection.Config{Projection: "flights", Stores: st, Modules: projection.Fixed(mod), Logger: quiet,
				Hooks: hooks, CursorEveryEvents: 50},
			WorkerID: id, Source: src, BatchSize: 20, BatchWait: 10 * time.Millisecond,
			LeaseDuration: 30 * time.Second, ShardSync: 100 * time.Millisecond, ControlCheck: 50 * time.Millisecond,
			UntilCaughtUp: until,
		})
		require.NoError(t, err)
		return r
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	w1, w2 := newRunner("w1", false), newRunner("w2", false)
	done := make(chan error, 2)
	go func() { done <- w1.Run(ctx) }()
	go func() { done <- w2.Run(ctx) }()

	appendFlights(fs[:400])
	time.Sleep(200 * time.Millisecond) // the parents are being read while they are split
	a, err := src.Split(memsource.ShardID(0))
	require.NoError(t, err)
	appendFlights(fs[400:900])
	b, err := src.Split(memsource.ShardID(1))
	require.NoError(t, err)
	appendFlights(fs[900:1400])
	_, err = src.Merge(a[1], b[0]) // the two middle ranges are adjacent
	require.NoError(t, err)
	appendFlights(fs[1400:])

	// A third worker with --until-caught-up returns once everything is projected.
	w3 := newRunner("w3", true)
	require.NoError(t, w3.Run(ctx))
	cancel()
	require.NoError(t, <-done)
	require.NoError(t, <-done)

	docs, err := st.ReadModel.Scan(context.Background(), "flights", "")
	require.NoError(t, err)
	flightcheck.Check(t, fs, docs)

	shards, err := src.Shards(context.Background())
	require.NoError(t, err)
	require.Len(t, shards, 7)
	ord.Check(t, shards, true)
	leases, err := st.Leases.List(context.Background(), "flights")
	require.NoError(t, err)
	require.Len(t, leases, 7)
}
