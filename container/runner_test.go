package container_test

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/container"
	"github.com/projhost/projhost/deadletter"
	"github.com/projhost/projhost/event"
	"github.com/projhost/projhost/host"
	"github.com/projhost/projhost/internal/flightcheck"
	"github.com/projhost/projhost/internal/testwasm"
	"github.com/projhost/projhost/projection"
	"github.com/projhost/projhost/shardmap"
	"github.com/projhost/projhost/source"
	"github.com/projhost/projhost/source/journal"
	"github.com/projhost/projhost/store"
	"github.com/projhost/projhost/store/sqlite"
)

var quiet = slog.New(slog.DiscardHandler)

type env struct {
	j   *journal.Journal
	st  *store.Stores
	mod *host.Module
}

func newEnv(t *testing.T, shards int) *env {
	t.Helper()
	dir := t.TempDir()
	j, err := journal.Create(dir, shards)
	require.NoError(t, err)
	t.Cleanup(func() { j.Close() })
	st, err := sqlite.Open(dir)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	return &env{j: j, st: st, mod: load(t, testwasm.FlightDelaysAS)}
}

func load(t *testing.T, name string) *host.Module {
	t.Helper()
	ctx := context.Background()
	rt, err := host.NewRuntime(ctx, host.WithLogger(quiet)) // the default compilation cache: the Go module compiles once
	require.NoError(t, err)
	t.Cleanup(func() { rt.Close(ctx) })
	wasm, err := os.ReadFile(testwasm.Path(t, name))
	require.NoError(t, err)
	mod, err := rt.Load(ctx, name, wasm)
	require.NoError(t, err)
	return mod
}

// append appends flights; those at the indexes in quoted in the malformed form.
func (e *env) append(t *testing.T, fs []flightcheck.Flight, quoted ...int) {
	t.Helper()
	bad := map[int]bool{}
	for _, i := range quoted {
		bad[i] = true
	}
	evs := make([]journal.AppendEvent, len(fs))
	for i, f := range fs {
		d := f.JSON()
		if bad[i] {
			d = f.QuotedJSON()
		}
		evs[i] = journal.AppendEvent{PartitionKey: f.Origin, Data: d}
	}
	_, err := e.j.Append(context.Background(), evs)
	require.NoError(t, err)
}

func (e *env) runner(t *testing.T, mut func(*container.Config)) *container.Runner {
	t.Helper()
	cfg := container.Config{
		Config: projection.Config{Projection: "flights", Stores: e.st, Modules: projection.Fixed(e.mod), Logger: quiet,
			RetryMin: time.Millisecond, RetryMax: 20 * time.Millisecond},
		WorkerID: "w1", Source: e.j,
		// A long lease: on a loaded machine a short one may lapse, and the replays that follow
		// would make the event counts below vary.
		BatchWait: 20 * time.Millisecond, LeaseDuration: 30 * time.Second, UntilCaughtUp: true,
		ControlCheck: 50 * time.Millisecond,
	}
	if mut != nil {
		mut(&cfg)
	}
	r, err := container.New(cfg)
	require.NoError(t, err)
	return r
}

func (e *env) check(t *testing.T, fs []flightcheck.Flight) {
	t.Helper()
	docs, err := e.st.ReadModel.Scan(context.Background(), "flights", "")
	require.NoError(t, err)
	flightcheck.Check(t, fs, docs)
}

// ctx2m bounds a test's runs (generous: -race on a loaded 2-core machine).
func ctx2m(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func without(fs []flightcheck.Flight, skip ...int) []flightcheck.Flight {
	out := append([]flightcheck.Flight(nil), fs...)
	for i := len(skip) - 1; i >= 0; i-- {
		out = append(out[:skip[i]], out[skip[i]+1:]...)
	}
	return out
}

func TestProjectsAndResumes(t *testing.T) {
	fs := flightcheck.Load(t, flightcheck.DataPath("flights-2k.json"))
	e := newEnv(t, 3)
	e.append(t, fs[:1200])
	var mu sync.Mutex
	var saves []string
	r := e.runner(t, func(c *container.Config) {
		c.CursorEveryEvents = 100
		c.BatchSize = 50
		c.Hooks.Flush = func(i projection.FlushInfo) { mu.Lock(); saves = append(saves, i.ShardID+"@"+i.Seq); mu.Unlock() }
	})
	ctx := ctx2m(t)
	require.NoError(t, r.Run(ctx))
	e.check(t, fs[:1200])
	st := r.Stats()
	require.EqualValues(t, 1200, st.Events)
	require.Zero(t, st.Failures)
	require.EqualValues(t, len(saves), st.CursorSaves)
	require.GreaterOrEqual(t, len(saves), 12-3, "a save every 100 events per shard")
	require.EqualValues(t, 3, st.LeasesGained)
	require.Zero(t, st.LeasesLost)

	// A second run resumes from the saved cursors: only the new events are handled.
	e.append(t, fs[1200:])
	r2 := e.runner(t, nil)
	require.NoError(t, r2.Run(ctx))
	require.EqualValues(t, 800, r2.Stats().Events)
	e.check(t, fs)
	for _, id := range []string{journal.ShardID(0), journal.ShardID(1), journal.ShardID(2)} {
		c, err := e.st.Cursors.Get(ctx, "flights", id)
		require.NoError(t, err)
		head, err := e.j.Head(ctx, id)
		require.NoError(t, err)
		require.Equal(t, head, c.Seq, id)
	}
}

// The retry policy: a batch the handler fails on is retried and never skipped: the cursor stays
// before it and the read model holds exactly the events before it.
func TestRetryPolicyNeverAdvances(t *testing.T) {
	fs := flightcheck.Load(t, flightcheck.DataPath("flights-2k.json"))[:41]
	e := newEnv(t, 1)
	e.append(t, fs, 30)
	r := e.runner(t, func(c *container.Config) {
		c.BatchSize = 1
		c.CursorEveryEvents = 1
		c.Policy.OnError = projection.Retry
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }() // never catches up: stopped below, gracefully
	for r.Stats().Failures < 4 && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	require.NoError(t, <-done)
	st := r.Stats()
	require.EqualValues(t, 30, st.Events)
	require.Greater(t, st.Failures, int64(3), "the bad batch was retried with backoff")
	c, err := e.st.Cursors.Get(context.Background(), "flights", journal.ShardID(0))
	require.NoError(t, err)
	require.Equal(t, "30", c.Seq)
	e.check(t, fs[:30])
}

// The dead-letter policy end to end in container mode, with replays requested while no worker
// runs: the next run applies them, and --until-caught-up waits for them.
func TestDeadLetterThenReplayOnNextRun(t *testing.T) {
	fs := flightcheck.Load(t, flightcheck.DataPath("flights-2k.json"))
	poison := []int{10, 700, 1500}
	e := newEnv(t, 4)
	e.append(t, fs, poison...)
	ctx := ctx2m(t)
	r := e.runner(t, func(c *container.Config) {
		c.Policy = projection.Policy{OnError: projection.DeadLetter, MaxAttempts: 2}
	})
	require.NoError(t, r.Run(ctx))
	e.check(t, without(fs, poison...))
	require.EqualValues(t, 3, r.Stats().DeadLetters)
	ls, err := e.st.DeadLetters.List(ctx, "flights", deadletter.Filter{State: deadletter.StateFailed})
	require.NoError(t, err)
	require.Len(t, ls, 3)
	for _, l := range ls {
		require.NoError(t, e.st.DeadLetters.Transition(ctx, "flights", l.ShardID, l.Seq,
			[]deadletter.State{deadletter.StateFailed}, deadletter.StateReplayRequested, ""))
	}
	fixed := load(t, testwasm.FlightDelaysGoLenient)
	r2 := e.runner(t, func(c *container.Config) { c.Modules = projection.Fixed(fixed) })
	require.NoError(t, r2.Run(ctx))
	require.EqualValues(t, 3, r2.Stats().Replayed)
	e.check(t, fs)
	ls, err = e.st.DeadLetters.List(ctx, "flights", deadletter.Filter{State: deadletter.StateReplayed})
	require.NoError(t, err)
	require.Len(t, ls, 3)
}

// The stop policy: --until-caught-up returns ErrShardStopped naming the shard instead of
// waiting for ever, the other shards are complete; after a resume the shard goes on.
func TestStopPolicyThenResume(t *testing.T) {
	fs := flightcheck.Load(t, flightcheck.DataPath("flights-2k.json"))
	e := newEnv(t, 4)
	e.append(t, fs, 500)
	ctx := ctx2m(t)
	r := e.runner(t, nil) // default policy: stop
	err := r.Run(ctx)
	require.ErrorIs(t, err, container.ErrShardStopped)
	stoppedShard := ""
	for i := 0; i < 4; i++ {
		c, err := e.st.Cursors.Get(ctx, "flights", journal.ShardID(i))
		require.NoError(t, err)
		if c.Stopped != "" {
			require.Empty(t, stoppedShard, "one shard stopped")
			stoppedShard = journal.ShardID(i)
		}
	}
	require.Contains(t, err.Error(), "shard "+stoppedShard)

	require.NoError(t, e.st.Cursors.Resume(ctx, "flights", stoppedShard))
	fixed := load(t, testwasm.FlightDelaysGoLenient)
	r2 := e.runner(t, func(c *container.Config) { c.Modules = projection.Fixed(fixed) })
	require.NoError(t, r2.Run(ctx))
	e.check(t, fs)
}

func TestNewRejectsBadConfig(t *testing.T) {
	e := newEnv(t, 1)
	cases := []struct {
		name string
		mut  func(*container.Config)
		err  error
		msg  string
	}{
		{"no projection", func(c *container.Config) { c.Projection = "" }, projection.ErrConfig, "projection name is required"},
		{"no worker", func(c *container.Config) { c.WorkerID = "" }, container.ErrConfig, "worker id is required"},
		{"no module", func(c *container.Config) { c.Modules = nil }, projection.ErrConfig, "module provider is required"},
		{"bad policy", func(c *container.Config) { c.Policy.OnError = "skip" }, projection.ErrConfig, `unknown error policy "skip"`},
		{"short lease", func(c *container.Config) { c.LeaseDuration = time.Millisecond }, container.ErrConfig, "at least 1s"},
		{"negative shard sync", func(c *container.Config) { c.ShardSync = -time.Second }, container.ErrConfig,
			"shard-sync -1s is negative: give how often the shard list is read again, e.g. 10s (0: the default, 10s)"},
		{"no dead letters", func(c *container.Config) { s := *e.st; s.DeadLetters = nil; c.Stores = &s }, store.ErrIncomplete, "dead-letter"},
		{"mode without committer", func(c *container.Config) { s := *e.st; s.Committer = nil; c.Stores = &s }, store.ErrIncomplete, "Committer"},
		{"until caught up without head or probe", func(c *container.Config) {
			c.Source, c.UntilCaughtUp = struct{ source.Source }{e.j}, true
		}, container.ErrConfig, "until-caught-up needs a source that reports its head (source.Header: the local journal) or probes its lag (source.Prober: Kinesis)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := container.Config{Config: projection.Config{Projection: "p", Stores: e.st, Modules: projection.Fixed(e.mod)},
				WorkerID: "w", Source: e.j}
			c.mut(&cfg)
			_, err := container.New(cfg)
			require.ErrorIs(t, err, c.err)
			require.Contains(t, err.Error(), c.msg)
		})
	}
}

// TestShardSyncDefault: Validate keeps a positive ShardSync and gives 0 the default (what
// `run --shard-sync 0` gets too: the CLI hands the flag's value over as it is).
func TestShardSyncDefault(t *testing.T) {
	e := newEnv(t, 1)
	for _, c := range []struct{ in, want time.Duration }{
		{0, container.DefaultShardSync},
		{time.Millisecond, time.Millisecond},
		{3 * time.Second, 3 * time.Second},
		{time.Hour, time.Hour},
	} {
		cfg := container.Config{Config: projection.Config{Projection: "p", Stores: e.st, Modules: projection.Fixed(e.mod)},
			WorkerID: "w", Source: e.j, ShardSync: c.in}
		require.NoError(t, cfg.Validate(), c.in)
		require.Equal(t, c.want, cfg.ShardSync, c.in)
	}
	require.Equal(t, 10*time.Second, container.DefaultShardSync, "README and run --help say 10s")
}

// leaseLog collects a runner's lease events.
type leaseLog struct {
	mu  sync.Mutex
	evs []projection.LeaseInfo
}

func (l *leaseLog) hook(i projection.LeaseInfo) { l.mu.Lock(); l.evs = append(l.evs, i); l.mu.Unlock() }

func (l *leaseLog) all() []projection.LeaseInfo {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]projection.LeaseInfo(nil), l.evs...)
}

// TestLeaseEventsEndEveryAcquisitionOnce: a second worker takes shards from the first by
// balancing. Every acquisition of the first ends in exactly one lease event, and one ended by a
// steal is reported lost with the lease manager's reason (a renewal conflict, or the lease
// written by another worker), not with whatever the shard's loop saw first; released and
// finished events carry the cursor handed over. (The runner used to report every loss as
// "lease lost", and none at all when the shard's loop noticed before the lease manager.)
func TestLeaseEventsEndEveryAcquisitionOnce(t *testing.T) {
	fs := flightcheck.Load(t, flightcheck.DataPath("flights-2k.json"))
	e := newEnv(t, 4)
	e.append(t, fs)
	logs := map[string]*leaseLog{"w1": {}, "w2": {}}
	runners := map[string]*container.Runner{}
	for _, id := range []string{"w1", "w2"} {
		runners[id] = e.runner(t, func(c *container.Config) {
			c.WorkerID, c.UntilCaughtUp, c.LeaseDuration = id, false, 6*time.Second
			c.Hooks.Lease = logs[id].hook
		})
	}
	ctx := ctx2m(t)
	run := func(id string) (context.CancelFunc, chan error) {
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- runners[id].Run(rctx) }()
		return cancel, done
	}
	waitFor := func(what string, ok func() bool) {
		for !ok() {
			require.NoError(t, ctx.Err(), "waiting for %s", what)
			time.Sleep(20 * time.Millisecond)
		}
	}
	stop1, done1 := run("w1")
	waitFor("w1 holding 4", func() bool { return len(runners["w1"].Owned()) == 4 })
	stop2, done2 := run("w2")
	waitFor("2/2", func() bool { return len(runners["w1"].Owned()) == 2 && len(runners["w2"].Owned()) == 2 })
	waitFor("caught up", func() bool {
		for i := range 4 {
			id := journal.ShardID(i)
			c, err1 := e.st.Cursors.Get(ctx, "flights", id)
			head, err2 := e.j.Head(ctx, id)
			if err1 != nil || err2 != nil || c.Seq != head {
				return false
			}
		}
		return true
	})
	stop1()
	require.NoError(t, <-done1)
	stop2()
	require.NoError(t, <-done2)

	type acq struct {
		shard string
		epoch int64
	}
	ends := map[acq][]projection.LeaseInfo{}
	var acquired []acq
	for _, i := range logs["w1"].all() {
		k := acq{i.ShardID, i.Epoch}
		if i.Event == projection.LeaseAcquired {
			acquired = append(acquired, k)
			continue
		}
		ends[k] = append(ends[k], i)
	}
	lost := 0
	for _, k := range acquired {
		require.Len(t, ends[k], 1, "w1's acquisition of %v ends once: %+v", k, ends[k])
		switch i := ends[k][0]; i.Event {
		case projection.LeaseLost:
			lost++
			// The lease manager noticed (a renewal conflict, a newer counter), the shard's
			// commit was fenced by the thief's claim, or the hand-over's release found the lease
			// already stolen (its conditional write failed).
			require.True(t, i.Reason == shardmap.WhyConflict || i.Reason == shardmap.WhyWritten || strings.Contains(i.Reason, "fenced") ||
				strings.Contains(i.Reason, "handing the lease over failed") && strings.Contains(i.Reason, "conditional write failed"),
				"why w1 lost %v: %q", k, i.Reason)
		case projection.LeaseReleased:
			c, err := e.st.Cursors.Get(ctx, "flights", k.shard)
			require.NoError(t, err)
			require.NotEmpty(t, i.Seq, "w1 released %v at its cursor", k)
			require.LessOrEqual(t, event.CompareSeq(i.Seq, c.Seq), 0)
		default:
			t.Fatalf("w1's acquisition of %v ended %s", k, i.Event)
		}
	}
	steals, stolenReleased := 0, 0
	for _, i := range logs["w2"].all() {
		if i.Event == projection.LeaseAcquired && i.How == shardmap.HowSteal {
			require.Equal(t, "w1", i.From)
			// Lost, or released when w1 handed the shard over (a release request or its stop)
			// after the steal but before noticing it: its final save preceded w2's claim (or it
			// would have been fenced), so w2 resumed from it (shardmap.Manager.Release).
			switch end := ends[acq{i.ShardID, i.Epoch - 1}][0].Event; end {
			case projection.LeaseReleased:
				stolenReleased++
			default:
				require.Equal(t, projection.LeaseLost, end, "the stolen %s", i.ShardID)
			}
			steals++
		}
	}
	require.Positive(t, steals, "w2 joined by stealing")
	require.Equal(t, steals, lost+stolenReleased, "w1 lost (or had just handed over) exactly the stolen leases")
	require.EqualValues(t, lost, runners["w1"].Stats().LeasesLost)
	e.check(t, fs)
}
