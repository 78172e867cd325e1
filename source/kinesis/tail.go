package kinesis

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/projhost/projhost/source"
)

// Tail's defaults.
const (
	// TailWindow is the first window Tail reads: the records that arrived in the last 10 s. A
	// shard written at its full write quota (1 MB/s) holds about 10 MB there, read in about
	// 10 s under the 2 MB/s pacing while writes go on; a minute would take a minute.
	TailWindow = 10 * time.Second
	// TailWiden is the factor by which each window is wider than the one before.
	TailWiden = 10
	// DefaultTailCalls is how many GetRecords calls one Tail makes at most (WithTailCalls): at
	// the 5 calls per second of a shard, 10 s or more of reading.
	DefaultTailCalls = 50
	// DefaultRetention is the retention period Tail assumes when the client cannot describe the
	// stream (its API has no DescribeStreamSummary, or the call failed): 24 hours, Kinesis'
	// default and minimum.
	DefaultRetention = 24 * time.Hour
)

// ErrTailBudget is returned by Tail when its GetRecords calls ran out before any window was read
// to the tip (a shard with more records in TailWindow than DefaultTailCalls calls read).
var ErrTailBudget = errors.New("kinesis: tail: GetRecords budget spent before the shard's tip")

// WithTailCalls sets how many GetRecords calls one Tail makes at most (default
// DefaultTailCalls). New fails with ErrInvalid for n < 1.
func WithTailCalls(n int) Option { return optionFunc(func(c *config) { c.tailCalls = n }) }

// Tail returns the last n records of shardID (fewer when the shard holds fewer), oldest first,
// as source.Tailer: what a deploy's smoke run handles (package deploy). n <= 0 returns nothing
// and makes no call.
//
// Kinesis has no "last n" call, so Tail reads windows of growing width: AT_TIMESTAMP now less
// TailWindow, read to the tip (an empty GetRecords with MillisBehindLatest 0, or the end of a
// closed shard) keeping the last n records; while fewer than n came, the next window is
// TailWiden times wider, read only up to the first record the previous one found (the records
// after it are known); a window as wide as the stream's retention period (DescribeStreamSummary,
// once per Source; DefaultRetention when the client cannot tell) is TRIM_HORIZON, the whole
// shard, and the last. With the default retention the windows are 10 s, 100 s, 1000 s, 10,000 s
// and TRIM_HORIZON.
//
// Reading is a reader's (Open's): GetRecords of up to MaxRead records, paced at MinCallInterval
// and the 2 MB/s byte rate across the windows of one Tail, throttling and transient errors
// retried, expired iterators renewed. Cost: per window one GetShardIterator and at least one
// GetRecords (one past the last record, at the tip), at most DefaultTailCalls GetRecords in all
// (WithTailCalls), counted in Stats().GetRecords; an empty shard costs 5 of each and about 1 s,
// a shard with n records in the last 10 s one GetShardIterator and two GetRecords (the second
// answering empty at the tip). When the budget runs out in a wider window, Tail returns what
// the narrower ones found (fewer than n, still the latest records); when it runs out before any
// window reached the tip, it fails with ErrTailBudget.
//
// Errors: source.ErrUnknownShard; ErrTailBudget; the context's; the reader's GetRecords
// errors.
func (s *Source) Tail(ctx context.Context, shardID string, n int) ([]source.Event, error) {
	if n <= 0 {
		return nil, nil
	}
	retention := s.retentionPeriod(ctx)
	now := s.cfg.clock.Now()
	var (
		got      []source.Event // the latest records, read to the tip, oldest first
		known    bool           // a window was read to the tip: got is the truth since its start
		calls    int            // GetRecords calls made by the windows so far
		nextCall time.Time      // the pacing, carried from one window's reader to the next
	)
	for window := TailWindow; ; window *= TailWiden {
		if calls >= s.cfg.tailCalls {
			return got, nil // known: the budget ran out with the previous window
		}
		pos := position{typ: types.ShardIteratorTypeAtTimestamp, ts: now.Add(-window), label: fmt.Sprintf("AT_TIMESTAMP now-%s (tail)", window)}
		last := window >= retention
		if last {
			pos = position{typ: types.ShardIteratorTypeTrimHorizon, label: "TRIM_HORIZON (tail)"}
		}
		r := &reader{src: s, shardID: shardID, start: pos, nextCall: nextCall}
		it, err := r.iterator(ctx, pos)
		if err != nil {
			return nil, err
		}
		r.iter = it
		stop := ""
		if len(got) > 0 {
			stop = got[0].Seq
		}
		ring, done, err := r.tailWindow(ctx, n, stop, s.cfg.tailCalls-calls)
		calls += r.calls
		switch {
		case err != nil:
			return nil, err
		case !done && known:
			return got, nil // the budget ran out: the latest known, fewer than n
		case !done:
			return nil, fmt.Errorf("kinesis: tail of %s: %w (%d calls, WithTailCalls)", shardID, ErrTailBudget, calls)
		}
		nextCall = r.nextCall
		if r.lastEmpty {
			// The reader's idle wait after an empty answer is not for the next window: an
			// empty answer has no bytes to pace.
			nextCall = r.lastCall.Add(MinCallInterval)
		}
		if stop != "" {
			// ring holds the records before the previous window's first one.
			got = append(ring[max(0, len(ring)-(n-len(got))):], got...)
		} else {
			got = ring
		}
		known = true
		if len(got) >= n || last {
			return got, nil
		}
	}
}

// tailWindow reads r (positioned at a window's start) until the record stop ("" = to the tip: an
// empty answer at MillisBehindLatest 0, or a closed shard's end), keeping the last n records
// before it, oldest first, within budget GetRecords calls. done is false when the budget ran out
// first.
func (r *reader) tailWindow(ctx context.Context, n int, stop string, budget int) (ring []source.Event, done bool, err error) {
	keep := func() {
		if len(ring) > n {
			ring = append(ring[:0:0], ring[len(ring)-n:]...)
		}
	}
	defer keep()
	for r.calls < budget {
		// A wait under MinCallInterval: one GetRecords per Read at most, so that the budget
		// holds and an empty answer at 0 is seen as such.
		b, err := r.Read(ctx, MaxRead, MinCallInterval/2)
		ended := errors.Is(err, source.ErrShardEnded)
		if err != nil && !ended {
			return nil, false, err
		}
		for _, e := range b.Events {
			if stop != "" && source.CompareSeq(e.Seq, stop) >= 0 {
				return ring, true, nil
			}
			ring = append(ring, e)
		}
		if len(ring) >= 2*n {
			keep()
		}
		if ended || len(b.Events) == 0 && b.MillisBehind == 0 {
			return ring, true, nil
		}
	}
	return ring, false, nil
}

// describer is the part of *kinesis.Client Tail uses to learn the retention period when the
// client has it.
type describer interface {
	DescribeStreamSummary(ctx context.Context, in *kinesis.DescribeStreamSummaryInput, optFns ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error)
}

// retentionCache holds the stream's retention period once asked.
type retentionCache struct {
	mu sync.Mutex
	d  time.Duration
}

// retentionPeriod returns the stream's retention period: DescribeStreamSummary's
// RetentionPeriodHours, asked once per Source; DefaultRetention when the client has no such call
// or it failed (then asked again by the next Tail).
func (s *Source) retentionPeriod(ctx context.Context) time.Duration {
	c := &s.retention
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.d > 0 {
		return c.d
	}
	d, ok := s.api.(describer)
	if !ok {
		c.d = DefaultRetention
		return c.d
	}
	in := &kinesis.DescribeStreamSummaryInput{}
	in.StreamName, in.StreamARN = s.names()
	out, err := d.DescribeStreamSummary(ctx, in)
	if err != nil || out.StreamDescriptionSummary == nil || aws.ToInt32(out.StreamDescriptionSummary.RetentionPeriodHours) <= 0 {
		s.logger().Debug("kinesis: tail: the stream's retention period is unknown: assuming the default", "stream", s.stream, "default", DefaultRetention, "err", err)
		return DefaultRetention
	}
	c.d = time.Duration(aws.ToInt32(out.StreamDescriptionSummary.RetentionPeriodHours)) * time.Hour
	return c.d
}

var _ source.Tailer = (*Source)(nil)
