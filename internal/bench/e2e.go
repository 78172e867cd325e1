package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/projhost/projhost/container"
	"github.com/projhost/projhost/host"
	"github.com/projhost/projhost/internal/cpuclock"
	"github.com/projhost/projhost/internal/eventfile"
	"github.com/projhost/projhost/projection"
	"github.com/projhost/projhost/readmodel"
	"github.com/projhost/projhost/shardmap"
	"github.com/projhost/projhost/source/journal"
	"github.com/projhost/projhost/store/sqlite"
)

// ErrIncomplete is wrapped by the error of MeasureE2E when the runner stopped without handling
// every appended event or with failed batches.
var ErrIncomplete = errors.New("bench: projection incomplete")

// ErrMismatch is wrapped by the error of MeasureE2E when the read models of two runs over the
// same journal differ.
var ErrMismatch = errors.New("bench: read models differ")

// E2EModule is a handler module MeasureE2E runs.
type E2EModule struct {
	Name string // e.g. "flightdelays-as.wasm"; required
	WASM []byte // required
}

// E2EOptions configures MeasureE2E.
type E2EOptions struct {
	Modules    []E2EModule // at least one; each projects every journal in turn
	Trusted    bool        // load the modules without the per-batch deadline (host.WithTrusted)
	EventsPath string      // events file (JSON array or JSON lines, gzip ok), streamed; required
	KeyField   string      // partition key field; default DefaultKeyField
	Repeat     int         // append the file's events this many times; default 1
	Limit      int64       // append at most this many events (0: all of them, Repeat times)
	Shards     []int       // journal shard counts, one run each; default DefaultShardCounts
	BatchSize  int         // container.Config.BatchSize; default 500 (the runner's default)
	// LeaseDuration is container.Config.LeaseDuration; default 0: the runner's (shardmap.DefaultLeaseDuration).
	LeaseDuration time.Duration
	// TempDir is where each run's journal and store directory is created (and removed); default
	// os.TempDir().
	TempDir string
	// Logger receives the guest's and host's logs; default slog.Default(). The runner's
	// warnings are counted into E2EResult.Warnings instead; its errors go to Logger.
	Logger *slog.Logger
	// Native, when not nil, makes the guests of the same handler compiled into the host
	// (NativeGuests: a Go handler through the SDK's native runner), run by host.NewNativeModule
	// through the same pipeline: after the modules, it projects each journal too, into a store
	// of its own. NativeName labels it (e.g. "flightdelays"; the results say "native NAME").
	Native     func(shardID string) host.NativeGuest
	NativeName string
}

// E2EResult is one run of MeasureE2E.
type E2EResult struct {
	Module string // the module's name, or "native " + E2EOptions.NativeName
	Native bool   // the run of E2EOptions.Native, the handler compiled into the host
	Shards int
	Events int64 // events appended (and projected)

	// AppendTime is the time spent in journal.Append calls of journal.TxEvents events each
	// (file reading and JSON scanning excluded). The runs of one shard count project the same
	// journal, appended once: they show the same figure.
	AppendTime time.Duration
	// ProjectTime is the wall time of container.Runner.Run with UntilCaughtUp, from start (lease
	// creation and acquisition included) until every shard's cursor is at its head (the
	// runner checks every 250 ms, so up to that much is idle time).
	ProjectTime time.Duration
	// ProjectCPU is the process's CPU time (every thread) over ProjectTime: on a shared
	// machine, where wall time depends on the other load, events per CPU-second compare runs
	// better. 0 when the system does not tell.
	ProjectCPU time.Duration
	Stats      container.Stats // the runner's counters at the end
	// LeaseCreates, LeaseUpdates and LeaseLists count the runner's calls to the lease store
	// (updates are acquisitions, renewals and releases, one per lease also when the store
	// writes them in batches: shardmap.BatchUpdater); LeaseConflicts counts the updates that
	// failed with shardmap.ErrConflict (the lease had changed: lost after a late renewal).
	LeaseCreates, LeaseUpdates, LeaseLists, LeaseConflicts int64
	// Warnings are the runner's warning messages with their counts, most frequent first
	// (e.g. leases lost because renewals were late), nil when there were none.
	Warnings []Warning
}

// Replayed returns the events handled more than once (after a lease was lost and retaken, or a
// batch retried): handled minus appended.
func (r E2EResult) Replayed() int64 { return max(r.Stats.Events-r.Events, 0) }

// AppendRate returns appended events per second (0 when nothing was timed).
func (r E2EResult) AppendRate() float64 { return rate(r.Events, r.AppendTime) }

// ProjectRate returns projected events per second (0 when nothing was timed).
func (r E2EResult) ProjectRate() float64 { return rate(r.Events, r.ProjectTime) }

// ProjectCPURate returns projected events per CPU-second of the process (0 when unknown).
func (r E2EResult) ProjectCPURate() float64 { return rate(r.Events, r.ProjectCPU) }

// CursorSavesPer100 returns the cursor writes per 100 handled events.
func (r E2EResult) CursorSavesPer100() float64 {
	if r.Stats.Events == 0 {
		return 0
	}
	return float64(r.Stats.CursorSaves) * 100 / float64(r.Stats.Events)
}

func rate(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// MeasureE2E runs, for each shard count, the whole local pipeline on fresh state: it creates a
// journal with that many shards in a new temporary directory, appends the events of
// opts.EventsPath (opts.Repeat times), and projects them with each module in turn (then with
// opts.Native), each with one in-process container.Runner (one worker, an embedded SQLite store
// of its own in the same directory, lease store wrapped to count its calls) until caught up.
// Every run after the first must leave the same read model as the first (the modules are
// builds of one handler). The results come per shard count, in the order of the runs.
// onResult, when not nil, is called after each run (to print progressively).
//
// Errors: ErrArgs for bad options; file, journal, store and host errors; ErrIncomplete when a
// runner handled fewer events than appended or had failed batches; ErrMismatch when a read
// model differs from the first; ctx's error.
func MeasureE2E(ctx context.Context, opts E2EOptions, onResult func(E2EResult)) ([]E2EResult, error) {
	if len(opts.Modules) == 0 || opts.EventsPath == "" {
		return nil, fmt.Errorf("%w: a module and an events file are required", ErrArgs)
	}
	for _, m := range opts.Modules {
		if m.Name == "" || len(m.WASM) == 0 {
			return nil, fmt.Errorf("%w: a module without its name or bytes", ErrArgs)
		}
	}
	if opts.KeyField == "" {
		opts.KeyField = DefaultKeyField
	}
	opts.Repeat = max(opts.Repeat, 1)
	if len(opts.Shards) == 0 {
		opts.Shards = DefaultShardCounts
	}
	for _, n := range opts.Shards {
		if n <= 0 {
			return nil, fmt.Errorf("%w: shard count %d is not positive", ErrArgs, n)
		}
	}
	if opts.BatchSize < 0 || opts.Limit < 0 || opts.LeaseDuration < 0 {
		return nil, fmt.Errorf("%w: negative batch size, limit or lease duration", ErrArgs)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	cacheDir, err := os.MkdirTemp(opts.TempDir, "projhost-bench-cache-")
	if err != nil {
		return nil, fmt.Errorf("bench: compilation cache dir: %w", err)
	}
	defer os.RemoveAll(cacheDir)
	rt, err := host.NewRuntime(ctx, host.WithCacheDir(cacheDir), host.WithLogger(opts.Logger))
	if err != nil {
		return nil, err
	}
	defer rt.Close(context.WithoutCancel(ctx))
	var mods []*host.Module
	for _, m := range opts.Modules {
		mod, err := rt.Load(ctx, m.Name, m.WASM, host.WithTrusted(opts.Trusted))
		if err != nil {
			return nil, err
		}
		defer mod.Close(context.WithoutCancel(ctx))
		mods = append(mods, mod)
	}
	if opts.Native != nil {
		mods = append(mods, host.NewNativeModule("native "+opts.NativeName, opts.Native, opts.Logger))
	}

	var out []E2EResult
	for _, n := range opts.Shards {
		res, err := e2eRun(ctx, opts, mods, n, onResult)
		out = append(out, res...)
		if err != nil {
			return out, fmt.Errorf("bench: e2e with %d shards: %w", n, err)
		}
	}
	return out, nil
}

// e2eRun appends the events to a new journal of shards shards and projects it with each of
// mods (the native one last) into a store of its own, comparing the read models of the later
// ones with the first's.
func e2eRun(ctx context.Context, opts E2EOptions, mods []*host.Module, shards int, onResult func(E2EResult)) ([]E2EResult, error) {
	dir, err := os.MkdirTemp(opts.TempDir, "projhost-bench-e2e-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	j, err := journal.Create(dir, shards)
	if err != nil {
		return nil, err
	}
	defer j.Close()
	events, appendTime, err := appendFile(ctx, j, opts.EventsPath, opts.KeyField, opts.Repeat, opts.Limit)
	if err != nil {
		return nil, err
	}
	var out []E2EResult
	var first []readmodel.Doc
	for i, mod := range mods {
		res := E2EResult{Module: mod.Name(), Native: opts.Native != nil && i == len(mods)-1, Shards: shards, Events: events, AppendTime: appendTime}
		storeDir := filepath.Join(dir, fmt.Sprintf("store-%d", i))
		docs, err := project(ctx, opts, mod, j, storeDir, &res, len(mods) > 1)
		if err != nil {
			return out, err
		}
		out = append(out, res)
		if onResult != nil {
			onResult(res)
		}
		if i == 0 {
			first = docs
		} else if err := sameDocs(first, docs); err != nil {
			return out, fmt.Errorf("%w: %s and %s: %w", ErrMismatch, mods[0].Name(), mod.Name(), err)
		}
	}
	return out, nil
}

// sameDocs returns an error naming the first difference between two read models (Scan order).
func sameDocs(want, got []readmodel.Doc) error {
	for i := range min(len(want), len(got)) {
		w, g := want[i], got[i]
		if w.Collection != g.Collection || w.Key != g.Key || !bytes.Equal(w.Doc, g.Doc) {
			return fmt.Errorf("document %d is %s/%s %s, want %s/%s %s", i, g.Collection, g.Key, g.Doc, w.Collection, w.Key, w.Doc)
		}
	}
	if len(want) != len(got) {
		return fmt.Errorf("%d documents, want %d", len(got), len(want))
	}
	return nil
}

// project runs the runner with mod over j, with the embedded store in storeDir, until caught
// up, and fills res; with scan, it returns the read model's documents.
func project(ctx context.Context, opts E2EOptions, mod *host.Module, j *journal.Journal, storeDir string, res *E2EResult, scan bool) ([]readmodel.Doc, error) {
	if err := os.Mkdir(storeDir, 0o755); err != nil {
		return nil, err
	}
	st, err := sqlite.Open(storeDir)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	leases := &countingLeases{LeaseStore: st.Leases}
	counted := *st
	counted.Leases = leases
	if b, ok := st.Leases.(shardmap.BatchUpdater); ok { // keep the store's batched writes
		counted.Leases = &countingBatchLeases{leases, b}
	}
	warns := newWarnCounter(opts.Logger.Handler())
	r, err := container.New(container.Config{
		Config: projection.Config{Projection: benchProjection, Stores: &counted, Modules: projection.Fixed(mod),
			Logger: slog.New(warns)},
		WorkerID: "bench-worker", Source: j,
		BatchSize: opts.BatchSize, LeaseDuration: opts.LeaseDuration, UntilCaughtUp: true,
	})
	if err != nil {
		return nil, err
	}
	t0, cpu0 := time.Now(), cpuclock.Process()
	if err := r.Run(ctx); err != nil {
		return nil, err
	}
	res.ProjectTime = time.Since(t0)
	if cpu0 > 0 {
		res.ProjectCPU = cpuclock.Process() - cpu0
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res.Stats = r.Stats()
	res.LeaseCreates, res.LeaseUpdates, res.LeaseLists = leases.creates.Load(), leases.updates.Load(), leases.lists.Load()
	res.LeaseConflicts = leases.conflicts.Load()
	res.Warnings = warns.warnings()
	if res.Stats.Events < res.Events || res.Stats.Failures > 0 {
		return nil, fmt.Errorf("%w: %s: %d events appended, %d handled, %d failed batches", ErrIncomplete, mod.Name(), res.Events, res.Stats.Events, res.Stats.Failures)
	}
	if !scan {
		return nil, nil
	}
	return st.ReadModel.Scan(ctx, benchProjection, "")
}

// benchProjection is the projection name of the e2e runs.
const benchProjection = "bench"

// errLimit stops the scan of the events file at the limit.
var errLimit = errors.New("limit reached")

// appendFile appends the events of path, repeat times but at most limit (0: no limit), to j in
// transactions of journal.TxEvents events, and returns how many it appended and the time spent
// in Append.
func appendFile(ctx context.Context, j *journal.Journal, path, keyField string, repeat int, limit int64) (int64, time.Duration, error) {
	var total int64
	var spent time.Duration
	buf := make([]journal.AppendEvent, 0, journal.TxEvents)
	flush := func() error {
		if len(buf) == 0 {
			return nil
		}
		t0 := time.Now()
		_, err := j.Append(ctx, buf)
		spent += time.Since(t0)
		if err != nil {
			return err
		}
		total += int64(len(buf))
		buf = buf[:0]
		return nil
	}
	for range repeat {
		f, err := os.Open(path)
		if err != nil {
			return total, spent, fmt.Errorf("reading events: %w", err)
		}
		err = eventfile.Scan(f, keyField, func(_ int, key string, raw []byte) error {
			buf = append(buf, journal.AppendEvent{PartitionKey: key, Data: append([]byte(nil), raw...)})
			if len(buf) == cap(buf) {
				if err := flush(); err != nil {
					return err
				}
			}
			if limit > 0 && total+int64(len(buf)) >= limit {
				return errLimit
			}
			return nil
		})
		f.Close()
		if errors.Is(err, errLimit) {
			break
		}
		if err != nil {
			return total, spent, fmt.Errorf("events file %s: %w", path, err)
		}
	}
	if err := flush(); err != nil {
		return total, spent, err
	}
	if total == 0 {
		return 0, 0, fmt.Errorf("%w: events file %s holds no events", ErrArgs, path)
	}
	return total, spent, nil
}

// countingLeases counts the calls to a shardmap.LeaseStore. Safe for concurrent use.
type countingLeases struct {
	shardmap.LeaseStore
	creates, updates, lists, conflicts atomic.Int64
}

func (c *countingLeases) List(ctx context.Context, projection string) ([]shardmap.Lease, error) {
	c.lists.Add(1)
	return c.LeaseStore.List(ctx, projection)
}

func (c *countingLeases) Create(ctx context.Context, l shardmap.Lease) error {
	c.creates.Add(1)
	return c.LeaseStore.Create(ctx, l)
}

// countingBatchLeases is countingLeases of a shardmap.BatchUpdater: UpdateMany counts one
// update per lease.
type countingBatchLeases struct {
	*countingLeases
	b shardmap.BatchUpdater
}

func (c *countingBatchLeases) UpdateMany(ctx context.Context, ls []shardmap.Lease) ([]shardmap.UpdateResult, error) {
	c.updates.Add(int64(len(ls)))
	res, err := c.b.UpdateMany(ctx, ls)
	for _, r := range res {
		if errors.Is(r.Err, shardmap.ErrConflict) {
			c.conflicts.Add(1)
		}
	}
	return res, err
}

func (c *countingLeases) Update(ctx context.Context, l shardmap.Lease) (shardmap.Lease, error) {
	c.updates.Add(1)
	nl, err := c.LeaseStore.Update(ctx, l)
	if errors.Is(err, shardmap.ErrConflict) {
		c.conflicts.Add(1)
	}
	return nl, err
}
