package container_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/container"
	"github.com/projhost/projhost/internal/flightcheck"
	"github.com/projhost/projhost/projection"
	"github.com/projhost/projhost/source/memsource"
	"github.com/projhost/projhost/store/sqlite"
)

// order records, in the order they happened, the first batch of each shard and each lease
// finish, across workers.
type order struct {
	mu       sync.Mutex
	seq      int
	first    map[string]int // shard -> position of its first handled batch
	finished map[string]int // shard -> position of its lease finish
}

func (o *order) hooks() projection.Hooks {
	o.first, o.finished = map[string]int{}, map[string]int{}
	return projection.Hooks{
		Batch: func(i projection.BatchInfo) {
			o.mu.Lock()
			defer o.mu.Unlock()
			o.seq++
			if _, ok := o.first[i.ShardID]; !ok {
				o.first[i.ShardID] = o.seq
			}
		},
		Lease: func(i projection.LeaseInfo) {
			if i.Event != projection.LeaseFinished {
				return
			}
			o.mu.Lock()
			defer o.mu.Unlock()
			o.seq++
			o.finished[i.ShardID] = o.seq
		},
	}
}

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
	var ord order
	hooks := ord.hooks()
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
	ord.mu.Lock()
	defer ord.mu.Unlock()
	for _, sh := range shards {
		if sh.Closed {
			require.Contains(t, ord.finished, sh.ID, "closed shard %s finished", sh.ID)
		}
		first, ok := ord.first[sh.ID]
		require.True(t, ok, "shard %s handled", sh.ID)
		for _, p := range sh.ParentIDs {
			require.Less(t, ord.finished[p], first, "shard %s started before its parent %s finished", sh.ID, p)
		}
	}
	leases, err := st.Leases.List(context.Background(), "flights")
	require.NoError(t, err)
	require.Len(t, leases, 7)
}
