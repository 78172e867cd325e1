package container

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/projhost/projhost/deadletter"
	"github.com/projhost/projhost/event"
	"github.com/projhost/projhost/shardmap"
	"github.com/projhost/projhost/source"
)

// ErrCursorBeyondHead is returned by Run with UntilCaughtUp when a shard's cursor is past the
// source's last event: the journal was replaced or truncated under the projection. Reset the
// projection (a new --name or a fresh store) to project the new journal.
var ErrCursorBeyondHead = errors.New("container: a cursor is beyond the end of its shard (was the journal replaced?)")

// ErrShardStopped is returned by Run with UntilCaughtUp when a shard is stopped by the stop
// error policy: it would never catch up. The message names the shard and the reason; fix the
// handler or the event, then `projhost resume`.
var ErrShardStopped = errors.New("container: a shard is stopped by the stop error policy")

// watchCaughtUp cancels stop once every shard is caught up and no replay is pending. It returns
// an error (after cancelling stop) when a shard can never catch up.
func (r *Runner) watchCaughtUp(ctx context.Context, stop context.CancelFunc) error {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		done, err := r.caughtUp(ctx)
		if err != nil {
			stop()
			return err
		}
		if done {
			r.log.Info("every shard caught up: stopping")
			stop()
			return nil
		}
	}
}

// caughtUp reports whether every unfinished shard's cursor is at its head and no dead-letter
// replay is pending. Store errors count as "not yet". A source without a Header is a
// source.Prober (Config.Validate): a shard of this worker is caught up by its last read (empty,
// not behind, everything committed), another's when a probe at its saved cursor finds nothing
// behind; a closed shard once it is finished. Probes are made at most every ProbeInterval, and
// stop at the first shard behind. While a shard of this worker is known to
// be behind (its last read), it answers "not yet" without asking the stores: the full check
// reads every shard's cursor and head, which with a thousand shards four times a second would
// take the CPU the lease renewals need.
func (r *Runner) caughtUp(ctx context.Context) (bool, error) {
	if r.busyShard() || r.mgr.Blocked() {
		return false, nil
	}
	shards, err := r.cfg.Source.Shards(ctx)
	if err != nil {
		return false, nil
	}
	leases, err := r.cfg.Stores.Leases.List(ctx, r.cfg.Projection)
	if err != nil {
		return false, nil
	}
	finished := map[string]bool{}
	for _, l := range leases {
		finished[l.ShardID] = l.State == shardmap.StateFinished
	}
	hd, _ := r.cfg.Source.(source.Header)
	if hd == nil && !r.probeDue() {
		return false, nil
	}
	done := true
	var stopped []string
	for _, sh := range shards {
		if finished[sh.ID] {
			continue
		}
		c, err := r.cfg.Stores.Cursors.Get(ctx, r.cfg.Projection, sh.ID)
		if err != nil {
			return false, nil
		}
		if c.Stopped != "" {
			stopped = append(stopped, fmt.Sprintf("shard %s: %s", sh.ID, c.Stopped))
			continue
		}
		if hd == nil {
			if !done || sh.Closed {
				done = false // a closed shard is caught up once its owner finished it
				continue
			}
			done = r.probeCaughtUp(ctx, sh.ID, c.Seq)
			continue
		}
		head, err := hd.Head(ctx, sh.ID)
		if err != nil {
			return false, nil
		}
		if cmp := event.CompareSeq(c.Seq, head); cmp > 0 {
			return false, fmt.Errorf("%w: shard %s cursor %s, last event %s", ErrCursorBeyondHead, sh.ID, c.Seq, orNone(head))
		} else if cmp < 0 || sh.Closed {
			done = false // a closed shard is caught up once its owner finished it
		}
	}
	if len(stopped) > 0 {
		return false, fmt.Errorf("%w: %s (fix the cause, then `projhost resume --name %s`)",
			ErrShardStopped, strings.Join(stopped, "; "), r.cfg.Projection)
	}
	if !done {
		return false, nil
	}
	ls, err := r.cfg.Stores.DeadLetters.List(ctx, r.cfg.Projection, deadletter.Filter{State: deadletter.StateReplayRequested})
	if err != nil {
		return false, nil
	}
	for _, l := range ls {
		// A finished shard has no owner any more to apply its replays (projection/RATIONALE.md,
		// known gap): waiting for them would never end.
		if !finished[l.ShardID] {
			return false, nil
		}
	}
	return true, nil
}

// busyShard reports whether a shard of this worker has not read itself caught up yet.
func (r *Runner) busyShard() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.shards {
		if !s.caughtUp.Load() {
			return true
		}
	}
	return false
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// ProbeInterval is the least time between two rounds of probes of the until-caught-up watcher
// over a source without a Header (Kinesis: a GetShardIterator and a GetRecords per shard not
// owned by this worker, against the shard's quota of 5 reads a second shared with its reader).
const ProbeInterval = time.Second

// probeDue reports whether a round of probes may start now, and if so starts it.
func (r *Runner) probeDue() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := time.Now(); now.Sub(r.lastProbe) >= ProbeInterval {
		r.lastProbe = now
		return true
	}
	return false
}

// probeCaughtUp reports whether shard id is caught up at cursor: by the last read when this
// worker owns it, else by a probe of the source. A probe error counts as "not yet" (a shard
// gone since the listing, past the retention, is dropped by the next listing).
func (r *Runner) probeCaughtUp(ctx context.Context, id, cursor string) bool {
	r.mu.Lock()
	s, own := r.shards[id]
	r.mu.Unlock()
	if own {
		return s.caughtUp.Load()
	}
	p, err := r.cfg.Source.(source.Prober).Probe(ctx, id, cursor)
	if err != nil {
		r.log.Debug("probing a shard for until-caught-up", "shard", id, "err", err)
		return false
	}
	return p.CaughtUp()
}
