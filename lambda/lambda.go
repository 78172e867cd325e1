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
//     projection.Shard.Handle, then Flush (the read model's writes with their exactly-once
//     markers, then the cursor), then Close.
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
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/projhost/projhost/deploy"
	"github.com/projhost/projhost/event"
	"github.com/projhost/projhost/host"
	"github.com/projhost/projhost/projection"
	"github.com/projhost/projhost/registry"
)

// DefaultReserve is the default Config.Reserve.
const DefaultReserve = time.Second

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
	// ModuleOptions are passed to Runtime.Load for every version (batch deadline, trusted).
	ModuleOptions []host.ModuleOption
	// Reserve is the time kept before an invocation's deadline (its context's) to commit what
	// was handled and respond: the core's work stops at the deadline less Reserve (less a
	// quarter of the time left, when that is shorter). Default DefaultReserve.
	Reserve time.Duration
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
		return nil, fmt.Errorf("%w: reserve %v", ErrConfig, cfg.Reserve)
	}
	if cfg.Reserve == 0 {
		cfg.Reserve = DefaultReserve
	}
	mods := &activeModule{}
	core := cfg.Core
	core.Modules = mods
	proc, err := projection.New(core)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	cfg.Core = proc.Config()
	return &Handler{cfg: cfg, log: cfg.Core.Logger.With("projection", cfg.Core.Projection), proc: proc, mods: mods}, nil
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
		Projection: h.cfg.Core.Projection, ModuleOptions: h.cfg.ModuleOptions, Logger: h.cfg.Core.Logger})
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
	if err := sh.Handle(ctx, evs); err != nil {
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

// Records returns the shard id and the events of an invocation's records, in order (Data as
// decoded by encoding/json from base64; ArrivalMs from approximateArrivalTimestamp, to the
// nearest millisecond, 0 when absent). Errors wrap ErrBadEvent: an eventID that is not "<shard id>:...", records of two
// shards, a sequence number that is not a canonical decimal (event.ValidSeq), or sequence
// numbers not increasing.
func Records(in events.KinesisEvent) (string, []event.Event, error) {
	var shardID string
	evs := make([]event.Event, 0, len(in.Records))
	for i, r := range in.Records {
		sid, _, found := strings.Cut(r.EventID, ":")
		if !found || sid == "" {
			return "", nil, fmt.Errorf("%w: record %d: eventID %q is not <shard id>:<sequence number>", ErrBadEvent, i, r.EventID)
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
