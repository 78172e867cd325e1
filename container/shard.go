package container

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/projhost/projhost/projection"
	"github.com/projhost/projhost/shardmap"
	"github.com/projhost/projhost/source"
)

// ending is how a shard loop ended.
type ending int

const (
	endLost     ending = iota // lease lost or shutdown without saving: nothing more is written
	endRelease                // hand-over: commit, then release the lease
	endFinished               // closed shard read to its end: commit, then finish the lease
	endPaused                 // the shard was paused: commit, close it, keep the lease, wait
)

// runShard processes one acquisition of a shard: open it in the core, pull and handle batches
// until the lease is lost, a release is asked for or the shard ends, then close it out.
//
// A paused shard (cursorstore.Store.SetPaused) is not opened: its owner keeps the lease and
// waits, reading nothing, calling no handler and claiming no cursor, until the pause is lifted.
// A shard found paused while open commits what it handled, closes and waits the same way.
func (r *Runner) runShard(ctx context.Context, s *shardRun) {
	log := r.log.With("shard", s.id, "epoch", s.epoch)
	for {
		if end, why, stop := r.waitUnpaused(ctx, s, log); stop {
			r.endUnopened(ctx, s, end, why, log)
			return
		}
		if !r.runOpen(ctx, s, log) {
			return
		}
	}
}

// reportLost reports the loss of s's lease: why it ended, as shutdown recorded it (stopWhy),
// else why, else as the lease manager tells (awaitLost).
func (r *Runner) reportLost(s *shardRun, why string) {
	s.mu.Lock()
	if s.stopWhy != "" {
		why = s.stopWhy
	}
	s.mu.Unlock()
	if why == "" {
		why = r.awaitLost(s)
	}
	r.end(s, projection.LeaseLost, "", why)
}

// endUnopened ends an acquisition whose shard is not open (it was paused): a release hands the
// lease back (nothing to commit), a loss is reported.
func (r *Runner) endUnopened(ctx context.Context, s *shardRun, end ending, why string, log *slog.Logger) {
	if end != endRelease {
		r.reportLost(s, why)
		return
	}
	c, _ := r.cfg.Stores.Cursors.Get(context.WithoutCancel(ctx), r.cfg.Projection, s.id) // for the report only
	r.handOver(ctx, s, r.mgr.Release, projection.LeaseReleased, c.Seq, log)
}

// handOver releases or finishes (what, reported as ev) the lease of s, whose cursor is seq.
func (r *Runner) handOver(ctx context.Context, s *shardRun, what func(context.Context, string) error, ev projection.LeaseEvent, seq string, log *slog.Logger) {
	if err := what(context.WithoutCancel(ctx), s.id); err != nil {
		// ErrNotOwned: the lease manager dropped it (Lost follows, or came first); ErrConflict:
		// another worker took it; a store error: it expires. Either way it was not handed over.
		log.Warn("handing the lease over", "err", err, "how", ev)
		why := "handing the lease over failed: " + err.Error()
		if errors.Is(err, shardmap.ErrNotOwned) {
			why = r.awaitLost(s)
		}
		r.end(s, projection.LeaseLost, "", why)
		return
	}
	r.end(s, ev, seq, "")
	log.Info("shard "+string(ev), "cursor", seq)
}

// waitUnpaused waits while the shard is paused, keeping its lease; stop true when the
// acquisition must end meanwhile (how and why as checkStop says).
func (r *Runner) waitUnpaused(ctx context.Context, s *shardRun, log *slog.Logger) (ending, string, bool) {
	logged := false
	info := projection.ShardInfo{ShardID: s.id, Epoch: s.epoch}
	for r.paused(s.id) {
		if !logged && r.pauses.Load() != nil {
			log.Info("shard paused: holding its lease, handling nothing until it is resumed")
			r.lease(projection.LeaseInfo{ShardInfo: info, Event: projection.LeasePaused})
			logged = true
		}
		s.caughtUp.Store(false)
		select {
		case <-ctx.Done():
			return endLost, whyCancelled, true
		case <-s.release:
			return endRelease, "", true
		case <-time.After(min(r.cfg.ControlCheck, 250*time.Millisecond)):
		}
		if end, why, stop := r.checkStop(ctx, s); stop {
			return end, why, true
		}
	}
	if logged {
		log.Info("shard resumed")
		r.lease(projection.LeaseInfo{ShardInfo: info, Event: projection.LeaseResumed})
	}
	return 0, "", false
}

// runOpen opens the shard and runs it until it ends (false) or is paused (true: it committed
// and closed; wait for the resume).
func (r *Runner) runOpen(ctx context.Context, s *shardRun, log *slog.Logger) bool {
	sh, err := r.openShard(ctx, s, log)
	if err != nil {
		// Usually a benign race: another worker took the shard (a steal while starting up).
		lvl := slog.LevelWarn
		if errors.Is(err, projection.ErrLost) {
			lvl = slog.LevelInfo
		}
		log.Log(ctx, lvl, "cannot open the shard: giving it up", "err", err)
		r.end(s, projection.LeaseLost, "", "cannot open the shard: "+err.Error())
		r.giveUp(s)
		return false
	}
	defer sh.Close(ctx)
	log.Info("shard started", "cursor", sh.Committed(), "stopped", sh.Stopped())
	end, why := r.pull(ctx, s, sh, log)
	if end == endPaused {
		if err := sh.Flush(ctx); err != nil {
			log.Warn("stopping paused shard without saving", "err", err)
			r.end(s, projection.LeaseLost, "", "commit before pausing failed: "+err.Error())
			return false
		}
		log.Info("shard paused: committed, holding its lease", "cursor", sh.Committed())
		return true
	}
	if end == endLost {
		r.reportLost(s, why)
		return false
	}
	if err := sh.Flush(ctx); err != nil {
		log.Warn("stopping shard without saving", "err", err)
		r.end(s, projection.LeaseLost, "", "final commit failed: "+err.Error())
		return false
	}
	what, ev := r.mgr.Release, projection.LeaseReleased
	if end == endFinished {
		what, ev = r.mgr.Finish, projection.LeaseFinished
		select { // the children may start now: look for them without waiting for the next sync
		case r.resync <- struct{}{}:
		default:
		}
	}
	r.handOver(ctx, s, what, ev, sh.Committed(), log)
	return false
}

// read reads a batch of at most max events and, from a source.ByteBoundedReader, at most
// maxBytes of event data (the handler's per-call budget: a batch of large events stays within
// it instead of growing with the batch size).
func read(ctx context.Context, rd source.ShardReader, max, maxBytes int, wait time.Duration) (source.Batch, error) {
	if br, ok := rd.(source.ByteBoundedReader); ok {
		return br.ReadBytes(ctx, max, maxBytes, wait)
	}
	return rd.Read(ctx, max, wait)
}

// openShard opens the shard in the core. A store error (the embedded store's write lock held
// by a paused process, an unreachable store) is retried every RetryMin while the lease is
// valid and no release is asked for: giving the lease up would only hand the same wait to the
// next owner, and report a lease lost that nothing took.
func (r *Runner) openShard(ctx context.Context, s *shardRun, log *slog.Logger) (*projection.Shard, error) {
	for {
		sh, err := r.proc.Open(ctx, s.id, s.epoch, projection.ShardOptions{Guard: r.guard(s.id), Interrupt: s.release})
		if err == nil || errors.Is(err, projection.ErrLost) || ctx.Err() != nil {
			return sh, err
		}
		if _, ok := r.mgr.Valid(s.id); !ok {
			return nil, err
		}
		select {
		case <-s.release:
			return nil, err
		default:
		}
		log.Warn("cannot open the shard: retrying", "err", err)
		if !r.pause(ctx) {
			return nil, err
		}
	}
}

// pull is the shard's read loop. For endLost it also says why ("": the lease manager's Lost
// event tells).
func (r *Runner) pull(ctx context.Context, s *shardRun, sh *projection.Shard, log *slog.Logger) (ending, string) {
	var rd source.ShardReader
	idle := 0 // consecutive empty reads
	defer func() {
		if rd != nil {
			rd.Close()
		}
	}()
	for {
		if end, why, stop := r.checkStop(ctx, s); stop {
			return end, why
		}
		if r.paused(s.id) {
			return endPaused, ""
		}
		if sh.Stopped() != "" {
			s.caughtUp.Store(true) // the watcher's store check reports it
			if rd != nil {
				rd.Close()
				rd = nil
			}
			if end, why, stop := r.waitResumed(ctx, s, sh); stop {
				return end, why
			}
			continue
		}
		if ls := s.takeReplays(); len(ls) > 0 {
			if err := sh.Replay(ctx, ls); err != nil {
				return r.ended(ctx, err, log)
			}
		}
		if rd == nil {
			var err error
			if rd, err = r.cfg.Source.Open(ctx, s.id, sh.Position()); err != nil {
				log.Error("cannot open the shard's reader: retrying", "err", err, "after", sh.Position())
				if !r.pause(ctx) {
					return endLost, whyCancelled
				}
				continue
			}
		}
		wait := r.cfg.BatchWait
		if idle > 0 {
			// An idle shard waits here, longer after every empty read, then looks once: a
			// worker with many idle shards must not spend its CPU polling them (the lease
			// renewals would starve).
			if end, why, stop := r.idleWait(ctx, s, idleDelay(r.cfg.BatchWait, idle)); stop {
				return end, why
			}
			wait = 0
		}
		b, err := read(ctx, rd, r.cfg.BatchSize, r.cfg.MaxBatchBytes, wait)
		if errors.Is(err, source.ErrShardEnded) {
			return endFinished, ""
		}
		if err != nil {
			if ctx.Err() != nil {
				return endLost, whyCancelled
			}
			log.Warn("reading shard failed: retrying", "err", err)
			if !r.pause(ctx) {
				return endLost, whyCancelled
			}
			continue
		}
		r.reportLag(sh, b)
		if err := sh.Handle(ctx, b.Events); err != nil && !errors.Is(err, projection.ErrStopped) {
			return r.ended(ctx, err, log)
		}
		// Idle: nothing new and nothing left to commit (pending events keep the shard polling
		// at the source's pace, so that their time-based cursor save is not delayed).
		if len(b.Events) == 0 && sh.Committed() == sh.Position() {
			idle = min(idle+1, maxIdleDoublings)
		} else {
			idle = 0
		}
		s.caughtUp.Store(idle > 0 && b.EventsBehind <= 0 && r.atTip(b))
	}
}

// atTip reports whether an empty batch b leaves its shard caught up as far as the source can
// tell. A source.Header's shard (-1: unknown) is checked against the stores by the watcher
// anyway; a source.Prober's (Kinesis) own shards are caught up by their last read alone, so
// only a known MillisBehind of 0 counts (the Kinesis reader says -1 when its last answer had
// records, which a page at MillisBehindLatest 0 may be followed by).
func (r *Runner) atTip(b source.Batch) bool {
	if _, hd := r.cfg.Source.(source.Header); hd {
		return b.MillisBehind <= 0
	}
	return b.MillisBehind == 0
}

// IdleReadMax is the longest a shard's loop waits between two reads of an idle shard (no new
// events, everything handled committed): after n consecutive idle reads (each waiting up to BatchWait inside the source for the
// first, then returning at once) it waits BatchWait * 2^(n-1), at most IdleReadMax, before
// reading again. An idle shard thus picks up a new event within IdleReadMax, and costs about one
// read a second instead of one every poll interval of the source (a thousand idle shards on the
// local journal: ~2,000 SQLite queries a second instead of ~55,000, which left no CPU for the
// lease renewals).
const IdleReadMax = time.Second

// maxIdleDoublings bounds the doubling of idleDelay (2^8 * BatchWait is past IdleReadMax for
// any BatchWait of 4ms or more).
const maxIdleDoublings = 8

// idleDelay is the wait before the read that follows n >= 1 empty reads.
func idleDelay(batchWait time.Duration, n int) time.Duration {
	return min(batchWait<<(n-1), IdleReadMax)
}

// idleWait waits d, ending early (stop true) when the shard must stop or be handed over.
func (r *Runner) idleWait(ctx context.Context, s *shardRun, d time.Duration) (ending, string, bool) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return endLost, whyCancelled, true
	case <-s.release:
		return endRelease, "", true
	case <-t.C:
		return 0, "", false
	}
}

// Reasons of endLost.
const (
	// whyCancelled: the shard's context ended, which only onLost (which reported the loss with
	// the lease manager's reason) and a re-acquisition of the shard do.
	whyCancelled = "lease lost"
	// whyExpired: the lease's validity ran out on this worker's clock (Manager.Valid) before
	// the lease manager noticed.
	whyExpired = "lease not renewed in time"
)

// checkStop reports whether the loop must end before the next batch (and for endLost why).
func (r *Runner) checkStop(ctx context.Context, s *shardRun) (ending, string, bool) {
	select {
	case <-ctx.Done():
		return endLost, whyCancelled, true
	case <-s.release:
		return endRelease, "", true
	default:
	}
	if ep, ok := r.mgr.Valid(s.id); !ok {
		if ep == 0 { // dropped by the lease manager, whose Lost event says why
			return endLost, "", true
		}
		r.log.Warn("lease not renewed in time: stopping shard without saving", "shard", s.id)
		return endLost, whyExpired, true
	}
	return 0, "", false
}

// waitResumed idles a stopped shard (keeping its lease) until it is resumed.
func (r *Runner) waitResumed(ctx context.Context, s *shardRun, sh *projection.Shard) (ending, string, bool) {
	for {
		if r.paused(s.id) {
			return endPaused, "", true
		}
		ok, err := sh.CheckResumed(ctx)
		if err == nil && ok {
			return 0, "", false
		}
		if err != nil && ctx.Err() == nil {
			r.log.Warn("reading a stopped shard's cursor failed", "shard", s.id, "err", err)
		}
		select {
		case <-ctx.Done():
			return endLost, whyCancelled, true
		case <-s.release:
			return endRelease, "", true
		case <-time.After(r.cfg.ControlCheck):
		}
		if end, why, stop := r.checkStop(ctx, s); stop {
			return end, why, true
		}
	}
}

// ended maps a core error to how the loop ends (and for endLost why; "" when the lease
// manager's Lost event tells).
func (r *Runner) ended(ctx context.Context, err error, log *slog.Logger) (ending, string) {
	switch {
	case errors.Is(err, projection.ErrInterrupted):
		return endRelease, ""
	case errors.Is(err, errDropped):
		log.Info("stopping shard without saving", "err", err)
		return endLost, ""
	case ctx.Err() != nil: // the lease was lost (onLost said so) or the worker stops
		log.Info("stopping shard without saving", "err", err)
		return endLost, whyCancelled
	default:
		log.Warn("stopping shard without saving", "err", err)
	}
	return endLost, err.Error()
}

func (r *Runner) reportLag(sh *projection.Shard, b source.Batch) {
	if h := r.cfg.Hooks.Lag; h != nil {
		h(projection.LagInfo{ShardInfo: sh.Info(), EventsBehind: b.EventsBehind, MillisBehind: b.MillisBehind})
	}
}

// pause waits RetryMin before a read is tried again; false when ctx ends first.
func (r *Runner) pause(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(r.cfg.RetryMin):
		return true
	}
}
