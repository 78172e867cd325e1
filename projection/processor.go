package projection

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/projhost/projhost/cursorstore"
	"github.com/projhost/projhost/event"
	"github.com/projhost/projhost/host"
	"github.com/projhost/projhost/internal/durations"
	"github.com/projhost/projhost/readmodel"
	"github.com/projhost/projhost/store"
)

// Errors of Shard methods that modes branch on.
var (
	// ErrLost: a newer owner claimed the shard (a fenced cursor or read-model write) or the
	// shard's Guard refused a commit. Stop processing the shard at once; nothing more is saved.
	ErrLost = errors.New("projection: shard lost to a newer owner: stop processing it")
	// ErrStopped: the shard is stopped by the Stop error policy (Shard.Stopped tells why); it
	// stays stopped, across workers and restarts, until resumed (projhost resume).
	ErrStopped = errors.New("projection: shard stopped by the stop error policy")
	// ErrInterrupted: ShardOptions.Interrupt was closed while a failing batch waited for its
	// next attempt. What was handled before the batch is still pending: Flush it, then hand
	// the shard over.
	ErrInterrupted = errors.New("projection: interrupted while retrying a failing batch")
	// ErrYielded: under the Retry policy with ShardOptions.YieldRetries, an event kept failing
	// MaxAttempts times; the events before it are committed, and the caller has it delivered
	// again later (Lambda mode: the event source mapping retries from it). Position is just
	// before it.
	ErrYielded = errors.New("projection: an event keeps failing: handing it back for a later delivery")
)

// Processor processes one projection's shards: it is the per-shard core that every mode
// (container workers, Lambda invocations) composes. It knows nothing of leases or of how
// events arrive. Safe for concurrent use: any number of shards may be open at once.
type Processor struct {
	cfg   Config
	log   *slog.Logger
	cache bool // Transactional mode: remember committed documents per shard
}

// New validates cfg (Config.Validate) and returns a Processor. It does no I/O.
func New(cfg Config) (*Processor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Processor{cfg: cfg, log: cfg.Logger.With("projection", cfg.Projection),
		cache: cfg.Stores.Mode == store.Transactional}, nil
}

// Config returns the validated configuration (defaults filled in).
func (p *Processor) Config() Config { return p.cfg }

// ShardOptions are a mode's per-shard controls.
type ShardOptions struct {
	// Guard, when set, is called before every commit; a non-nil error cancels the commit and
	// the call returns an error wrapping ErrLost (container mode: the lease's validity on this
	// worker's clock).
	Guard func() error
	// Interrupt, when closed, ends the wait between attempts of a failing batch (Handle
	// returns ErrInterrupted): container mode closes it when the balancer asks for the shard.
	Interrupt <-chan struct{}
	// YieldRetries bounds the Retry policy for a caller whose source delivers failed events
	// again (Lambda mode: the event source mapping retries from a record the response names):
	// a failing batch is tried Policy.MaxAttempts times, its first failing event is found by
	// bisection as under Stop, the events before it are committed, and Handle returns an error
	// wrapping ErrYielded. Nothing is recorded on the shard: the next delivery of the event is
	// handled as any other. Ignored under the other policies.
	YieldRetries bool
}

// Shard is one open shard at one epoch. Its methods must be called from one goroutine at a
// time (the shard's processing loop).
type Shard struct {
	p    *Processor
	info ShardInfo
	opts ShardOptions
	log  *slog.Logger

	mod       *host.Module
	handler   *host.Handler
	pend      pending
	committed string // cursor as last committed
	replayTo  string // Fenced mode: the high-water mark of an interrupted Apply, until committed
	stopped   string
	lastFlush time.Time
	closed    bool
	// logDropped: the handler's LogDropped count as last reported to Hooks.LogDropped.
	logDropped uint64
	// redo: after a commit the store refused (readmodel.ErrRejected), the events since the last
	// commit, to be handled again; refused: the documents refused so far, charged to the event
	// whose output holds one (checkMutations).
	redo     []event.Event
	redoTo   string // the position when the commit was refused: events up to it are in redo or were dead-lettered
	refused  map[docKey][]refusal
	nRefused int
}

// refusal is a document the read model refused.
type refusal struct {
	doc []byte
	err string
}

// errRewound: a commit was refused (readmodel.ErrRejected) and the shard went back to its last
// commit; Handle and Flush handle s.redo again.
var errRewound = errors.New("projection: commit refused by the store: handling the events since the last commit again")

// Open claims shardID at epoch, the fencing token of the caller's ownership (a lease epoch;
// Lambda mode uses its own monotonic epoch): it raises the cursor's epoch (so older owners'
// saves fail) and, in Fenced mode, the read model's write fence, reading the high-water mark of
// an interrupted write, which the first commit then ends at exactly (no event counts twice).
// Errors: ErrLost when a newer epoch holds the shard; store errors otherwise (retry later).
// A stopped shard opens fine: Stopped tells, and Handle returns ErrStopped until resumed.
func (p *Processor) Open(ctx context.Context, shardID string, epoch int64, opts ShardOptions) (*Shard, error) {
	st := p.cfg.Stores
	cur, err := st.Cursors.Claim(ctx, p.cfg.Projection, shardID, epoch)
	if err != nil {
		return nil, lostOr(fmt.Errorf("projection: claiming the cursor of shard %s: %w", shardID, err))
	}
	s := &Shard{p: p, info: ShardInfo{Projection: p.cfg.Projection, ShardID: shardID, Epoch: epoch}, opts: opts,
		log: p.log.With("shard", shardID, "epoch", epoch), committed: cur.Seq, stopped: cur.Stopped, lastFlush: time.Now()}
	s.pend.seq = cur.Seq
	if st.Mode == store.Fenced {
		hw, err := st.WriteClaimer.ClaimWrites(ctx, p.cfg.Projection, shardID, epoch)
		if err != nil {
			return nil, lostOr(fmt.Errorf("projection: claiming the read model's writes of shard %s: %w", shardID, err))
		}
		if event.CompareSeq(hw, cur.Seq) > 0 {
			s.replayTo = hw
			s.log.Info("replaying up to an interrupted write", "cursor", cur.Seq, "replay_to", hw)
		}
	}
	if err := s.supersede(ctx); err != nil {
		return nil, fmt.Errorf("projection: reading the dead letters of shard %s: %w", shardID, err)
	}
	if h := p.cfg.Hooks.Opened; h != nil {
		h(OpenInfo{ShardInfo: s.info, Seq: cur.Seq, Stopped: cur.Stopped})
	}
	return s, nil
}

// Info identifies the shard.
func (s *Shard) Info() ShardInfo { return s.info }

// Position is the sequence number of the last event handled (committed or pending), "" for
// none: a reader continues after it.
func (s *Shard) Position() string { return s.pend.seq }

// Committed is the cursor as last committed.
func (s *Shard) Committed() string { return s.committed }

// Stopped is the reason the shard is stopped ("" when it is not).
func (s *Shard) Stopped() string { return s.stopped }

// Close closes the shard's handler instance. Nothing is saved: Flush first for a graceful
// hand-over. Idempotent.
func (s *Shard) Close(ctx context.Context) {
	if s.closed {
		return
	}
	s.closed = true
	if s.handler != nil {
		_ = s.handler.Close(context.WithoutCancel(ctx))
	}
}

// Handle processes events, a batch of this shard in sequence order (events at or below
// Position are skipped: a redelivery changes nothing). The mutations stay pending, overlaid on
// the read model for later reads, until a flush; Handle flushes by itself when
// CursorEveryEvents events are pending or the oldest pending one waits CursorEvery. Call it
// with no events after an empty read so the time-based flush happens.
//
// A handler failure follows the error policy; store errors are retried with backoff (never
// skipped). A commit the store refuses as invalid (readmodel.ErrRejected: a document DynamoDB
// does not take) is not retried: the shard goes back to its last commit, handles the events
// since then again and charges the refused document to the event whose output it is, as bad
// output under the error policy. Handle therefore keeps the events since the last commit (their
// Data is not copied: do not change it). Errors: ErrLost, ErrStopped, ErrInterrupted (what was
// handled before stays pending), or ctx's error.
func (s *Shard) Handle(ctx context.Context, events []event.Event) error {
	err := s.handle(ctx, events)
	for errors.Is(err, errRewound) {
		err = s.handle(ctx, events)
	}
	return err
}

// handle is Handle once: events after s.redo's are handled after s.redo.
func (s *Shard) handle(ctx context.Context, events []event.Event) error {
	if s.redoTo != "" {
		redo := s.redo
		for len(events) > 0 && event.CompareSeq(events[0].Seq, s.redoTo) <= 0 {
			events = events[1:]
		}
		s.redo, s.redoTo = nil, ""
		events = append(redo, events...)
	}
	if s.stopped != "" {
		return fmt.Errorf("%w: shard %s: %s", ErrStopped, s.info.ShardID, s.stopped)
	}
	events = s.skipHandled(events)
	// A shard switches module at a batch boundary; an idle one that runs a module already
	// switches at an empty batch too, so that every owned shard runs the provider's module
	// within one read of a change (a shard that never handled anything gets its first handler
	// with its first events).
	if len(events) > 0 || s.handler != nil {
		if err := s.swapModule(ctx); err != nil {
			return err
		}
	}
	if s.replayTo != "" && len(events) > 0 {
		n := 0
		for n < len(events) && event.CompareSeq(events[n].Seq, s.replayTo) <= 0 {
			n++
		}
		if err := s.handleRange(ctx, events[:n]); err != nil {
			return err
		}
		events = events[n:]
		if event.CompareSeq(s.pend.seq, s.replayTo) >= 0 || len(events) > 0 {
			// The interrupted write's range is complete (or the shard skipped past it): commit
			// it alone, so that the commit ends exactly at the high-water mark.
			if err := s.flush(ctx); err != nil {
				return err
			}
			s.replayTo = ""
			if len(events) > 0 {
				// The module that wrote the range handled it; the rest is the current one's.
				if err := s.swapModule(ctx); err != nil {
					return err
				}
			}
		}
	}
	if err := s.handleRange(ctx, events); err != nil {
		return err
	}
	if s.replayTo == "" && s.flushDue() {
		return s.flush(ctx)
	}
	return nil
}

func (s *Shard) skipHandled(events []event.Event) []event.Event {
	for len(events) > 0 && event.CompareSeq(events[0].Seq, s.pend.seq) <= 0 {
		events = events[1:]
	}
	return events
}

func (s *Shard) flushDue() bool {
	c := &s.p.cfg
	return s.pend.count >= c.CursorEveryEvents || s.pend.full() || (!s.pend.empty() && time.Since(s.lastFlush) >= c.CursorEvery)
}

// swapModule switches to the provider's current module at a batch boundary: what the old
// module produced is committed first. A shard's first module is, while an interrupted write's
// range is handled again, the one a ModuleRecorder says wrote it. With a ModuleRecorder the
// change is recorded before the module handles anything.
func (s *Shard) swapModule(ctx context.Context) error {
	m := s.p.cfg.Modules.Module()
	if m == s.mod && s.handler != nil {
		return nil
	}
	if s.handler != nil && s.replayTo != "" {
		return nil // the range of an interrupted write is handled again by the module that wrote it
	}
	rec, _ := s.p.cfg.Modules.(ModuleRecorder)
	if rec != nil && s.handler == nil && s.replayTo != "" {
		var wrote *host.Module
		if err := s.retryStore(ctx, "finding the module of an interrupted write", func() (err error) {
			wrote, err = rec.ModuleAfter(ctx, s.info.ShardID, s.committed)
			return lostOr(err)
		}); err != nil {
			return err
		}
		if wrote != nil && wrote != m {
			s.log.Info("handling an interrupted write's range again with the module that wrote it", "module", wrote.Name(),
				"current", m.Name(), "cursor", s.committed, "replay_to", s.replayTo)
			m = wrote
		}
	}
	from := ""
	if s.handler != nil {
		if err := s.flush(ctx); err != nil {
			return err
		}
		from = s.mod.Name()
	}
	info := ModuleInfo{ShardInfo: s.info, Module: m.Name(), From: from, Seq: s.pend.seq}
	if rec != nil {
		if err := s.retryStore(ctx, "recording the shard's handler module", func() error { return lostOr(rec.RecordModule(ctx, info)) }); err != nil {
			return err
		}
	}
	if s.handler != nil {
		_ = s.handler.Close(context.WithoutCancel(ctx))
		s.log.Info("handler module changed", "module", m.Name(), "from", from, "after", s.pend.seq)
	}
	s.mod, s.handler, s.logDropped = m, m.NewHandler(s.info.ShardID), 0
	if h := s.p.cfg.Hooks.Module; h != nil {
		h(info)
	}
	return nil
}

// Flush commits the pending mutations and the cursor (the one commit path), retrying store
// errors with backoff until it works, the shard is lost (ErrLost) or ctx ends. A commit the
// store refuses as invalid is handled as in Handle (the events since the last commit are
// handled again, under the error policy), then committed.
func (s *Shard) Flush(ctx context.Context) error {
	err := s.flush(ctx)
	for errors.Is(err, errRewound) {
		if err = s.handle(ctx, nil); err == nil {
			err = s.flush(ctx)
		}
	}
	return err
}

// flush is Flush once; errRewound after a refused commit.
func (s *Shard) flush(ctx context.Context) error {
	if s.pend.empty() {
		return nil
	}
	// Inside an interrupted write's range (replayTo), a commit may end before its high-water
	// mark (Lambda mode: the ESM delivers part of the range again, e.g. after bisecting the
	// batch): the items the interrupted write reached carry its mark and keep their value; the
	// others get the value at pend.seq. A commit never spans the mark (handle commits the range
	// alone, ending exactly at it), which would lose the events after the mark on the items
	// the interrupted write reached.
	w := readmodel.Write{Projection: s.info.Projection, ShardID: s.info.ShardID, Epoch: s.info.Epoch,
		Seq: s.pend.seq, Mutations: s.pend.muts}
	if err := s.commitRetry(ctx, w); err != nil {
		if errors.Is(err, readmodel.ErrRejected) && s.refuse(w, err) {
			return errRewound
		}
		return err
	}
	s.p.cfg.Hooks.flush(FlushInfo{ShardInfo: s.info, Seq: w.Seq, Events: s.pend.count, Mutations: len(w.Mutations)})
	s.log.Debug("cursor saved", "cursor", w.Seq, "mutations", len(w.Mutations), "events", s.pend.count)
	if s.p.cache {
		s.pend.rememberAll(s.pend.muts)
	}
	s.pend.reset()
	s.committed = w.Seq
	s.lastFlush = time.Now()
	return nil
}

// maxRefused bounds Shard.refused (documents; cleared when full).
const maxRefused = 1000

// refuse records the documents of w the store refused (err wraps readmodel.ErrRejected; all
// of w's documents when it does not say which) and rewinds the shard to its last commit: the
// pending mutations are dropped and their events are to be handled again (s.redo). In Fenced
// mode the refused write may have been applied in part: like an interrupted write found by
// Open, the next commit must end exactly where it would have (replayTo). It returns false,
// changing nothing, when every refused document was refused before (checkMutations should have
// caught it: the handler is not deterministic).
func (s *Shard) refuse(w readmodel.Write, err error) bool {
	var rej *readmodel.RejectedError
	named := errors.As(err, &rej) && (rej.Collection != "" || rej.Key != "")
	learned := false
	for _, m := range w.Mutations {
		if named && (m.Collection != rej.Collection || m.Key != rej.Key) {
			continue
		}
		k := docKey{m.Collection, m.Key}
		if s.refusal(k, m.Doc) != nil {
			continue
		}
		if s.refused == nil || s.nRefused >= maxRefused {
			s.refused, s.nRefused = make(map[docKey][]refusal), 0
		}
		s.refused[k] = append(s.refused[k], refusal{doc: bytes.Clone(m.Doc), err: err.Error()})
		s.nRefused++
		learned = true
	}
	if !learned {
		s.log.Error("the read model refused a commit again: retrying it", "err", err)
		return false
	}
	s.log.Error("the read model refused a document as invalid: handling the events since the last commit again, to charge it to its event",
		"err", err, "cursor", s.committed, "events", len(s.pend.events))
	s.redo, s.redoTo = append([]event.Event(nil), s.pend.events...), s.pend.seq
	s.pend.reset()
	s.pend.seq = s.committed
	if s.p.cfg.Stores.Mode == store.Fenced && event.CompareSeq(w.Seq, s.replayTo) > 0 {
		s.replayTo = w.Seq
	}
	return true
}

// refusal returns the refusal of doc as the document of k, nil if it was not refused.
func (s *Shard) refusal(k docKey, doc []byte) *refusal {
	for i, r := range s.refused[k] {
		if bytes.Equal(r.doc, doc) {
			return &s.refused[k][i]
		}
	}
	return nil
}

// commitRetry commits w, retrying store errors with backoff.
func (s *Shard) commitRetry(ctx context.Context, w readmodel.Write) error {
	return s.retryStore(ctx, "commit", func() error { return s.commit(ctx, w) })
}

// retryStore runs op until it succeeds, fails with ErrLost or readmodel.ErrRejected
// (returned), or ctx ends.
func (s *Shard) retryStore(ctx context.Context, what string, op func() error) error {
	backoff := s.p.cfg.RetryMin
	for {
		err := op()
		if err == nil || errors.Is(err, ErrLost) || errors.Is(err, readmodel.ErrRejected) {
			return err // a refused write is refused again: Flush and replayOne handle it
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.log.Warn(what+" failed: retrying", "err", err, "backoff", backoff)
		if !durations.Sleep(ctx, backoff) {
			return ctx.Err()
		}
		backoff = min(backoff*2, s.p.cfg.RetryMax)
	}
}

func (s *Shard) commit(ctx context.Context, w readmodel.Write) error {
	if g := s.opts.Guard; g != nil {
		if err := g(); err != nil {
			return fmt.Errorf("%w: %w", ErrLost, err)
		}
	}
	st := s.p.cfg.Stores
	var err error
	if st.Mode == store.Transactional {
		err = st.Committer.Commit(ctx, w)
	} else if err = st.ReadModel.Apply(ctx, w); err == nil && w.Replay == "" {
		err = st.Cursors.Save(ctx, w.Projection, w.ShardID, w.Epoch, w.Seq)
	}
	return lostOr(err)
}

// lostOr maps the stores' fencing errors to ErrLost.
func lostOr(err error) error {
	if errors.Is(err, readmodel.ErrFenced) || errors.Is(err, cursorstore.ErrFenced) {
		return fmt.Errorf("%w: %w", ErrLost, err)
	}
	return err
}

func (h *Hooks) flush(i FlushInfo) {
	if h.Flush != nil {
		h.Flush(i)
	}
}
