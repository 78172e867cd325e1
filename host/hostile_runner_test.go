package host_test

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/container"
	"github.com/projhost/projhost/deadletter"
	"github.com/projhost/projhost/host"
	"github.com/projhost/projhost/projection"
	"github.com/projhost/projhost/source/journal"
	"github.com/projhost/projhost/store"
	"github.com/projhost/projhost/store/sqlite"
)

// Hostile handlers under a real container.Runner (journal, embedded store, lease manager): one
// shard misbehaves (testdata/wat/bomb.wat, chosen by the event data), the other is healthy.

type hostileEnv struct {
	j        *journal.Journal
	st       *store.Stores
	mod      *host.Module
	bad, ok  string // shard ids
	mu       sync.Mutex
	leases   []projection.LeaseInfo
	flushed  map[string]string // shard -> last cursor saved
	flushed1 chan string       // shards whose cursor was saved, as it happens
}

// newHostileEnv creates a 2-shard journal with badData then healthy events on one shard and
// healthy events on the other, and loads bomb.wat with opts on a runtime with the default memory
// limit.
func newHostileEnv(t *testing.T, badData []string, healthy int, opts ...host.ModuleOption) *hostileEnv {
	t.Helper()
	dir := t.TempDir()
	j, err := journal.Create(dir, 2)
	require.NoError(t, err)
	t.Cleanup(func() { j.Close() })
	st, err := sqlite.Open(dir)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	keys := [2]string{}
	for i := 0; keys[0] == "" || keys[1] == ""; i++ {
		k := fmt.Sprintf("k%d", i)
		if s := journal.ShardFor(k, 2); keys[s] == "" {
			keys[s] = k
		}
	}
	var evs []journal.AppendEvent
	for _, d := range badData {
		evs = append(evs, journal.AppendEvent{PartitionKey: keys[0], Data: []byte(d)})
	}
	for i := range healthy {
		evs = append(evs, journal.AppendEvent{PartitionKey: keys[0], Data: []byte(fmt.Sprintf(`{"i":%d}`, i))},
			journal.AppendEvent{PartitionKey: keys[1], Data: []byte(fmt.Sprintf(`{"i":%d}`, i))})
	}
	_, err = j.Append(context.Background(), evs)
	require.NoError(t, err)
	ctx := context.Background()
	rt, err := host.NewRuntime(ctx, host.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	t.Cleanup(func() { rt.Close(ctx) })
	mod, err := rt.Load(ctx, "bomb", host.WAT(t, "bomb"), opts...)
	require.NoError(t, err)
	return &hostileEnv{j: j, st: st, mod: mod, bad: journal.ShardID(0), ok: journal.ShardID(1),
		flushed: map[string]string{}, flushed1: make(chan string, 1000)}
}

func (e *hostileEnv) runner(t *testing.T, mut func(*container.Config)) *container.Runner {
	t.Helper()
	cfg := container.Config{
		Config: projection.Config{Projection: "hostile", Stores: e.st, Modules: projection.Fixed(e.mod),
			Logger: slog.New(slog.DiscardHandler), RetryMin: time.Millisecond, RetryMax: 20 * time.Millisecond,
			Policy: projection.Policy{OnError: projection.DeadLetter, MaxAttempts: 2}, CursorEveryEvents: 10,
			Hooks: projection.Hooks{
				Lease: func(i projection.LeaseInfo) {
					e.mu.Lock()
					e.leases = append(e.leases, i)
					e.mu.Unlock()
				},
				Flush: func(i projection.FlushInfo) {
					e.mu.Lock()
					e.flushed[i.ShardID] = i.Seq
					e.mu.Unlock()
					select {
					case e.flushed1 <- i.ShardID:
					default:
					}
				},
			}},
		WorkerID: "w1", Source: e.j, BatchSize: 10, BatchWait: 5 * time.Millisecond,
		LeaseDuration: 2 * time.Second, ControlCheck: 50 * time.Millisecond,
	}
	if mut != nil {
		mut(&cfg)
	}
	r, err := container.New(cfg)
	require.NoError(t, err)
	return r
}

// lost returns the LeaseLost events so far.
func (e *hostileEnv) lost() []projection.LeaseInfo {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []projection.LeaseInfo
	for _, l := range e.leases {
		if l.Event == projection.LeaseLost {
			out = append(out, l)
		}
	}
	return out
}

func (e *hostileEnv) cursor(shard string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.flushed[shard]
}

// TestMemoryBombKeepsLeases: memory bombs (grow to the cap writing every page, then trap; and
// grow then keep the memory) on one shard, under the default memory limit and a 2 s lease
// renewed every 667 ms: no lease is lost, the healthy shard is projected to its end, and each
// trapping bomb ends as the policy says (dead-lettered with the trap), the kept one as a
// success.
func TestMemoryBombKeepsLeases(t *testing.T) {
	if testing.Short() {
		t.Skip("writes hundreds of MiB")
	}
	e := newHostileEnv(t, []string{"T", "t", "T", "x"}, 300)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// One event per batch: the module looks at a batch's first event only.
	r := e.runner(t, func(c *container.Config) { c.UntilCaughtUp, c.BatchSize = true, 1 })
	require.NoError(t, r.Run(ctx))
	require.Empty(t, e.lost(), "leases lost")
	for _, s := range []string{e.bad, e.ok} {
		head, err := e.j.Head(ctx, s)
		require.NoError(t, err)
		require.Equal(t, head, e.cursor(s), "shard %s cursor", s)
	}
	ls, err := e.st.DeadLetters.List(ctx, "hostile", deadletter.Filter{})
	require.NoError(t, err)
	var seqs []string
	for _, l := range ls {
		require.Equal(t, e.bad, l.ShardID)
		require.Equal(t, "trap", l.ErrorKind, l.Error)
		require.Contains(t, l.Error, "guest memory is at")
		seqs = append(seqs, string(l.Data))
	}
	require.Equal(t, []string{"T", "T", "x"}, seqs, "dead letters: the trapping bombs, not the kept one")
}

func init() { host.RegisterChild("trusted-runner", childTrustedRunner) }

type trustedRunnerResult struct {
	HealthyDone bool
	GCReturned  bool
	LostBefore  int     // leases lost before the stop
	StopSeconds float64 // from the graceful stop to Run's return
	RunErr      string
	Leases      []string // shard event reason, in order
}

// childTrustedRunner: a trusted handler loops for ever on one shard while the other is
// projected to its end and a GC runs; then a graceful stop (what SIGTERM does).
func childTrustedRunner(t *testing.T) any {
	e := newHostileEnv(t, []string{"L"}, 200, host.WithTrusted(true))
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	r := e.runner(t, nil)
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	head, err := e.j.Head(context.Background(), e.ok)
	require.NoError(t, err)
	var res trustedRunnerResult
	for !res.HealthyDone {
		select {
		case <-e.flushed1:
			res.HealthyDone = e.cursor(e.ok) == head
		case err := <-done:
			t.Fatalf("Run returned before the stop: %v", err)
		}
	}
	runtime.GC()
	res.GCReturned = true
	res.LostBefore = len(e.lost())
	start := time.Now()
	stop()
	if err := <-done; err != nil {
		res.RunErr = err.Error()
	}
	res.StopSeconds = time.Since(start).Seconds()
	e.mu.Lock()
	for _, l := range e.leases {
		res.Leases = append(res.Leases, fmt.Sprintf("%s %s %s", l.ShardID, l.Event, l.Reason))
	}
	e.mu.Unlock()
	return res
}

// TestTrustedLoopRunner: a trusted handler in a runaway loop on one shard does not stop the
// worker: the other shard is projected to its end and keeps its lease, a GC completes, and a
// graceful stop returns after about the lease duration (2 s here), the looping shard
// interrupted without saving and its lease released. Before trusted modules were instrumented
// the child process froze at its first GC.
func TestTrustedLoopRunner(t *testing.T) {
	var res trustedRunnerResult
	host.RunChild(t, "trusted-runner", 2*time.Minute, &res)
	t.Logf("graceful stop took %.2fs; lease events %q", res.StopSeconds, res.Leases)
	require.True(t, res.HealthyDone && res.GCReturned, "%+v", res)
	require.Zero(t, res.LostBefore, "leases lost while the loop ran: %q", res.Leases)
	require.Empty(t, res.RunErr)
	var sawStop, sawRelease bool
	for _, l := range res.Leases {
		sawStop = sawStop || strings.HasPrefix(l, journal.ShardID(0)+" lost worker stopping: the shard did not finish its batch within the lease duration (2s)")
		sawRelease = sawRelease || strings.HasPrefix(l, journal.ShardID(1)+" released")
	}
	require.True(t, sawStop && sawRelease, "lease events %q", res.Leases)
}
