package status_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/projhost/projhost/deadletter"
	"github.com/projhost/projhost/internal/dynamotest"
	"github.com/projhost/projhost/internal/storetest"
	"github.com/projhost/projhost/registry"
	"github.com/projhost/projhost/shardmap"
	"github.com/projhost/projhost/shardmap/memlease"
	"github.com/projhost/projhost/source"
	"github.com/projhost/projhost/status"
	"github.com/projhost/projhost/store"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

// fakeSource lists shards and gives each a head, as the journal does (consecutive numbers
// from 1).
type fakeSource struct {
	shards []source.Shard
	heads  map[string]string
}

func (f fakeSource) Shards(context.Context) ([]source.Shard, error) { return f.shards, nil }
func (f fakeSource) Head(_ context.Context, id string) (string, error) {
	return f.heads[id], nil
}

// fakeProber answers a probe per shard.
type fakeProber map[string]source.Probe

func (f fakeProber) Probe(_ context.Context, id, _ string) (source.Probe, error) {
	p, ok := f[id]
	if !ok {
		return source.Probe{}, fmt.Errorf("probe %s: %w", id, source.ErrUnknownShard)
	}
	return p, nil
}

// TestRows sets up one shard per situation on both stores, watches the leases with a manual
// clock across a lease duration in which only some owners renew, and checks each row.
func TestRows(t *testing.T) {
	type want struct {
		owner, lease, run, state, cursor, stopped string
		lag                                       int64
		paused                                    bool
		letters                                   int
		version                                   int64
	}
	cases := []struct {
		shard   string
		lease   *shardmap.Lease // nil: no lease
		renews  bool            // the owner renews during the watch
		cursor  string
		stop    string // the stop policy's reason
		pause   bool
		letters []deadletter.State
		version int64
		head    string
		want    want
	}{
		{shard: "live", lease: &shardmap.Lease{Owner: "w1"}, renews: true, cursor: "7", head: "10", letters: []deadletter.State{deadletter.StateFailed, deadletter.StateReplayed}, version: 2,
			want: want{owner: "w1", lease: status.LeaseLive, run: status.RunRunning, state: "active", cursor: "7", lag: 3, letters: 1, version: 2}},
		{shard: "dead", lease: &shardmap.Lease{Owner: "w2"}, cursor: "4", head: "9",
			want: want{owner: "w2", lease: status.LeaseExpired, run: status.RunIdle, state: "active", cursor: "4", lag: 5}},
		{shard: "free", lease: &shardmap.Lease{}, head: "2",
			want: want{lease: status.LeaseFree, run: status.RunIdle, state: "active", lag: 2}},
		{shard: "nolease", head: "",
			want: want{lease: status.LeaseFree, run: status.RunIdle}},
		{shard: "paused", lease: &shardmap.Lease{Owner: "w1"}, renews: true, pause: true, cursor: "3", head: "3",
			want: want{owner: "w1", lease: status.LeaseLive, run: status.RunPaused, state: "active", cursor: "3", paused: true}},
		{shard: "stopped", lease: &shardmap.Lease{Owner: "w1"}, renews: true, cursor: "5", stop: "handler failed <b>at seq 6</b>", head: "8",
			want: want{owner: "w1", lease: status.LeaseLive, run: status.RunStopped, state: "STOPPED", cursor: "5", lag: 3, stopped: "handler failed <b>at seq 6</b>"}},
		{shard: "finished", lease: &shardmap.Lease{State: shardmap.StateFinished}, cursor: "6", head: "6",
			want: want{lease: status.LeaseFree, run: status.RunFinished, state: "finished", cursor: "6"}},
	}
	for _, b := range storetest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			st := b.Open(t)
			proj := "status-" + b.Name
			src := fakeSource{heads: map[string]string{}}
			for _, c := range cases {
				src.shards = append(src.shards, source.Shard{ID: c.shard})
				src.heads[c.shard] = c.head
				if c.lease != nil {
					l := *c.lease
					l.Projection, l.ShardID, l.Counter, l.Epoch = proj, c.shard, 1, 1
					if l.State == "" {
						l.State = shardmap.StateActive
					}
					must(t, st.Leases.Create(ctx, l))
				}
				if c.cursor != "" {
					_, err := st.Cursors.Claim(ctx, proj, c.shard, 1)
					must(t, err)
					must(t, st.Cursors.Save(ctx, proj, c.shard, 1, c.cursor))
				}
				if c.stop != "" {
					must(t, st.Cursors.Stop(ctx, proj, c.shard, 1, c.stop))
				}
				if c.pause {
					must(t, st.Cursors.SetPaused(ctx, proj, c.shard, true))
				}
				for i, s := range c.letters {
					must(t, st.DeadLetters.Put(ctx, deadletter.Letter{Projection: proj, ShardID: c.shard, Seq: fmt.Sprint(i + 1),
						Error: "x", ErrorKind: "fail", Attempts: 1, FirstFailure: time.Now(), LastFailure: time.Now(), State: s}))
				}
				if c.version > 0 {
					must(t, st.Registry.SetShard(ctx, registry.ShardVersion{Projection: proj, ShardID: c.shard, Epoch: 1, Version: c.version, Seq: "5"}))
				}
			}
			clock := shardmap.NewManualClock(0)
			w := status.NewWatcher(6*time.Second, clock)
			cfg := status.Config{Stores: st, Source: src, Header: src, Watcher: w}
			rows, err := status.Rows(ctx, cfg, []string{proj})
			must(t, err)
			for _, r := range rows {
				if r.Owner != "" && r.Lease != status.LeaseUnknown {
					t.Errorf("%s: first look: lease %q, want unknown (one look cannot tell)", r.Shard, r.Lease)
				}
			}
			// Half a lease duration later, the renewing owners have renewed: live. The silent
			// ones are still unknown.
			clock.Advance(3 * time.Second)
			renew(t, st, proj, cases[0].shard, cases[4].shard, cases[5].shard)
			rows, err = status.Rows(ctx, cfg, []string{proj})
			must(t, err)
			byShard := map[string]status.Row{}
			for _, r := range rows {
				byShard[r.Shard] = r
			}
			if byShard["live"].Lease != status.LeaseLive || byShard["dead"].Lease != status.LeaseUnknown || byShard["dead"].RunState != status.RunRunning {
				t.Fatalf("after a renewal: live %+v, dead %+v; want live, and unknown (running) for the silent one", byShard["live"], byShard["dead"])
			}
			// A lease duration after the first look, the silent owner's lease is expired.
			clock.Advance(3 * time.Second)
			renew(t, st, proj, cases[0].shard, cases[4].shard, cases[5].shard)
			rows, err = status.Rows(ctx, cfg, []string{proj})
			must(t, err)
			if len(rows) != len(cases) {
				t.Fatalf("%d rows, want %d", len(rows), len(cases))
			}
			for i, c := range cases {
				r := rows[i]
				got := want{owner: r.Owner, lease: r.Lease, run: r.RunState, state: r.State, cursor: r.Cursor, stopped: r.Stopped,
					lag: r.LagEvents, paused: r.Paused, letters: r.DeadLetters, version: r.Version}
				if r.Shard != c.shard || got != c.want {
					t.Errorf("row %d (%s):\n got %+v\nwant %+v", i, r.Shard, got, c.want)
				}
				if r.Head != c.head || r.Projection != proj {
					t.Errorf("row %s: head %q projection %q, want %q %q", r.Shard, r.Head, r.Projection, c.head, proj)
				}
			}
			if r := rows[1]; r.LeaseSilentMs != 6000 {
				t.Errorf("dead: silent %d ms, want 6000 (the manual clock's lease duration)", r.LeaseSilentMs)
			}
			if names, err := status.Projections(ctx, st.Leases); b.Name == "sqlite" && (err != nil || len(names) != 1 || names[0] != proj) {
				t.Errorf("Projections = %v, %v; want [%s]", names, err, proj)
			} else if b.Name == "dynamodb" && !errors.Is(err, status.ErrNoLister) {
				t.Errorf("Projections on DynamoDB: %v, want ErrNoLister", err)
			}
		})
	}
}

// renew rewrites the leases of shards unchanged, as their owner's renewal does (counter + 1).
func renew(t *testing.T, st *store.Stores, proj string, shards ...string) {
	t.Helper()
	ls, err := st.Leases.List(context.Background(), proj)
	must(t, err)
	for _, l := range ls {
		for _, s := range shards {
			if l.ShardID == s {
				_, err := st.Leases.Update(context.Background(), l)
				must(t, err)
			}
		}
	}
}

// TestRowsKinesis: without a Header, a Prober gives the lag in ms; a finished shard is not
// probed; a failing probe is the row's Problem.
func TestRowsKinesis(t *testing.T) {
	ctx := context.Background()
	st := storetest.Backends()[0].Open(t)
	ls := st.Leases
	must(t, ls.Create(ctx, shardmap.Lease{Projection: "k", ShardID: "a", State: shardmap.StateActive}))
	must(t, ls.Create(ctx, shardmap.Lease{Projection: "k", ShardID: "b", State: shardmap.StateFinished}))
	src := fakeSource{shards: []source.Shard{{ID: "a"}, {ID: "b", Closed: true}, {ID: "gone"}}}
	rows, err := status.Rows(ctx, status.Config{Stores: st, Source: src, Prober: fakeProber{"a": {More: true, MillisBehind: 1500}}}, []string{"k"})
	must(t, err)
	if len(rows) != 3 {
		t.Fatalf("%d rows", len(rows))
	}
	if r := rows[0]; r.LagMillis == nil || *r.LagMillis != 1500 || !*r.RecordsBehind || r.LagEvents != -1 || r.Lease != status.LeaseFree {
		t.Errorf("a: %+v", r)
	}
	if r := rows[1]; r.LagMillis == nil || *r.LagMillis != 0 || *r.RecordsBehind || r.RunState != status.RunFinished || !r.Closed {
		t.Errorf("b (finished): %+v", r)
	}
	if r := rows[2]; !strings.Contains(r.Problem, "probe gone") || r.LagMillis != nil {
		t.Errorf("gone: problem %q, want the probe's error", r.Problem)
	}
	if _, err := status.Rows(ctx, status.Config{Source: src}, []string{"k"}); !errors.Is(err, status.ErrConfig) {
		t.Errorf("Rows without Stores: %v, want ErrConfig", err)
	}
}

// TestWatch: Watch returns once every owned lease is judged (one look cannot tell): live after
// its owner's renewal, expired after a lease duration without one; a lease without owner is
// not judged.
func TestWatch(t *testing.T) {
	ctx := context.Background()
	ls := memlease.New()
	must(t, ls.Create(ctx, shardmap.Lease{Projection: "p", ShardID: "live", Owner: "w1", State: shardmap.StateActive}))
	must(t, ls.Create(ctx, shardmap.Lease{Projection: "p", ShardID: "dead", Owner: "w2", State: shardmap.StateActive}))
	must(t, ls.Create(ctx, shardmap.Lease{Projection: "p", ShardID: "free", State: shardmap.StateActive}))
	done := make(chan struct{})
	defer close(done)
	go func() { // w1 renews every 20 ms
		for {
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
			l, _ := ls.List(ctx, "p")
			for _, x := range l {
				if x.ShardID == "live" {
					_, _ = ls.Update(ctx, x)
				}
			}
		}
	}()
	w := status.NewWatcher(300*time.Millisecond, nil)
	must(t, w.Watch(ctx, ls, []string{"p"}, 10*time.Millisecond))
	l, err := ls.List(ctx, "p")
	must(t, err)
	got := w.Observe("p", l)
	if got["live"].Lease != status.LeaseLive || got["dead"].Lease != status.LeaseExpired || len(got) != 2 {
		t.Fatalf("after Watch: %+v; want live live, dead expired, free not judged", got)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := status.NewWatcher(time.Hour, nil).Watch(cctx, ls, []string{"p"}, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("Watch with a done context: %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
