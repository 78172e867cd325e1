package kinesis_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	kinesissrc "github.com/projhost/projhost/source/kinesis"
)

// fakeClock is a clock whose After advances the time by d at once: sleeps take no real time and
// every gap between two calls is exact.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	ch := make(chan time.Time, 1)
	ch <- c.now
	return ch
}

var _ kinesissrc.Clock = (*fakeClock)(nil)

// fakeShard is one shard of the fake stream. seqs are the records' sequence numbers; records
// before trimmed are gone (older than the retention).
type fakeShard struct {
	shard   types.Shard
	recs    []types.Record
	trimmed int
}

// fakeKinesis is a Kinesis stream in memory, for the calls the source makes. Iterators are
// "shard/index". It records every GetRecords call.
type fakeKinesis struct {
	mu     sync.Mutex
	clock  *fakeClock
	shards []*fakeShard
	// pageSize, when > 0, is how many shards one ListShards page holds.
	pageSize int
	// invalidTrimmed: AFTER_SEQUENCE_NUMBER of a trimmed record is refused with
	// InvalidArgumentException (else the iterator starts at the first remaining record).
	invalidTrimmed bool
	// refuseAfter: every AFTER_SEQUENCE_NUMBER is refused with InvalidArgumentException (a
	// sequence number of another stream).
	refuseAfter bool
	// failGetRecords, when set, is asked before each GetRecords call (n counts from 0); a
	// non-nil error is returned instead of records.
	failGetRecords func(n int) error
	// behindMs is the MillisBehindLatest of a page that is not the shard's last.
	behindMs int64
	// emptyPages: the first emptyPages GetRecords calls return no records (the iterator stays
	// where it is) with MillisBehindLatest behindMs.
	emptyPages int
	// iterExpiry, when > 0, is how long an iterator lives on the fake clock (Kinesis: 5
	// minutes): a GetRecords with an older one is answered with ExpiredIteratorException.
	iterExpiry time.Duration
	issued     map[string]time.Time // iterator -> when it was handed out (with iterExpiry)

	calls     []getCall
	listCalls []*kinesis.ListShardsInput
}

type getCall struct {
	at    time.Time
	limit int32
	err   error
	n     int // records returned
}

// addShard adds an open shard with records of the given data sizes, sequence numbers
// 1000, 1001, ...
func (f *fakeKinesis) addShard(id string, sizes ...int) *fakeShard {
	s := &fakeShard{shard: types.Shard{ShardId: aws.String(id),
		HashKeyRange:        &types.HashKeyRange{StartingHashKey: aws.String("0"), EndingHashKey: aws.String("1")},
		SequenceNumberRange: &types.SequenceNumberRange{StartingSequenceNumber: aws.String("1000")}}}
	for i, n := range sizes {
		s.recs = append(s.recs, types.Record{SequenceNumber: aws.String(strconv.Itoa(1000 + i)),
			PartitionKey: aws.String("k"), Data: make([]byte, n), ApproximateArrivalTimestamp: aws.Time(f.clock.Now())})
	}
	f.shards = append(f.shards, s)
	return s
}

func (f *fakeKinesis) shard(id string) *fakeShard {
	for _, s := range f.shards {
		if aws.ToString(s.shard.ShardId) == id {
			return s
		}
	}
	return nil
}

func (f *fakeKinesis) ListShards(ctx context.Context, in *kinesis.ListShardsInput, _ ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.listCalls = append(f.listCalls, in)
	from := 0
	if in.NextToken != nil {
		if in.StreamName != nil || in.StreamARN != nil {
			return nil, &types.InvalidArgumentException{Message: aws.String("NextToken and StreamName cannot be provided together")}
		}
		from, _ = strconv.Atoi(*in.NextToken)
	}
	to := len(f.shards)
	if f.pageSize > 0 {
		to = min(to, from+f.pageSize)
	}
	out := &kinesis.ListShardsOutput{}
	for _, s := range f.shards[from:to] {
		out.Shards = append(out.Shards, s.shard)
	}
	if to < len(f.shards) {
		out.NextToken = aws.String(strconv.Itoa(to))
	}
	return out, nil
}

func (f *fakeKinesis) GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, _ ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.shard(aws.ToString(in.ShardId))
	if s == nil {
		return nil, &types.ResourceNotFoundException{Message: aws.String("no shard " + aws.ToString(in.ShardId))}
	}
	i := s.trimmed
	switch in.ShardIteratorType {
	case types.ShardIteratorTypeTrimHorizon:
	case types.ShardIteratorTypeLatest:
		i = len(s.recs)
	case types.ShardIteratorTypeAtTimestamp:
		for i < len(s.recs) && s.recs[i].ApproximateArrivalTimestamp.Before(*in.Timestamp) {
			i++
		}
	case types.ShardIteratorTypeAfterSequenceNumber:
		seq, _ := strconv.Atoi(aws.ToString(in.StartingSequenceNumber))
		if (seq-1000 < s.trimmed && f.invalidTrimmed) || f.refuseAfter {
			return nil, &types.InvalidArgumentException{Message: aws.String("sequence number is trimmed")}
		}
		i = max(seq-1000+1, s.trimmed)
	default:
		return nil, fmt.Errorf("fake: iterator type %s", in.ShardIteratorType)
	}
	it := fmt.Sprintf("%s/%d", aws.ToString(in.ShardId), i)
	f.issue(it)
	return &kinesis.GetShardIteratorOutput{ShardIterator: aws.String(it)}, nil
}

// issue dates iterator it (handed out now) for iterExpiry.
func (f *fakeKinesis) issue(it string) {
	if f.issued == nil {
		f.issued = map[string]time.Time{}
	}
	f.issued[it] = f.clock.Now()
}

func (f *fakeKinesis) GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, _ ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	call := getCall{at: f.clock.Now(), limit: aws.ToInt32(in.Limit)}
	defer func() { f.calls = append(f.calls, call) }()
	if f.failGetRecords != nil {
		if call.err = f.failGetRecords(len(f.calls)); call.err != nil {
			return nil, call.err
		}
	}
	if at, ok := f.issued[aws.ToString(in.ShardIterator)]; ok && f.iterExpiry > 0 && call.at.Sub(at) > f.iterExpiry {
		call.err = &types.ExpiredIteratorException{Message: aws.String("Iterator expired")}
		return nil, call.err
	}
	if len(f.calls) < f.emptyPages {
		return &kinesis.GetRecordsOutput{MillisBehindLatest: aws.Int64(f.behindMs), NextShardIterator: in.ShardIterator}, nil
	}
	id, is, _ := strings.Cut(aws.ToString(in.ShardIterator), "/")
	i, _ := strconv.Atoi(is)
	s := f.shard(id)
	end := min(i+int(call.limit), len(s.recs))
	call.n = end - i
	out := &kinesis.GetRecordsOutput{Records: slices.Clone(s.recs[i:end]), MillisBehindLatest: aws.Int64(0),
		NextShardIterator: aws.String(fmt.Sprintf("%s/%d", id, end))}
	if end < len(s.recs) {
		out.MillisBehindLatest = aws.Int64(f.behindMs)
	}
	if s.shard.SequenceNumberRange.EndingSequenceNumber != nil && end == len(s.recs) {
		out.NextShardIterator = nil
	} else {
		f.issue(*out.NextShardIterator)
	}
	return out, nil
}

// gaps returns the time between successive GetRecords calls.
func (f *fakeKinesis) gaps() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	var g []time.Duration
	for i := 1; i < len(f.calls); i++ {
		g = append(g, f.calls[i].at.Sub(f.calls[i-1].at))
	}
	return g
}

var _ kinesissrc.API = (*fakeKinesis)(nil)
