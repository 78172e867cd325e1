package projection

import (
	"context"
	"errors"
	"time"

	"github.com/projhost/projhost/deadletter"
	"github.com/projhost/projhost/event"
	"github.com/projhost/projhost/host"
	"github.com/projhost/projhost/readmodel"
)

// Replay re-handles the shard's dead letters in state replay_requested (letters of other
// shards or states are ignored) with the handler the shard runs now, each committed alone with
// the shard's current cursor (RATIONALE.md: why this is exactly-once). Pending mutations are
// committed first. A letter that fails again goes back to state failed with its attempts and
// error updated. Replays wait while an interrupted write's range is being re-handled or the
// shard is stopped (Replay then returns nil and does nothing). Errors: ErrLost, ctx's error.
func (s *Shard) Replay(ctx context.Context, letters []deadletter.Letter) error {
	if s.replayTo != "" || s.stopped != "" {
		return nil
	}
	for _, l := range letters {
		if l.ShardID != s.info.ShardID || l.Projection != s.info.Projection || l.State != deadletter.StateReplayRequested ||
			event.CompareSeq(l.Seq, s.committed) > 0 {
			continue // not ours, or its event is still ahead of the cursor (Open superseded it)
		}
		if err := s.Flush(ctx); err != nil {
			return err
		}
		if err := s.swapModule(ctx); err != nil {
			return err
		}
		if err := s.replayOne(ctx, l); err != nil {
			return err
		}
	}
	return nil
}

func (s *Shard) replayOne(ctx context.Context, l deadletter.Letter) error {
	dl := s.p.cfg.Stores.DeadLetters
	cur, err := dl.Get(ctx, l.Projection, l.ShardID, l.Seq)
	if err != nil || cur.State != deadletter.StateReplayRequested {
		return nil // replayed, dropped or gone since it was listed; a store error: next time
	}
	l = cur
	ev := event.Event{ShardID: l.ShardID, Seq: l.Seq, PartitionKey: l.PartitionKey, ArrivalMs: l.ArrivalMs, Data: l.Data}
	muts, fault, err := s.try(ctx, []event.Event{ev})
	if err != nil {
		return err
	}
	var w readmodel.Write
	if fault == nil {
		muts = coalesce(muts)
		w = readmodel.Write{Projection: s.info.Projection, ShardID: s.info.ShardID, Epoch: s.info.Epoch,
			Seq: s.committed, Mutations: muts, Replay: l.Seq}
		if err := s.commitRetry(ctx, w); errors.Is(err, readmodel.ErrRejected) {
			// The store refused a document of the event's output: the replay failed.
			fault = &host.HandlerError{Module: s.mod.Name(), Shard: s.info.ShardID, FirstSeq: l.Seq, LastSeq: l.Seq,
				Kind: host.ErrBadOutput, Message: "a document cannot be stored in the read model: " + err.Error()}
		} else if err != nil {
			return err
		}
	}
	if fault != nil {
		l.Attempts++
		l.LastFailure, l.ErrorKind, l.Error, l.State = time.Now(), ErrorKind(fault), fault.Error(), deadletter.StateFailed
		s.log.Warn("dead letter replay failed again: back to failed", "seq", l.Seq, "err", fault)
		if err := s.retryStore(ctx, "updating a dead letter", func() error { return dl.Put(ctx, l) }); err != nil {
			return err
		}
		if h := s.p.cfg.Hooks.Replayed; h != nil {
			h(l, fault)
		}
		return nil
	}
	if s.p.cache {
		s.pend.rememberAll(muts)
	}
	from := []deadletter.State{deadletter.StateReplayRequested, deadletter.StateReplayed}
	err = s.retryStore(ctx, "marking a dead letter replayed", func() error {
		err := dl.Transition(ctx, l.Projection, l.ShardID, l.Seq, from, deadletter.StateReplayed, s.committed)
		if errors.Is(err, deadletter.ErrState) || errors.Is(err, deadletter.ErrNotFound) {
			s.log.Warn("dead letter changed while it was replayed (its replay is committed)", "seq", l.Seq, "err", err)
			return nil
		}
		return err
	})
	if err != nil {
		return err
	}
	l.State, l.ReplayedSeq = deadletter.StateReplayed, s.committed
	s.p.cfg.Hooks.flush(FlushInfo{ShardInfo: s.info, Seq: s.committed, Mutations: len(muts), Replay: l.Seq})
	s.log.Info("dead letter replayed", "seq", l.Seq, "mutations", len(muts))
	if h := s.p.cfg.Hooks.Replayed; h != nil {
		h(l, nil)
	}
	return nil
}

// supersede marks superseded the shard's open letters of events after the cursor: a crash came between storing
// the letter and committing past it, so the event will be handled again (and dead-lettered
// again if it still fails). Replaying such a letter would apply its event twice.
func (s *Shard) supersede(ctx context.Context) error {
	dl := s.p.cfg.Stores.DeadLetters
	ls, err := dl.List(ctx, s.info.Projection, deadletter.Filter{ShardID: s.info.ShardID})
	if err != nil {
		return err
	}
	from := []deadletter.State{deadletter.StateFailed, deadletter.StateReplayRequested}
	for _, l := range ls {
		if event.CompareSeq(l.Seq, s.committed) <= 0 || (l.State != deadletter.StateFailed && l.State != deadletter.StateReplayRequested) {
			continue
		}
		err := dl.Transition(ctx, l.Projection, l.ShardID, l.Seq, from, deadletter.StateSuperseded, "")
		if err != nil && !errors.Is(err, deadletter.ErrState) && !errors.Is(err, deadletter.ErrNotFound) {
			return err
		}
		s.log.Info("dead letter of an event after the cursor superseded: the event is handled again", "seq", l.Seq)
	}
	return nil
}
