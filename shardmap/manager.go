package shardmap

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
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
	// claims the cursor with l.Epoch and starts the shard. how is HowFree, HowExpired,
	// HowSteal or HowRetake; from is the lease's previous owner ("" for a free lease).
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
	HowRetake  = "retake"  // this worker's own take of the last round, whose outcome the store did not tell, taken again
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
	module        string
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

// WithModule sets this worker's module identity (projhost: "sha256:<hex>" of the handler's
// bytes), written on every lease it takes or renews. With an identity the Manager refuses to
// share the projection with a live worker of another identity (see Manager, "Module
// identity"); without one (the default, "") it neither writes nor checks any.
func WithModule(id string) Option {
	return func(c *config) { c.module = id }
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
//     worker wrote it: Lost — unless the stored lease is this worker's own earlier renewal, one
//     whose outcome it did not learn (the store failed after the write was sent): the lease
//     then holds our owner and epoch with our counter+1, which no other write produces, and it
//     is written again on top of it (RoundReport.Resolved; the same for takes, releases and
//     finishes). A lease whose last successful renewal started a lease duration
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
// # Many leases
//
// Renewals and takes are written MaxBatch leases per call through BatchUpdater when the store
// implements it (the embedded store: one SQLite transaction per call), else renewParallelism
// Updates at a time. Renewals come first in every round and are never queued behind takes:
// takes stop once the round has run for half a renew interval (the rest are taken in the next
// rounds), so that the next round's renewals start on time however many leases are free.
//
// # Module identity
//
// With WithModule, every take and renewal writes the identity on the lease (Lease.Module), and
// Release, Finish and hand-backs clear it with the owner. A lease is *foreign* when it is
// active, owned by another worker (or an earlier incarnation of our worker id), carries a
// non-empty identity other than ours, and is live by the expiry rule above (its counter changed
// less than a lease duration ago on our clock). While any lease is foreign the Manager takes
// and steals nothing (a worker of another module may be running). When a foreign lease's
// counter is seen to change between two of our Lists, its owner is live: a Manager holding no
// lease then returns a *ModuleConflictError (ErrModuleConflict) from Round, and Run ends with
// it. A dead owner's leases expire after one lease duration and are then taken as usual, so a
// new module starts at once after a graceful stop of the old workers (released leases carry no
// owner and no identity) and one lease duration after a crash.
//
// Two workers of different modules starting at the same instant: each round that took leases
// Lists again before it tells the runner (Events.Acquired); if a foreign lease shows up, the
// leases just taken are handed back unused, and a Manager left holding no lease returns the
// conflict. Of two such workers, the one whose confirming List comes later sees the other's
// takes (each take precedes its own List), so at least one refuses, and a worker that processes
// a lease has seen no foreign lease after taking it: two modules never process at once.
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
	// unknownTakes are the takes of the last round whose outcome the store did not tell (an
	// error other than a conflict), by shard: the lease as the take wrote it. Guarded by roundMu.
	unknownTakes map[string]Lease

	mu    sync.Mutex // guards owned and the fields of every ownedLease
	owned map[string]*ownedLease

	blocked atomic.Bool // the last round saw foreign leases (another module) and held none
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
// not release leases on return: call ReleaseAll after the runners saved their cursors. With
// WithModule, Run ends with the *ModuleConflictError of a round that refused to start (see
// Manager, "Module identity"); the Manager then holds no lease.
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
		if errors.Is(err, ErrModuleConflict) {
			return err
		}
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
	Writes           int // lease writes (Update calls, or leases passed to UpdateMany), successful or not
	Foreign          int // live leases of other workers with another module (WithModule); nothing is taken then
	HandedBack       int // leases taken this round and handed back unused (a foreign lease appeared)
	Resolved         int // conflicts with this worker's own earlier write of unknown outcome, written again (ownEarlier)
}

// Round performs one renew / observe / take / steal / release round (see Manager) and
// reports what it did. Run calls it every renew interval; tests call it directly with a
// ManualClock. The error is the List failure, if any (renewals are attempted before List, so
// a failed List still renews). Concurrent calls are serialised.
func (m *Manager) Round(ctx context.Context) (RoundReport, error) {
	m.roundMu.Lock()
	defer m.roundMu.Unlock()
	var rep RoundReport
	roundStart := m.cfg.clock.Now()

	// 1. Renew, MaxBatch leases per store call: a worker with many shards must not renew them
	// one after another (each renewal is one conditional write).
	m.renewAll(ctx, m.ownedSnapshot(), &rep)

	// 2. Observe.
	leases, err := m.store.List(ctx, m.projection)
	if err != nil {
		rep.Owned = len(m.Owned())
		return rep, fmt.Errorf("shardmap: list leases of projection %q: %w", m.projection, err)
	}
	byID, changed, now := m.observe(leases)
	expired := func(l Lease) bool { return now-m.seen[l.ShardID].changedAt >= m.cfg.leaseDuration }
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
		switch l, ok := byID[id]; {
		case ok && isOwnEarlier(l, e.lease):
			// Our own renewal of this round or an earlier one, applied although the store
			// reported an error: keep the lease. Its validity still runs from our last write
			// known to have been applied; the next renewal writes on top of it.
			e.lease = l
			rep.Resolved++
		case !ok || l.Counter > e.lease.Counter:
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

	// Another module on the projection: take nothing; refuse when its owner is proven live
	// and we hold nothing.
	canTake := true
	if n, live := m.foreignLeases(leases, changed, expired); n > 0 {
		rep.Foreign, canTake = n, false
		held := len(m.Owned()) > 0
		m.blocked.Store(!held)
		if !held && live != nil {
			return rep, m.conflict(*live)
		}
		m.cfg.logger.Warn("shardmap: leases of another module are live on this projection: taking none until they expire",
			"foreign", n, "module", m.cfg.module, "held", held)
	} else {
		m.blocked.Store(false)
	}

	// 3. Target.
	unknown := m.unknownTakes
	m.unknownTakes = nil
	var free, exp, retakes []Lease
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
		case l.Owner == m.worker && isOwnEarlier(l, unknown[l.ShardID]):
			// Our own take of the last round, applied although the store reported an error:
			// no runner ever started on it, so take it again now (a fresh write, which
			// starts its validity) instead of waiting a lease duration for it to expire.
			retakes = append(retakes, l)
		case l.Owner == m.worker:
			// Held by an earlier incarnation of this worker id, or one we gave up as lost:
			// it may still be in use, so wait for it to expire like any other.
		case m.otherModule(l):
			// A worker of another module (about to refuse, or to be refused): not one to
			// balance with.
		default:
			counts[l.Owner]++
			theirs[l.Owner] = append(theirs[l.Owner], l)
		}
	}
	m.mu.Unlock()
	rep.Workers = len(counts) + 1
	rep.Target = (rep.Available + rep.Workers - 1) / rep.Workers

	// 4. Take free, then expired leases, MaxBatch per store call, within the take budget: the
	// next round's renewals must not wait for a long run of takes.
	var pending []taken
	if n := min(rep.Target-mine, len(retakes)); canTake && n > 0 {
		got := m.takeMany(ctx, retakes[:n], &rep, HowRetake)
		pending = append(pending, got...)
		mine += len(got)
	}
	cands := append(free, exp...)
	for canTake && mine < rep.Target && len(cands) > 0 {
		if len(pending) > 0 && m.cfg.clock.Now()-roundStart >= m.cfg.renewInterval/2 {
			m.cfg.logger.Debug("shardmap: take budget of the round spent; taking more next round",
				"taken", len(pending), "left", len(cands))
			break
		}
		n := min(rep.Target-mine, MaxBatch, len(cands))
		got := m.takeMany(ctx, cands[:n], &rep, "")
		cands = cands[n:]
		pending = append(pending, got...)
		mine += len(got)
	}

	// 5. Steal from the most loaded worker.
	for i := 0; canTake && i < m.cfg.maxSteals && mine < rep.Target; i++ {
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
		got := m.takeMany(ctx, []Lease{l}, &rep, HowSteal)
		pending = append(pending, got...)
		mine += len(got)
	}

	// Tell the runner about the leases taken, after checking that no other module took any
	// meanwhile (see Manager, "Module identity").
	if len(pending) > 0 && m.cfg.module != "" {
		if pending, err = m.confirm(ctx, pending, &rep); err != nil {
			rep.Owned = len(m.Owned())
			return rep, err
		}
	}
	m.acquire(ctx, pending, &rep)

	// 6. Hand one lease over when above the target.
	m.mu.Lock()
	mine = 0
	id := ""
	for sid, e := range m.owned {
		if !e.releaseRequested {
			mine++
			id = max(id, sid)
		}
	}
	if mine <= rep.Target {
		id = ""
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
	rep.Owned = len(m.Owned())
	return rep, nil
}

// observe records the counter of every listed lease (step 2: first sighting or a new counter
// counts as a change, dated now) and returns the leases by shard id, the shard ids whose
// counter changed since an earlier List (proof of a live writer), and the clock reading used.
func (m *Manager) observe(leases []Lease) (byID map[string]Lease, changed map[string]bool, now time.Duration) {
	now = m.cfg.clock.Now()
	seen := make(map[string]seenInfo, len(leases))
	byID = make(map[string]Lease, len(leases))
	changed = make(map[string]bool)
	for _, l := range leases {
		s, ok := m.seen[l.ShardID]
		if !ok || s.counter != l.Counter {
			if ok {
				changed[l.ShardID] = true
			}
			s = seenInfo{counter: l.Counter, changedAt: now}
		}
		seen[l.ShardID] = s
		byID[l.ShardID] = l
	}
	m.seen = seen
	return byID, changed, now
}

// foreignLeases counts the live active leases owned with a module identity other than ours
// (none without WithModule) and returns one whose counter changed since an earlier List (its
// owner is live), or nil.
func (m *Manager) foreignLeases(leases []Lease, changed map[string]bool, expired func(Lease) bool) (int, *Lease) {
	if m.cfg.module == "" {
		return 0, nil
	}
	n := 0
	var live *Lease
	for i, l := range leases {
		if !m.otherModule(l) || l.State != StateActive || expired(l) {
			continue
		}
		n++
		if live == nil && changed[l.ShardID] {
			live = &leases[i]
		}
	}
	return n, live
}

// otherModule reports whether l is owned with a module identity other than ours (never without
// WithModule, nor for a lease without identity).
func (m *Manager) otherModule(l Lease) bool {
	return m.cfg.module != "" && l.Owner != "" && l.Module != "" && l.Module != m.cfg.module
}

func (m *Manager) conflict(l Lease) error {
	err := &ModuleConflictError{Projection: m.projection, Module: m.cfg.module,
		OtherWorker: l.Owner, OtherModule: l.Module, ShardID: l.ShardID}
	m.cfg.logger.Error("shardmap: refusing to start", "err", err)
	return err
}

// taken is a lease this round wrote with us as owner, not yet told to the runner.
type taken struct {
	lease     Lease // as stored
	how, from string
	start     time.Duration // our clock just before the write was sent
}

// takeMany writes ls (at most MaxBatch) with this worker as owner, our module and the next
// epoch, and returns the leases it got. how is HowSteal, or "" for HowFree/HowExpired by owner.
func (m *Manager) takeMany(ctx context.Context, ls []Lease, rep *RoundReport, how string) []taken {
	want := make([]Lease, len(ls))
	for i, l := range ls {
		want[i] = l
		want[i].Owner, want[i].Module = m.worker, m.cfg.module
		want[i].Epoch++
	}
	start := m.cfg.clock.Now()
	res, err := m.write(ctx, want, rep)
	rep.Writes += len(want)
	if err != nil {
		m.cfg.logger.Warn("shardmap: could not take leases", "leases", len(want), "err", err)
		for _, w := range want {
			m.noteUnknownTake(w)
		}
		return nil
	}
	var out []taken
	for i, r := range res {
		h := how
		if h == "" {
			h = HowFree
			if ls[i].Owner != "" {
				h = HowExpired
			}
		}
		if r.Err != nil {
			lvl := slog.LevelWarn
			if errors.Is(r.Err, ErrConflict) {
				lvl = slog.LevelDebug // another worker was faster
			} else {
				m.noteUnknownTake(want[i])
			}
			m.cfg.logger.Log(ctx, lvl, "shardmap: could not take lease", "shard", ls[i].ShardID, "how", h, "from", ls[i].Owner, "err", r.Err)
			continue
		}
		out = append(out, taken{lease: r.Lease, how: h, from: ls[i].Owner, start: start})
	}
	return out
}

// noteUnknownTake remembers the take w whose outcome the store did not tell, for the next round.
func (m *Manager) noteUnknownTake(w Lease) {
	if m.unknownTakes == nil {
		m.unknownTakes = make(map[string]Lease)
	}
	m.unknownTakes[w.ShardID] = w
}

// confirm Lists the leases again after this round's takes: when a foreign lease shows up (a
// worker of another module took leases at the same time), the leases just taken are handed
// back unused, and a conflict is returned when we hold no other. A failed List hands them back
// too (they cannot be checked).
func (m *Manager) confirm(ctx context.Context, pending []taken, rep *RoundReport) ([]taken, error) {
	back := func() {
		ls := make([]Lease, len(pending))
		for i, p := range pending {
			ls[i] = p.lease
		}
		m.handBackAll(ctx, ls, rep)
		rep.HandedBack += len(ls)
	}
	leases, err := m.store.List(ctx, m.projection)
	if err != nil {
		m.cfg.logger.Warn("shardmap: could not check the leases just taken for another module; handing them back",
			"leases", len(pending), "err", err)
		back()
		return nil, nil
	}
	_, changed, now := m.observe(leases)
	expired := func(l Lease) bool { return now-m.seen[l.ShardID].changedAt >= m.cfg.leaseDuration }
	n, live := m.foreignLeases(leases, changed, expired)
	if n == 0 {
		return pending, nil
	}
	rep.Foreign = n
	back()
	if len(m.Owned()) == 0 {
		m.blocked.Store(true)
		if live == nil { // cannot happen: a lease that became foreign since step 2 was written
			live = &leases[slices.IndexFunc(leases, m.otherModule)]
		}
		return nil, m.conflict(*live)
	}
	m.cfg.logger.Warn("shardmap: another module took leases of this projection at the same time; handed back the leases just taken",
		"foreign", n, "module", m.cfg.module, "handed_back", len(pending))
	return nil, nil
}

// acquire makes the leases taken this round ours and tells the runner. A take whose write took
// a whole lease duration is too late to use: it is handed back.
func (m *Manager) acquire(ctx context.Context, pending []taken, rep *RoundReport) {
	var late []Lease
	for _, p := range pending {
		nl := p.lease
		m.mu.Lock()
		lapsed := m.cfg.clock.Now()-p.start >= m.cfg.leaseDuration
		if !lapsed {
			m.owned[nl.ShardID] = &ownedLease{lease: nl, validFrom: p.start}
		}
		m.mu.Unlock()
		if lapsed {
			late = append(late, nl)
			continue
		}
		if p.how == HowSteal {
			rep.Stolen++
		} else {
			rep.Taken++
		}
		m.seen[nl.ShardID] = seenInfo{counter: nl.Counter, changedAt: m.cfg.clock.Now()}
		m.cfg.logger.Info("shardmap: lease acquired", "shard", nl.ShardID, "how", p.how, "from", p.from, "epoch", nl.Epoch)
		if f := m.cfg.events.Acquired; f != nil {
			f(nl.ShardID, nl, p.how, p.from)
		}
	}
	m.handBackAll(ctx, late, rep)
}

// Blocked reports whether the last round saw live leases of another module (WithModule) while
// this worker held none: it takes nothing until they expire, or ends with a
// *ModuleConflictError once their owner is seen renewing. Safe for concurrent use.
func (m *Manager) Blocked() bool { return m.blocked.Load() }

// renewParallelism bounds the concurrent Updates of one write when the store is no
// BatchUpdater.
const renewParallelism = 8

// write writes ls (at most MaxBatch leases) through the store: one UpdateMany call when it is
// a BatchUpdater, else renewParallelism Updates at a time. res[i] is the outcome of ls[i]; err
// is the failure of a whole UpdateMany call (res is nil then). A conflict with this worker's
// own earlier write of the same lease (ownEarlier) is resolved by writing ls[i] again on top
// of it (rep.Resolved).
func (m *Manager) write(ctx context.Context, ls []Lease, rep *RoundReport) ([]UpdateResult, error) {
	res, err := m.writeOnce(ctx, ls)
	if err != nil {
		return nil, err
	}
	for i, r := range res {
		stored := ownEarlier(r.Err, ls[i])
		if stored == nil {
			continue
		}
		again := ls[i]
		again.Counter = stored.Counter
		nl, err := m.store.Update(ctx, again)
		rep.Writes++
		rep.Resolved++
		m.cfg.logger.Info("shardmap: a lease write of this worker whose outcome was unknown had been applied; wrote the lease again on top of it",
			"shard", again.ShardID, "counter", stored.Counter, "err", err)
		res[i] = UpdateResult{Lease: nl, Err: err}
	}
	return res, nil
}

// ownEarlier returns the lease stored at the conflict err of a write of l when it is this
// worker's own earlier write of l whose outcome the worker did not learn (a store error after
// the write was sent, e.g. a timeout, when the write had been applied): l's owner, epoch,
// state, module and parents with a counter above l.Counter (l.Counter+1, or more when several
// such writes in a row went unseen: a renewal of unknown outcome in a round whose List failed,
// then the write on top of it in the next round, also of unknown outcome). No other write
// produces it: a take raises the epoch and sets its own owner, a release or finish clears the
// owner, and the epoch never goes down, so every write since l that kept l's owner and epoch
// was this worker's. It returns nil for any other error or stored lease, for a
// write of a free lease (l.Owner ""; a hand-back that fails simply expires), and when the store
// gave no stored lease (a bare ErrConflict). The caller must write again rather than
// take the stored lease as its own success: the earlier write happened at an unknown time, so
// it cannot start a validity period.
func ownEarlier(err error, l Lease) *Lease {
	var ce *ConflictError
	if !errors.As(err, &ce) || ce.Stored == nil || !isOwnEarlier(*ce.Stored, l) {
		return nil
	}
	return ce.Stored
}

// isOwnEarlier reports whether stored is the result of a write of l (ownEarlier).
func isOwnEarlier(stored, l Lease) bool {
	return l.Owner != "" && stored.Counter > l.Counter && stored.Owner == l.Owner && stored.Epoch == l.Epoch &&
		stored.State == l.State && stored.Module == l.Module && slices.Equal(stored.ParentIDs, l.ParentIDs)
}

func (m *Manager) writeOnce(ctx context.Context, ls []Lease) ([]UpdateResult, error) {
	if b, ok := m.store.(BatchUpdater); ok {
		res, err := b.UpdateMany(ctx, ls)
		if err == nil && len(res) != len(ls) {
			err = fmt.Errorf("shardmap: UpdateMany returned %d results for %d leases", len(res), len(ls))
		}
		if err != nil {
			return nil, err
		}
		return res, nil
	}
	res := make([]UpdateResult, len(ls))
	if len(ls) == 1 {
		l, err := m.store.Update(ctx, ls[0])
		res[0] = UpdateResult{Lease: l, Err: err}
		return res, nil
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, renewParallelism)
	for i, l := range ls {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			nl, err := m.store.Update(ctx, l)
			res[i] = UpdateResult{Lease: nl, Err: err}
		}()
	}
	wg.Wait()
	return res, nil
}

// renewAll rewrites every owned lease unchanged, MaxBatch per store call.
func (m *Manager) renewAll(ctx context.Context, owned []*ownedLease, rep *RoundReport) {
	for len(owned) > 0 {
		n := min(len(owned), MaxBatch)
		m.renewChunk(ctx, owned[:n], rep)
		owned = owned[n:]
	}
}

// renewChunk renews up to MaxBatch owned leases in one write. It holds the write lock of each
// lease from its checks to the outcome of the write, and reports losses after releasing them
// (an Events.Lost callback may call Release).
func (m *Manager) renewChunk(ctx context.Context, chunk []*ownedLease, rep *RoundReport) {
	type lostLease struct{ id, why string }
	var (
		es    []*ownedLease
		ls    []Lease
		froms []time.Duration
		lost  []lostLease
	)
	for _, e := range chunk {
		e.wmu.Lock()
		m.mu.Lock()
		if e.gone {
			m.mu.Unlock()
			e.wmu.Unlock()
			continue
		}
		l, validFrom := e.lease, e.validFrom
		m.mu.Unlock()
		if since := m.cfg.clock.Now() - validFrom; since >= m.cfg.leaseDuration {
			m.drop(e)
			e.wmu.Unlock()
			m.cfg.logger.Info("shardmap: lease lost: "+WhyNotRenewed, "shard", l.ShardID,
				"since_renew", since, "lease_duration", m.cfg.leaseDuration)
			lost = append(lost, lostLease{l.ShardID, WhyNotRenewed})
			continue
		}
		es, ls, froms = append(es, e), append(ls, l), append(froms, validFrom)
	}
	var late []Lease
	if len(es) > 0 {
		start := m.cfg.clock.Now()
		res, err := m.write(ctx, ls, rep)
		rep.Writes += len(ls)
		if err != nil {
			m.cfg.logger.Warn("shardmap: lease renewals failed; retrying next round", "leases", len(ls), "err", err)
		}
		for i := 0; err == nil && i < len(es); i++ {
			e, r := es[i], res[i]
			switch {
			case r.Err == nil:
				// If the validity ran out while the write was in flight, Valid may already
				// have told the runner "no": keep Valid monotonic (never false then true for
				// one acquisition) by treating the lease as lost and handing it back.
				m.mu.Lock()
				lapsed := m.cfg.clock.Now()-froms[i] >= m.cfg.leaseDuration
				if lapsed {
					m.dropLocked(e)
				} else {
					e.lease, e.validFrom = r.Lease, start
				}
				m.mu.Unlock()
				if lapsed {
					late = append(late, r.Lease)
					m.cfg.logger.Warn("shardmap: lease lost: "+WhyLateRenew, "shard", ls[i].ShardID)
					lost = append(lost, lostLease{ls[i].ShardID, WhyLateRenew})
				} else {
					rep.Renewed++
				}
			case errors.Is(r.Err, ErrConflict):
				m.drop(e)
				m.cfg.logger.Info("shardmap: lease lost: "+WhyConflict, "shard", ls[i].ShardID)
				lost = append(lost, lostLease{ls[i].ShardID, WhyConflict})
			default:
				m.cfg.logger.Warn("shardmap: lease renewal failed; retrying next round", "shard", ls[i].ShardID, "err", r.Err)
			}
		}
		m.handBackAll(ctx, late, rep)
	}
	for _, e := range es {
		e.wmu.Unlock()
	}
	for _, l := range lost {
		m.emitLost(l.id, l.why)
		rep.Lost++
	}
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
// afterwards. A lease that another worker has taken since, with a newer epoch, counts as
// released (nil): this worker had stopped using it, and the newer epoch fences it; it is also
// what a release whose write was applied and whose answer was lost looks like when the next
// owner took the free lease before the store's retry. Errors: ErrNotOwned (wrapped) when not
// held; ErrConflict (wrapped) when the lease changed otherwise; store errors (the lease then
// expires by itself).
func (m *Manager) Release(ctx context.Context, shardID string) error {
	return m.finalWrite(ctx, shardID, "release", func(l *Lease) { l.Owner, l.Module = "", "" })
}

// Finish marks the shard's lease finished (State finished, Owner "", epoch kept): the closed
// shard was read to its end (source.ErrShardEnded) and its cursor saved, so its children may
// start. Errors as for Release.
func (m *Manager) Finish(ctx context.Context, shardID string) error {
	return m.finalWrite(ctx, shardID, "finish", func(l *Lease) { l.Owner, l.Module, l.State = "", "", StateFinished })
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
	held := l
	change(&l)
	_, err := m.store.Update(ctx, l)
	if stored := ownEarlier(err, held); stored != nil {
		// Our last renewal had been applied without our learning it: write on top of it.
		l.Counter = stored.Counter
		_, err = m.store.Update(ctx, l)
	}
	var ce *ConflictError
	if what == "release" && errors.As(err, &ce) && ce.Stored != nil && ce.Stored.Epoch > held.Epoch {
		m.cfg.logger.Info("shardmap: lease released; another worker had already taken it", "shard", shardID,
			"epoch", held.Epoch, "owner_now", ce.Stored.Owner, "epoch_now", ce.Stored.Epoch)
		return nil
	}
	if err != nil {
		return fmt.Errorf("shardmap: %s shard %q of projection %q: %w", what, shardID, m.projection, err)
	}
	m.cfg.logger.Info("shardmap: lease "+what+"d", "shard", shardID, "epoch", l.Epoch)
	return nil
}

// handBackAll frees leases this worker wrote last (ls as returned by the store) but must not
// use, MaxBatch per store call. A lease that fails to be freed simply expires.
func (m *Manager) handBackAll(ctx context.Context, ls []Lease, rep *RoundReport) {
	for len(ls) > 0 {
		n := min(len(ls), MaxBatch)
		free := make([]Lease, n)
		for i, l := range ls[:n] {
			free[i] = l
			free[i].Owner, free[i].Module = "", ""
		}
		res, err := m.write(ctx, free, rep)
		rep.Writes += n
		for i, l := range free {
			e := err
			if e == nil {
				e = res[i].Err
			}
			if e != nil {
				m.cfg.logger.Warn("shardmap: could not free a lapsed lease; it will expire", "shard", l.ShardID, "err", e)
			}
		}
		ls = ls[n:]
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
