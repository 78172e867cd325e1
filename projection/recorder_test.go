package projection_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/cursorstore"
	"github.com/projhost/projhost/event"
	"github.com/projhost/projhost/host"
	"github.com/projhost/projhost/internal/flightcheck"
	"github.com/projhost/projhost/internal/storetest"
	"github.com/projhost/projhost/internal/testwasm"
	"github.com/projhost/projhost/projection"
	"github.com/projhost/projhost/readmodel"
	"github.com/projhost/projhost/store"
)

// versions is a ModuleProvider over named modules whose current one can be changed (a deploy);
// with record set it is a ModuleRecorder keeping the latest record per shard in memory, the
// way deploy.Follower keeps them in the registry (a record of an older epoch is dropped).
type versions struct {
	swap
	mu      sync.Mutex
	byName  map[string]*host.Module
	records map[string]projection.ModuleInfo
}

func (v *versions) RecordModule(_ context.Context, i projection.ModuleInfo) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if r, ok := v.records[i.ShardID]; !ok || r.Epoch <= i.Epoch {
		v.records[i.ShardID] = i
	}
	return nil
}

func (v *versions) ModuleAfter(_ context.Context, shardID, seq string) (*host.Module, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	r, ok := v.records[shardID]
	if !ok || event.CompareSeq(r.Seq, seq) > 0 {
		return nil, nil
	}
	return v.byName[r.Module], nil
}

// plain hides versions' ModuleRecorder methods: a provider without records.
type plain struct{ v *versions }

func (p plain) Module() *host.Module { return p.v.Module() }

// failingSave is a cursor store whose Save fails while armed, after the read model's Apply of
// the same commit went through: an owner interrupted between the two writes of a Fenced commit.
type failingSave struct {
	cursorstore.Store
	armed atomic.Bool
	die   context.CancelFunc // called by an armed Save: the worker's end
}

var errCut = errors.New("test: the worker died between the read model's write and the cursor save")

func (f *failingSave) Save(ctx context.Context, projection, shardID string, epoch int64, seq string) error {
	if f.armed.Load() {
		f.die()
		return errCut
	}
	return f.Store.Save(ctx, projection, shardID, epoch, seq)
}

// TestInterruptedWriteReplayedByItsModule (issue 11): on a Fenced store (DynamoDB), an owner
// running count writes the documents of events 301..600 and dies before saving the cursor; the
// active module changes to flightdelays meanwhile. The next owner handles 301..600 again with
// count, the module that wrote them (the provider's record), then switches to flightdelays: the
// count documents count 1..600 exactly once and the flightdelays documents hold exactly
// 601..900. The module records say so. Without records (a plain provider) the range is handled
// by flightdelays and 301..600 end up in both modules' documents: the check fails.
func TestInterruptedWriteReplayedByItsModule(t *testing.T) {
	fs := flightcheck.Load(t, flightcheck.DataPath("flights-2k.json"))[:900]
	evs := events(fs)
	count, fd := load(t, testwasm.CountAS), load(t, testwasm.FlightDelaysAS)
	var dynamo storetest.Backend
	for _, b := range storetest.Backends() {
		if b.Name == "dynamodb" {
			dynamo = b
		}
	}
	for _, recorded := range []bool{true, false} {
		name := map[bool]string{true: "recorded", false: "unrecorded"}[recorded]
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := dynamo.Open(t)
			require.Equal(t, store.Fenced, st.Mode)
			cut := &failingSave{Store: st.Cursors}
			st1 := *st
			st1.Cursors = cut
			v := &versions{byName: map[string]*host.Module{count.Name(): count, fd.Name(): fd}, records: map[string]projection.ModuleInfo{}}
			v.m.Store(count)
			var mods projection.ModuleProvider = v
			if !recorded {
				mods = plain{v}
			}
			var mu sync.Mutex
			var switches []projection.ModuleInfo
			hooks := projection.Hooks{Module: func(i projection.ModuleInfo) { mu.Lock(); switches = append(switches, i); mu.Unlock() }}

			p1 := newProc(t, &st1, mods, func(c *projection.Config) { c.Hooks = hooks })
			sh1, err := p1.Open(ctx, shard, 1, projection.ShardOptions{})
			require.NoError(t, err)
			push(t, sh1, evs[:300], 100)
			cctx, cancel := context.WithCancel(ctx)
			cut.die = cancel
			cut.armed.Store(true)
			// 300 pending events: Handle commits them, and dies in the cursor save.
			require.ErrorIs(t, sh1.Handle(cctx, evs[300:600]), context.Canceled)
			sh1.Close(ctx)
			require.Equal(t, "300", cursor(t, st))
			v.m.Store(fd) // a deploy activates flightdelays

			p2 := newProc(t, st, mods, func(c *projection.Config) { c.Hooks = hooks })
			sh2, err := p2.Open(ctx, shard, 2, projection.ShardOptions{})
			require.NoError(t, err)
			push(t, sh2, evs[300:], 100)
			sh2.Close(ctx)
			require.Equal(t, "900", cursor(t, st))

			docs, err := st.ReadModel.Scan(ctx, "flights", "")
			require.NoError(t, err)
			counts, want := map[string]int64{}, map[string]int64{}
			var fdDocs []readmodel.Doc
			for _, d := range docs {
				if d.Collection != "counts" {
					fdDocs = append(fdDocs, d)
					continue
				}
				var c struct{ Count int64 }
				require.NoError(t, json.Unmarshal(d.Doc, &c))
				counts[d.Key] = c.Count
			}
			for _, f := range fs[:600] {
				want[f.Origin]++
			}
			if !recorded {
				// The interrupted range went to flightdelays too: its documents hold 301..900.
				got, err := flightcheck.Decode(fdDocs)
				require.NoError(t, err)
				require.NotEmpty(t, flightcheck.Diff(flightcheck.Expected(fs[600:]), got, 1))
				require.Empty(t, flightcheck.Diff(flightcheck.Expected(fs[300:]), got, 5))
				require.Equal(t, want, counts)
				return
			}
			require.Equal(t, want, counts, "count documents: events 1..600, each once")
			flightcheck.Check(t, fs[600:], fdDocs)
			mu.Lock()
			defer mu.Unlock()
			require.Len(t, switches, 3)
			require.Equal(t, []string{"", "300", "600"}, []string{switches[0].Seq, switches[1].Seq, switches[2].Seq})
			require.Equal(t, []string{count.Name(), count.Name(), fd.Name()}, []string{switches[0].Module, switches[1].Module, switches[2].Module})
			require.Equal(t, projection.ModuleInfo{ShardInfo: projection.ShardInfo{Projection: "flights", ShardID: shard, Epoch: 2},
				Module: fd.Name(), From: count.Name(), Seq: "600"}, v.records[shard])
		})
	}
}

// An idle shard that runs a module switches at its next empty batch (what `status` shows
// then); one that never handled anything gets no handler from an empty batch.
func TestIdleShardSwitchesAtAnEmptyBatch(t *testing.T) {
	fs := flightcheck.Load(t, flightcheck.DataPath("flights-2k.json"))[:100]
	count, fd := load(t, testwasm.CountAS), load(t, testwasm.FlightDelaysAS)
	ctx := context.Background()
	st := storetest.Backends()[0].Open(t)
	mods := newSwap(count)
	var mu sync.Mutex
	var switches []projection.ModuleInfo
	p := newProc(t, st, mods, func(c *projection.Config) {
		c.Hooks = projection.Hooks{Module: func(i projection.ModuleInfo) { mu.Lock(); switches = append(switches, i); mu.Unlock() }}
	})
	idle, err := p.Open(ctx, "other", 1, projection.ShardOptions{})
	require.NoError(t, err)
	require.NoError(t, idle.Handle(ctx, nil))
	sh, err := p.Open(ctx, shard, 1, projection.ShardOptions{})
	require.NoError(t, err)
	push(t, sh, events(fs), 50)
	mods.m.Store(fd)
	require.NoError(t, sh.Handle(ctx, nil))
	require.NoError(t, idle.Handle(ctx, nil))
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []projection.ModuleInfo{
		{ShardInfo: projection.ShardInfo{Projection: "flights", ShardID: shard, Epoch: 1}, Module: count.Name(), Seq: ""},
		{ShardInfo: projection.ShardInfo{Projection: "flights", ShardID: shard, Epoch: 1}, Module: fd.Name(), From: count.Name(), Seq: "100"},
	}, switches)
}
