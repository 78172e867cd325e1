package host_test

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/host"
	"github.com/projhost/projhost/internal/flightcheck"
	"github.com/projhost/projhost/internal/testwasm"
	"github.com/projhost/projhost/local"
	"github.com/projhost/projhost/source/journal"
)

type runnerEnv struct {
	j   *journal.Journal
	st  *local.Store
	mod *host.Module
}

func newRunnerEnv(t *testing.T, shards int) *runnerEnv {
	t.Helper()
	dir := t.TempDir()
	j, err := journal.Create(dir, shards)
	require.NoError(t, err)
	t.Cleanup(func() { j.Close() })
	st, err := local.Open(dir)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	rt, err := host.NewRuntime(ctx, host.WithCacheDir(""))
	require.NoError(t, err)
	t.Cleanup(func() { rt.Close(ctx) })
	wasm, err := os.ReadFile(testwasm.Path(t, "flightdelays-as"))
	require.NoError(t, err)
	mod, err := rt.Load(ctx, "flights", wasm)
	require.NoError(t, err)
	return &runnerEnv{j: j, st: st, mod: mod}
}

func (e *runnerEnv) append(t *testing.T, fs []flightcheck.Flight) {
	t.Helper()
	evs := make([]journal.AppendEvent, len(fs))
	for i, f := range fs {
		b, err := json.Marshal(f)
		require.NoError(t, err)
		evs[i] = journal.AppendEvent{PartitionKey: f.Origin, Data: b}
	}
	_, err := e.j.Append(context.Background(), evs)
	require.NoError(t, err)
}

func (e *runnerEnv) runner(t *testing.T, mut func(*host.RunnerConfig)) *host.Runner {
	t.Helper()
	cfg := host.RunnerConfig{
		Projection: "flights", WorkerID: "w1",
		Source: e.j, Leases: e.st.Leases(), Cursors: e.st.Cursors(), ReadModel: e.st.ReadModels(), Module: e.mod,
		// A long lease: on a loaded machine a short one may lapse, and the replays that follow
		// would make the event counts below vary.
		BatchWait: 20 * time.Millisecond, LeaseDuration: 30 * time.Second, UntilCaughtUp: true,
	}
	if mut != nil {
		mut(&cfg)
	}
	r, err := host.NewRunner(cfg)
	require.NoError(t, err)
	return r
}

func (e *runnerEnv) check(t *testing.T, fs []flightcheck.Flight) {
	t.Helper()
	docs, err := e.st.ReadModels().Scan(context.Background(), "flights", "")
	require.NoError(t, err)
	flightcheck.Check(t, fs, docs)
}

func TestRunnerProjectsAndResumes(t *testing.T) {
	fs := flightcheck.Load(t, flightcheck.DataPath("flights-2k.json"))
	e := newRunnerEnv(t, 3)
	e.append(t, fs[:1200])
	var saves []string
	r := e.runner(t, func(c *host.RunnerConfig) {
		c.CursorEveryEvents = 100
		c.BatchSize = 50
		c.OnCursorSave = func(shard string, epoch int64, seq string) { saves = append(saves, shard+"@"+seq) }
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	require.NoError(t, r.Run(ctx))
	e.check(t, fs[:1200])
	st := r.Stats()
	require.EqualValues(t, 1200, st.Events)
	require.Zero(t, st.Failures)
	require.EqualValues(t, len(saves), st.CursorSaves)
	require.GreaterOrEqual(t, len(saves), 12-3, "a save every 100 events per shard")

	// A second run resumes from the saved cursors: only the new events are handled.
	e.append(t, fs[1200:])
	r2 := e.runner(t, nil)
	require.NoError(t, r2.Run(ctx))
	require.EqualValues(t, 800, r2.Stats().Events)
	e.check(t, fs)
	for _, id := range []string{journal.ShardID(0), journal.ShardID(1), journal.ShardID(2)} {
		c, err := e.st.Cursors().Get(ctx, "flights", id)
		require.NoError(t, err)
		head, err := e.j.Head(ctx, id)
		require.NoError(t, err)
		require.Equal(t, head, c.Seq, id)
	}
}

// A batch the handler fails on is retried and never skipped: the cursor stays before it and
// the read model holds exactly the events before it.
func TestRunnerFailingBatchNeverAdvances(t *testing.T) {
	fs := flightcheck.Load(t, flightcheck.DataPath("flights-2k.json"))
	e := newRunnerEnv(t, 1)
	e.append(t, fs[:30])
	_, err := e.j.Append(context.Background(), []journal.AppendEvent{{PartitionKey: "DTW", Data: []byte(`{"origin":"DTW","delay":"late"}`)}})
	require.NoError(t, err)
	e.append(t, fs[30:40])
	r := e.runner(t, func(c *host.RunnerConfig) {
		c.BatchSize = 1
		c.CursorEveryEvents = 1
		c.RetryMin = 10 * time.Millisecond
		c.RetryMax = 50 * time.Millisecond
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
	c, err := e.st.Cursors().Get(context.Background(), "flights", journal.ShardID(0))
	require.NoError(t, err)
	require.Equal(t, "30", c.Seq)
	e.check(t, fs[:30])
}

func TestNewRunnerRejectsBadConfig(t *testing.T) {
	e := newRunnerEnv(t, 1)
	cases := []struct {
		name string
		mut  func(*host.RunnerConfig)
		msg  string
	}{
		{"no projection", func(c *host.RunnerConfig) { c.Projection = "" }, "projection name is required"},
		{"no worker", func(c *host.RunnerConfig) { c.WorkerID = "" }, "worker id is required"},
		{"no module", func(c *host.RunnerConfig) { c.Module = nil }, "module are required"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := host.RunnerConfig{Projection: "p", WorkerID: "w", Source: e.j, Leases: e.st.Leases(),
				Cursors: e.st.Cursors(), ReadModel: e.st.ReadModels(), Module: e.mod}
			c.mut(&cfg)
			_, err := host.NewRunner(cfg)
			require.ErrorIs(t, err, host.ErrConfig)
			require.Contains(t, err.Error(), c.msg)
		})
	}
}
