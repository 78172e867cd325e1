// Package kinesis reads an Amazon Kinesis Data Streams stream as a source.Source: shards from
// ListShards (paged), one reader per shard polling GetRecords (the shared-throughput consumer,
// not enhanced fan-out), positioned from projhost's cursors with AFTER_SEQUENCE_NUMBER.
//
// # Shards
//
// Shards lists every shard the stream still has (open and closed: ListShards without a filter),
// parents before children. ParentIDs are ParentShardId and AdjacentParentShardId (a merge), less
// any parent the listing no longer holds: a parent older than the retention period is gone with
// its records, so nothing waits for it. Closed is set when the shard has an
// EndingSequenceNumber. The hash key ranges are Kinesis' own, as decimal strings.
//
// # Reading
//
// Open positions a reader AFTER_SEQUENCE_NUMBER the cursor, or, for "" (no cursor yet), at the
// source's initial position (WithInitialPosition: TRIM_HORIZON by default, LATEST or
// AT_TIMESTAMP). Each Read makes GetRecords calls with Limit = the events asked for (at most
// MaxRead) and paces them to stay under the per-shard read quotas of the Kinesis Data Streams
// Developer Guide ("Quotas and limits": 5 GetRecords calls per second per shard, 2 MB per second
// per shard): successive calls of one reader are at least MinCallInterval apart, and after a
// response of B bytes the next call waits B / MaxReadBytesPerSecond. Several consumers of one
// stream share those quotas; each reader paces only itself, and the throttling backoff covers
// the rest.
//
// A reader waits between calls (WithIdleTime, default DefaultIdleTime = 1 s, the KCL's
// idleTimeBetweenReadsInMillis) only after a call that returned no records with
// MillisBehindLatest 0 (caught up and empty); a call that returned records, or an empty page of
// a shard still behind, is followed by the next call as soon as the pacing allows. A Read never
// waits past its wait argument: when the next call is not due by then, it returns an empty batch
// whose MillisBehind is the last answer's, or -1 (unknown) when that answer had records at
// MillisBehindLatest 0 or there was none yet: only an empty answer at 0 shows the tip (records
// put in the tip's millisecond may follow a page at 0).
//
// Errors of GetRecords: ProvisionedThroughputExceededException and the SDK's other throttling
// errors are retried with exponential backoff (ThrottleBackoffMin doubling to
// ThrottleBackoffMax, jittered) for as long as the Read's context lasts; transient errors
// (5xx, timeouts, connection resets) the same way up to MaxTransientRetries in a row;
// ExpiredIteratorException (an iterator unused for 5 minutes: a handler stalled that long) gets
// a new iterator AFTER_SEQUENCE_NUMBER the last record this reader returned, or at its start
// position when it returned none, so that nothing is skipped or returned twice; it is got right
// before the next GetRecords (not when the expiry is answered), so that it cannot expire in turn
// while the caller waits between Reads. Other errors are returned.
//
// A closed shard read to its end (GetRecords without NextShardIterator) returns its last records
// and then source.ErrShardEnded on every Read.
//
// Batch.MillisBehind is GetRecords' MillisBehindLatest (-1 when absent); Batch.EventsBehind is
// -1: Kinesis cannot tell how many records follow. *Source is not a source.Header for the same
// reason; it is a source.Prober (Probe: the lag of a saved cursor, from any process) and a
// source.Tailer (Tail: a shard's last n records, by windows of growing width read to the tip,
// for a deploy's smoke run).
//
// # Cursors older than the retention period
//
// A cursor whose record was trimmed (older than the stream's retention) cannot be resumed after:
// Kinesis answers AFTER_SEQUENCE_NUMBER with InvalidArgumentException, or with records starting
// later than the cursor's successor. Open checks for both (the second by reading the shard's
// first remaining record at TRIM_HORIZON, one GetShardIterator and one GetRecords of Limit 1 per
// Open with a cursor; WithTrimCheck(false) skips it) and falls back to TRIM_HORIZON: loudly
// (a slog warning naming the shard, the cursor and the first record still there) and counted in
// Stats().TrimmedFallbacks, since records between the cursor and the oldest one kept may be lost
// to the projection (sequence numbers have gaps: whether any was lost cannot be told). A cursor
// Kinesis refuses although the shard's oldest record is at or before it is no sequence number of
// the shard (a stream deleted and created again under its name): Open fails with
// ErrCursorRefused instead of replaying the shard.
//
// # Not supported
//
// Records aggregated by the Kinesis Producer Library (KPL aggregation, protobuf-framed records
// with the magic prefix F3 89 9A C2) are out of scope: each Kinesis record is one event, its
// data handed over as is. Enhanced fan-out (SubscribeToShard) is not used.
//
// All methods of *Source are safe for concurrent use; a reader is used by one goroutine at a
// time (source.ShardReader).
package kinesis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"

	"github.com/projhost/projhost/source"
)

// API is the part of the Kinesis Data Streams client the source calls; *kinesis.Client (from
// NewClient or kinesis.NewFromConfig) implements it. Tests wrap it.
type API interface {
	ListShards(ctx context.Context, in *kinesis.ListShardsInput, optFns ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error)
	GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, optFns ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error)
}

// Limits and defaults. Sources: Amazon Kinesis Data Streams Developer Guide, "Quotas and limits",
// and the GetRecords API reference.
const (
	// MaxRead is GetRecords' largest Limit: 10,000 records per call.
	MaxRead = 10000
	// MaxGetRecordsPerSecond is the per-shard quota of GetRecords calls: 5 per second.
	MaxGetRecordsPerSecond = 5
	// MinCallInterval is the shortest gap between two GetRecords calls of one reader
	// (1 s / MaxGetRecordsPerSecond).
	MinCallInterval = time.Second / MaxGetRecordsPerSecond
	// MaxReadBytesPerSecond is the per-shard read quota: 2 MB per second, taken as 2,000,000
	// bytes (the lower reading of "MB").
	MaxReadBytesPerSecond = 2_000_000
	// DefaultIdleTime is the default wait after an empty GetRecords of a caught-up shard: 1 s,
	// the Kinesis Client Library's default idleTimeBetweenReadsInMillis (KCL 1.x,
	// KinesisClientLibConfiguration.DEFAULT_IDLETIME_BETWEEN_READS_MILLIS).
	DefaultIdleTime = time.Second
	// ThrottleBackoffMin and ThrottleBackoffMax bound the backoff after a throttled or failed
	// GetRecords: it starts at ThrottleBackoffMin and doubles per failure in a row, up to
	// ThrottleBackoffMax; each wait is between half of it and all of it (jitter).
	ThrottleBackoffMin = 500 * time.Millisecond
	ThrottleBackoffMax = 10 * time.Second
	// MaxTransientRetries is how many transient GetRecords failures in a row (5xx, timeouts,
	// connection errors) a Read rides out before returning the error.
	MaxTransientRetries = 8
	// trimProbePages bounds the empty TRIM_HORIZON pages the trim check reads past.
	trimProbePages = 3
	// latestMargin: an iterator of a LATEST reader that returned nothing yet is renewed
	// AT_TIMESTAMP its open time less this much (clock skew between this host and Kinesis).
	latestMargin = time.Second
)

var (
	// ErrInvalid is returned for a configuration or argument the source cannot take.
	ErrInvalid = errors.New("kinesis: invalid input")
	// ErrStreamNotFound is returned by Shards when the stream does not exist: create it, or
	// check the stream name or ARN and the region.
	ErrStreamNotFound = errors.New("kinesis: stream not found")
	// ErrReaderClosed is returned by Read after the reader's Close.
	ErrReaderClosed = errors.New("kinesis: reader is closed")
	// ErrCursorRefused is returned by Open when Kinesis refuses to read after a cursor that is
	// not older than the shard's oldest record: it is no sequence number of this shard (the
	// stream was deleted and created again under the same name?). Reset the cursor deliberately.
	ErrCursorRefused = errors.New("kinesis: the stream refuses the cursor although it is not older than the retention period")
)

// InitialPosition is where a reader of a shard without a cursor starts.
type InitialPosition struct {
	// Type is types.ShardIteratorTypeTrimHorizon (the oldest record kept), Latest (only records
	// put after the reader opened) or AtTimestamp.
	Type types.ShardIteratorType
	// Timestamp is AT_TIMESTAMP's time: the first record read is the first one that arrived at
	// or after it.
	Timestamp time.Time
}

// TrimHorizon is the default initial position: the oldest record the shard still holds.
var TrimHorizon = InitialPosition{Type: types.ShardIteratorTypeTrimHorizon}

// Latest returns the position after the newest record at the time a reader opens.
func Latest() InitialPosition { return InitialPosition{Type: types.ShardIteratorTypeLatest} }

// AtTimestamp returns the position of the first record that arrived at or after t.
func AtTimestamp(t time.Time) InitialPosition {
	return InitialPosition{Type: types.ShardIteratorTypeAtTimestamp, Timestamp: t}
}

// String returns the form ParseInitialPosition reads.
func (p InitialPosition) String() string {
	if p.Type == types.ShardIteratorTypeAtTimestamp {
		return "AT_TIMESTAMP=" + p.Timestamp.UTC().Format(time.RFC3339Nano)
	}
	return string(p.Type)
}

// ParseInitialPosition reads "TRIM_HORIZON", "LATEST" or "AT_TIMESTAMP=<RFC 3339 time>" (e.g.
// "AT_TIMESTAMP=2026-01-02T15:04:05Z"), in any letter case. Errors: ErrInvalid, naming the
// accepted forms.
func ParseInitialPosition(s string) (InitialPosition, error) {
	name, ts, hasTS := strings.Cut(strings.TrimSpace(s), "=")
	switch strings.ToUpper(name) {
	case "TRIM_HORIZON":
		if !hasTS {
			return TrimHorizon, nil
		}
	case "LATEST":
		if !hasTS {
			return Latest(), nil
		}
	case "AT_TIMESTAMP":
		t, err := time.Parse(time.RFC3339Nano, ts)
		if hasTS && err == nil {
			return AtTimestamp(t), nil
		}
	}
	return InitialPosition{}, fmt.Errorf("kinesis: initial position %q: want TRIM_HORIZON, LATEST or AT_TIMESTAMP=<RFC 3339 time, e.g. 2026-01-02T15:04:05Z>: %w", s, ErrInvalid)
}

func (p InitialPosition) validate() error {
	switch p.Type {
	case types.ShardIteratorTypeTrimHorizon, types.ShardIteratorTypeLatest:
		return nil
	case types.ShardIteratorTypeAtTimestamp:
		if !p.Timestamp.IsZero() {
			return nil
		}
	}
	return fmt.Errorf("kinesis: initial position %q: want TRIM_HORIZON, LATEST or AT_TIMESTAMP with a time: %w", p, ErrInvalid)
}

// Clock is the time the readers pace and wait by. After behaves like time.After.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Option configures New.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	initial   InitialPosition
	idle      time.Duration
	clock     Clock
	log       *slog.Logger
	trimCheck bool
	tailCalls int
}

// WithInitialPosition sets where readers of shards without a cursor start (default TrimHorizon).
// New fails with ErrInvalid for an AT_TIMESTAMP without a time or an unknown type.
func WithInitialPosition(p InitialPosition) Option {
	return optionFunc(func(c *config) { c.initial = p })
}

// WithIdleTime sets the wait after an empty GetRecords of a caught-up shard (default
// DefaultIdleTime; 0 leaves only the pacing, MinCallInterval). New fails with ErrInvalid for a
// negative d.
func WithIdleTime(d time.Duration) Option { return optionFunc(func(c *config) { c.idle = d }) }

// WithClock sets the clock (default the system's); for tests. A nil clock keeps the default.
func WithClock(clk Clock) Option {
	return optionFunc(func(c *config) {
		if clk != nil {
			c.clock = clk
		}
	})
}

// WithLogger sets the logger of the warnings (trimmed cursors) and debug lines (throttling,
// renewed iterators); default slog.Default() at each line.
func WithLogger(l *slog.Logger) Option { return optionFunc(func(c *config) { c.log = l }) }

// WithTrimCheck turns the check of Open for cursors older than the retention period on (the
// default) or off (then only an InvalidArgumentException of GetShardIterator is detected).
func WithTrimCheck(on bool) Option { return optionFunc(func(c *config) { c.trimCheck = on }) }

// Stats are counters of a Source since New, over all its readers.
type Stats struct {
	// GetRecords is the number of GetRecords calls made.
	GetRecords int64
	// Throttled is the number of GetRecords calls refused for throughput
	// (ProvisionedThroughputExceededException and other throttling errors).
	Throttled int64
	// ExpiredIterators is the number of ExpiredIteratorExceptions GetRecords answered (each is
	// followed by a new iterator, got before the next call).
	ExpiredIterators int64
	// TrimmedFallbacks is the number of Opens whose cursor was older than the retention period
	// and that fell back to TRIM_HORIZON (the records between were lost to the projection).
	TrimmedFallbacks int64
}

// Source is a Kinesis stream read as a source.Source. Create it with New.
type Source struct {
	api    API
	stream string // name or ARN
	isARN  bool
	cfg    config

	getRecords, throttled, expired, trimmed atomic.Int64
	retention                               retentionCache
}

// New returns the source for stream, a stream name or ARN ("arn:aws:kinesis:REGION:ACCOUNT:
// stream/NAME"; with an ARN every call names the stream by StreamARN), read through api. It
// makes no call. Errors: ErrInvalid for an empty stream, a nil api or an invalid option.
func New(api API, stream string, opts ...Option) (*Source, error) {
	if api == nil {
		return nil, fmt.Errorf("kinesis: no client: %w", ErrInvalid)
	}
	if stream == "" {
		return nil, fmt.Errorf("kinesis: no stream name or ARN: %w", ErrInvalid)
	}
	c := config{initial: TrimHorizon, idle: DefaultIdleTime, clock: realClock{}, trimCheck: true, tailCalls: DefaultTailCalls}
	for _, o := range opts {
		o.apply(&c)
	}
	if err := c.initial.validate(); err != nil {
		return nil, err
	}
	if c.idle < 0 {
		return nil, fmt.Errorf("kinesis: idle time %v: want 0 or more: %w", c.idle, ErrInvalid)
	}
	if c.tailCalls < 1 {
		return nil, fmt.Errorf("kinesis: tail budget of %d GetRecords calls: want 1 or more: %w", c.tailCalls, ErrInvalid)
	}
	return &Source{api: api, stream: stream, isARN: strings.HasPrefix(stream, "arn:"), cfg: c}, nil
}

// Stream returns the stream name or ARN the source was created with.
func (s *Source) Stream() string { return s.stream }

// Stats returns the source's counters.
func (s *Source) Stats() Stats {
	return Stats{
		GetRecords:       s.getRecords.Load(),
		Throttled:        s.throttled.Load(),
		ExpiredIterators: s.expired.Load(),
		TrimmedFallbacks: s.trimmed.Load(),
	}
}

func (s *Source) logger() *slog.Logger {
	if s.cfg.log != nil {
		return s.cfg.log
	}
	return slog.Default()
}

// names returns the stream's name and ARN fields for an input: one of them set.
func (s *Source) names() (name, arn *string) {
	if s.isARN {
		return nil, aws.String(s.stream)
	}
	return aws.String(s.stream), nil
}

// Shards returns every shard the stream holds, open and closed, parents before children (see
// the package doc). Errors: ErrStreamNotFound; the client's errors, wrapped.
func (s *Source) Shards(ctx context.Context) ([]source.Shard, error) {
	in := &kinesis.ListShardsInput{}
	in.StreamName, in.StreamARN = s.names()
	var listed []types.Shard
	for {
		out, err := s.api.ListShards(ctx, in)
		if err != nil {
			var nf *types.ResourceNotFoundException
			if errors.As(err, &nf) {
				return nil, fmt.Errorf("kinesis: list shards of %s: %w (%v)", s.stream, ErrStreamNotFound, err)
			}
			return nil, fmt.Errorf("kinesis: list shards of %s: %w", s.stream, err)
		}
		listed = append(listed, out.Shards...)
		if out.NextToken == nil || *out.NextToken == "" {
			break
		}
		// With a NextToken the stream must not be named again (ListShards API reference).
		in = &kinesis.ListShardsInput{NextToken: out.NextToken}
	}
	return lineageOrder(listed), nil
}

// lineageOrder maps a listing to source.Shards, drops parents the listing lacks, and orders
// parents before children (keeping the listing's order otherwise).
func lineageOrder(listed []types.Shard) []source.Shard {
	byID := make(map[string]source.Shard, len(listed))
	order := make([]string, 0, len(listed))
	for _, ks := range listed {
		id := aws.ToString(ks.ShardId)
		if _, dup := byID[id]; dup || id == "" {
			continue
		}
		sh := source.Shard{ID: id}
		for _, p := range []*string{ks.ParentShardId, ks.AdjacentParentShardId} {
			if p != nil && *p != "" {
				sh.ParentIDs = append(sh.ParentIDs, *p)
			}
		}
		if r := ks.HashKeyRange; r != nil {
			sh.HashKeyStart, sh.HashKeyEnd = aws.ToString(r.StartingHashKey), aws.ToString(r.EndingHashKey)
		}
		if r := ks.SequenceNumberRange; r != nil && r.EndingSequenceNumber != nil {
			sh.Closed = true
		}
		byID[id] = sh
		order = append(order, id)
	}
	out := make([]source.Shard, 0, len(order))
	done := make(map[string]bool, len(order))
	var visit func(id string)
	visit = func(id string) {
		if done[id] {
			return
		}
		done[id] = true // before the parents: a (malformed) cycle ends here
		sh := byID[id]
		kept := sh.ParentIDs[:0]
		for _, p := range sh.ParentIDs {
			if _, ok := byID[p]; ok {
				visit(p)
				kept = append(kept, p)
			}
		}
		if len(kept) == 0 {
			kept = nil
		}
		sh.ParentIDs = kept
		out = append(out, sh)
	}
	for _, id := range order {
		visit(id)
	}
	return out
}

// position is where an iterator starts.
type position struct {
	typ   types.ShardIteratorType
	seq   string    // AFTER_SEQUENCE_NUMBER
	ts    time.Time // AT_TIMESTAMP
	label string    // for messages
}

// Open returns a reader of shardID positioned after the sequence number after, or at the
// initial position for "" (see the package doc; a cursor older than the retention period falls
// back to TRIM_HORIZON). It calls GetShardIterator (and, for a cursor with the trim check on,
// GetShardIterator and GetRecords once more at TRIM_HORIZON). Errors: source.ErrUnknownShard
// (the stream has no such shard, or no longer has it); ErrInvalid for an after that is not a
// decimal sequence number; ErrCursorRefused for a cursor Kinesis refuses that the trim check
// found no older than the shard's oldest record; the client's errors, wrapped.
func (s *Source) Open(ctx context.Context, shardID, after string) (source.ShardReader, error) {
	if after != "" && strings.Trim(after, "0123456789") != "" {
		return nil, fmt.Errorf("kinesis: open %s after %q: not a decimal sequence number: %w", shardID, after, ErrInvalid)
	}
	r := &reader{src: s, shardID: shardID}
	switch {
	case after != "":
		r.start = position{typ: types.ShardIteratorTypeAfterSequenceNumber, seq: after, label: "after " + after}
	case s.cfg.initial.Type == types.ShardIteratorTypeLatest:
		// Renewed (after an iterator expired before any record came) AT_TIMESTAMP now.
		r.start = position{typ: types.ShardIteratorTypeLatest, ts: s.cfg.clock.Now().Add(-latestMargin), label: "LATEST"}
	default:
		r.start = position{typ: s.cfg.initial.Type, ts: s.cfg.initial.Timestamp, label: s.cfg.initial.String()}
	}
	if after != "" && s.cfg.trimCheck {
		if err := r.checkTrimmed(ctx); err != nil {
			return nil, err
		}
	}
	it, err := r.iterator(ctx, r.start)
	if err != nil && r.start.typ == types.ShardIteratorTypeAfterSequenceNumber && isInvalidArgument(err) {
		if uerr := r.unknownShard(ctx, err); uerr != nil {
			return nil, uerr
		}
		if r.cursorKept {
			return nil, fmt.Errorf("kinesis: open %s after %s (the oldest record kept is %s): %w: %v", shardID, after, r.oldest, ErrCursorRefused, err)
		}
		r.fallBack("GetShardIterator refused the cursor", "err", err)
		it, err = r.iterator(ctx, r.start)
	}
	if err != nil {
		return nil, err
	}
	r.iter = it
	return r, nil
}

// reader reads one shard. Its fields are used by the goroutine calling Read only.
type reader struct {
	src     *Source
	shardID string
	start   position // where a renewed iterator starts while no record was returned
	// iter is the iterator of the next GetRecords; nil after an ExpiredIteratorException,
	// until the next call gets a new one (renewed).
	iter  *string
	last  string // sequence number of the last record returned ("" = none)
	ended bool
	// cursorKept: the trim check found the shard's oldest record (oldest) at or before the
	// cursor.
	cursorKept bool
	oldest     string

	nextCall  time.Time // earliest time of the next GetRecords (zero: now)
	failures  int       // throttled or failed GetRecords in a row
	transient int       // transient failures in a row
	behind    int64     // last MillisBehindLatest (-1 unknown)
	lastEmpty bool      // the last GetRecords answer held no record
	calls     int       // GetRecords calls made (Tail's budget)
	lastCall  time.Time // when the last GetRecords was made
	closed    atomic.Bool
}

// iterator gets a shard iterator at pos.
func (r *reader) iterator(ctx context.Context, pos position) (*string, error) {
	s := r.src
	in := &kinesis.GetShardIteratorInput{ShardId: aws.String(r.shardID), ShardIteratorType: pos.typ}
	in.StreamName, in.StreamARN = s.names()
	switch pos.typ {
	case types.ShardIteratorTypeAfterSequenceNumber:
		in.StartingSequenceNumber = aws.String(pos.seq)
	case types.ShardIteratorTypeAtTimestamp:
		in.Timestamp = aws.Time(pos.ts)
	}
	out, err := s.api.GetShardIterator(ctx, in)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var nf *types.ResourceNotFoundException
		if errors.As(err, &nf) {
			return nil, fmt.Errorf("kinesis: open shard %s of %s: %w (%v)", r.shardID, s.stream, source.ErrUnknownShard, err)
		}
		if isInvalidArgument(err) && pos.typ != types.ShardIteratorTypeAfterSequenceNumber {
			// A malformed shard id is refused as an invalid argument.
			return nil, r.unknownShard(ctx, err)
		}
		return nil, fmt.Errorf("kinesis: get shard iterator of %s %s: %w", r.shardID, pos.label, err)
	}
	if out.ShardIterator == nil {
		return nil, fmt.Errorf("kinesis: get shard iterator of %s %s: no iterator in the answer", r.shardID, pos.label)
	}
	return out.ShardIterator, nil
}

// unknownShard returns source.ErrUnknownShard (wrapped, with cause) when the stream does not
// list the shard, nil when it does; a listing failure is returned.
func (r *reader) unknownShard(ctx context.Context, cause error) error {
	ss, err := r.src.Shards(ctx)
	if err != nil {
		return err
	}
	for _, sh := range ss {
		if sh.ID == r.shardID {
			return nil
		}
	}
	return fmt.Errorf("kinesis: open shard %s of %s: %w (%v)", r.shardID, r.src.stream, source.ErrUnknownShard, cause)
}

// fallBack moves the start to TRIM_HORIZON after a trimmed cursor, loudly.
func (r *reader) fallBack(why string, args ...any) {
	s := r.src
	s.trimmed.Add(1)
	s.logger().Warn("kinesis: the cursor's record is no longer in the shard (older than the stream's retention period): reading the shard from TRIM_HORIZON; records between the cursor and the oldest one kept are lost to the projection",
		append([]any{"stream", s.stream, "shard", r.shardID, "cursor", r.start.seq, "why", why}, args...)...)
	r.start = position{typ: types.ShardIteratorTypeTrimHorizon, label: "TRIM_HORIZON (cursor " + r.start.seq + " trimmed)"}
}

// checkTrimmed reads the shard's first remaining record at TRIM_HORIZON and falls back when it
// comes after the cursor.
func (r *reader) checkTrimmed(ctx context.Context) error {
	it, err := r.iterator(ctx, position{typ: types.ShardIteratorTypeTrimHorizon, label: "TRIM_HORIZON (trim check)"})
	if err != nil {
		return err
	}
	for page := 0; page < trimProbePages && it != nil; page++ {
		if err := r.pace(ctx); err != nil {
			return err
		}
		out, err := r.get(ctx, it, 1)
		if err != nil {
			return err
		}
		if len(out.Records) > 0 {
			first := aws.ToString(out.Records[0].SequenceNumber)
			if source.CompareSeq(first, r.start.seq) > 0 {
				r.fallBack("the first record still in the shard comes after it", "first", first)
			} else {
				r.cursorKept, r.oldest = true, first
			}
			return nil
		}
		if aws.ToInt64(out.MillisBehindLatest) <= 0 {
			return nil // an empty shard: nothing to lose
		}
		it = out.NextShardIterator
	}
	return nil
}

// get makes one GetRecords call without the SDK's retries (the reader retries itself) and
// paces the next one.
func (r *reader) get(ctx context.Context, it *string, limit int) (*kinesis.GetRecordsOutput, error) {
	s := r.src
	in := &kinesis.GetRecordsInput{ShardIterator: it, Limit: aws.Int32(int32(limit))}
	if s.isARN {
		in.StreamARN = aws.String(s.stream)
	}
	at := s.cfg.clock.Now()
	s.getRecords.Add(1)
	r.calls++
	r.lastCall = at
	out, err := s.api.GetRecords(ctx, in, func(o *kinesis.Options) { o.RetryMaxAttempts = 1 })
	r.nextCall = at.Add(MinCallInterval)
	if err != nil {
		return nil, err
	}
	n := 0
	for _, rec := range out.Records {
		n += len(rec.Data)
	}
	if d := time.Duration(float64(n) / MaxReadBytesPerSecond * float64(time.Second)); d > MinCallInterval {
		r.nextCall = at.Add(d)
	}
	return out, nil
}

// pace sleeps until the next call is due.
func (r *reader) pace(ctx context.Context) error {
	_, err := r.sleepUntil(ctx, r.nextCall, time.Time{})
	return err
}

// sleepUntil sleeps until t, or only until deadline (non-zero) when that comes first; due
// reports whether t was reached.
func (r *reader) sleepUntil(ctx context.Context, t, deadline time.Time) (due bool, err error) {
	clk := r.src.cfg.clock
	due = true
	if !deadline.IsZero() && t.After(deadline) {
		t, due = deadline, false
	}
	if d := t.Sub(clk.Now()); d > 0 {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-clk.After(d):
		}
	}
	return due, nil
}

// Read returns up to max records (MaxRead when max <= 0 or above it) after the last one
// returned, waiting up to wait (see the package doc for the pacing and retries). Errors:
// source.ErrShardEnded after a closed shard's last records; the context's error as is;
// ErrReaderClosed after Close; GetRecords errors that are not retried, and the last transient
// one after MaxTransientRetries, wrapped.
func (r *reader) Read(ctx context.Context, n int, wait time.Duration) (source.Batch, error) {
	if err := ctx.Err(); err != nil {
		return source.Batch{}, err
	}
	if r.closed.Load() {
		return source.Batch{}, fmt.Errorf("kinesis: read %s: %w", r.shardID, ErrReaderClosed)
	}
	if r.ended {
		return source.Batch{}, fmt.Errorf("kinesis: read %s: %w", r.shardID, source.ErrShardEnded)
	}
	if n <= 0 || n > MaxRead {
		n = MaxRead
	}
	s := r.src
	deadline := s.cfg.clock.Now().Add(max(wait, 0))
	// An empty batch returned without a call (the next one not due by the deadline) says how
	// far behind the last answer was; after an answer with records at MillisBehindLatest 0
	// that is unknown (records put in the same millisecond as the tip may follow: only an
	// empty answer at 0 is the tip), and so before the first answer.
	empty := source.Batch{MillisBehind: r.behind, EventsBehind: -1}
	if r.behind == 0 && !r.lastEmpty {
		empty.MillisBehind = -1
	}
	for {
		due, err := r.sleepUntil(ctx, r.nextCall, deadline)
		if err != nil || !due {
			return empty, err
		}
		if r.iter == nil {
			if r.iter, err = r.renewed(ctx); err != nil {
				return source.Batch{}, err
			}
		}
		out, err := r.get(ctx, r.iter, n)
		if err != nil {
			if ctx.Err() != nil {
				return source.Batch{}, ctx.Err()
			}
			if err := r.retry(ctx, err); err != nil {
				return source.Batch{}, err
			}
			continue
		}
		r.failures, r.transient = 0, 0
		r.behind = -1
		if out.MillisBehindLatest != nil {
			r.behind = max(*out.MillisBehindLatest, 0)
		}
		r.lastEmpty = len(out.Records) == 0
		evs := make([]source.Event, 0, len(out.Records))
		for _, rec := range out.Records {
			seq := aws.ToString(rec.SequenceNumber)
			if r.last != "" && source.CompareSeq(seq, r.last) <= 0 {
				continue // already returned (never seen from Kinesis: a guard)
			}
			e := source.Event{ShardID: r.shardID, Seq: seq, PartitionKey: aws.ToString(rec.PartitionKey), Data: rec.Data}
			if e.Data == nil {
				e.Data = []byte{}
			}
			if rec.ApproximateArrivalTimestamp != nil {
				e.ArrivalMs = rec.ApproximateArrivalTimestamp.UnixMilli()
			}
			evs = append(evs, e)
		}
		if out.NextShardIterator == nil || *out.NextShardIterator == "" {
			r.ended = true
		} else {
			r.iter = out.NextShardIterator
		}
		if len(evs) > 0 {
			r.last = evs[len(evs)-1].Seq
			return source.Batch{Events: evs, MillisBehind: r.behind, EventsBehind: -1}, nil
		}
		if r.ended {
			return source.Batch{}, fmt.Errorf("kinesis: read %s: %w", r.shardID, source.ErrShardEnded)
		}
		empty.MillisBehind = r.behind
		if r.behind <= 0 { // caught up (or unknown) and empty: idle
			// get set nextCall to the call's time + MinCallInterval (no bytes came).
			if t := r.nextCall.Add(s.cfg.idle - MinCallInterval); t.After(r.nextCall) {
				r.nextCall = t
			}
		}
	}
}

// renewed gets the iterator that replaces an expired one, right before the call that uses it:
// AFTER_SEQUENCE_NUMBER the last record returned, or the start position before any (LATEST as
// AT_TIMESTAMP of the open). Getting it then rather than when the expiry was answered keeps a
// renewed iterator from expiring in turn while the caller waits between Reads (an idle shard's
// next Read may come a second later, past an expiry shorter than that).
func (r *reader) renewed(ctx context.Context) (*string, error) {
	pos := r.start
	if r.last != "" {
		pos = position{typ: types.ShardIteratorTypeAfterSequenceNumber, seq: r.last, label: "after " + r.last}
	} else if pos.typ == types.ShardIteratorTypeLatest {
		pos = position{typ: types.ShardIteratorTypeAtTimestamp, ts: pos.ts, label: "AT_TIMESTAMP of the LATEST reader's open"}
	}
	r.src.logger().Debug("kinesis: shard iterator expired: getting a new one", "stream", r.src.stream, "shard", r.shardID, "at", pos.label)
	return r.iterator(ctx, pos)
}

// retry handles a failed GetRecords: a new iterator after an expiry (got by the next call), a
// backoff after throttling or a transient error; any other error (and too many transient
// ones) is returned.
func (r *reader) retry(ctx context.Context, err error) error {
	s := r.src
	log := s.logger()
	var expired *types.ExpiredIteratorException
	switch {
	case errors.As(err, &expired):
		s.expired.Add(1)
		r.iter = nil
		return nil
	case isThrottle(err):
		s.throttled.Add(1)
		r.backoff()
		log.Debug("kinesis: GetRecords throttled: backing off", "stream", s.stream, "shard", r.shardID, "err", err)
		return nil
	case isTransient(err):
		r.transient++
		if r.transient > MaxTransientRetries {
			return fmt.Errorf("kinesis: GetRecords on %s failed %d times in a row: %w", r.shardID, r.transient, err)
		}
		r.backoff()
		log.Debug("kinesis: GetRecords failed: retrying", "stream", s.stream, "shard", r.shardID, "err", err)
		return nil
	}
	return fmt.Errorf("kinesis: GetRecords on %s: %w", r.shardID, err)
}

// backoff moves the next call ThrottleBackoffMin * 2^failures (at most ThrottleBackoffMax),
// jittered to between half of it and all of it, from now.
func (r *reader) backoff() {
	d := ThrottleBackoffMax
	if r.failures < 16 {
		d = min(ThrottleBackoffMin<<r.failures, ThrottleBackoffMax)
	}
	r.failures++
	d = d/2 + rand.N(d/2+1)
	if t := r.src.cfg.clock.Now().Add(d); t.After(r.nextCall) {
		r.nextCall = t
	}
}

// Close makes later Reads fail with ErrReaderClosed. It holds no resources and never fails.
func (r *reader) Close() error {
	r.closed.Store(true)
	return nil
}

func isInvalidArgument(err error) bool {
	var ia *types.InvalidArgumentException
	if errors.As(err, &ia) {
		return true
	}
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == "ValidationException"
}

// isThrottle: Kinesis' ProvisionedThroughputExceededException, KMSThrottlingException and
// LimitExceededException, and whatever the SDK's standard retryer counts as throttling.
func isThrottle(err error) bool {
	var pt *types.ProvisionedThroughputExceededException
	var kt *types.KMSThrottlingException
	var le *types.LimitExceededException
	if errors.As(err, &pt) || errors.As(err, &kt) || errors.As(err, &le) {
		return true
	}
	return retry.IsErrorThrottles(retry.DefaultThrottles).IsErrorThrottle(err) == aws.TrueTernary
}

// isTransient: what the SDK's standard retryer retries (5xx, timeouts, connection errors), and
// the service's server-side faults (InternalFailureException).
func isTransient(err error) bool {
	var ae smithy.APIError
	if errors.As(err, &ae) && ae.ErrorFault() == smithy.FaultServer {
		return true
	}
	return retry.IsErrorRetryables(retry.DefaultRetryables).IsErrorRetryable(err) == aws.TrueTernary
}

var _ source.Source = (*Source)(nil)
