package shardmap

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/projhost/projhost/source"
)

// Defaults of a Manager (DESIGN §4). The lease duration is shorter than the KCL's 10 s failover
// time so that a dead worker's shards are processing again within 10 s: an observer takes an
// expired lease between 1 and 4/3 lease durations after the owner's last renewal (it looks once
// per renew interval), i.e. 6-8 s.
const (
	DefaultLeaseDuration     = 6 * time.Second
	DefaultMaxStealsPerRound = 1
)

// ErrNotOwned is returned by Release and Finish when this worker does not hold the shard's
// lease (never acquired, already released or finished, or lost). The caller must stop
// processing the shard and must not save its cursor.
var ErrNotOwned = errors.New("shardmap: this worker does not hold the shard's lease (never acquired, released or lost): stop processing the shard")

// Events are the Manager's notifications to the shard runner. Every function is optional.
// They are called from the goroutine running Run/Round, one at a time, with no Manager lock
// held, so they may call Manager methods (Release, Valid, Owned); they must return quickly (a
// slow callback delays renewals of every other lease).
type Events struct {
	// Acquired: this worker now holds the shard's lease with l.Epoch (a new epoch). The runner
	// claims the cursor with l.Epoch and starts the shard. how is HowFree, HowExpired or
	// HowSteal; from is the lease's previous owner ("" for a free lease).
	Acquired func(shardID string, l Lease, how, from string)
	// Lost: the lease is gone (another worker wrote it, or it was not renewed within the lease
	// duration on this worker's clock); why says which (the Why constants). The runner stops at
	// once and saves nothing.
	Lost func(shardID, why string)
	// ReleaseRequested: the balancer wants the shard handed over. The runner finishes its
	// batch, saves the cursor, then calls Manager.Release. The lease keeps being renewed until
	// then. When ReleaseRequested is nil the Manager releases the lease itself and reports
	// Lost instead.
	ReleaseRequested func(shardID string)
}

// How a lease was acquired (Events.Acquired).
const (
	HowFree    = "free"    // it had no owner (new, released or handed back)
	HowExpired = "expired" // its owner had not renewed it for a lease duration on this worker's clock
	HowSteal   = "steal"   // balancing took a live lease from the most loaded worker
)

// Why a lease was lost (Events.Lost).
const (
	WhyWritten    = "written by another worker"                  // a List showed a newer counter
	WhyNotRenewed = "not renewed within the lease duration"      // on this worker's clock
	WhyLateRenew  = "renewal completed after the lease duration" // handed back
	WhyConflict   = "renewal conflicted"                         // another worker wrote it first
	WhyReleased   = "released by the manager"                    // above target with no ReleaseRequested event
)

// Option configures a Manager. Options are applied in order by NewManager.
type Option func(*config)

type config struct {
	leaseDuration time.Duration
	renewInterval time.Duration
	maxSteals     int
	clock         Clock
	logger        *slog.Logger
	events        Events
}

// WithLeaseDuration sets how long a lease stays valid without a renewal, measured on each
// worker's own monotonic clock. Default 10 s; d <= 0 is ignored.
func WithLeaseDuration(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.leaseDuration = d
		}
	}
}

// WithRenewInterval sets the time between rounds (renew, observe, take, balance). Default
// lease duration / 3; a value <= 0 or >= the lease duration is replaced by the default.
func WithRenewInterval(d time.Duration) Option {
	return func(c *config) { c.renewInterval = d }
}

// WithMaxStealsPerRound bounds how many live leases a round may steal. Default 1; 0 disables
// stealing (expired and free leases are still taken); n < 0 is ignored.
func WithMaxStealsPerRound(n int) Option {
	return func(c *config) {
		if n >= 0 {
			c.maxSteals = n
		}
	}
}

// WithClock sets the monotonic clock (tests use a ManualClock). Default: Go's monotonic
// clock since NewManager. A nil clock is ignored.
func WithClock(clk Clock) Option {
	return func(c *config) {
		if clk != nil {
			c.clock = clk
		}
	}
}

// WithLogger sets the logger. Default slog.Default(). A nil logger is ignored.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.logger = l
		}
	}
}

// WithEvents sets the notifications to the shard runner (see Events).
func WithEvents(e Events) Option {
	return func(c *config) { c.events = e }
}

// Manager acquires, renews, balances, steals and releases the shard leases of one projection
// for one worker (DESIGN §4).
//
// Rules, evaluated once per round (every renew interval, by Run):
//
//  1. Renew: every owned lease is rewritten unchanged (counter+1). ErrConflict means another
//     worker wrote it: Lost. A lease whose last successful renewal started a lease duration
//     ago or more on our clock is Lost without asking the store (a paused or partitioned
//     worker must assume the lease was taken); other store errors are retried next round.
//  2. Observe: List all leases and record, per lease, the local monotonic time at which its
//     counter was last seen to change (first sighting counts as a change). A lease is expired
//     when that is a lease duration ago or more. No wall-clock time is stored or compared, so
//     clock skew between workers cannot make a live lease look expired.
//  3. Target: available = active leases whose parents are all finished (a parent without a
//     lease counts as finished); live workers = distinct owners of non-expired available
//     leases other than us, plus us; target = ceil(available / live workers). "Mine" counts
//     owned leases not already asked to be released.
//  4. Take: while mine < target, take free leases (Owner "") then expired ones, in shard-id
//     order: Update with Owner=us and Epoch+1.
//  5. Steal: if still mine < target, up to MaxStealsPerRound times take the lowest-id lease of
//     the most loaded other worker (ties: lowest worker id), but only while that worker has at
//     least 2 more leases than we do. The victim learns it at its next renewal (ErrConflict);
//     epoch fencing in the cursor and read-model stores covers the gap.
//  6. Release: if mine > target, ask the runner to release one lease (the highest shard id)
//     per round.
//
// Why this converges without flapping: takes stop at the target, so nobody climbs above it;
// a release happens only above the target, so nobody releases down below it; a steal needs a
// gap of 2 and leaves the thief at most at the target and the victim at least at the thief's
// new count, so it never reverses. With consistent views the fixed points are exactly the
// assignments where every worker holds target or less and no two differ by 2 or more (16
// shards on 3 workers: 6/5/5). A new worker owns nothing and is invisible to others until its
// first steal; from then on overloaded workers also release, so a joiner gains up to
// 1 + MaxStealsPerRound leases per round from the others.
//
// A child shard's lease is taken only when every parent lease is finished (StateFinished),
// which the parent's owner sets with Finish after reading the closed shard to its end.
//
// Concurrency: Run (or Round) runs in one goroutine; Valid, Owned, Release, Finish and
// ReleaseAll may be called from any goroutine at any time. Writes to one lease are serialised.
type Manager struct {
	store      LeaseStore
	projection string
	worker     string
	cfg        config

	roundMu sync.Mutex          // serialises rounds
	emitMu  sync.Mutex          // serialises Lost events of parallel renewals
	seen    map[string]seenInfo // guarded by roundMu

	mu    sync.Mutex // guards owned and the fields of every ownedLease
	owned map[string]*ownedLease
}

type seenInfo struct {
	counter   int64
	changedAt time.Duration // our clock when counter was first seen with this value
}

type ownedLease struct {
	wmu sync.Mutex // held across every store write to this lease

	// Guarded by Manager.mu.
	lease            Lease         // as stored by our last successful write
	validFrom        time.Duration // our clock just before that write was sent
	releaseRequested bool
	gone             bool // released, finished or lost; no longer in Manager.owned
}

// NewManager returns a Manager of projection's leases in store for the worker workerID (unique
// among the workers sharing store; a restarted process may reuse its id). It does no I/O.
func NewManager(store LeaseStore, projection, workerID string, opts ...Option) *Manager {
	cfg := config{
		leaseDuration: DefaultLeaseDuration,
		maxSteals:     DefaultMaxStealsPerRound,
		clock:         monoClock{start: time.Now()},
		logger:        slog.Default(),
	}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.renewInterval <= 0 || cfg.renewInterval >= cfg.leaseDuration {
		cfg.renewInterval = cfg.leaseDuration / 3
	}
	cfg.logger = cfg.logger.With("projection", projection, "worker", workerID)
	return &Manager{
		store:      store,
		projection: projection,
		worker:     workerID,
		cfg:        cfg,
		seen:       make(map[string]seenInfo),
		owned:      make(map[string]*ownedLease),
	}
}

// WorkerID returns the worker id the Manager writes as lease owner.
func (m *Manager) WorkerID() string { return m.worker }

// LeaseDuration returns the configured lease duration.
func (m *Manager) LeaseDuration() time.Duration { return m.cfg.leaseDuration }

// RenewInterval returns the time between rounds of Run.
func (m *Manager) RenewInterval() time.Duration { return m.cfg.renewInterval }

// EnsureShards creates a free, active lease (epoch 0, with the shard's parents) for every
// shard that has none. Existing leases are left alone; a concurrent creation by another worker
// (ErrExists) is not an error. Costs one List plus one Create per missing lease.
func (m *Manager) EnsureShards(ctx context.Context, shards []source.Shard) error {
	leases, err := m.store.List(ctx, m.projection)
	if err != nil {
		return fmt.Errorf("shardmap: list leases of projection %q: %w", m.projection, err)
	}
	have := make(map[string]bool, len(leases))
	for _, l := range leases {
		have[l.ShardID] = true
	}
	for _, s := range shards {
		if have[s.ID] {
			continue
		}
		l := Lease{
			Projection: m.projection,
			ShardID:    s.ID,
			ParentIDs:  slices.Clone(s.ParentIDs),
			State:      StateActive,
		}
		if err := m.store.Create(ctx, l); err != nil && !errors.Is(err, ErrExists) {
			return fmt.Errorf("shardmap: create lease for shard %q of projection %q: %w", s.ID, m.projection, err)
		}
		have[s.ID] = true
	}
	return nil
}

// Run performs a round at once and then every renew interval until ctx is done, and returns
// ctx.Err(). Each round's store calls share a deadline of one lease duration. Store errors are
// logged and retried at the next round; they never end Run. A round under way when ctx ends is
// finished, not cancelled: a lease write cancelled in flight may still land, and a lease taken
// that way would be held by no one until it expired (ReleaseAll would not know it). Run does
// not release leases on return: call ReleaseAll after the runners saved their cursors.
func (m *Manager) Run(ctx context.Context) error {
	t := time.NewTicker(m.cfg.renewInterval)
	defer t.Stop()
	for {
		// A round may take at most one lease duration (after that every lease it renews has
		// lapsed anyway): a store that hangs (a black-holed connection) must not keep this
		// worker from taking leases back once the store answers again.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.leaseDuration)
		_, err := m.Round(rctx)
		cancel()
		if err != nil && ctx.Err() == nil {
			m.cfg.logger.Warn("shardmap: lease round failed; retrying next round", "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// RoundReport describes what one round did.
type RoundReport struct {
	Available        int // active leases whose parents are finished
	Workers          int // live workers seen, including this one
	Target           int // ceil(Available / Workers)
	Owned            int // leases held at the end of the round
	Renewed          int
	Lost             int
	Taken            int // free or expired leases taken
	Stolen           int // live leases taken from another worker
	ReleaseRequested int
	Writes           int // LeaseStore Update calls (successful or not)
}

// Round performs one renew / observe / take / steal / release round (see Manager) and
// reports what it did. Run calls it every renew interval; tests call it directly with a
// ManualClock. The error is the List failure, if any (renewals are attempted before List, so
// a failed List still renews). Concurrent calls are serialised.
func (m *Manager) Round(ctx context.Context) (RoundReport, error) {
	m.roundMu.Lock()
	defer m.roundMu.Unlock()
	var rep RoundReport

	// 1. Renew, up to renewParallelism leases at once: a worker with many shards must not
	// renew them one after another behind a slow store (each renewal is one conditional write).
	m.renewAll(ctx, m.ownedSnapshot(), &rep)

	// 2. Observe.
	leases, err := m.store.List(ctx, m.projection)
	if err != nil {
		rep.Owned = len(m.Owned())
		return rep, fmt.Errorf("shardmap: list leases of projection %q: %w", m.projection, err)
	}
	now := m.cfg.clock.Now()
	seen := make(map[string]seenInfo, len(leases))
	byID := make(map[string]Lease, len(leases))
	for _, l := range leases {
		s, ok := m.seen[l.ShardID]
		if !ok || s.counter != l.Counter {
			s = seenInfo{counter: l.Counter, changedAt: now}
		}
		seen[l.ShardID] = s
		byID[l.ShardID] = l
	}
	m.seen = seen
	expired := func(l Lease) bool { return now-seen[l.ShardID].changedAt >= m.cfg.leaseDuration }
	parentsDone := func(l Lease) bool {
		for _, p := range l.ParentIDs {
			if pl, ok := byID[p]; ok && pl.State != StateFinished {
				return false
			}
		}
		return true
	}

	// Leases someone else wrote since our last write are lost; the next renewal would fail.
	var lost []string
	m.mu.Lock()
	for id, e := range m.owned {
		if !e.wmu.TryLock() {
			continue // a Release or Finish is writing it right now; nothing to conclude
		}
		if l, ok := byID[id]; !ok || l.Counter > e.lease.Counter {
			m.dropLocked(e)
			lost = append(lost, id)
		}
		e.wmu.Unlock()
	}
	m.mu.Unlock()
	for _, id := range lost {
		m.cfg.logger.Info("shardmap: lease lost: "+WhyWritten, "shard", id)
		m.emitLost(id, WhyWritten)
		rep.Lost++
	}

	// 3. Target.
	var free, exp []Lease
	counts := make(map[string]int)
	theirs := make(map[string][]Lease)
	m.mu.Lock()
	mine := 0
	for _, e := range m.owned {
		if !e.releaseRequested {
			mine++
		}
	}
	for _, l := range leases {
		if l.State == StateFinished || !parentsDone(l) {
			continue
		}
		rep.Available++
		if _, ok := m.owned[l.ShardID]; ok {
			continue
		}
		switch {
		case l.Owner == "":
			free = append(free, l)
		case expired(l):
			exp = append(exp, l)
		case l.Owner == m.worker:
			// Held by an earlier incarnation of this worker id, or one we gave up as lost:
			// it may still be in use, so wait for it to expire like any other.
		default:
			counts[l.Owner]++
			theirs[l.Owner] = append(theirs[l.Owner], l)
		}
	}
	m.mu.Unlock()
	rep.Workers = len(counts) + 1
	rep.Target = (rep.Available + rep.Workers - 1) / rep.Workers

	// 4. Take free, then expired leases.
	for _, l := range append(free, exp...) {
		if mine >= rep.Target {
			break
		}
		how := HowFree
		if l.Owner != "" {
			how = HowExpired
		}
		if m.take(ctx, l, &rep, how) {
			rep.Taken++
			mine++
		}
	}

	// 5. Steal from the most loaded worker.
	for i := 0; i < m.cfg.maxSteals && mine < rep.Target; i++ {
		victim := ""
		for w, n := range counts {
			if victim == "" || n > counts[victim] || (n == counts[victim] && w < victim) {
				victim = w
			}
		}
		if victim == "" || counts[victim]-mine < 2 {
			break
		}
		l := theirs[victim][0]
		theirs[victim] = theirs[victim][1:]
		counts[victim]--
		if m.take(ctx, l, &rep, HowSteal) {
			rep.Stolen++
			mine++
		}
	}

	// 6. Hand one lease over when above the target.
	if mine > rep.Target {
		m.mu.Lock()
		id := ""
		for sid, e := range m.owned {
			if !e.releaseRequested && sid > id {
				id = sid
			}
		}
		if id != "" {
			m.owned[id].releaseRequested = true
		}
		m.mu.Unlock()
		if id != "" {
			rep.ReleaseRequested++
			m.cfg.logger.Info("shardmap: above target; asking runner to release", "shard", id, "owned", mine, "target", rep.Target)
			if f := m.cfg.events.ReleaseRequested; f != nil {
				f(id)
			} else {
				if err := m.Release(ctx, id); err != nil {
					m.cfg.logger.Warn("shardmap: release failed", "shard", id, "err", err)
				}
				rep.Writes++
				m.emitLost(id, WhyReleased)
			}
		}
	}
	rep.Owned = len(m.Owned())
	return rep, nil
}

// renewParallelism bounds the concurrent renewals of one round.
const renewParallelism = 8

func (m *Manager) renewAll(ctx context.Context, owned []*ownedLease, rep *RoundReport) {
	if len(owned) <= 1 {
		for _, e := range owned {
			m.renew(ctx, e, rep)
		}
		return
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, renewParallelism)
	for _, e := range owned {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			var r RoundReport
			m.renew(ctx, e, &r)
			mu.Lock()
			rep.Renewed += r.Renewed
			rep.Lost += r.Lost
			rep.Writes += r.Writes
			mu.Unlock()
		}()
	}
	wg.Wait()
}

// renew rewrites one owned lease unchanged.
func (m *Manager) renew(ctx context.Context, e *ownedLease, rep *RoundReport) {
	e.wmu.Lock()
	m.mu.Lock()
	if e.gone {
		m.mu.Unlock()
		e.wmu.Unlock()
		return
	}
	l, validFrom := e.lease, e.validFrom
	m.mu.Unlock()
	start := m.cfg.clock.Now()
	if start-validFrom >= m.cfg.leaseDuration {
		m.drop(e)
		e.wmu.Unlock()
		m.cfg.logger.Info("shardmap: lease lost: "+WhyNotRenewed, "shard", l.ShardID,
			"since_renew", start-validFrom, "lease_duration", m.cfg.leaseDuration)
		m.emitLost(l.ShardID, WhyNotRenewed)
		rep.Lost++
		return
	}
	nl, err := m.store.Update(ctx, l)
	rep.Writes++
	switch {
	case err == nil:
		// If the validity ran out while the write was in flight, Valid may already have told
		// the runner "no": keep Valid monotonic (never false then true for one acquisition)
		// by treating the lease as lost and handing it back.
		m.mu.Lock()
		lapsed := m.cfg.clock.Now()-validFrom >= m.cfg.leaseDuration
		if lapsed {
			m.dropLocked(e)
		} else {
			e.lease, e.validFrom = nl, start
		}
		m.mu.Unlock()
		if !lapsed {
			e.wmu.Unlock()
			rep.Renewed++
			return
		}
		m.handBack(ctx, nl, rep)
		e.wmu.Unlock()
		m.cfg.logger.Warn("shardmap: lease lost: "+WhyLateRenew, "shard", l.ShardID)
		m.emitLost(l.ShardID, WhyLateRenew)
		rep.Lost++
	case errors.Is(err, ErrConflict):
		m.drop(e)
		e.wmu.Unlock()
		m.cfg.logger.Info("shardmap: lease lost: "+WhyConflict, "shard", l.ShardID)
		m.emitLost(l.ShardID, WhyConflict)
		rep.Lost++
	default:
		e.wmu.Unlock()
		m.cfg.logger.Warn("shardmap: lease renewal failed; retrying next round", "shard", l.ShardID, "err", err)
	}
}

// take writes l with this worker as owner and the next epoch; how is HowFree, HowExpired or
// HowSteal.
func (m *Manager) take(ctx context.Context, l Lease, rep *RoundReport, how string) bool {
	want := l
	want.Owner = m.worker
	want.Epoch++
	start := m.cfg.clock.Now()
	nl, err := m.store.Update(ctx, want)
	rep.Writes++
	if err != nil {
		lvl := slog.LevelWarn
		if errors.Is(err, ErrConflict) {
			lvl = slog.LevelDebug // another worker was faster
		}
		m.cfg.logger.Log(ctx, lvl, "shardmap: could not take lease", "shard", l.ShardID, "how", how, "from", l.Owner, "err", err)
		return false
	}
	m.mu.Lock()
	lapsed := m.cfg.clock.Now()-start >= m.cfg.leaseDuration
	if !lapsed {
		m.owned[nl.ShardID] = &ownedLease{lease: nl, validFrom: start}
	}
	m.mu.Unlock()
	if lapsed { // the write took a whole lease duration: too late to use it
		m.handBack(ctx, nl, rep)
		return false
	}
	m.seen[nl.ShardID] = seenInfo{counter: nl.Counter, changedAt: m.cfg.clock.Now()}
	m.cfg.logger.Info("shardmap: lease acquired", "shard", nl.ShardID, "how", how, "from", l.Owner, "epoch", nl.Epoch)
	if f := m.cfg.events.Acquired; f != nil {
		f(nl.ShardID, nl, how, l.Owner)
	}
	return true
}

// Valid reports whether this worker may still act on the shard: it holds the lease and the
// last successful renewal (or take) started less than a lease duration ago on this worker's
// clock. epoch is the lease's fencing token (also returned, with ok false, when the lease is
// held but its validity ran out). Call it before every batch and every cursor save: a worker
// that was paused (SIGSTOP, GC, VM migration) sees ok false as soon as it resumes, before
// any round has run. Once ok is false for an acquisition it stays false: the next round
// reports Lost, and a later Acquired starts a new epoch. Safe for concurrent use; no I/O.
func (m *Manager) Valid(shardID string) (epoch int64, ok bool) {
	now := m.cfg.clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.owned[shardID]
	if e == nil {
		return 0, false
	}
	return e.lease.Epoch, now-e.validFrom < m.cfg.leaseDuration
}

// Owned returns copies of the leases this worker holds (as last written by it), ordered by
// shard id, including leases asked to be released but not yet released.
func (m *Manager) Owned() []Lease {
	m.mu.Lock()
	out := make([]Lease, 0, len(m.owned))
	for _, e := range m.owned {
		l := e.lease
		l.ParentIDs = slices.Clone(l.ParentIDs)
		out = append(out, l)
	}
	m.mu.Unlock()
	slices.SortFunc(out, func(a, b Lease) int { return cmp.Compare(a.ShardID, b.ShardID) })
	return out
}

// Release frees the shard's lease (Owner "", epoch kept) for another worker. Call it after
// the final cursor save. Whatever the outcome, this worker no longer holds the lease
// afterwards. Errors: ErrNotOwned (wrapped) when not held; ErrConflict (wrapped) when
// another worker had already taken it; store errors (the lease then expires by itself).
func (m *Manager) Release(ctx context.Context, shardID string) error {
	return m.finalWrite(ctx, shardID, "release", func(l *Lease) { l.Owner = "" })
}

// Finish marks the shard's lease finished (State finished, Owner "", epoch kept): the closed
// shard was read to its end (source.ErrShardEnded) and its cursor saved, so its children may
// start. Errors as for Release.
func (m *Manager) Finish(ctx context.Context, shardID string) error {
	return m.finalWrite(ctx, shardID, "finish", func(l *Lease) { l.Owner, l.State = "", StateFinished })
}

// ReleaseAll releases every held lease (graceful shutdown, after Run returned and the runners
// saved their cursors) and returns the store errors joined. Leases another worker took in the
// meantime (ErrConflict) are skipped silently; leases that fail to release expire by
// themselves after the lease duration.
func (m *Manager) ReleaseAll(ctx context.Context) error {
	var errs []error
	for _, l := range m.Owned() {
		if err := m.Release(ctx, l.ShardID); err != nil && !errors.Is(err, ErrNotOwned) && !errors.Is(err, ErrConflict) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (m *Manager) finalWrite(ctx context.Context, shardID, what string, change func(*Lease)) error {
	m.mu.Lock()
	e := m.owned[shardID]
	m.mu.Unlock()
	if e == nil {
		return fmt.Errorf("shardmap: %s shard %q of projection %q: %w", what, shardID, m.projection, ErrNotOwned)
	}
	e.wmu.Lock()
	defer e.wmu.Unlock()
	m.mu.Lock()
	if e.gone {
		m.mu.Unlock()
		return fmt.Errorf("shardmap: %s shard %q of projection %q: %w", what, shardID, m.projection, ErrNotOwned)
	}
	l := e.lease
	// Stop being the owner before the lease can become free, so that no other worker can
	// hold it while Valid still says yes here.
	m.dropLocked(e)
	m.mu.Unlock()
	change(&l)
	_, err := m.store.Update(ctx, l)
	if err != nil {
		return fmt.Errorf("shardmap: %s shard %q of projection %q: %w", what, shardID, m.projection, err)
	}
	m.cfg.logger.Info("shardmap: lease "+what+"d", "shard", shardID, "epoch", l.Epoch)
	return nil
}

// handBack frees a lease this worker wrote last (l as returned by the store) but must not
// use. On failure the lease simply expires.
func (m *Manager) handBack(ctx context.Context, l Lease, rep *RoundReport) {
	l.Owner = ""
	_, err := m.store.Update(ctx, l)
	rep.Writes++
	if err != nil {
		m.cfg.logger.Warn("shardmap: could not free a lapsed lease; it will expire", "shard", l.ShardID, "err", err)
	}
}

func (m *Manager) ownedSnapshot() []*ownedLease {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*ownedLease, 0, len(m.owned))
	for _, e := range m.owned {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b *ownedLease) int { return cmp.Compare(a.lease.ShardID, b.lease.ShardID) })
	return out
}

func (m *Manager) drop(e *ownedLease) {
	m.mu.Lock()
	m.dropLocked(e)
	m.mu.Unlock()
}

func (m *Manager) dropLocked(e *ownedLease) {
	e.gone = true
	if m.owned[e.lease.ShardID] == e {
		delete(m.owned, e.lease.ShardID)
	}
}

func (m *Manager) emitLost(shardID, why string) {
	if f := m.cfg.events.Lost; f != nil {
		m.emitMu.Lock() // renewals run in parallel; events stay one at a time
		defer m.emitMu.Unlock()
		f(shardID, why)
	}
}
