package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/projhost/projhost/cursorstore"
	"github.com/projhost/projhost/readmodel"
	"github.com/projhost/projhost/shardmap"
	"github.com/projhost/projhost/source"
)

// Header is implemented by sources that can tell a shard's last sequence number cheaply (the
// local journal). The runner uses it for --until-caught-up and lag in events.
type Header interface {
	// Head returns the sequence number of the last event on the shard, "" when empty.
	Head(ctx context.Context, shardID string) (string, error)
}

// RunnerConfig configures a Runner. Zero values take the documented defaults.
type RunnerConfig struct {
	Projection string // required
	WorkerID   string // required: unique per worker process

	Source  source.Source       // required
	Leases  shardmap.LeaseStore // required
	Cursors cursorstore.Store   // required
	// ReadModel is required. When it implements readmodel.Committer, mutations and the cursor
	// commit in one transaction through it, and its cursors must be the ones Cursors reads (the
	// embedded store's ReadModels and Cursors views).
	ReadModel readmodel.Store
	Module    *Module // required

	BatchSize         int           // events per handler call; default 500
	MaxBatchBytes     int           // event data bytes per handler call; default 4 MiB (a single larger event goes alone)
	BatchWait         time.Duration // max wait for a batch to fill; default 200ms
	CursorEveryEvents int           // save the cursor after this many events; default 2000
	CursorEvery       time.Duration // ... or after this long with unsaved events; default 1s
	LeaseDuration     time.Duration // default shardmap.DefaultLeaseDuration (6s)
	MaxStealsPerRound int           // default 1
	RetryMin          time.Duration // first backoff after a failed batch; default 100ms
	RetryMax          time.Duration // backoff cap; default 10s

	// UntilCaughtUp makes Run return nil once every shard's cursor has reached the source's
	// head (requires a Source implementing Header).
	UntilCaughtUp bool

	Logger *slog.Logger

	// OnCursorSave, when set, is called after every successful cursor save (tests record them).
	OnCursorSave func(shardID string, epoch int64, seq string)
}

// Stats are cumulative counters of a Runner, safe to read at any time.
type Stats struct {
	Events      int64 // events handled (including retried batches once)
	Batches     int64
	CursorSaves int64
	Failures    int64 // failed handler calls
}

// Runner runs one projection's per-shard loops on one worker: it holds leases through a
// shardmap.Manager, and for each owned shard reads batches, calls the WASM handler, applies
// its mutations and saves the cursor in batches (DESIGN §1, §3).
//
// Delivery is at-least-once; with a readmodel.Committer (the embedded store) or a read model
// with per-shard markers (DynamoDB) the effect is exactly-once.
type Runner struct {
	cfg     RunnerConfig
	log     *slog.Logger
	mgr     *shardmap.Manager
	commit  readmodel.Committer
	mu      sync.Mutex
	shards  map[string]*shardRun
	wg      sync.WaitGroup
	ctx     context.Context
	stats   struct{ events, batches, saves, failures atomic.Int64 }
	stopped atomic.Bool
}

type shardRun struct {
	id      string
	epoch   int64
	cancel  context.CancelFunc // hard stop: lease lost, nothing saved
	release chan struct{}      // graceful: flush, save, release
	done    chan struct{}
	relOnce sync.Once
}

// ErrConfig is wrapped by errors about a bad RunnerConfig.
var ErrConfig = errors.New("host: bad runner configuration")

// NewRunner checks cfg and returns a Runner. It does not start anything.
func NewRunner(cfg RunnerConfig) (*Runner, error) {
	switch {
	case cfg.Projection == "":
		return nil, fmt.Errorf("%w: projection name is required", ErrConfig)
	case cfg.WorkerID == "":
		return nil, fmt.Errorf("%w: worker id is required", ErrConfig)
	case cfg.Source == nil || cfg.Leases == nil || cfg.Cursors == nil || cfg.ReadModel == nil || cfg.Module == nil:
		return nil, fmt.Errorf("%w: source, lease store, cursor store, read model and module are required", ErrConfig)
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 500
	}
	if cfg.MaxBatchBytes <= 0 {
		cfg.MaxBatchBytes = 4 << 20
	}
	if cfg.BatchWait <= 0 {
		cfg.BatchWait = 200 * time.Millisecond
	}
	if cfg.CursorEveryEvents <= 0 {
		cfg.CursorEveryEvents = 2000
	}
	if cfg.CursorEvery <= 0 {
		cfg.CursorEvery = time.Second
	}
	if cfg.RetryMin <= 0 {
		cfg.RetryMin = 100 * time.Millisecond
	}
	if cfg.RetryMax <= 0 {
		cfg.RetryMax = 10 * time.Second
	}
	if cfg.MaxStealsPerRound <= 0 {
		cfg.MaxStealsPerRound = 1
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.UntilCaughtUp {
		if _, ok := cfg.Source.(Header); !ok {
			return nil, fmt.Errorf("%w: --until-caught-up needs a source that reports its head (the local journal)", ErrConfig)
		}
	}
	r := &Runner{cfg: cfg, shards: map[string]*shardRun{}}
	r.log = cfg.Logger.With("projection", cfg.Projection, "worker", cfg.WorkerID)
	if c, ok := cfg.ReadModel.(readmodel.Committer); ok {
		r.commit = c
	}
	opts := []shardmap.Option{
		shardmap.WithLogger(cfg.Logger),
		shardmap.WithMaxStealsPerRound(cfg.MaxStealsPerRound),
		shardmap.WithEvents(shardmap.Events{
			Acquired:         r.onAcquired,
			Lost:             r.onLost,
			ReleaseRequested: r.onReleaseRequested,
		}),
	}
	if cfg.LeaseDuration > 0 {
		opts = append(opts, shardmap.WithLeaseDuration(cfg.LeaseDuration))
	}
	r.mgr = shardmap.NewManager(cfg.Leases, cfg.Projection, cfg.WorkerID, opts...)
	return r, nil
}

// Stats returns the runner's counters.
func (r *Runner) Stats() Stats {
	return Stats{Events: r.stats.events.Load(), Batches: r.stats.batches.Load(),
		CursorSaves: r.stats.saves.Load(), Failures: r.stats.failures.Load()}
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

// Run processes shards until ctx is cancelled (graceful: every shard finishes its batch, saves
// its cursor and releases its lease; Run then returns nil) or, with UntilCaughtUp, until every
// shard's cursor reaches the source's head. It returns an error only when it cannot work at all
// (the shard list or the lease store is unreachable at start).
func (r *Runner) Run(ctx context.Context) error {
	shards, err := r.cfg.Source.Shards(ctx)
	if err != nil {
		return fmt.Errorf("host: listing shards: %w", err)
	}
	if err := r.mgr.EnsureShards(ctx, shards); err != nil {
		return fmt.Errorf("host: creating leases: %w", err)
	}
	// Shard loops get their own context: a graceful stop must let them flush after ctx ends.
	loopCtx, cancelLoops := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelLoops()
	r.mu.Lock()
	r.ctx = loopCtx
	r.mu.Unlock()

	mgrCtx, stopMgr := context.WithCancel(ctx)
	mgrDone := make(chan error, 1)
	go func() { mgrDone <- r.mgr.Run(mgrCtx) }()

	var watchErr error
	watchDone := make(chan struct{})
	if r.cfg.UntilCaughtUp {
		go func() {
			defer close(watchDone)
			watchErr = r.watchCaughtUp(mgrCtx, shards, stopMgr)
		}()
	} else {
		close(watchDone)
	}
	select {
	case <-mgrCtx.Done():
		<-mgrDone
	case err := <-mgrDone:
		if err != nil && mgrCtx.Err() == nil {
			r.log.Error("lease manager stopped", "err", err)
		}
	}
	stopMgr()
	r.stopped.Store(true)

	// Graceful shutdown: flush and release every shard still running.
	r.mu.Lock()
	for _, s := range r.shards {
		s.relOnce.Do(func() { close(s.release) })
	}
	r.mu.Unlock()
	r.wg.Wait()
	relCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := r.mgr.ReleaseAll(relCtx); err != nil {
		r.log.Warn("releasing leases at shutdown", "err", err)
	}
	<-watchDone
	return watchErr
}

func (r *Runner) onAcquired(shardID string, l shardmap.Lease) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped.Load() || r.ctx == nil {
		return
	}
	if old, ok := r.shards[shardID]; ok {
		// A previous loop of this shard (lost, then re-acquired) must end before a new one starts.
		old.cancel()
	}
	ctx, cancel := context.WithCancel(r.ctx)
	s := &shardRun{id: shardID, epoch: l.Epoch, cancel: cancel, release: make(chan struct{}), done: make(chan struct{})}
	prev := r.shards[shardID]
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

func (r *Runner) onLost(shardID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s, ok := r.shards[shardID]; ok {
		r.log.Warn("lease lost: stopping shard without saving", "shard", shardID, "epoch", s.epoch)
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
	s.relOnce.Do(func() { close(s.release) })
}

// pending holds the mutations of handled batches not yet committed, in first-write order,
// last write per key winning. It is the overlay the handler's reads see (ABI.md §5).
type pending struct {
	docs  map[docKey]int // index into muts
	muts  []readmodel.Mutation
	seq   string
	count int // events since the last save

	// known caches documents of this shard as committed (nil: absent), filled only with a
	// transactional readmodel.Committer, where a commit applies all of its mutations or none.
	// Documents are written by one shard only (they are keyed by the partition key; README), so
	// while this worker holds the lease no one else changes them and reads need not go back to
	// the store. It lives as long as one lease acquisition and holds at most maxKnownDocs.
	known map[docKey][]byte
}

// maxKnownDocs bounds pending.known per shard (documents; the map is cleared when full).
const maxKnownDocs = 20000

// remember records doc as the committed state of k.
func (p *pending) remember(k docKey, doc []byte) {
	if p.known == nil {
		p.known = make(map[docKey][]byte)
	}
	if len(p.known) >= maxKnownDocs {
		clear(p.known)
	}
	p.known[k] = bytes.Clone(doc)
}

// committed moves the committed mutations into known, then resets.
func (p *pending) committed() {
	for _, m := range p.muts {
		p.remember(docKey{m.Collection, m.Key}, m.Doc)
	}
	p.reset()
}

type docKey struct{ coll, key string }

func (p *pending) add(ms []readmodel.Mutation) {
	if p.docs == nil {
		p.docs = map[docKey]int{}
	}
	for _, m := range ms {
		k := docKey{m.Collection, m.Key}
		if i, ok := p.docs[k]; ok {
			p.muts[i] = m
			continue
		}
		p.docs[k] = len(p.muts)
		p.muts = append(p.muts, m)
	}
}

func (p *pending) reset() {
	clear(p.docs)
	p.muts = p.muts[:0]
	p.count = 0
}

type overlayReader struct {
	p     *pending
	store readmodel.Store
	proj  string
	cache bool // remember committed and read documents in p.known
}

func (o overlayReader) ReadDoc(ctx context.Context, collection, key string) ([]byte, bool, error) {
	k := docKey{collection, key}
	if i, ok := o.p.docs[k]; ok {
		d := o.p.muts[i].Doc
		return d, d != nil, nil
	}
	if d, ok := o.p.known[k]; ok {
		return d, d != nil, nil
	}
	doc, found, err := o.store.Get(ctx, o.proj, collection, key)
	if err == nil && o.cache {
		if !found {
			doc = nil
		}
		o.p.remember(k, doc)
	}
	return doc, found, err
}

// errStop ends a shard loop without saving.
var errStop = errors.New("shard stopped")

func (r *Runner) runShard(ctx context.Context, s *shardRun) {
	log := r.log.With("shard", s.id, "epoch", s.epoch)
	cur, err := r.cfg.Cursors.Claim(ctx, r.cfg.Projection, s.id, s.epoch)
	if err != nil {
		// Usually a benign race: another worker took the shard (a steal while starting up).
		lvl := slog.LevelWarn
		if errors.Is(err, cursorstore.ErrFenced) {
			lvl = slog.LevelInfo
		}
		log.Log(ctx, lvl, "cannot claim cursor: another owner has the shard; giving it up", "err", err)
		r.giveUp(s)
		return
	}
	rd, err := r.cfg.Source.Open(ctx, s.id, cur.Seq)
	if err != nil {
		log.Error("cannot open shard", "err", err)
		r.giveUp(s)
		return
	}
	defer rd.Close()
	h := r.cfg.Module.NewHandler(s.id)
	defer h.Close(context.WithoutCancel(ctx))
	log.Info("shard started", "cursor", cur.Seq)

	// Without transactions an interrupted Apply may have written part of its items: fence older
	// owners out of the read model, then replay up to exactly its sequence number first
	// (readmodel.WriteClaimer).
	replayTo := ""
	if wc, ok := r.cfg.ReadModel.(readmodel.WriteClaimer); ok && r.commit == nil {
		seq, err := wc.ClaimWrites(ctx, r.cfg.Projection, s.id, s.epoch)
		if err != nil {
			log.Warn("cannot claim the read model's writes: giving the shard up", "err", err)
			r.giveUp(s)
			return
		}
		if source.CompareSeq(seq, cur.Seq) > 0 {
			replayTo = seq
			log.Info("replaying up to an interrupted write", "cursor", cur.Seq, "replay_to", seq)
		}
	}

	var p pending
	p.seq = cur.Seq
	lastSave := time.Now()
	ov := overlayReader{p: &p, store: r.cfg.ReadModel, proj: r.cfg.Projection, cache: r.commit != nil}

	flush := func() error {
		if p.count == 0 && len(p.muts) == 0 {
			return nil
		}
		if _, ok := r.mgr.Valid(s.id); !ok {
			return fmt.Errorf("%w: lease no longer valid", errStop)
		}
		w := readmodel.Write{Projection: r.cfg.Projection, ShardID: s.id, Epoch: s.epoch, Seq: p.seq, Mutations: p.muts}
		var err error
		if r.commit != nil {
			err = r.commit.Commit(ctx, w)
		} else {
			err = r.cfg.ReadModel.Apply(ctx, w)
			if err == nil {
				err = r.cfg.Cursors.Save(ctx, r.cfg.Projection, s.id, s.epoch, p.seq)
			}
		}
		if err != nil {
			if errors.Is(err, readmodel.ErrFenced) || errors.Is(err, cursorstore.ErrFenced) {
				return fmt.Errorf("%w: %w", errStop, err)
			}
			return err
		}
		r.stats.saves.Add(1)
		log.Debug("cursor saved", "cursor", p.seq, "mutations", len(p.muts), "events", p.count)
		if r.cfg.OnCursorSave != nil {
			r.cfg.OnCursorSave(s.id, s.epoch, p.seq)
		}
		if ov.cache {
			p.committed()
		} else {
			p.reset()
		}
		lastSave = time.Now()
		return nil
	}
	// saveRetry retries a failed flush (store unreachable) with backoff until it works, the
	// shard is stopped, or the lease is gone.
	saveRetry := func() bool {
		backoff := r.cfg.RetryMin
		for {
			err := flush()
			if err == nil {
				return true
			}
			if errors.Is(err, errStop) || ctx.Err() != nil {
				log.Warn("stopping shard without saving", "err", err)
				return false
			}
			log.Warn("cursor save failed: retrying", "err", err, "backoff", backoff)
			if !sleepCtx(ctx, backoff) {
				return false
			}
			backoff = min(backoff*2, r.cfg.RetryMax)
		}
	}
	release := func() {
		if saveRetry() {
			if err := r.mgr.Release(context.WithoutCancel(ctx), s.id); err != nil && !errors.Is(err, shardmap.ErrNotOwned) {
				log.Warn("releasing lease", "err", err)
			}
			log.Info("shard released", "cursor", p.seq)
		}
	}

	for {
		select {
		case <-ctx.Done():
			return // lease lost: nothing saved
		case <-s.release:
			release()
			return
		default:
		}
		if _, ok := r.mgr.Valid(s.id); !ok {
			log.Warn("lease not renewed in time: stopping shard without saving")
			return
		}
		b, err := rd.Read(ctx, r.cfg.BatchSize, r.cfg.BatchWait)
		if errors.Is(err, source.ErrShardEnded) {
			if saveRetry() {
				if err := r.mgr.Finish(context.WithoutCancel(ctx), s.id); err != nil {
					log.Warn("marking shard finished", "err", err)
				}
				log.Info("shard finished", "cursor", p.seq)
			}
			return
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			log.Warn("reading shard failed: retrying", "err", err)
			if !sleepCtx(ctx, r.cfg.RetryMin) {
				return
			}
			continue
		}
		evs := b.Events
		if replayTo != "" && len(evs) > 0 {
			n := 0
			for n < len(evs) && source.CompareSeq(evs[n].Seq, replayTo) <= 0 {
				n++
			}
			if n > 0 && !r.handle(ctx, s, h, evs[:n], ov, &p, log) {
				return
			}
			evs = evs[n:]
			if n > 0 && source.CompareSeq(p.seq, replayTo) >= 0 || len(evs) > 0 {
				// The replayed range is complete (or the shard skipped past it): commit it alone.
				if !saveRetry() {
					return
				}
				replayTo = ""
			}
		}
		if len(evs) > 0 {
			if !r.handle(ctx, s, h, evs, ov, &p, log) {
				return
			}
		}
		if replayTo != "" {
			continue // never commit part of the replayed range
		}
		if p.count >= r.cfg.CursorEveryEvents || (p.count > 0 && time.Since(lastSave) >= r.cfg.CursorEvery) {
			if !saveRetry() {
				return
			}
		}
	}
}

// handle calls the handler on one batch, retrying with backoff on failure (a fresh instance
// after a poisoning error: Handler does that), and never advancing past a failing batch. It
// returns false when the shard must stop (lease lost, release requested during retries after
// saving what was applied, shutdown).
func (r *Runner) handle(ctx context.Context, s *shardRun, h *Handler, evs []source.Event, ov overlayReader, p *pending, log *slog.Logger) bool {
	// Keep each call under MaxBatchBytes of event data.
	for size, i := 0, 0; i < len(evs); i++ {
		size += len(evs[i].Data)
		if size > r.cfg.MaxBatchBytes && i > 0 {
			if !r.handle(ctx, s, h, evs[:i], ov, p, log) {
				return false
			}
			return r.handle(ctx, s, h, evs[i:], ov, p, log)
		}
	}
	backoff := r.cfg.RetryMin
	for attempt := 1; ; attempt++ {
		muts, err := h.Handle(ctx, evs, ov)
		if err == nil {
			p.add(muts)
			p.seq = evs[len(evs)-1].Seq
			p.count += len(evs)
			r.stats.events.Add(int64(len(evs)))
			r.stats.batches.Add(1)
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		r.stats.failures.Add(1)
		log.Error("handler failed: retrying the batch", "err", err, "attempt", attempt,
			"first_seq", evs[0].Seq, "last_seq", evs[len(evs)-1].Seq, "backoff", backoff)
		select {
		case <-ctx.Done():
			return false
		case <-s.release:
			// Hand over what was applied before the failing batch; the next owner retries it.
			s.relOnce.Do(func() {})
			return r.releaseAfterFailure(ctx, s, p, log)
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, r.cfg.RetryMax)
	}
}

func (r *Runner) releaseAfterFailure(ctx context.Context, s *shardRun, p *pending, log *slog.Logger) bool {
	if p.count > 0 || len(p.muts) > 0 {
		w := readmodel.Write{Projection: r.cfg.Projection, ShardID: s.id, Epoch: s.epoch, Seq: p.seq, Mutations: p.muts}
		var err error
		if r.commit != nil {
			err = r.commit.Commit(ctx, w)
		} else if err = r.cfg.ReadModel.Apply(ctx, w); err == nil {
			err = r.cfg.Cursors.Save(ctx, r.cfg.Projection, s.id, s.epoch, p.seq)
		}
		if err != nil {
			log.Warn("could not save before release", "err", err)
			return false
		}
	}
	if err := r.mgr.Release(context.WithoutCancel(ctx), s.id); err != nil {
		log.Warn("releasing lease", "err", err)
	}
	return false
}

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

// ErrCursorBeyondHead is returned by Run with UntilCaughtUp when a shard's cursor is past the
// source's last event: the journal was replaced or truncated under the projection. Reset the
// projection (a new --name or a fresh store) to project the new journal.
var ErrCursorBeyondHead = errors.New("host: a cursor is beyond the end of its shard (was the journal replaced?)")

// watchCaughtUp cancels stop once every shard's cursor has reached its head. It returns an
// error wrapping ErrCursorBeyondHead (after cancelling stop) when a cursor is past its head.
func (r *Runner) watchCaughtUp(ctx context.Context, shards []source.Shard, stop context.CancelFunc) error {
	hd := r.cfg.Source.(Header)
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		done := true
		for _, sh := range shards {
			head, err := hd.Head(ctx, sh.ID)
			if err != nil {
				done = false
				break
			}
			c, err := r.cfg.Cursors.Get(ctx, r.cfg.Projection, sh.ID)
			if err != nil {
				done = false
				break
			}
			if cmp := source.CompareSeq(c.Seq, head); cmp > 0 {
				stop()
				return fmt.Errorf("%w: shard %s cursor %s, last event %s", ErrCursorBeyondHead, sh.ID, c.Seq, orNone(head))
			} else if cmp < 0 {
				done = false
				break
			}
		}
		if done {
			r.log.Info("every shard caught up: stopping")
			stop()
			return nil
		}
	}
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
