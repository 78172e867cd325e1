package container

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/projhost/projhost/cursorstore"
	"github.com/projhost/projhost/deadletter"
	"github.com/projhost/projhost/projection"
	"github.com/projhost/projhost/shardmap"
)

// Stats are cumulative counters of a Runner, safe to read at any time.
type Stats struct {
	Events       int64 // events handled (a retried batch once)
	Batches      int64
	CursorSaves  int64
	Failures     int64 // failed handler calls
	DeadLetters  int64
	Replayed     int64 // dead letters replayed
	LeasesLost   int64
	LeasesGained int64
}

// Runner is one worker of a projection in container mode (see the package doc).
type Runner struct {
	cfg   Config
	log   *slog.Logger
	proc  *projection.Processor
	mgr   *shardmap.Manager
	stats struct {
		events, batches, saves, failures, dead, replayed, lost, gained atomic.Int64
	}

	mu      sync.Mutex
	shards  map[string]*shardRun
	wg      sync.WaitGroup
	ctx     context.Context
	stopped atomic.Bool
	resync  chan struct{}
	// lastProbe is when the until-caught-up watcher last probed the source (ProbeInterval).
	lastProbe time.Time
	// pauses is the projection's pause state as last read (controlLoop, every ControlCheck);
	// nil until read once: until then no shard is opened.
	pauses atomic.Pointer[cursorstore.Pauses]
}

// shardRun is one acquisition of a shard by this worker.
type shardRun struct {
	id      string
	epoch   int64
	cancel  context.CancelFunc // hard stop: lease lost, nothing saved
	release chan struct{}      // graceful: flush, save, release
	done    chan struct{}
	relOnce sync.Once
	ended   atomic.Bool // the acquisition's lost, released or finished event was reported
	// caughtUp: the last read found nothing new, nothing behind, and everything handled is
	// committed (the until-caught-up watcher asks the stores only when every shard says so).
	caughtUp atomic.Bool
	endedCh  chan struct{} // closed then

	mu      sync.Mutex
	replays []deadletter.Letter // requested replays handed over by the control loop
	stopWhy string              // why shutdown canceled the loop ("" when it did not)
}

func (s *shardRun) requestRelease() { s.relOnce.Do(func() { close(s.release) }) }

func (s *shardRun) takeReplays() []deadletter.Letter {
	s.mu.Lock()
	defer s.mu.Unlock()
	ls := s.replays
	s.replays = nil
	return ls
}

// New validates cfg and returns a Runner. It does no I/O.
func New(cfg Config) (*Runner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &Runner{cfg: cfg, shards: map[string]*shardRun{}, resync: make(chan struct{}, 1)}
	r.log = cfg.Logger.With("projection", cfg.Projection, "worker", cfg.WorkerID)
	pc := cfg.Config
	pc.Hooks = r.countingHooks(cfg.Hooks)
	proc, err := projection.New(pc)
	if err != nil {
		return nil, err
	}
	r.proc = proc
	r.mgr = shardmap.NewManager(cfg.Stores.Leases, cfg.Projection, cfg.WorkerID,
		shardmap.WithLogger(cfg.Logger),
		shardmap.WithMaxStealsPerRound(cfg.MaxStealsPerRound),
		shardmap.WithLeaseDuration(cfg.LeaseDuration),
		shardmap.WithModule(cfg.ModuleID),
		shardmap.WithEvents(shardmap.Events{
			Acquired:         r.onAcquired,
			Lost:             r.onLost,
			ReleaseRequested: r.onReleaseRequested,
		}))
	return r, nil
}

// countingHooks wraps the user's hooks with the runner's counters.
func (r *Runner) countingHooks(h projection.Hooks) projection.Hooks {
	out := h
	out.Batch = func(i projection.BatchInfo) {
		r.stats.events.Add(int64(i.Events))
		r.stats.batches.Add(1)
		if h.Batch != nil {
			h.Batch(i)
		}
	}
	out.Flush = func(i projection.FlushInfo) {
		r.stats.saves.Add(1)
		if h.Flush != nil {
			h.Flush(i)
		}
	}
	out.HandlerError = func(i projection.HandlerErrorInfo) {
		r.stats.failures.Add(1)
		if h.HandlerError != nil {
			h.HandlerError(i)
		}
	}
	out.DeadLettered = func(l deadletter.Letter) {
		r.stats.dead.Add(1)
		if h.DeadLettered != nil {
			h.DeadLettered(l)
		}
	}
	out.Replayed = func(l deadletter.Letter, err error) {
		if err == nil {
			r.stats.replayed.Add(1)
		}
		if h.Replayed != nil {
			h.Replayed(l, err)
		}
	}
	return out
}

// Stats returns the runner's counters.
func (r *Runner) Stats() Stats {
	s := &r.stats
	return Stats{Events: s.events.Load(), Batches: s.batches.Load(), CursorSaves: s.saves.Load(),
		Failures: s.failures.Load(), DeadLetters: s.dead.Load(), Replayed: s.replayed.Load(),
		LeasesLost: s.lost.Load(), LeasesGained: s.gained.Load()}
}

// Owned returns the ids of the shards this worker currently processes, sorted.
func (r *Runner) Owned() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := make([]string, 0, len(r.shards))
	for id := range r.shards {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Run processes shards until ctx is cancelled (graceful: every shard finishes its batch,
// commits and releases its lease; Run then returns nil; a shard still in its batch after
// LeaseDuration, such as a trusted handler in a runaway loop, is interrupted without saving
// and its lease released, so Run returns within about LeaseDuration plus the releases) or, with UntilCaughtUp, until every
// shard is caught up (nil), a shard is stopped (ErrShardStopped) or a cursor is past its
// shard's head (ErrCursorBeyondHead). It returns an error at start when the shard list or the
// lease store is unreachable. With Config.ModuleID set, it returns a
// *shardmap.ModuleConflictError (wrapping shardmap.ErrModuleConflict) when another worker is
// live on the projection with a different module: it then has processed nothing (it waits up
// to one lease duration to tell a live worker's leases from a dead one's).
func (r *Runner) Run(ctx context.Context) error {
	if err := r.syncShards(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // stopped before it started: nothing to flush or release
		}
		return err
	}
	// Shard loops get their own context: a graceful stop must let them flush after ctx ends.
	loopCtx, cancelLoops := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelLoops()
	r.mu.Lock()
	r.ctx = loopCtx
	r.mu.Unlock()

	r.refreshPauses(ctx) // before any lease is taken; controlLoop retries a failure
	mgrCtx, stopMgr := context.WithCancel(ctx)
	defer stopMgr()
	var bg sync.WaitGroup
	bg.Add(2)
	go func() { defer bg.Done(); r.syncLoop(mgrCtx) }()
	go func() { defer bg.Done(); r.controlLoop(mgrCtx) }()
	var watchErr error
	if r.cfg.UntilCaughtUp {
		bg.Add(1)
		go func() { defer bg.Done(); watchErr = r.watchCaughtUp(mgrCtx, stopMgr) }()
	}
	mgrErr := r.mgr.Run(mgrCtx)
	if mgrErr != nil && mgrCtx.Err() == nil && !errors.Is(mgrErr, shardmap.ErrModuleConflict) {
		r.log.Error("lease manager stopped", "err", mgrErr)
	}
	stopMgr()
	bg.Wait()
	r.shutdown(ctx)
	if errors.Is(mgrErr, shardmap.ErrModuleConflict) {
		return mgrErr
	}
	return watchErr
}

// shutdown flushes and releases every shard still running.
func (r *Runner) shutdown(ctx context.Context) {
	r.stopped.Store(true)
	r.mu.Lock()
	for _, s := range r.shards {
		s.requestRelease()
	}
	r.mu.Unlock()
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(r.cfg.LeaseDuration):
		// No lease is renewed any more: past the lease duration a shard's commit would be
		// refused anyway. Interrupt what still runs (a trusted handler in a long batch or a
		// loop, a store that does not answer); the next owner replays from the saved cursor.
		r.mu.Lock()
		for id, s := range r.shards {
			why := fmt.Sprintf("worker stopping: the shard did not finish its batch within the lease duration (%v); interrupted without saving", r.cfg.LeaseDuration)
			r.log.Warn("stopping: interrupting a shard that did not finish its batch in time", "shard", id, "waited", r.cfg.LeaseDuration)
			s.mu.Lock()
			s.stopWhy = why
			s.mu.Unlock()
			s.cancel()
		}
		r.mu.Unlock()
		<-done
	}
	relCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := r.mgr.ReleaseAll(relCtx); err != nil {
		r.log.Warn("releasing leases at shutdown", "err", err)
	}
}

// syncShards lists the source's shards and creates leases for new ones.
func (r *Runner) syncShards(ctx context.Context) error {
	shards, err := r.cfg.Source.Shards(ctx)
	if err != nil {
		return fmt.Errorf("container: listing shards: %w", err)
	}
	if err := r.mgr.EnsureShards(ctx, shards); err != nil {
		return fmt.Errorf("container: creating leases: %w", err)
	}
	return nil
}

// syncLoop re-lists shards every ShardSync and after a shard ends.
func (r *Runner) syncLoop(ctx context.Context) {
	t := time.NewTicker(r.cfg.ShardSync)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-r.resync:
		}
		if err := r.syncShards(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("shard sync failed; retrying at the next one", "err", err)
		}
	}
}

// refreshPauses reads the projection's pause state for the shard loops (Runner.paused).
func (r *Runner) refreshPauses(ctx context.Context) {
	p, err := r.cfg.Stores.Cursors.Pauses(ctx, r.cfg.Projection)
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("reading the projection's pauses failed: keeping the last known ones", "err", err)
		}
		return
	}
	r.pauses.Store(&p)
}

// paused reports whether shard id is paused, as last read; true while the pauses were never
// read (a worker that cannot read them must not handle a shard an operator paused).
func (r *Runner) paused(id string) bool {
	p := r.pauses.Load()
	return p == nil || p.Paused(id)
}

// controlLoop reads the projection's pauses and hands requested dead-letter replays to the
// owners of their shards, every ControlCheck.
func (r *Runner) controlLoop(ctx context.Context) {
	t := time.NewTicker(r.cfg.ControlCheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r.refreshPauses(ctx)
		ls, err := r.cfg.Stores.DeadLetters.List(ctx, r.cfg.Projection, deadletter.Filter{State: deadletter.StateReplayRequested})
		if err != nil {
			if ctx.Err() == nil {
				r.log.Warn("listing requested dead-letter replays failed", "err", err)
			}
			continue
		}
		byShard := map[string][]deadletter.Letter{}
		for _, l := range ls {
			byShard[l.ShardID] = append(byShard[l.ShardID], l)
		}
		r.mu.Lock()
		for id, s := range r.shards {
			s.mu.Lock()
			s.replays = byShard[id]
			s.mu.Unlock()
		}
		r.mu.Unlock()
	}
}

// lease reports a lease event to the hooks and counters.
func (r *Runner) lease(i projection.LeaseInfo) {
	switch i.Event {
	case projection.LeaseAcquired:
		r.stats.gained.Add(1)
	case projection.LeaseLost:
		r.stats.lost.Add(1)
	}
	if h := r.cfg.Hooks.Lease; h != nil {
		i.Projection, i.Worker = r.cfg.Projection, r.cfg.WorkerID
		h(i)
	}
}

// end reports how s's acquisition ended (lost, released or finished), once: the first of the
// lease manager and the shard's loop to notice tells.
func (r *Runner) end(s *shardRun, ev projection.LeaseEvent, seq, reason string) {
	if s.ended.CompareAndSwap(false, true) {
		r.lease(projection.LeaseInfo{ShardInfo: projection.ShardInfo{ShardID: s.id, Epoch: s.epoch}, Event: ev, Seq: seq, Reason: reason})
		close(s.endedCh)
	}
}

// errDropped: the lease manager no longer holds the lease (it lost it, and reports Lost with
// the reason right after dropping it).
var errDropped = errors.New("the lease manager dropped the lease")

// awaitLost waits (at most a lease duration) for the lease manager's Lost event of an
// acquisition it dropped, so that the loss is reported with the manager's reason (a steal, a
// lapse) rather than with the symptom the shard's loop saw first.
func (r *Runner) awaitLost(s *shardRun) string {
	select {
	case <-s.endedCh:
	case <-time.After(r.cfg.LeaseDuration):
	}
	return "lease dropped by the lease manager"
}

func (r *Runner) onAcquired(shardID string, l shardmap.Lease, how, from string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped.Load() || r.ctx == nil {
		return
	}
	r.lease(projection.LeaseInfo{ShardInfo: projection.ShardInfo{ShardID: shardID, Epoch: l.Epoch},
		Event: projection.LeaseAcquired, How: how, From: from})
	prev := r.shards[shardID]
	if prev != nil {
		// A previous loop of this shard (lost, then re-acquired) must end before a new one starts.
		prev.cancel()
	}
	ctx, cancel := context.WithCancel(r.ctx)
	s := &shardRun{id: shardID, epoch: l.Epoch, cancel: cancel, release: make(chan struct{}), done: make(chan struct{}), endedCh: make(chan struct{})}
	r.shards[shardID] = s
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer close(s.done)
		if prev != nil {
			<-prev.done
		}
		r.runShard(ctx, s)
		r.mu.Lock()
		if r.shards[shardID] == s {
			delete(r.shards, shardID)
		}
		r.mu.Unlock()
	}()
}

func (r *Runner) onLost(shardID, why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s, ok := r.shards[shardID]; ok {
		r.log.Warn("lease lost: stopping shard without saving", "shard", shardID, "epoch", s.epoch, "why", why)
		r.end(s, projection.LeaseLost, "", why)
		s.cancel()
	}
}

func (r *Runner) onReleaseRequested(shardID string) {
	r.mu.Lock()
	s, ok := r.shards[shardID]
	r.mu.Unlock()
	if !ok {
		// Not running (not started yet or already ended): hand the lease over right away.
		go func() {
			if err := r.mgr.Release(context.Background(), shardID); err != nil && !errors.Is(err, shardmap.ErrNotOwned) {
				r.log.Warn("releasing lease", "shard", shardID, "err", err)
			}
		}()
		return
	}
	s.requestRelease()
}

// guard is the shard's commit guard: the lease must still be valid on this worker's clock.
func (r *Runner) guard(id string) func() error {
	return func() error {
		if ep, ok := r.mgr.Valid(id); !ok {
			if ep == 0 {
				return errDropped
			}
			return errors.New(whyExpired)
		}
		return nil
	}
}

// giveUp releases a lease this worker cannot use.
func (r *Runner) giveUp(s *shardRun) {
	err := r.mgr.Release(context.Background(), s.id)
	switch {
	case err == nil, errors.Is(err, shardmap.ErrNotOwned):
	case errors.Is(err, shardmap.ErrConflict):
		r.log.Info("lease already taken by another worker", "shard", s.id)
	default:
		r.log.Warn("releasing lease", "shard", s.id, "err", err)
	}
}
