package projection

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/bits"
	"time"

	"github.com/projhost/projhost/deadletter"
	"github.com/projhost/projhost/event"
	"github.com/projhost/projhost/host"
	"github.com/projhost/projhost/internal/durations"
	"github.com/projhost/projhost/wasmabi"
)

// Error kinds of handler failures, as stored in dead letters and reported to hooks.
const (
	KindFail           = "fail"            // the guest called projhost.fail
	KindTrap           = "trap"            // the guest trapped (or a Go guest panicked)
	KindExit           = "exit"            // the guest called proc_exit
	KindDeadline       = "deadline"        // the batch deadline passed
	KindBadOutput      = "bad_output"      // malformed output
	KindMalformedEvent = "malformed_event" // an event the ABI cannot carry (too long a key, ...)
)

// ErrorKind classifies err from a handler call: one of the Kind constants when the handler or
// the event is at fault (the error policy applies), "" for an infrastructure error (a read of
// the store failed, a context ended: retried, never charged to the event).
func ErrorKind(err error) string {
	var he *host.HandlerError
	if errors.As(err, &he) {
		switch {
		case errors.Is(he.Kind, host.ErrHandlerFailed):
			return KindFail
		case errors.Is(he.Kind, host.ErrTrap):
			return KindTrap
		case errors.Is(he.Kind, host.ErrExit):
			return KindExit
		case errors.Is(he.Kind, host.ErrDeadline):
			return KindDeadline
		default:
			return KindBadOutput
		}
	}
	if errors.Is(err, wasmabi.ErrMalformed) {
		return KindMalformedEvent
	}
	return ""
}

// handleRange handles events in calls of at most MaxBatchBytes of event data each.
func (s *Shard) handleRange(ctx context.Context, events []event.Event) error {
	for len(events) > 0 {
		n, size := 0, 0
		for n < len(events) && (n == 0 || size+len(events[n].Data) <= s.p.cfg.MaxBatchBytes) {
			size += len(events[n].Data)
			n++
		}
		consumed, err := s.handlePolicy(ctx, events[:n])
		if err != nil {
			return err
		}
		events = events[consumed:]
	}
	return nil
}

// failure is a handler failure on a range of events.
type failure struct {
	err      error
	kind     string
	attempts int
	first    time.Time
	last     time.Time
}

// handlePolicy handles events under the error policy and returns how many of them it consumed
// (all of them, or, after a dead letter, up to and including the dead-lettered event).
func (s *Shard) handlePolicy(ctx context.Context, events []event.Event) (int, error) {
	pol := s.p.cfg.Policy
	backoff := s.p.cfg.RetryMin
	var f failure
	for {
		start := time.Now()
		muts, fault, err := s.try(ctx, events)
		if err != nil {
			return 0, err
		}
		if fault == nil {
			return len(events), s.accept(ctx, events, muts, time.Since(start))
		}
		if tooLarge(fault) && len(events) > 1 {
			// The output limits are per call and the output's size is deterministic: hand
			// the batch over in halves instead of retrying it; only an event whose own output
			// is too large meets the policy.
			var one failure
			one.note(fault)
			s.reportFailure(events, one, "handler output over the limits of one call: splitting the batch", 0)
			half := len(events) / 2
			n, err := s.handlePolicy(ctx, events[:half])
			if err != nil || n < half {
				return n, err
			}
			m, err := s.handlePolicy(ctx, events[half:])
			return n + m, err
		}
		f.note(fault)
		s.reportFailure(events, f, "handler failed: retrying the batch", backoff)
		if (pol.OnError != Retry || s.opts.YieldRetries) && f.attempts >= pol.MaxAttempts {
			return s.isolate(ctx, events, f)
		}
		if f.attempts == 1 {
			// Commit what was handled before the failing batch: it must not wait for the retries.
			if err := s.flush(ctx); err != nil {
				return 0, err
			}
		}
		if err := s.wait(ctx, backoff); err != nil {
			return 0, err
		}
		backoff = min(backoff*2, s.p.cfg.RetryMax)
	}
}

func (f *failure) note(err error) {
	now := time.Now()
	if f.attempts == 0 {
		f.first = now
	}
	f.attempts++
	f.err, f.kind, f.last = err, ErrorKind(err), now
}

func (s *Shard) reportFailure(events []event.Event, f failure, msg string, backoff time.Duration) {
	first, last := events[0].Seq, events[len(events)-1].Seq
	if h := s.p.cfg.Hooks.HandlerError; h != nil {
		h(HandlerErrorInfo{ShardInfo: s.info, Kind: f.kind, Err: f.err, Attempt: f.attempts, FirstSeq: first, LastSeq: last})
	}
	s.log.Error(msg, "err", f.err, "attempt", f.attempts, "policy", s.p.cfg.Policy.OnError,
		"first_seq", first, "last_seq", last, "backoff", backoff)
}

// wait sleeps d unless ctx ends (its error) or Interrupt closes (ErrInterrupted).
func (s *Shard) wait(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-s.opts.Interrupt:
		return ErrInterrupted
	case <-t.C:
		return nil
	}
}

// try calls the handler once on events. It returns the mutations, or the handler's fault (the
// policy applies), or a terminal error (ctx ended, Interrupt). Infrastructure errors (a store
// read failed) are retried here with backoff and never count as attempts.
func (s *Shard) try(ctx context.Context, events []event.Event) ([]event.Mutation, error, error) {
	ov := overlay{p: &s.pend, store: s.p.cfg.Stores.ReadModel, proj: s.info.Projection, cache: s.p.cache}
	backoff := s.p.cfg.RetryMin
	for {
		muts, err := s.handler.Handle(ctx, events, ov)
		s.reportLogDropped()
		if err == nil {
			if fault := s.checkMutations(events, muts); fault != nil {
				return nil, fault, nil
			}
			return muts, nil, nil
		}
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		if ErrorKind(err) != "" {
			return nil, err, nil
		}
		s.log.Warn("handler call failed (not the handler's fault): retrying", "err", err, "backoff", backoff)
		if err := s.wait(ctx, backoff); err != nil {
			return nil, nil, err
		}
		backoff = min(backoff*2, s.p.cfg.RetryMax)
	}
}

// tooLarge reports whether err is a handler output over the limits of one call
// (host.HandlerError.TooLarge).
func tooLarge(err error) bool {
	var he *host.HandlerError
	return errors.As(err, &he) && he.TooLarge
}

// reportLogDropped calls the LogDropped hook when the handler dropped guest log lines since
// the last call.
func (s *Shard) reportLogDropped() {
	n := s.handler.LogDropped()
	if n <= s.logDropped {
		return
	}
	d := n - s.logDropped
	s.logDropped = n
	if h := s.p.cfg.Hooks.LogDropped; h != nil {
		h(LogDroppedInfo{ShardInfo: s.info, Lines: d, Total: n})
	}
}

// checkMutations reports, as the handler's bad output, a mutation the read model cannot store
// (store.Stores.CheckMutation): committing it would fail for ever.
// A document the store refused before (Shard.refuse) is reported the same way.
func (s *Shard) checkMutations(events []event.Event, muts []event.Mutation) error {
	check := s.p.cfg.Stores.CheckMutation
	if check == nil && len(s.refused) == 0 {
		return nil
	}
	for _, m := range muts {
		var err error
		if r := s.refusal(docKey{m.Collection, m.Key}, m.Doc); r != nil {
			err = errors.New(r.err)
		} else if check != nil {
			err = check(s.info.Projection, m)
		}
		if err != nil {
			return &host.HandlerError{Module: s.mod.Name(), Shard: s.info.ShardID, FirstSeq: events[0].Seq,
				LastSeq: events[len(events)-1].Seq, Kind: host.ErrBadOutput,
				Message: fmt.Sprintf("mutation %s/%s cannot be stored in the read model: %v", m.Collection, m.Key, err)}
		}
	}
	return nil
}

// accept makes a handled batch's mutations pending. When they would take the pending
// mutations past the limits of one handler output (pending.overflows), what is pending is
// committed first, so that one commit holds at most that much (about a second of work on the
// embedded store) however the batches come. Errors: Flush's.
func (s *Shard) accept(ctx context.Context, events []event.Event, muts []event.Mutation, d time.Duration) error {
	if s.pend.overflows(muts) {
		if err := s.flush(ctx); err != nil {
			return err
		}
	}
	s.pend.add(muts)
	s.pend.events = append(s.pend.events, events...)
	s.pend.seq = events[len(events)-1].Seq
	s.pend.count += len(events)
	if h := s.p.cfg.Hooks.Batch; h != nil {
		h(BatchInfo{ShardInfo: s.info, Events: len(events), Mutations: len(muts),
			FirstSeq: events[0].Seq, LastSeq: s.pend.seq, Duration: d, MemoryBytes: s.handler.MemorySize()})
	}
	return nil
}

// isolate finds the first failing event of events (which failed as a whole) by bisection,
// accepting the events before it, and applies the policy to it: DeadLetter stores it and
// consumes it; Stop commits the events before it and stops the shard; Retry (with
// ShardOptions.YieldRetries) commits the events before it and hands it back. It returns how many
// events it consumed.
func (s *Shard) isolate(ctx context.Context, events []event.Event, f failure) (int, error) {
	consumed := 0
	rest, failedLen := events, len(events) // failedLen: length of the last range seen failing
	for len(rest) > 1 {
		half := rest[:len(rest)/2]
		start := time.Now()
		muts, fault, err := s.try(ctx, half)
		if err != nil {
			return consumed, err
		}
		if fault == nil {
			// The handler is deterministic: the failure is in the other half.
			if err := s.accept(ctx, half, muts, time.Since(start)); err != nil {
				return consumed, err
			}
			consumed += len(half)
			rest = rest[len(half):]
			continue
		}
		f.note(fault)
		s.reportFailure(half, f, "handler failed: bisecting the batch", 0)
		rest, failedLen = half, len(half)
	}
	if failedLen > 1 {
		// Confirm the culprit alone (and get its own error, not a range's).
		start := time.Now()
		muts, fault, err := s.try(ctx, rest)
		if err != nil {
			return consumed, err
		}
		if fault == nil { // not deterministic after all: keep it, go on with the rest
			return consumed + 1, s.accept(ctx, rest, muts, time.Since(start))
		}
		f.note(fault)
		s.reportFailure(rest, f, "handler failed on one event", 0)
	}
	switch s.p.cfg.Policy.OnError {
	case DeadLetter:
		return consumed + 1, s.deadLetter(ctx, rest[0], f)
	case Retry: // ShardOptions.YieldRetries
		return consumed, s.yield(ctx, rest[0], f)
	}
	return consumed, s.stop(ctx, rest[0], f)
}

// yield commits what was handled before ev and hands ev back (ShardOptions.YieldRetries).
func (s *Shard) yield(ctx context.Context, ev event.Event, f failure) error {
	if err := s.flush(ctx); err != nil {
		return err
	}
	s.log.Error("event keeps failing: handed back for a later delivery", "seq", ev.Seq, "partition_key", ev.PartitionKey,
		"kind", f.kind, "attempts", f.attempts, "err", f.err)
	return fmt.Errorf("%w: shard %s: handler %s at seq %s (partition key %q) after %d attempts: %w",
		ErrYielded, s.info.ShardID, f.kind, ev.Seq, ev.PartitionKey, f.attempts, f.err)
}

// deadLetter stores ev as a dead letter (durably, before the cursor can pass it) and skips it.
func (s *Shard) deadLetter(ctx context.Context, ev event.Event, f failure) error {
	l := deadletter.Letter{Projection: s.info.Projection, ShardID: s.info.ShardID, Seq: ev.Seq,
		PartitionKey: ev.PartitionKey, ArrivalMs: ev.ArrivalMs, Data: bytes.Clone(ev.Data),
		ErrorKind: f.kind, Error: f.err.Error(), Attempts: f.attempts,
		FirstFailure: f.first, LastFailure: f.last, State: deadletter.StateFailed}
	err := s.retryStore(ctx, "storing a dead letter", func() error {
		return s.p.cfg.Stores.DeadLetters.Put(ctx, l)
	})
	if err != nil {
		return err
	}
	s.pend.seq = ev.Seq
	s.pend.count++
	s.log.Warn("event dead-lettered: going on after it", "seq", ev.Seq, "partition_key", ev.PartitionKey, "kind", f.kind, "err", f.err)
	if h := s.p.cfg.Hooks.DeadLettered; h != nil {
		h(l)
	}
	return nil
}

// stop commits what was handled before ev and stops the shard at ev.
func (s *Shard) stop(ctx context.Context, ev event.Event, f failure) error {
	if err := s.flush(ctx); err != nil {
		return err
	}
	reason := fmt.Sprintf("handler %s at seq %s (partition key %q) after %d attempts: %v", f.kind, ev.Seq, ev.PartitionKey, f.attempts, f.err)
	err := s.retryStore(ctx, "stopping the shard", func() error {
		return lostOr(s.p.cfg.Stores.Cursors.Stop(ctx, s.info.Projection, s.info.ShardID, s.info.Epoch, reason))
	})
	if err != nil {
		return err
	}
	s.stopped = reason
	s.log.Error("shard stopped by the stop error policy: resume it with `projhost resume` once the handler or event is fixed", "reason", reason)
	if h := s.p.cfg.Hooks.Stopped; h != nil {
		h(s.info, reason)
	}
	return fmt.Errorf("%w: shard %s: %s", ErrStopped, s.info.ShardID, reason)
}

// CheckResumed reads the shard's cursor and reports whether a stopped shard was resumed
// (projhost resume); the shard then continues from Position. Errors: store errors.
func (s *Shard) CheckResumed(ctx context.Context) (bool, error) {
	if s.stopped == "" {
		return true, nil
	}
	c, err := s.p.cfg.Stores.Cursors.Get(ctx, s.info.Projection, s.info.ShardID)
	if err != nil {
		return false, err
	}
	if c.Stopped != "" {
		return false, nil
	}
	s.stopped = ""
	s.log.Info("shard resumed", "cursor", s.pend.seq)
	return true, nil
}

// FailureTime is the longest the core spends on a range of n events (n >= 1) that one handler
// call takes (at most MaxBatchBytes of data) when the handler keeps failing on one of them,
// before the error policy acts on that event (Stop, DeadLetter, or Retry with
// ShardOptions.YieldRetries; plain Retry never gives up), given that one handler call runs
// at most call (the module's batch deadline): Policy.MaxAttempts calls with the backoffs
// between them (RetryMin, doubling up to RetryMax), then the bisection that finds the failing
// event, ceil(log2 n) calls, and one more to confirm it alone. Zero fields of c count as
// their defaults. It leaves out the store's time (the commit before the retries, the dead
// letter's write) and the handler's own successes before and after the failing event: a
// caller with a deadline (Lambda mode) keeps a margin. The sum saturates at the largest
// time.Duration rather than overflow.
func (c Config) FailureTime(n int, call time.Duration) time.Duration {
	attempts := c.Policy.MaxAttempts
	if attempts <= 0 {
		attempts = DefaultMaxAttempts
	}
	backoff, maxBackoff := c.RetryMin, c.RetryMax
	if backoff <= 0 {
		backoff = DefaultRetryMin
	}
	if maxBackoff <= 0 {
		maxBackoff = DefaultRetryMax
	}
	maxBackoff = max(maxBackoff, backoff)
	calls := attempts
	if n > 1 {
		calls += bits.Len(uint(n-1)) + 1 // ceil(log2 n) probes, then the confirmation
	}
	t := durations.Mul(max(call, 0), calls)
	for i := 1; i < attempts; i++ {
		if backoff == maxBackoff { // the rest of the waits are all maxBackoff
			return durations.Add(t, durations.Mul(maxBackoff, attempts-i))
		}
		t = durations.Add(t, backoff)
		if backoff > maxBackoff/2 {
			backoff = maxBackoff
		} else {
			backoff *= 2
		}
	}
	return t
}
