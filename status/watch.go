package status

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/projhost/projhost/shardmap"
)

// Liveness is a watched lease's judgement (Watcher.Observe).
type Liveness struct {
	// Lease is LeaseLive, LeaseExpired or LeaseUnknown.
	Lease string
	// Silent is how long ago, on the watcher's clock, the lease's counter last changed (or was
	// first seen, when it never changed while watched).
	Silent time.Duration
}

// Watcher judges whether the owners of leases are live by the lease manager's rule
// (shardmap.Manager): every lease write (renewal, take) increments the lease's counter, and a
// lease whose counter has not changed for LeaseDuration on the watcher's own monotonic clock is
// expired. No wall-clock time is stored or compared, so clock skew between machines cannot make
// a live owner look dead. A lease seen for the first time is LeaseUnknown until its counter
// changes (LeaseLive) or a lease duration passes without a change (LeaseExpired): one look
// cannot tell, so a judgement needs two Observes, at least a renew interval apart for a live
// owner (a third of the lease duration in projhost) and a lease duration apart for a dead one.
//
// A Watcher is safe for concurrent use.
type Watcher struct {
	leaseDuration time.Duration
	clock         shardmap.Clock

	mu   sync.Mutex
	seen map[string]map[string]seenLease // projection -> shard -> what was seen
}

type seenLease struct {
	counter   int64
	changedAt time.Duration
	changed   bool // the counter was seen to change (not just first seen)
}

// NewWatcher returns a Watcher judging by leaseDuration (the workers' --lease-duration; at most
// 0 means shardmap.DefaultLeaseDuration) on clock (nil: Go's monotonic clock).
func NewWatcher(leaseDuration time.Duration, clock shardmap.Clock) *Watcher {
	if leaseDuration <= 0 {
		leaseDuration = shardmap.DefaultLeaseDuration
	}
	if clock == nil {
		clock = monoClock{time.Now()}
	}
	return &Watcher{leaseDuration: leaseDuration, clock: clock, seen: map[string]map[string]seenLease{}}
}

type monoClock struct{ start time.Time }

func (c monoClock) Now() time.Duration { return time.Since(c.start) }

// LeaseDuration is the duration the Watcher judges by.
func (w *Watcher) LeaseDuration() time.Duration { return w.leaseDuration }

// Observe records the counters of a projection's leases (all of them, as LeaseStore.List
// returns them) and returns the liveness of each owned one by shard id. Leases without an
// owner are forgotten (they have no owner to judge).
func (w *Watcher) Observe(projection string, leases []shardmap.Lease) map[string]Liveness {
	now := w.clock.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	before := w.seen[projection]
	seen := make(map[string]seenLease, len(leases))
	out := make(map[string]Liveness, len(leases))
	for _, l := range leases {
		if l.Owner == "" {
			continue
		}
		s, ok := before[l.ShardID]
		switch {
		case !ok:
			s = seenLease{counter: l.Counter, changedAt: now}
		case s.counter != l.Counter:
			s = seenLease{counter: l.Counter, changedAt: now, changed: true}
		}
		seen[l.ShardID] = s
		lv := Liveness{Lease: LeaseUnknown, Silent: now - s.changedAt}
		switch {
		case lv.Silent >= w.leaseDuration:
			lv.Lease = LeaseExpired
		case s.changed:
			lv.Lease = LeaseLive
		}
		out[l.ShardID] = lv
	}
	w.seen[projection] = seen
	return out
}

// Watch lists the leases of projections and Observes them in w until no owned lease is
// LeaseUnknown, or for at most w's lease duration (after which every owned lease is judged),
// looking every poll (at most 0: a tenth of the lease duration). With live owners it returns
// after about one renew interval; an owner that renews nothing keeps it waiting a lease
// duration. Errors: the lease store's, or ctx's.
func (w *Watcher) Watch(ctx context.Context, leases shardmap.LeaseStore, projections []string, poll time.Duration) error {
	if poll <= 0 {
		poll = w.leaseDuration / 10
	}
	start := w.clock.Now()
	for {
		unknown := false
		for _, p := range projections {
			ls, err := leases.List(ctx, p)
			if err != nil {
				return fmt.Errorf("status: watching the leases of %q: %w", p, err)
			}
			for _, lv := range w.Observe(p, ls) {
				unknown = unknown || lv.Lease == LeaseUnknown
			}
		}
		elapsed := w.clock.Now() - start
		if !unknown || elapsed > w.leaseDuration {
			return nil
		}
		t := time.NewTimer(min(poll, w.leaseDuration-elapsed+time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}
