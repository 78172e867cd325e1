// Package kinesisadmin is what `projhost kinesis` does to a stream besides reading it: wait
// until it is ACTIVE, put records in PutRecords batches within the service's limits (retrying
// only the refused entries), and find shards for split and merge. Sources of the limits:
// Amazon Kinesis Data Streams API reference, PutRecords ("Each PutRecords request can support
// up to 500 records. Each record in the request can be as large as 1 MiB, up to a limit of
// 5 MiB for the entire request, including partition keys").
package kinesisadmin

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// PutRecords limits (API reference, PutRecords).
const (
	// MaxPutRecords is the most records one PutRecords call takes.
	MaxPutRecords = 500
	// MaxRecordBytes is the most bytes of one record: its data and partition key, 1 MiB.
	MaxRecordBytes = 1 << 20
	// MaxPutBytes is the most bytes of one call: every record's data and partition key, 5 MiB.
	MaxPutBytes = 5 << 20
)

// Retry of refused entries: the first wait is RetryMin, doubling per round up to RetryMax
// (each wait jittered to between half of it and all of it); after MaxRounds rounds of a batch
// Put gives up with ErrRefused.
const (
	RetryMin  = 100 * time.Millisecond
	RetryMax  = 5 * time.Second
	MaxRounds = 20
)

// Polling of WaitActive: PollMin doubling to PollMax (DescribeStreamSummary is limited to 20
// calls a second per account; a local server is ACTIVE at once).
const (
	PollMin = 20 * time.Millisecond
	PollMax = time.Second
)

var (
	// ErrRefused is returned by Put when entries were still refused after MaxRounds rounds.
	ErrRefused = errors.New("kinesis: records still refused after retries")
	// ErrTooLarge is returned by Put for a record above MaxRecordBytes.
	ErrTooLarge = errors.New("kinesis: record too large")
	// ErrNoShard is returned by FindOpenShard for a shard the stream does not list as open.
	ErrNoShard = errors.New("kinesis: no such shard")
)

// API is the part of the Kinesis client this package calls (*kinesis.Client implements it).
type API interface {
	DescribeStreamSummary(ctx context.Context, in *kinesis.DescribeStreamSummaryInput, optFns ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error)
	PutRecords(ctx context.Context, in *kinesis.PutRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error)
	ListShards(ctx context.Context, in *kinesis.ListShardsInput, optFns ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error)
}

// IsARN reports whether stream is a stream ARN rather than a name.
func IsARN(stream string) bool { return strings.HasPrefix(stream, "arn:") }

// Names returns the StreamName and StreamARN fields naming stream (a name or ARN) in an input:
// one of them set.
func Names(stream string) (name, arn *string) {
	if IsARN(stream) {
		return nil, aws.String(stream)
	}
	return aws.String(stream), nil
}

// WaitActive polls DescribeStreamSummary (PollMin doubling to PollMax) until stream (a name or
// ARN) is ACTIVE and returns its ARN. Errors: the stream is being deleted or does not exist, a
// call failed, or ctx ended first.
func WaitActive(ctx context.Context, c API, stream string) (arn string, err error) {
	in := &kinesis.DescribeStreamSummaryInput{}
	in.StreamName, in.StreamARN = Names(stream)
	for wait := PollMin; ; wait = min(2*wait, PollMax) {
		out, err := c.DescribeStreamSummary(ctx, in)
		if err != nil {
			return "", fmt.Errorf("describe stream %s: %w", stream, err)
		}
		switch d := out.StreamDescriptionSummary; d.StreamStatus {
		case types.StreamStatusActive:
			return aws.ToString(d.StreamARN), nil
		case types.StreamStatusDeleting:
			return "", fmt.Errorf("stream %s is being deleted", stream)
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("stream %s not ACTIVE: %w", stream, ctx.Err())
		case <-time.After(wait):
		}
	}
}

// Record is one record to put.
type Record struct {
	PartitionKey string
	Data         []byte
}

func (r Record) size() int { return len(r.Data) + len(r.PartitionKey) }

// PutStats is what Put did.
type PutStats struct {
	Records int // records stored (confirmed by a PutRecords answer)
	Calls   int // PutRecords calls
	Resent  int // entries sent again after a refusal (throttling, an internal failure)
}

// Putter puts records to a stream in PutRecords batches of at most MaxPutRecords records and
// MaxPutBytes bytes. Add buffers a record and sends a full batch; Flush sends the rest. It is
// not safe for concurrent use.
//
// Entries a call refuses (FailedRecordCount > 0: ProvisionedThroughputExceededException,
// InternalFailure) are sent again, only they, after a backoff (RetryMin to RetryMax), up to
// MaxRounds rounds. Delivery is at least once: a call whose answer is lost and that the SDK
// retries may store its records twice, and an entry sent again lands after the batch's other
// records, so the order of one partition key's records holds only while nothing is resent
// (Stats().Resent == 0).
type Putter struct {
	api    API
	stream string
	buf    []types.PutRecordsRequestEntry
	bytes  int
	stats  PutStats
	added  int // records given to Add
	stored int // records of the input whose batches were confirmed whole
	// retryMin and retryMax are RetryMin and RetryMax (tests shorten them).
	retryMin, retryMax time.Duration
}

// NewPutter returns a Putter for stream (a name or ARN) through api.
func NewPutter(api API, stream string) *Putter {
	return &Putter{api: api, stream: stream, retryMin: RetryMin, retryMax: RetryMax}
}

// Stats returns the counters so far.
func (p *Putter) Stats() PutStats { return p.stats }

// Pending returns the number of records buffered, not yet confirmed.
func (p *Putter) Pending() int { return len(p.buf) }

// Stored returns how many of the first records given to Add are stored for sure: batches go
// one after the other in input order, so after a failed Flush every record before its batch
// is stored (and some of the batch may be).
func (p *Putter) Stored() int { return p.stored }

// Add buffers rec, sending the buffered batch first when rec would not fit in it. The data is
// kept (not copied). Errors: ErrTooLarge for a record above MaxRecordBytes (nothing is sent);
// Flush's errors.
func (p *Putter) Add(ctx context.Context, rec Record) error {
	if rec.size() > MaxRecordBytes {
		return fmt.Errorf("%w: %d bytes of data and partition key; a record is at most %d (1 MiB)", ErrTooLarge, rec.size(), MaxRecordBytes)
	}
	if len(p.buf) == MaxPutRecords || p.bytes+rec.size() > MaxPutBytes {
		if err := p.Flush(ctx); err != nil {
			return err
		}
	}
	p.buf = append(p.buf, types.PutRecordsRequestEntry{PartitionKey: aws.String(rec.PartitionKey), Data: rec.Data})
	p.bytes += rec.size()
	p.added++
	return nil
}

// Flush sends the buffered records, retrying refused entries. Errors: a call failed (after the
// SDK's retries) or ErrRefused; the records of the failed batch not confirmed stay buffered
// (Pending).
func (p *Putter) Flush(ctx context.Context) error {
	wait := p.retryMin
	for round := 0; len(p.buf) > 0; round++ {
		if round == MaxRounds {
			return fmt.Errorf("%w: %d entries refused %d times in a row", ErrRefused, len(p.buf), MaxRounds)
		}
		if round > 0 {
			p.stats.Resent += len(p.buf)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(wait/2 + rand.N(wait/2+1)):
			}
			wait = min(2*wait, p.retryMax)
		}
		in := &kinesis.PutRecordsInput{Records: p.buf}
		in.StreamName, in.StreamARN = Names(p.stream)
		p.stats.Calls++
		out, err := p.api.PutRecords(ctx, in)
		if err != nil {
			return fmt.Errorf("kinesis: put %d records to %s: %w", len(p.buf), p.stream, err)
		}
		if len(out.Records) != len(p.buf) {
			return fmt.Errorf("kinesis: put %d records to %s: %d results in the answer", len(p.buf), p.stream, len(out.Records))
		}
		failed := p.buf[:0]
		bytes := 0
		for i, r := range out.Records {
			if r.ErrorCode != nil {
				failed = append(failed, p.buf[i])
				bytes += len(p.buf[i].Data) + len(aws.ToString(p.buf[i].PartitionKey))
			} else {
				p.stats.Records++
			}
		}
		p.buf, p.bytes = failed, bytes
	}
	p.buf, p.bytes, p.stored = p.buf[:0], 0, p.added
	return nil
}

// ListShards returns every shard of stream (a name or ARN), following NextToken.
func ListShards(ctx context.Context, c API, stream string) ([]types.Shard, error) {
	in := &kinesis.ListShardsInput{}
	in.StreamName, in.StreamARN = Names(stream)
	var all []types.Shard
	for {
		out, err := c.ListShards(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("kinesis: list shards of %s: %w", stream, err)
		}
		all = append(all, out.Shards...)
		if aws.ToString(out.NextToken) == "" {
			return all, nil
		}
		in = &kinesis.ListShardsInput{NextToken: out.NextToken}
	}
}

// FindOpenShard returns open shard id of stream (the shard a split or merge takes). Errors:
// ErrNoShard for a shard the stream does not list or that is closed (already split or
// merged), naming the open shards; ListShards' errors.
func FindOpenShard(ctx context.Context, c API, stream, id string) (types.Shard, error) {
	all, err := ListShards(ctx, c, stream)
	if err != nil {
		return types.Shard{}, err
	}
	var open []string
	var found *types.Shard
	for i, s := range all {
		isOpen := s.SequenceNumberRange == nil || s.SequenceNumberRange.EndingSequenceNumber == nil
		if aws.ToString(s.ShardId) == id {
			if isOpen {
				return s, nil
			}
			found = &all[i]
		}
		if isOpen {
			open = append(open, aws.ToString(s.ShardId))
		}
	}
	if found != nil {
		return types.Shard{}, fmt.Errorf("%w: shard %s of %s is closed (split or merged already); open shards: %s", ErrNoShard, id, stream, strings.Join(open, ", "))
	}
	return types.Shard{}, fmt.Errorf("%w: stream %s has no shard %s (open shards: %s)", ErrNoShard, stream, id, strings.Join(open, ", "))
}

// MidHashKey returns the hash key that splits s's range in two halves as even as can be: start
// + (end - start + 1) / 2, the NewStartingHashKey of the upper child. Errors: a range of one
// key (it cannot be split) or a malformed one.
func MidHashKey(s types.Shard) (string, error) {
	lo, hi, err := hashRange(s)
	if err != nil {
		return "", err
	}
	if lo.Cmp(hi) >= 0 {
		return "", fmt.Errorf("kinesis: shard %s covers a single hash key: it cannot be split", aws.ToString(s.ShardId))
	}
	mid := new(big.Int).Sub(hi, lo)
	mid.Add(mid, big.NewInt(1)).Rsh(mid, 1).Add(mid, lo)
	return mid.String(), nil
}

// CheckSplitKey checks that key can split s: a decimal hash key above the shard's starting
// hash key and at most its ending one (SplitShard's NewStartingHashKey).
func CheckSplitKey(s types.Shard, key string) error {
	lo, hi, err := hashRange(s)
	if err != nil {
		return err
	}
	k, ok := new(big.Int).SetString(key, 10)
	if !ok || k.Cmp(lo) <= 0 || k.Cmp(hi) > 0 {
		return fmt.Errorf("kinesis: --at %s: want a decimal hash key above %s and at most %s (shard %s's range)", key, lo, hi, aws.ToString(s.ShardId))
	}
	return nil
}

func hashRange(s types.Shard) (lo, hi *big.Int, err error) {
	if s.HashKeyRange == nil {
		return nil, nil, fmt.Errorf("kinesis: shard %s has no hash key range", aws.ToString(s.ShardId))
	}
	lo, ok1 := new(big.Int).SetString(aws.ToString(s.HashKeyRange.StartingHashKey), 10)
	hi, ok2 := new(big.Int).SetString(aws.ToString(s.HashKeyRange.EndingHashKey), 10)
	if !ok1 || !ok2 {
		return nil, nil, fmt.Errorf("kinesis: shard %s has a malformed hash key range", aws.ToString(s.ShardId))
	}
	return lo, hi, nil
}

// StartKey returns s's starting hash key as a number (0 when malformed), to order shards.
func StartKey(s types.Shard) *big.Int {
	if lo, _, err := hashRange(s); err == nil {
		return lo
	}
	return new(big.Int)
}
