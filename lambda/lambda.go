// Package lambda runs a projection as an AWS Lambda function driven by a Kinesis event source
// mapping (ESM): each invocation is one batch of one shard's records, put through the same
// per-shard core as container mode (projection.Processor), with the projection's active handler
// version from the module registry (deploy.Follower) and its read model, cursors and dead
// letters in DynamoDB (store/dynamo). cmd/bootstrap is the function's `bootstrap` for the
// provided.al2023 runtime.
//
// # An invocation
//
// Handler.Handle takes the ESM's events.KinesisEvent and returns an events.KinesisEventResponse
// (the function must be configured with FunctionResponseTypes [ReportBatchItemFailures]):
//
//   - Every record of an invocation belongs to one shard (the ESM never mixes shards in a
//     batch); the shard id is the part of a record's eventID before ':'
//     ("shardId-000000000000:4954..."). Records of two shards, a malformed eventID or sequence
//     number, or sequence numbers out of order are a bad input: Handle returns an error wrapping
//     ErrBadEvent (a function error) and does nothing.
//   - The handler module is the projection's active version: loaded (fetched from the module
//     store and compiled, with the runtime's compilation cache, under /tmp in Lambda) once per
//     warm container, by Warm or the first Handle; the active pointer is read again at the
//     start of every invocation (deploy.Follower.Refresh), so a deploy --activate or a rollback
//     takes effect at the next invocation of each shard (after what the old version produced is
//     committed).
//   - Fencing: Lambda has no leases. An invocation claims its shard at the stored cursor's
//     epoch + 1 (projection.Processor.Open raises the cursor's and the read model's fences to
//     it), so the writes of an older invocation still running (one that timed out, say) are
//     fenced out: its cursor saves and read-model writes fail, and it responds with what it
//     committed. This assumes one invocation per shard at a time, which the ESM guarantees with
//     ParallelizationFactor 1 (the default): with a higher factor, two invocations of one shard
//     run at once, and the later one fences the earlier one out after every batch, which then
//     reports its records as failed and has them retried (progress, but no exactly-once
//     guarantee across the two: do not). Two invocations that read the cursor at the same
//     moment claim the same epoch and are not fenced from each other (the same assumption).
//     Do not run container-mode workers on the same projection at once: their lease epochs and
//     these epochs fence each other out.
//   - Records at or below the shard's cursor are skipped (the ESM redelivers after a failure
//     or a timeout: the cursor is the idempotency fence). The rest go through
//     projection.Shard.Handle in chunks, then Flush (the read model's writes with their
//     exactly-once markers, then the cursor), then Close.
//   - Dead-letter replays. The shard's letters whose replay was requested (`projhost
//     deadletters replay`) are replayed at the start of an invocation, before its batch, by the
//     handler version the invocation runs (projection.Shard.Replay), while the time left keeps
//     room for the batch; the requests are listed at most every Config.ReplayCheck per shard and
//     warm container. A shard that gets no records replays nothing until it does.
//   - Time. A chunk holds as many records as the invocation's time left could settle if the
//     handler failed on one of them (projection.Config.FailureTime: the attempts with their
//     backoff and the bisection, each call bounded by Config.BatchDeadline with a margin): so
//     a record the handler keeps failing on is always dead-lettered, stopped at or handed back
//     within one invocation, and the records before it committed. When the time left cannot
//     settle one more record, the invocation commits and names the next record (the ESM
//     retries from it). The function's timeout must be at least Config.MinTimeout.
//   - Failures. Under the error policy dead-letter, the core stores an event the handler keeps
//     failing on, whole, in the dead-letter table and goes on after it: the invocation succeeds
//     (the ESM's own on-failure destination would get a sequence range only, not the data).
//     Under stop, the core commits the events before the failing one and stops the shard (until
//     `projhost resume`); under retry, it tries the batch Policy.MaxAttempts times per
//     invocation, then commits the events before the failing one and hands it back
//     (projection.ShardOptions.YieldRetries). Either way, and for any other failure (the shard
//     stopped before, a store error, the invocation's time running out, a newer invocation
//     fencing this one out), the response's batchItemFailures holds exactly one item: the
//     sequence number of the first record of the batch after the shard's committed cursor
//     (never an empty identifier, which AWS takes as the whole batch failing). The ESM then
//     checkpoints the records before it and retries from it. When every record is committed
//     the response has no failures.
//
// Under stop and retry the ESM's own retry settings decide what happens when a record keeps
// failing: after MaximumRetryAttempts (or MaximumRecordAgeInSeconds) the ESM gives the batch up,
// sends its on-failure record, and goes on with later records, which this package then
// handles (a stopped shard keeps failing them until resumed, so the ESM gives them up too).
// For a shard that truly stops or retries until fixed, set both to -1 (infinite, the ESM's
// default); with finite values, prefer dead-letter, which keeps the failing events' data.
//
// Store errors (DynamoDB unreachable) are retried with backoff by the core within the
// invocation's time (its deadline less Config.Reserve); then the invocation reports the first
// uncommitted record as failed rather than returning a function error: the ESM checkpoints
// what was committed, and with BisectBatchOnFunctionError it would otherwise split the batch
// for a failure that no record causes. The error is logged.
//
// # Concurrency
//
// A Handler is safe for concurrent use: the Lambda runtime calls Handle once at a time per
// process, but invocations of different shards may share a Handler (tests do).
package lambda

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/projhost/projhost/deadletter"
	"github.com/projhost/projhost/deploy"
	"github.com/projhost/projhost/event"
	"github.com/projhost/projhost/host"
	"github.com/projhost/projhost/internal/durations"
	"github.com/projhost/projhost/projection"
	"github.com/projhost/projhost/registry"
)

// Defaults of Config.
const (
	DefaultReserve     = time.Second
	DefaultReplayCheck = 10 * time.Second
)

// Errors.
var (
	// ErrConfig is wrapped by New's errors about a bad Config (and projection.ErrConfig's).
	ErrConfig = errors.New("lambda: bad configuration")
	// ErrBadEvent is wrapped by Handle's and Records' errors about an input that is not one
	// shard's Kinesis records in order.
	ErrBadEvent = errors.New("lambda: bad Kinesis event")
)

// Config configures a Handler.
type Config struct {
	// Core configures the per-shard core (projection.Config): Projection and Stores are
	// required (store/dynamo.Open; its Registry too, which holds the projection's versions and
	// active pointer), Policy is the projection's error policy (default stop after 5
	// attempts), and Hooks, Logger, MaxBatchBytes, CursorEveryEvents, CursorEvery, RetryMin and
	// RetryMax keep their meaning and defaults (within an invocation the core commits every
	// CursorEveryEvents events, and at its end). Modules must be nil: the Handler runs the
	// registry's active version.
	Core projection.Config
	// Blobs is the module store holding the versions' bytes (registry/s3blobs). Required.
	Blobs registry.Blobs
	// Runtime compiles and runs the modules. Required; in Lambda give it a compilation cache
	// directory under /tmp (host.WithCacheDir), the only writable place.
	Runtime *host.Runtime
	// BatchDeadline is how long one handler call may run (host.WithBatchDeadline); default
	// host.DefaultBatchDeadline. Lambda mode has no trusted modules: the invocation's time is
	// split by what a failing record can cost, which a call without a deadline makes unbounded
	// (see MinTimeout).
	BatchDeadline time.Duration
	// Reserve is the time kept before an invocation's deadline (its context's) to commit what
	// was handled and respond: the core's work stops at the deadline less Reserve (less a
	// quarter of the time left, when that is shorter). Default DefaultReserve.
	Reserve time.Duration
	// ReplayCheck is how often, at most, an invocation of a shard lists the shard's dead
	// letters whose replay was requested (`projhost deadletters replay`; a DynamoDB Query),
	// per warm container; default DefaultReplayCheck. The requested replays are handled at the
	// start of the shard's next invocation after that: a shard that gets no records replays
	// nothing until it does.
	ReplayCheck time.Duration
	// Metrics, when set, receives one CloudWatch embedded-metric-format (EMF) JSON line per
	// invocation with records: the figures of package prom, per invocation (see EMFNamespace
	// for the line's metrics). cmd/bootstrap gives os.Stdout, which Lambda sends to CloudWatch
	// Logs. Default nil: no metrics.
	Metrics io.Writer
}

// Handler handles the invocations of one projection's function. Create it with New, once per
// process (a warm container reuses it).
type Handler struct {
	cfg  Config
	log  *slog.Logger
	proc *projection.Processor
	mods *activeModule

	mu       sync.Mutex // guards follower's creation
	follower *deploy.Follower

	replayMu      sync.Mutex
	replayChecked map[string]time.Time // shard id: when its replay requests were last listed

	emf *emfRecorder // nil without Config.Metrics
}

// New validates cfg (projection.Config.Validate for Core) and returns a Handler. It does no I/O:
// the module is loaded by Warm or the first Handle. Errors wrap ErrConfig.
func New(cfg Config) (*Handler, error) {
	switch {
	case cfg.Core.Modules != nil:
		return nil, fmt.Errorf("%w: Core.Modules must be nil (the handler runs the registry's active version)", ErrConfig)
	case cfg.Blobs == nil || cfg.Runtime == nil:
		return nil, fmt.Errorf("%w: a module store and a runtime are required", ErrConfig)
	case cfg.Core.Stores != nil && cfg.Core.Stores.Registry == nil:
		return nil, fmt.Errorf("%w: the stores have no module registry", ErrConfig)
	case cfg.Reserve < 0:
		return nil, fmt.Errorf("%w: reserve %v: want a positive duration", ErrConfig, cfg.Reserve)
	case cfg.ReplayCheck < 0:
		return nil, fmt.Errorf("%w: replay check %v: want a positive duration", ErrConfig, cfg.ReplayCheck)
	case cfg.BatchDeadline < 0:
		return nil, fmt.Errorf("%w: batch deadline %v: want a positive duration", ErrConfig, cfg.BatchDeadline)
	}
	if cfg.Reserve == 0 {
		cfg.Reserve = DefaultReserve
	}
	if cfg.BatchDeadline == 0 {
		cfg.BatchDeadline = host.DefaultBatchDeadline
	}
	if cfg.ReplayCheck == 0 {
		cfg.ReplayCheck = DefaultReplayCheck
	}
	mods := &activeModule{}
	core := cfg.Core
	core.Modules = mods
	var emf *emfRecorder
	if cfg.Metrics != nil {
		emf = newEMFRecorder(cfg.Metrics)
		core.Hooks = projection.Chain(core.Hooks, emf.hooks())
	}
	proc, err := projection.New(core)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	cfg.Core = proc.Config()
	return &Handler{cfg: cfg, log: cfg.Core.Logger.With("projection", cfg.Core.Projection), proc: proc, mods: mods,
		replayChecked: map[string]time.Time{}, emf: emf}, nil
}

// Warm loads the projection's active version unless it is loaded (a deploy.Follower: the
// bytes from the module store, compiled with the runtime's cache): call it at start-up, in
// the function's init phase, so that the first invocation does not pay for it. Errors are
// NewFollower's (deploy.ErrNoActive when nothing is deployed yet); the next Warm or Handle
// tries again.
func (h *Handler) Warm(ctx context.Context) error {
	_, err := h.active(ctx)
	return err
}

// active returns the Follower, creating it when needed.
func (h *Handler) active(ctx context.Context) (*deploy.Follower, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.follower != nil {
		return h.follower, nil
	}
	st := h.cfg.Core.Stores
	f, err := deploy.NewFollower(ctx, deploy.FollowConfig{Registry: st.Registry, Blobs: h.cfg.Blobs, Runtime: h.cfg.Runtime,
		Projection: h.cfg.Core.Projection, ModuleOptions: []host.ModuleOption{host.WithBatchDeadline(h.cfg.BatchDeadline)}, Logger: h.cfg.Core.Logger})
	if err != nil {
		return nil, err
	}
	h.follower = f
	h.mods.f.Store(f)
	return f, nil
}

// Version is the active version the Handler runs (zero before the first Warm or Handle that
// loaded it).
func (h *Handler) Version() registry.Version {
	if f := h.mods.f.Load(); f != nil {
		return f.Version()
	}
	return registry.Version{}
}

// Close releases the loaded modules. No Handle may run or follow.
func (h *Handler) Close(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.follower == nil {
		return nil
	}
	return h.follower.Close(ctx)
}

// Handle handles one invocation: the batch of one shard's records the ESM delivers (see the
// package documentation). It returns an error only for a bad input (ErrBadEvent); every other
// failure is reported as the first uncommitted record in the response's BatchItemFailures.
func (h *Handler) Handle(ctx context.Context, in events.KinesisEvent) (events.KinesisEventResponse, error) {
	shardID, evs, err := Records(in)
	if err != nil {
		return events.KinesisEventResponse{}, err
	}
	ok := events.KinesisEventResponse{BatchItemFailures: []events.KinesisBatchItemFailure{}}
	if len(evs) == 0 {
		return ok, nil
	}
	log := h.log.With("shard", shardID)
	work, flushCtx, cancel := h.budget(ctx)
	defer cancel()
	committed, err := h.handle(work, flushCtx, log, shardID, evs)
	if h.emf != nil {
		h.emf.emit(log, h.cfg.Core.Projection, shardID, evs, committed)
	}
	for _, e := range evs {
		if event.CompareSeq(e.Seq, committed) > 0 {
			log.Error("batch not committed in full: reporting the first uncommitted record", "seq", e.Seq, "first", evs[0].Seq,
				"last", evs[len(evs)-1].Seq, "records", len(evs), "err", err)
			return events.KinesisEventResponse{BatchItemFailures: []events.KinesisBatchItemFailure{{ItemIdentifier: e.Seq}}}, nil
		}
	}
	if err != nil { // every record committed all the same (a failure after the last commit)
		log.Warn("invocation failed after committing every record", "err", err)
	}
	return ok, nil
}

// budget returns the context of the core's work (ending Reserve before ctx's deadline), the
// context of the last flush (ending Reserve/2 before it) and their cancel.
func (h *Handler) budget(ctx context.Context) (work, flush context.Context, cancel func()) {
	dl, ok := ctx.Deadline()
	if !ok {
		return ctx, ctx, func() {}
	}
	reserve := min(h.cfg.Reserve, time.Until(dl)/4)
	work, c1 := context.WithDeadline(ctx, dl.Add(-reserve))
	flush, c2 := context.WithDeadline(ctx, dl.Add(-reserve/2))
	return work, flush, func() { c1(); c2() }
}

// handle runs the batch through the core and returns the shard's committed cursor ("" when the
// shard could not be opened: nothing of the batch is known committed) and the first error.
func (h *Handler) handle(ctx, flushCtx context.Context, log *slog.Logger, shardID string, evs []event.Event) (string, error) {
	f, err := h.active(ctx)
	if err != nil {
		return "", fmt.Errorf("loading the active handler version: %w", err)
	}
	if err := f.Refresh(ctx); err != nil {
		log.Error("the active handler version could not be refreshed: running the one loaded", "version", f.Version().Number, "err", err)
	}
	c, err := h.cfg.Core.Stores.Cursors.Get(ctx, h.cfg.Core.Projection, shardID)
	if err != nil {
		return "", fmt.Errorf("reading the cursor: %w", err)
	}
	sh, err := h.proc.Open(ctx, shardID, c.Epoch+1, projection.ShardOptions{YieldRetries: true})
	if err != nil {
		return "", err
	}
	defer sh.Close(ctx)
	if err := h.replay(ctx, log, sh); err != nil {
		return sh.Committed(), err
	}
	if err := h.handleChunks(ctx, log, sh, evs); err != nil {
		if !errors.Is(err, projection.ErrLost) {
			// Commit what was handled before the failure (a no-op after Stop and a yield,
			// which committed it; after the time ran out, what is pending).
			if ferr := sh.Flush(flushCtx); ferr != nil {
				log.Error("committing what was handled before a failure failed", "err", ferr)
			}
		}
		return sh.Committed(), err
	}
	err = sh.Flush(flushCtx)
	return sh.Committed(), err
}

// replay re-handles the shard's dead letters whose replay was requested (`projhost deadletters
// replay`), one at a time while the invocation's time left keeps room for a handler call and
// then one failing record of its batch, before the batch. The requests are listed at most every
// Config.ReplayCheck per shard and container. A listing error is logged, not returned.
func (h *Handler) replay(ctx context.Context, log *slog.Logger, sh *projection.Shard) error {
	id := sh.Info().ShardID
	h.replayMu.Lock()
	due := time.Since(h.replayChecked[id]) >= h.cfg.ReplayCheck
	if due {
		h.replayChecked[id] = time.Now()
	}
	h.replayMu.Unlock()
	if !due {
		return nil
	}
	again := func() { // list them again at the next invocation
		h.replayMu.Lock()
		delete(h.replayChecked, id)
		h.replayMu.Unlock()
	}
	ls, err := h.cfg.Core.Stores.DeadLetters.List(ctx, h.cfg.Core.Projection, deadletter.Filter{ShardID: id, State: deadletter.StateReplayRequested})
	if err != nil {
		log.Warn("listing requested dead-letter replays failed: the next invocation tries again", "err", err)
		again()
		return nil
	}
	dl, bounded := ctx.Deadline()
	for i, l := range ls {
		if bounded && time.Until(dl) < durations.Add(h.cfg.callLimit(), h.cfg.Core.FailureTime(1, h.cfg.callLimit())) {
			log.Warn("dead-letter replays left for a later invocation: keeping the time for the batch (a function timeout of at least MinTimeout leaves time for one per invocation)",
				"replays", len(ls)-i)
			again()
			return nil
		}
		if err := sh.Replay(ctx, []deadletter.Letter{l}); err != nil {
			return err
		}
	}
	return nil
}

// validShardID reports whether id matches the Kinesis API's ShardId constraints (pattern
// [a-zA-Z0-9_.-]+, length 1 to 128: Kinesis API reference, Shard).
func validShardID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// errNoTime ends an invocation whose time left is shorter than what the next record could
// take if the handler kept failing on it.
var errNoTime = errors.New("not enough time left in the invocation for the next records if the handler fails on them: handing them back to the event source mapping")

// handleChunks puts evs through sh in chunks sized so that one cycle of the error policy on
// a chunk (projection.Config.FailureTime, with a margin) fits the time left before ctx's
// deadline: a record the handler keeps failing on is then always isolated, and dead-lettered,
// stopped at or handed back, within one invocation, and what comes before it is committed.
// When the time left is too short for the next chunk of one record, it returns errNoTime (the
// caller commits what was handled and names the next record); when it is too short for one
// record at the invocation's start, the function's timeout is too short for the
// configuration (Config.MinTimeout): the records go one at a time all the same, and an error
// says what to change. Without a deadline, evs go in one piece.
func (h *Handler) handleChunks(ctx context.Context, log *slog.Logger, sh *projection.Shard, evs []event.Event) error {
	dl, bounded := ctx.Deadline()
	for first := true; len(evs) > 0; first = false {
		n := len(evs)
		if bounded {
			n = h.fit(time.Until(dl), evs)
		}
		if n == 0 && !first {
			log.Warn(errNoTime.Error(), "records", len(evs), "time_left", time.Until(dl).Round(time.Millisecond))
			return errNoTime
		}
		if n == 0 {
			log.Error("the invocation's time is too short for one record the handler fails on: its attempts and backoff would outlast it, "+
				"nothing of it would be committed, and the event source mapping would give it up without a dead letter; raise the function's "+
				"timeout to at least min_timeout, or lower PROJHOST_MAX_ATTEMPTS or PROJHOST_BATCH_DEADLINE",
				"time_left", time.Until(dl).Round(time.Millisecond), "min_timeout", h.cfg.MinTimeout())
			n = 1
		}
		if err := sh.Handle(ctx, evs[:n]); err != nil {
			return err
		}
		evs = evs[n:]
	}
	return nil
}

// callLimit is what FailureTime counts per handler call: the batch deadline, and a margin for
// the interruption of a call at its deadline and for the host's work around a call
// (saturating at the largest time.Duration).
func (c Config) callLimit() time.Duration {
	return durations.Add(durations.Add(c.BatchDeadline, c.BatchDeadline/10), 20*time.Millisecond)
}

// fit returns how many of evs (at least one, at most one handler call's MaxBatchBytes of
// data) may go in one chunk whose failure takes at most left; 0 when not even one may.
func (h *Handler) fit(left time.Duration, evs []event.Event) int {
	core, call := h.cfg.Core, h.cfg.callLimit()
	if core.FailureTime(1, call) > left {
		return 0
	}
	n := 1
	for n < len(evs) && core.FailureTime(2*n, call) <= left {
		n *= 2
	}
	n = min(n, len(evs))
	size := 0
	for i, e := range evs[:n] {
		if size += len(e.Data); i > 0 && size > core.MaxBatchBytes {
			return i
		}
	}
	return n
}

// MinTimeout is the shortest function timeout with which an invocation has time for one
// handler call (a requested dead-letter replay, or the first records of its batch) and then
// for one record the handler keeps failing on (projection.Config.FailureTime of one record
// under Core's policy and backoff, each call bounded by the batch deadline with a margin),
// and Reserve. With a shorter one, such a record may never be dead-lettered, stopped at or
// handed back: the event source mapping retries its batch until it gives it up. A timeout of
// a few times this lets an invocation handle more records per chunk (the package
// documentation, Time). Zero fields count as their defaults; the sum saturates at the largest
// time.Duration.
func (c Config) MinTimeout() time.Duration {
	if c.BatchDeadline <= 0 {
		c.BatchDeadline = host.DefaultBatchDeadline
	}
	if c.Reserve <= 0 {
		c.Reserve = DefaultReserve
	}
	return durations.Add(durations.Add(c.Core.FailureTime(1, c.callLimit()), c.callLimit()), c.Reserve)
}

// Records returns the shard id and the events of an invocation's records, in order (Data as
// decoded by encoding/json from base64; ArrivalMs from approximateArrivalTimestamp, to the
// nearest millisecond, 0 when absent). Errors wrap ErrBadEvent: an eventID that is not
// "<shard id>:<sequence number>" (a shard id as the Kinesis API's ShardId: 1 to 128 of
// a-z, A-Z, 0-9, '_', '.', '-'), records of two shards, a sequence number that is not a
// canonical decimal (event.ValidSeq) or is not the eventID's, or sequence numbers not
// increasing.
func Records(in events.KinesisEvent) (string, []event.Event, error) {
	var shardID string
	evs := make([]event.Event, 0, len(in.Records))
	for i, r := range in.Records {
		sid, idSeq, found := strings.Cut(r.EventID, ":")
		if !found || !validShardID(sid) {
			return "", nil, fmt.Errorf("%w: record %d: eventID %q is not <shard id>:<sequence number> (a shard id is 1 to 128 of a-z, A-Z, 0-9, '_', '.', '-')", ErrBadEvent, i, r.EventID)
		}
		if i == 0 {
			shardID = sid
		} else if sid != shardID {
			return "", nil, fmt.Errorf("%w: records of two shards in one invocation: %s (record 0) and %s (record %d); the event source mapping delivers one shard's records per invocation",
				ErrBadEvent, shardID, sid, i)
		}
		k := r.Kinesis
		if !event.ValidSeq(k.SequenceNumber) {
			return "", nil, fmt.Errorf("%w: record %d: sequence number %q is not a decimal number", ErrBadEvent, i, k.SequenceNumber)
		}
		if idSeq != k.SequenceNumber {
			return "", nil, fmt.Errorf("%w: record %d: eventID %q names another sequence number than kinesis.sequenceNumber %s", ErrBadEvent, i, r.EventID, k.SequenceNumber)
		}
		if i > 0 && event.CompareSeq(k.SequenceNumber, evs[i-1].Seq) <= 0 {
			return "", nil, fmt.Errorf("%w: record %d: sequence number %s does not follow %s", ErrBadEvent, i, k.SequenceNumber, evs[i-1].Seq)
		}
		e := event.Event{ShardID: sid, Seq: k.SequenceNumber, PartitionKey: k.PartitionKey, Data: k.Data}
		if e.Data == nil {
			e.Data = []byte{}
		}
		if t := k.ApproximateArrivalTimestamp; !t.IsZero() {
			// Rounded: the JSON number (seconds, with milliseconds as decimals) comes through a
			// float64, which often lands a few nanoseconds short of the millisecond.
			e.ArrivalMs = t.Round(time.Millisecond).UnixMilli()
		}
		evs = append(evs, e)
	}
	return shardID, evs, nil
}
