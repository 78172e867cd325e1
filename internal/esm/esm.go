// Package esm is a test-side stand-in for AWS Lambda's Kinesis event source mapping (ESM): it
// polls each shard of a stream on a Kinesis-compatible server (kinesis-local), batches the
// records, builds the events.KinesisEvent the service would send, and invokes the function
// through an Invoker — the real bootstrap under the AWS Lambda Runtime Interface Emulator
// (Emulator), or a handler called in-process (HandlerInvoker) — honouring the mapping's
// settings the way the service does.
//
// # What it does, as the service does
//
//   - Shards: ListShards; one loop per shard, with one batch in flight per shard
//     (ParallelizationFactor 1). A shard starts from its checkpoint (AFTER_SEQUENCE_NUMBER) or,
//     without one, at StartingPosition (TRIM_HORIZON or LATEST). A closed shard is read to its
//     end; a child shard starts only after its parents (those still listed) ended, so a key's
//     records stay in order across resharding.
//   - Batching: a batch is up to BatchSize records of one shard, delivered as soon as BatchSize
//     records are read, or MaximumBatchingWindow after the first of them was read (at once with
//     a window of 0), or at the shard's end; and at most 6 MB of event (payload limit).
//   - The event: every record with eventID "<shardId>:<sequenceNumber>", eventName
//     "aws:kinesis:record", eventSource "aws:kinesis", eventVersion "1.0", eventSourceARN (the
//     stream's ARN), awsRegion, invokeIdentityArn, and kinesis {kinesisSchemaVersion "1.0",
//     partitionKey, sequenceNumber, data (base64), approximateArrivalTimestamp (epoch seconds)}
//     (Event).
//   - Responses (ReportBatchItemFailures): no failures (absent, null or empty
//     batchItemFailures) is a success: the shard is checkpointed at the batch's last record.
//     Failures naming records of the batch: the checkpoint moves to just before the lowest of
//     them and the batch is retried from it (the remaining records only). An empty, null or
//     unknown itemIdentifier, or a response that is not JSON, fails the whole batch.
//   - Function errors (the function returned an error, crashed, timed out; the emulator's
//     non-200 answers): the whole batch is retried; with BisectBatchOnFunctionError a batch of
//     more than one record is split in halves first, the first half retried, then the second
//     (splitting does not count as a retry).
//   - MaximumRetryAttempts (-1: for ever) and MaximumRecordAge (0 or -1: for ever): a batch
//     that failed more times than allowed, or whose records are older than allowed, is given
//     up: an on-failure record (FailureRecord, shaped like AWS's, condition
//     RetryAttemptsExhausted or RecordAgeExceeded, with the sequence range only) goes to
//     OnFailure, the shard is checkpointed past the batch and goes on.
//
// # What differs from AWS
//
//   - Checkpoints live in memory (Driver.Checkpoints; Config.Checkpoints to start from some):
//     a new Driver without them starts at StartingPosition.
//   - Records read are kept in memory between retries instead of being read again.
//   - Retry counting: a batch's retry count restarts when a partial failure moves the checkpoint
//     (AWS does not document this case). Failures to invoke at all (the Invoker's errors: the
//     emulator not reachable) are retried with a backoff without counting, like the service's
//     throttles, until MaximumRecordAge.
//   - A whole-batch failure from a bad partial response is bisected like a function error under
//     BisectBatchOnFunctionError.
//   - The backoff between retries is RetryBackoff, doubling up to 1 s (AWS: exponential, not
//     documented).
//   - Not modelled: ParallelizationFactor > 1, tumbling windows, filters, enhanced fan-out
//     consumers, AT_TIMESTAMP, the Lambda payload limit beyond an estimate of the event's size,
//     invocation throttling and concurrency limits, on-failure destinations other than a Go
//     function (FileDestination writes JSON lines), the service's iterator-age metrics.
package esm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/google/uuid"

	"github.com/projhost/projhost/internal/durations"
)

// KinesisAPI is the part of the Kinesis Data Streams client the driver calls.
type KinesisAPI interface {
	ListShards(context.Context, *kinesis.ListShardsInput, ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error)
	GetShardIterator(context.Context, *kinesis.GetShardIteratorInput, ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error)
	GetRecords(context.Context, *kinesis.GetRecordsInput, ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error)
}

// Limits and defaults of the service.
const (
	DefaultBatchSize = 100
	MaxBatchSize     = 10000
	// MaxPayload is the largest synchronous invocation payload: 6 MB.
	MaxPayload = 6 * 1024 * 1024
	// MaxRead is GetRecords' largest Limit.
	MaxRead = 10000
)

// Conditions of a FailureRecord.
const (
	RetryAttemptsExhausted = "RetryAttemptsExhausted"
	RecordAgeExceeded      = "RecordAgeExceeded"
)

// Config configures a Driver. Field names follow the event source mapping's settings.
type Config struct {
	// Kinesis is the client; StreamARN the stream's ARN (ListShards takes it; it is every
	// record's eventSourceARN). Required.
	Kinesis   KinesisAPI
	StreamARN string
	// Invoker invokes the function. Required.
	Invoker Invoker
	// Region is every record's awsRegion (default: the ARN's region).
	Region string
	// FunctionARN is the on-failure records' functionArn (default a made-up one in Region).
	FunctionARN string
	// StartingPosition of a shard without a checkpoint: TRIM_HORIZON (default) or LATEST.
	StartingPosition types.ShardIteratorType
	// BatchSize: the most records per invocation (default DefaultBatchSize, at most
	// MaxBatchSize).
	BatchSize int
	// MaximumBatchingWindow: how long to gather records before invoking with fewer than
	// BatchSize (0: invoke as soon as there are records).
	MaximumBatchingWindow time.Duration
	// ReportBatchItemFailures is FunctionResponseTypes [ReportBatchItemFailures]: the response's
	// batchItemFailures are read. Without it any response without a function error is a
	// success.
	ReportBatchItemFailures bool
	// BisectBatchOnFunctionError splits a batch in halves on a function error.
	BisectBatchOnFunctionError bool
	// MaximumRetryAttempts: retries of a failing batch before it is given up; -1 retries for
	// ever (the service's default). Note that 0, Go's zero value, means no retry.
	MaximumRetryAttempts int
	// MaximumRecordAge: records older than this (by approximateArrivalTimestamp) are given up
	// rather than invoked; 0 or -1: no limit (the service's default).
	MaximumRecordAge time.Duration
	// OnFailure receives the on-failure record of each batch given up (nil: dropped).
	OnFailure func(FailureRecord)
	// Checkpoints are the shards' checkpoints to start from (the last sequence number done).
	Checkpoints map[string]string
	// PollInterval is the pause after a read that found no new record (default 1 s, the
	// service's pace for an idle shard).
	PollInterval time.Duration
	// RetryBackoff is the first pause before retrying a failed batch (default 100 ms; doubling
	// up to 1 s).
	RetryBackoff time.Duration
	// ShardRefresh is how often Run lists the shards again (default 5 s).
	ShardRefresh time.Duration
	// Hooks observe the driver.
	Hooks Hooks
	// Logger (default slog.Default()).
	Logger *slog.Logger
}

// Hooks are called from the shard loops (concurrently across shards).
type Hooks struct {
	// Invoke is called before each invocation, with the shard and the batch's records.
	Invoke func(shardID string, recs []types.Record)
	// Invoked is called after each invocation.
	Invoked func(InvokeInfo)
	// Checkpoint is called when a shard's checkpoint moves.
	Checkpoint func(shardID, seq string)
}

// Outcome of an invocation, as the driver took it.
type Outcome string

const (
	Success      Outcome = "success"
	Partial      Outcome = "partial"       // some records reported failed
	BatchFailure Outcome = "batch-failure" // a response failing the whole batch (bad or unknown identifier, not JSON)
	FuncError    Outcome = "function-error"
	InvokeError  Outcome = "invoke-error" // the Invoker failed: no response
)

// InvokeInfo describes one invocation.
type InvokeInfo struct {
	ShardID       string
	First, Last   string // sequence numbers
	Records       int
	Duration      time.Duration
	Outcome       Outcome
	StatusCode    int      // the Result's
	FunctionError string   // the Result's
	Failures      []string // the reported itemIdentifiers
	Payload       []byte   // the response
	Err           error    // the Invoker's
}

// FailureRecord is the on-failure destination's record for a Kinesis batch given up, as the
// service sends it (to SQS, SNS, S3 or Kafka).
type FailureRecord struct {
	RequestContext   RequestContext   `json:"requestContext"`
	ResponseContext  ResponseContext  `json:"responseContext"`
	Version          string           `json:"version"`
	Timestamp        string           `json:"timestamp"`
	KinesisBatchInfo KinesisBatchInfo `json:"KinesisBatchInfo"`
}

// RequestContext of a FailureRecord.
type RequestContext struct {
	RequestID              string `json:"requestId"`
	FunctionARN            string `json:"functionArn"`
	Condition              string `json:"condition"`
	ApproximateInvokeCount int    `json:"approximateInvokeCount"`
}

// ResponseContext of a FailureRecord: the last invocation's (status 0 when none was made).
type ResponseContext struct {
	StatusCode      int    `json:"statusCode"`
	ExecutedVersion string `json:"executedVersion"`
	FunctionError   string `json:"functionError,omitempty"`
}

// KinesisBatchInfo of a FailureRecord: the records given up, by range (no data).
type KinesisBatchInfo struct {
	ShardID                         string `json:"shardId"`
	StartSequenceNumber             string `json:"startSequenceNumber"`
	EndSequenceNumber               string `json:"endSequenceNumber"`
	ApproximateArrivalOfFirstRecord string `json:"approximateArrivalOfFirstRecord"`
	ApproximateArrivalOfLastRecord  string `json:"approximateArrivalOfLastRecord"`
	BatchSize                       int    `json:"batchSize"`
	StreamARN                       string `json:"streamArn"`
}

// Driver runs an event source mapping. Create it with New.
type Driver struct {
	cfg Config
	log *slog.Logger

	mu          sync.Mutex
	checkpoints map[string]string
}

// ErrConfig is wrapped by New's errors.
var ErrConfig = errors.New("esm: bad configuration")

// New checks cfg, fills in its defaults and returns a Driver.
func New(cfg Config) (*Driver, error) {
	arn := strings.Split(cfg.StreamARN, ":")
	switch {
	case cfg.Kinesis == nil || cfg.Invoker == nil:
		return nil, fmt.Errorf("%w: a Kinesis client and an Invoker are required", ErrConfig)
	case len(arn) != 6 || arn[2] != "kinesis":
		return nil, fmt.Errorf("%w: stream ARN %q", ErrConfig, cfg.StreamARN)
	case cfg.BatchSize < 0 || cfg.BatchSize > MaxBatchSize:
		return nil, fmt.Errorf("%w: batch size %d", ErrConfig, cfg.BatchSize)
	case cfg.MaximumRetryAttempts < -1:
		return nil, fmt.Errorf("%w: maximum retry attempts %d", ErrConfig, cfg.MaximumRetryAttempts)
	case cfg.StartingPosition != "" && cfg.StartingPosition != types.ShardIteratorTypeTrimHorizon &&
		cfg.StartingPosition != types.ShardIteratorTypeLatest:
		return nil, fmt.Errorf("%w: starting position %s", ErrConfig, cfg.StartingPosition)
	}
	if cfg.Region == "" {
		cfg.Region = arn[3]
	}
	if cfg.FunctionARN == "" {
		cfg.FunctionARN = fmt.Sprintf("arn:aws:lambda:%s:%s:function:projhost", cfg.Region, arn[4])
	}
	if cfg.StartingPosition == "" {
		cfg.StartingPosition = types.ShardIteratorTypeTrimHorizon
	}
	if cfg.BatchSize == 0 {
		cfg.BatchSize = DefaultBatchSize
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = time.Second
	}
	if cfg.RetryBackoff <= 0 {
		cfg.RetryBackoff = 100 * time.Millisecond
	}
	if cfg.ShardRefresh <= 0 {
		cfg.ShardRefresh = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	d := &Driver{cfg: cfg, log: cfg.Logger.With("stream", cfg.StreamARN), checkpoints: map[string]string{}}
	maps.Copy(d.checkpoints, cfg.Checkpoints)
	return d, nil
}

// Checkpoints returns a copy of the shards' checkpoints (the last sequence number done).
func (d *Driver) Checkpoints() map[string]string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return maps.Clone(d.checkpoints)
}

func (d *Driver) checkpoint(shardID string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.checkpoints[shardID]
}

func (d *Driver) setCheckpoint(shardID, seq string) {
	d.mu.Lock()
	d.checkpoints[shardID] = seq
	d.mu.Unlock()
	if d.cfg.Hooks.Checkpoint != nil {
		d.cfg.Hooks.Checkpoint(shardID, seq)
	}
}

// Run runs the mapping until ctx ends (it then returns nil), listing the shards again every
// ShardRefresh for new ones. Errors: ListShards failing for a minute.
func (d *Driver) Run(ctx context.Context) error {
	err := d.run(ctx, false)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// RunToTip runs the mapping until every shard is done: a closed shard read to its end, an
// open one to its tip (a read finding nothing, MillisBehindLatest 0) with every record read
// checkpointed or given up; then it lists the shards once more and returns nil unless new
// ones appeared. Errors: ctx's, ListShards failing for a minute.
func (d *Driver) RunToTip(ctx context.Context) error { return d.run(ctx, true) }

type shardState struct {
	shard   types.Shard
	started bool
	ended   bool // a closed shard read to its end
}

func (d *Driver) run(ctx context.Context, toTip bool) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	states := map[string]*shardState{}
	type finished struct {
		id    string
		ended bool
		err   error
	}
	done := make(chan finished)
	running := 0
	defer func() {
		cancel()
		for ; running > 0; running-- {
			<-done
		}
	}()
	refresh := time.NewTicker(d.cfg.ShardRefresh)
	defer refresh.Stop()
	for {
		shards, err := d.listShards(ctx)
		if err != nil {
			return err
		}
		started := 0
		for _, s := range shards {
			id := aws.ToString(s.ShardId)
			st := states[id]
			if st == nil {
				st = &shardState{shard: s}
				states[id] = st
			}
			if st.started || !d.parentsEnded(states, s) {
				continue
			}
			st.started = true
			started++
			running++
			go func() {
				ended, err := d.runShard(ctx, id, toTip)
				done <- finished{id, ended, err}
			}()
		}
		if toTip && running == 0 && started == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case f := <-done:
			running--
			if f.err != nil && ctx.Err() == nil {
				return fmt.Errorf("esm: shard %s: %w", f.id, f.err)
			}
			states[f.id].ended = f.ended
			if !f.ended && !toTip { // cannot happen: Run's loops end with the shard or ctx
				states[f.id].started = false
			}
		case <-refresh.C:
		}
	}
}

// parentsEnded reports whether s's parents that are listed have been read to their end.
func (d *Driver) parentsEnded(states map[string]*shardState, s types.Shard) bool {
	for _, p := range []*string{s.ParentShardId, s.AdjacentParentShardId} {
		if p == nil {
			continue
		}
		if st, ok := states[*p]; ok && !st.ended {
			return false
		}
	}
	return true
}

func (d *Driver) listShards(ctx context.Context) ([]types.Shard, error) {
	var out []types.Shard
	var next *string
	deadline := time.Now().Add(time.Minute)
	for {
		in := &kinesis.ListShardsInput{StreamARN: aws.String(d.cfg.StreamARN)}
		if next != nil {
			in = &kinesis.ListShardsInput{NextToken: next}
		}
		r, err := d.cfg.Kinesis.ListShards(ctx, in)
		if err != nil {
			if ctx.Err() != nil || time.Now().After(deadline) {
				return nil, fmt.Errorf("esm: list shards: %w", err)
			}
			d.log.Warn("esm: list shards failed: trying again", "err", err)
			if !durations.Sleep(ctx, time.Second) {
				return nil, ctx.Err()
			}
			continue
		}
		out = append(out, r.Shards...)
		if r.NextToken == nil {
			return out, nil
		}
		next = r.NextToken
	}
}

// shardLoop is one shard's reading state.
type shardLoop struct {
	d        *Driver
	id       string
	iter     *string
	lastRead string // sequence number of the last record read
	pending  []types.Record
	firstAt  time.Time // when the first pending record was read
	ended    bool      // no NextShardIterator: nothing more to read
	atTip    bool      // the last read found nothing at MillisBehindLatest 0
	behind   bool      // the last read found records, or MillisBehindLatest > 0
}

// runShard runs one shard until it ended (true), or ctx ended, or (toTip) it is at its tip.
func (d *Driver) runShard(ctx context.Context, id string, toTip bool) (bool, error) {
	l := &shardLoop{d: d, id: id, lastRead: d.checkpoint(id)}
	for {
		if !l.ended && len(l.pending) < d.cfg.BatchSize {
			if err := l.read(ctx); err != nil {
				return false, err
			}
		}
		if n := l.ready(); n > 0 {
			batch := l.pending[:n:n]
			if err := d.deliver(ctx, id, batch); err != nil {
				return false, err
			}
			l.pending = l.pending[n:]
			l.firstAt = time.Time{}
			if len(l.pending) > 0 {
				l.firstAt = time.Now()
			}
			continue
		}
		if len(l.pending) == 0 {
			if l.ended {
				return true, nil
			}
			if toTip && l.atTip {
				return false, nil
			}
		}
		if l.behind && len(l.pending) < d.cfg.BatchSize {
			continue
		}
		wait := d.cfg.PollInterval
		if !l.firstAt.IsZero() {
			wait = min(wait, time.Until(l.firstAt.Add(d.cfg.MaximumBatchingWindow)))
		}
		if !durations.Sleep(ctx, max(wait, time.Millisecond)) {
			return false, ctx.Err()
		}
	}
}

// ready returns how many pending records make the next batch now (0: wait).
func (l *shardLoop) ready() int {
	cfg := l.d.cfg
	if len(l.pending) == 0 {
		return 0
	}
	if len(l.pending) < cfg.BatchSize && !l.ended && time.Since(l.firstAt) < cfg.MaximumBatchingWindow {
		return 0
	}
	n, size := 0, 64
	for _, r := range l.pending[:min(len(l.pending), cfg.BatchSize)] {
		size += recordSize(r)
		if n > 0 && size > MaxPayload {
			break
		}
		n++
	}
	return n
}

// recordSize estimates a record's size in the event's JSON.
func recordSize(r types.Record) int {
	return (len(r.Data)+2)/3*4 + len(aws.ToString(r.PartitionKey)) + 2*len(aws.ToString(r.SequenceNumber)) + 450
}

// read makes one GetRecords call (getting an iterator first when needed), retrying errors.
func (l *shardLoop) read(ctx context.Context) error {
	d := l.d
	for try := 0; ; try++ {
		if try > 0 && !durations.Sleep(ctx, min(time.Duration(try)*200*time.Millisecond, 2*time.Second)) {
			return ctx.Err()
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if l.iter == nil {
			in := &kinesis.GetShardIteratorInput{StreamARN: aws.String(d.cfg.StreamARN), ShardId: aws.String(l.id),
				ShardIteratorType: d.cfg.StartingPosition}
			if l.lastRead != "" {
				in.ShardIteratorType, in.StartingSequenceNumber = types.ShardIteratorTypeAfterSequenceNumber, aws.String(l.lastRead)
			}
			out, err := d.cfg.Kinesis.GetShardIterator(ctx, in)
			if err != nil {
				d.log.Warn("esm: get shard iterator failed: trying again", "shard", l.id, "err", err)
				continue
			}
			l.iter = out.ShardIterator
		}
		out, err := d.cfg.Kinesis.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: l.iter, Limit: aws.Int32(MaxRead),
			StreamARN: aws.String(d.cfg.StreamARN)})
		if err != nil {
			var expired *types.ExpiredIteratorException
			if errors.As(err, &expired) {
				l.iter = nil
			}
			d.log.Warn("esm: get records failed: trying again", "shard", l.id, "err", err)
			continue
		}
		if len(out.Records) > 0 {
			if len(l.pending) == 0 {
				l.firstAt = time.Now()
			}
			l.pending = append(l.pending, out.Records...)
			l.lastRead = aws.ToString(out.Records[len(out.Records)-1].SequenceNumber)
		}
		behind := aws.ToInt64(out.MillisBehindLatest)
		l.atTip = len(out.Records) == 0 && behind == 0
		l.behind = len(out.Records) > 0 || behind > 0
		l.iter = out.NextShardIterator
		l.ended = out.NextShardIterator == nil
		return nil
	}
}

// deliver invokes the function with batch until every record of it is checkpointed or given
// up (the package documentation). Errors: ctx's only.
func (d *Driver) deliver(ctx context.Context, shardID string, batch []types.Record) error {
	queue := [][]types.Record{batch}
	attempts, invokes := 0, 0 // failed invocations of queue[0] since its start last moved; all invocations
	var last *Result
	giveUp := func(recs []types.Record, condition string) {
		d.failure(shardID, recs, condition, invokes, last)
		d.setCheckpoint(shardID, seqOf(recs[len(recs)-1]))
		attempts, invokes, last = 0, 0, nil
	}
	for len(queue) > 0 {
		b := queue[0]
		if age := d.cfg.MaximumRecordAge; age > 0 {
			n := 0
			for n < len(b) && time.Since(aws.ToTime(b[n].ApproximateArrivalTimestamp)) > age {
				n++
			}
			if n > 0 {
				giveUp(b[:n], RecordAgeExceeded)
				if b = b[n:]; len(b) == 0 {
					queue = queue[1:]
					continue
				}
				queue[0] = b
			}
		}
		res, info := d.invoke(ctx, shardID, b)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if info.Outcome != InvokeError {
			invokes++
			last = &res
		}
		switch info.Outcome {
		case Success:
			d.setCheckpoint(shardID, seqOf(b[len(b)-1]))
			queue, attempts, invokes, last = queue[1:], 0, 0, nil
			continue
		case Partial:
			lowest := len(b)
			for _, id := range info.Failures {
				for i, r := range b {
					if seqOf(r) == id && i < lowest {
						lowest = i
					}
				}
			}
			if lowest > 0 {
				d.setCheckpoint(shardID, seqOf(b[lowest-1]))
				attempts = 0
			}
			queue[0] = b[lowest:]
			attempts++
		case FuncError, BatchFailure:
			if d.cfg.BisectBatchOnFunctionError && len(b) > 1 {
				h := len(b) / 2
				queue = append([][]types.Record{b[:h], b[h:]}, queue[1:]...)
				continue
			}
			attempts++
		case InvokeError:
			d.log.Warn("esm: invoke failed: trying again", "shard", shardID, "err", info.Err)
		}
		if m := d.cfg.MaximumRetryAttempts; m >= 0 && attempts > m {
			giveUp(queue[0], RetryAttemptsExhausted)
			queue = queue[1:]
			continue
		}
		backoff := d.cfg.RetryBackoff
		for i := 1; i < attempts && backoff < time.Second; i++ {
			backoff *= 2
		}
		if !durations.Sleep(ctx, min(backoff, time.Second)) {
			return ctx.Err()
		}
	}
	return nil
}

// invoke makes one invocation of b and classifies its response.
func (d *Driver) invoke(ctx context.Context, shardID string, b []types.Record) (Result, InvokeInfo) {
	info := InvokeInfo{ShardID: shardID, First: seqOf(b[0]), Last: seqOf(b[len(b)-1]), Records: len(b)}
	payload, err := json.Marshal(Event(d.cfg.StreamARN, d.cfg.Region, shardID, b))
	if err != nil {
		panic(err) // a KinesisEvent always marshals
	}
	if d.cfg.Hooks.Invoke != nil {
		d.cfg.Hooks.Invoke(shardID, b)
	}
	start := time.Now()
	res, err := d.cfg.Invoker.Invoke(ctx, shardID, payload)
	info.Duration = time.Since(start)
	info.Payload, info.StatusCode, info.FunctionError, info.Err = res.Payload, res.StatusCode, res.FunctionError, err
	switch {
	case err != nil:
		info.Outcome = InvokeError
	case res.FunctionError != "":
		info.Outcome = FuncError
	case !d.cfg.ReportBatchItemFailures:
		info.Outcome = Success
	default:
		info.Failures, info.Outcome = d.failures(res.Payload, b)
	}
	if d.cfg.Hooks.Invoked != nil {
		d.cfg.Hooks.Invoked(info)
	}
	return res, info
}

// failures reads a response's batchItemFailures: Success (none), Partial (every identifier
// names a record of b) or BatchFailure.
func (d *Driver) failures(payload []byte, b []types.Record) ([]string, Outcome) {
	var resp struct {
		BatchItemFailures []struct {
			ItemIdentifier *string `json:"itemIdentifier"`
		} `json:"batchItemFailures"`
	}
	if err := json.Unmarshal(payload, &resp); err != nil {
		return nil, BatchFailure
	}
	if len(resp.BatchItemFailures) == 0 {
		return nil, Success
	}
	known := make(map[string]bool, len(b))
	for _, r := range b {
		known[seqOf(r)] = true
	}
	var ids []string
	out := Partial
	for _, f := range resp.BatchItemFailures {
		id := aws.ToString(f.ItemIdentifier)
		ids = append(ids, id)
		if !known[id] {
			out = BatchFailure
		}
	}
	return ids, out
}

// failure sends the on-failure record of recs.
func (d *Driver) failure(shardID string, recs []types.Record, condition string, invokes int, last *Result) {
	d.log.Warn("esm: batch given up", "shard", shardID, "condition", condition, "first", seqOf(recs[0]),
		"last", seqOf(recs[len(recs)-1]), "records", len(recs))
	if d.cfg.OnFailure == nil {
		return
	}
	fr := FailureRecord{
		RequestContext: RequestContext{RequestID: uuid.NewString(), FunctionARN: d.cfg.FunctionARN, Condition: condition,
			ApproximateInvokeCount: invokes},
		Version:   "1.0",
		Timestamp: isoMillis(time.Now()),
		KinesisBatchInfo: KinesisBatchInfo{ShardID: shardID, StartSequenceNumber: seqOf(recs[0]),
			EndSequenceNumber:               seqOf(recs[len(recs)-1]),
			ApproximateArrivalOfFirstRecord: isoMillis(aws.ToTime(recs[0].ApproximateArrivalTimestamp)),
			ApproximateArrivalOfLastRecord:  isoMillis(aws.ToTime(recs[len(recs)-1].ApproximateArrivalTimestamp)),
			BatchSize:                       len(recs), StreamARN: d.cfg.StreamARN},
	}
	if last != nil {
		fr.ResponseContext = ResponseContext{StatusCode: last.StatusCode, ExecutedVersion: "$LATEST", FunctionError: last.FunctionError}
	}
	d.cfg.OnFailure(fr)
}

func isoMillis(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

func seqOf(r types.Record) string { return aws.ToString(r.SequenceNumber) }

// Event is the event the service sends for recs of a shard of the stream streamARN (in
// region).
func Event(streamARN, region, shardID string, recs []types.Record) events.KinesisEvent {
	account := "123456789012"
	if p := strings.Split(streamARN, ":"); len(p) == 6 {
		account = p[4]
	}
	out := events.KinesisEvent{Records: make([]events.KinesisEventRecord, len(recs))}
	for i, r := range recs {
		k := events.KinesisRecord{KinesisSchemaVersion: "1.0", PartitionKey: aws.ToString(r.PartitionKey),
			SequenceNumber: seqOf(r), Data: r.Data,
			ApproximateArrivalTimestamp: events.SecondsEpochTime{Time: aws.ToTime(r.ApproximateArrivalTimestamp)}}
		if r.EncryptionType == types.EncryptionTypeKms {
			k.EncryptionType = string(r.EncryptionType)
		}
		if k.Data == nil {
			k.Data = []byte{}
		}
		out.Records[i] = events.KinesisEventRecord{AwsRegion: region, EventID: shardID + ":" + seqOf(r),
			EventName: "aws:kinesis:record", EventSource: "aws:kinesis", EventSourceArn: streamARN, EventVersion: "1.0",
			InvokeIdentityArn: "arn:aws:iam::" + account + ":role/projhost-esm", Kinesis: k}
	}
	return out
}

// SortedShards returns the keys of m in order (for logs and tests).
func SortedShards[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
