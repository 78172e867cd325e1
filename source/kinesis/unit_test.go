package kinesis_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/source"
	kinesissrc "github.com/projhost/projhost/source/kinesis"
)

func newFake(t *testing.T, opts ...kinesissrc.Option) (*fakeKinesis, *kinesissrc.Source) {
	t.Helper()
	f := &fakeKinesis{clock: newFakeClock(), behindMs: 5000}
	src, err := kinesissrc.New(f, "s", append([]kinesissrc.Option{kinesissrc.WithClock(f.clock),
		kinesissrc.WithLogger(slog.New(slog.DiscardHandler))}, opts...)...)
	require.NoError(t, err)
	return f, src
}

func seqs(evs []source.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Seq)
	}
	return out
}

func seqRange(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, itoa(1000+i))
	}
	return out
}

func itoa(i int) string { return strconv.Itoa(i) }

// readAll reads r until n events came (or the shard ended), failing on errors.
func readAll(t *testing.T, r source.ShardReader, max, n int) []source.Event {
	t.Helper()
	var got []source.Event
	for i := 0; len(got) < n && i < 1000; i++ {
		b, err := r.Read(context.Background(), max, time.Second)
		if errors.Is(err, source.ErrShardEnded) {
			break
		}
		require.NoError(t, err)
		got = append(got, b.Events...)
	}
	return got
}

// TestPacing: successive GetRecords calls of a reader are MinCallInterval apart, or longer after
// a response of many bytes (2 MB/s per shard); an empty page of a shard still behind is followed
// after the pacing only, a caught-up empty shard after the idle time.
func TestPacing(t *testing.T) {
	tests := []struct {
		name     string
		sizes    []int // record data sizes on the shard
		max      int   // records per Read
		idle     time.Duration
		reads    int
		wantGaps []time.Duration
	}{
		{"small records: 5 calls a second", []int{10, 10, 10, 10}, 1, time.Second, 4,
			[]time.Duration{200 * time.Millisecond, 200 * time.Millisecond, 200 * time.Millisecond}},
		// 1,000,000 bytes at 2,000,000 bytes/s: 500 ms until the next call.
		{"1 MB responses: 2 calls a second", []int{500_000, 500_000, 500_000, 500_000}, 2, time.Second, 2,
			[]time.Duration{500 * time.Millisecond}},
		// 3 MB in one response: 1.5 s.
		{"3 MB response", []int{1_000_000, 1_000_000, 1_000_000, 10}, 3, time.Second, 2,
			[]time.Duration{1500 * time.Millisecond}},
		// The last record read, the shard is caught up: the next calls wait the idle time.
		{"caught up and empty: idle time", []int{10}, 10, time.Second, 3,
			[]time.Duration{200 * time.Millisecond, time.Second}},
		{"caught up, idle time 0: pacing only", []int{10}, 10, 0, 3,
			[]time.Duration{200 * time.Millisecond, 200 * time.Millisecond}},
		// A call that returned records is followed after the pacing (even at the tip); only an
		// empty answer at the tip waits the idle time.
		{"caught up, idle time 3 s", []int{10}, 10, 3 * time.Second, 3,
			[]time.Duration{200 * time.Millisecond, 3 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, src := newFake(t, kinesissrc.WithIdleTime(tt.idle))
			f.addShard("shardId-0", tt.sizes...)
			r, err := src.Open(context.Background(), "shardId-0", "")
			require.NoError(t, err)
			for i := 0; i < tt.reads; i++ {
				// Wait long enough that every Read makes one call at least.
				_, err := r.Read(context.Background(), tt.max, 10*time.Second)
				require.NoError(t, err)
			}
			got := f.gaps()
			if len(got) > len(tt.wantGaps) {
				got = got[:len(tt.wantGaps)]
			}
			require.Equal(t, tt.wantGaps, got)
			for _, c := range f.calls {
				require.Equal(t, int32(tt.max), c.limit, "GetRecords Limit = the events asked for")
			}
		})
	}
}

// TestPacingBehindEmptyPage: an empty page while MillisBehindLatest > 0 is followed by the next
// call after MinCallInterval (not the idle time), within the same Read.
func TestPacingBehindEmptyPage(t *testing.T) {
	f, src := newFake(t)
	f.addShard("shardId-0", 10, 10)
	f.emptyPages = 2 // Kinesis returns empty pages on sparse shards while behind
	r, err := src.Open(context.Background(), "shardId-0", "")
	require.NoError(t, err)
	b, err := r.Read(context.Background(), 10, 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, []string{"1000", "1001"}, seqs(b.Events))
	require.Equal(t, []time.Duration{200 * time.Millisecond, 200 * time.Millisecond}, f.gaps())
}

// TestWaitBound: a Read never waits past its wait: with the idle time not elapsed it returns an
// empty batch at the deadline without a call.
func TestWaitBound(t *testing.T) {
	f, src := newFake(t)
	f.addShard("shardId-0")
	r, err := src.Open(context.Background(), "shardId-0", "")
	require.NoError(t, err)
	start := f.clock.Now()
	b, err := r.Read(context.Background(), 10, 300*time.Millisecond)
	require.NoError(t, err)
	require.Empty(t, b.Events)
	require.Equal(t, int64(0), b.MillisBehind)
	require.Equal(t, int64(-1), b.EventsBehind)
	require.Equal(t, 300*time.Millisecond, f.clock.Now().Sub(start))
	require.Len(t, f.calls, 1)
	b, err = r.Read(context.Background(), 10, 0)
	require.NoError(t, err)
	require.Empty(t, b.Events)
	require.Len(t, f.calls, 1, "the idle time is not over: no call")
}

// TestThrottlingBackoff: throttled calls (Kinesis' ProvisionedThroughputExceededException and
// the SDK's generic throttling codes) are retried after growing, jittered backoffs; the Read
// then returns the records, and Stats counts the throttled calls.
func TestThrottlingBackoff(t *testing.T) {
	tests := []struct {
		name string
		err  error
	}{
		{"ProvisionedThroughputExceeded", &types.ProvisionedThroughputExceededException{Message: aws.String("Rate exceeded for shard")}},
		{"ThrottlingException", &smithy.GenericAPIError{Code: "ThrottlingException", Message: "slow down"}},
		{"LimitExceeded", &types.LimitExceededException{Message: aws.String("limit")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, src := newFake(t)
			f.addShard("shardId-0", 10, 10, 10)
			const throttled = 5
			f.failGetRecords = func(n int) error {
				if n < throttled {
					return tt.err
				}
				return nil
			}
			r, err := src.Open(context.Background(), "shardId-0", "")
			require.NoError(t, err)
			b, err := r.Read(context.Background(), 10, time.Minute)
			require.NoError(t, err)
			require.Equal(t, []string{"1000", "1001", "1002"}, seqs(b.Events))
			require.Equal(t, int64(throttled), src.Stats().Throttled)
			require.Equal(t, int64(throttled+1), src.Stats().GetRecords)
			gaps := f.gaps()
			require.Len(t, gaps, throttled)
			for i, g := range gaps {
				full := min(kinesissrc.ThrottleBackoffMin<<i, kinesissrc.ThrottleBackoffMax)
				if g < full/2 || g > full {
					t.Fatalf("backoff %d = %v, want between %v and %v", i, g, full/2, full)
				}
			}
		})
	}
}

// TestBackoffCap: the backoff stops growing at ThrottleBackoffMax; a success resets it.
func TestBackoffCap(t *testing.T) {
	f, src := newFake(t)
	f.addShard("shardId-0", 10)
	f.failGetRecords = func(n int) error {
		if n < 12 {
			return &types.ProvisionedThroughputExceededException{Message: aws.String("Rate exceeded")}
		}
		return nil
	}
	r, err := src.Open(context.Background(), "shardId-0", "")
	require.NoError(t, err)
	_, err = r.Read(context.Background(), 10, time.Hour)
	require.NoError(t, err)
	gaps := f.gaps()
	require.Len(t, gaps, 12)
	for _, g := range gaps[6:] { // 500ms << 6 = 32 s: capped
		require.GreaterOrEqual(t, g, kinesissrc.ThrottleBackoffMax/2)
		require.LessOrEqual(t, g, kinesissrc.ThrottleBackoffMax)
	}
}

// TestTransientErrors: transient failures are retried up to MaxTransientRetries in a row, then
// returned; a non-retryable error is returned at once.
func TestTransientErrors(t *testing.T) {
	tests := []struct {
		name      string
		failures  int
		err       error
		wantErr   bool
		wantCalls int
	}{
		{"a few 5xx then success", 3, &types.InternalFailureException{Message: aws.String("boom")}, false, 4},
		{"too many in a row", kinesissrc.MaxTransientRetries + 1, timeoutErr{}, true, kinesissrc.MaxTransientRetries + 1},
		{"access denied: not retried", 1, &types.AccessDeniedException{Message: aws.String("no")}, true, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, src := newFake(t)
			f.addShard("shardId-0", 10)
			f.failGetRecords = func(n int) error {
				if n < tt.failures {
					return tt.err
				}
				return nil
			}
			r, err := src.Open(context.Background(), "shardId-0", "")
			require.NoError(t, err)
			b, err := r.Read(context.Background(), 10, time.Hour)
			if tt.wantErr {
				require.ErrorIs(t, err, tt.err)
			} else {
				require.NoError(t, err)
				require.Len(t, b.Events, 1)
			}
			require.Len(t, f.calls, tt.wantCalls)
		})
	}
}

// timeoutErr is a network timeout (the SDK retries those).
type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

// TestExpiredIterator: an ExpiredIteratorException gets a new iterator AFTER_SEQUENCE_NUMBER the
// last record returned (or at the start position before any): every record once, in order.
func TestExpiredIterator(t *testing.T) {
	tests := []struct {
		name    string
		expire  []int // GetRecords calls (from 0) answered with ExpiredIteratorException
		initial kinesissrc.InitialPosition
		after   string
		want    []string
	}{
		{"mid-shard", []int{2}, kinesissrc.TrimHorizon, "", seqRange(0, 10)},
		{"twice in a row", []int{1, 2}, kinesissrc.TrimHorizon, "", seqRange(0, 10)},
		{"before any record", []int{0}, kinesissrc.TrimHorizon, "", seqRange(0, 10)},
		{"before any record, after a cursor", []int{0}, kinesissrc.TrimHorizon, "1004", seqRange(5, 10)},
		{"before any record, AT_TIMESTAMP", []int{0}, kinesissrc.AtTimestamp(newFakeClock().now), "", seqRange(0, 10)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, src := newFake(t, kinesissrc.WithInitialPosition(tt.initial), kinesissrc.WithTrimCheck(false))
			f.addShard("shardId-0", 1, 1, 1, 1, 1, 1, 1, 1, 1, 1)
			f.failGetRecords = func(n int) error {
				if slices.Contains(tt.expire, n) {
					return &types.ExpiredIteratorException{Message: aws.String("Iterator expired")}
				}
				return nil
			}
			r, err := src.Open(context.Background(), "shardId-0", tt.after)
			require.NoError(t, err)
			got := readAll(t, r, 3, len(tt.want))
			require.Equal(t, tt.want, seqs(got))
			require.Equal(t, int64(len(tt.expire)), src.Stats().ExpiredIterators)
		})
	}
}

// TestRenewedIteratorOutlivesSlowReads: a caller that reads less often than iterators live
// (each Read after a pause longer than the expiry, with wait 0, as the container reads an idle
// shard) still gets every record once, in order: an expired iterator is replaced right before
// the next call, not when the expiry is answered (that one would expire in turn during the
// pause, and no Read would ever get records again).
func TestRenewedIteratorOutlivesSlowReads(t *testing.T) {
	f, src := newFake(t, kinesissrc.WithTrimCheck(false))
	f.iterExpiry = 300 * time.Millisecond
	f.addShard("shardId-0", 1, 1, 1, 1, 1, 1, 1, 1, 1, 1)
	r, err := src.Open(context.Background(), "shardId-0", "")
	require.NoError(t, err)
	var got []source.Event
	for i := 0; len(got) < 10 && i < 50; i++ {
		<-f.clock.After(time.Second) // the pause between two Reads
		b, err := r.Read(context.Background(), 3, 0)
		require.NoError(t, err)
		got = append(got, b.Events...)
	}
	require.Equal(t, seqRange(0, 10), seqs(got))
	require.Positive(t, src.Stats().ExpiredIterators)
}

// TestNotDueBatchLag: an empty batch returned because the next call is not due says -1 (unknown)
// after an answer with records at MillisBehindLatest 0, which records of the tip's millisecond
// may follow (the container would take 0 for caught up), and 0 only after an empty answer at 0;
// a shard behind keeps its figure.
func TestNotDueBatchLag(t *testing.T) {
	f, src := newFake(t, kinesissrc.WithTrimCheck(false))
	f.behindMs = 0 // every page at MillisBehindLatest 0, as records put in one call are
	f.addShard("shardId-0", 1, 1, 1, 1, 1)
	r, err := src.Open(context.Background(), "shardId-0", "")
	require.NoError(t, err)
	ctx := context.Background()
	b, err := r.Read(ctx, 3, time.Second)
	require.NoError(t, err)
	require.Len(t, b.Events, 3)
	require.Equal(t, int64(0), b.MillisBehind, "the answer's own figure")
	b, err = r.Read(ctx, 3, 0) // the next call is MinCallInterval away
	require.NoError(t, err)
	require.Empty(t, b.Events)
	require.Equal(t, int64(-1), b.MillisBehind, "not due after records at 0: unknown")
	b, err = r.Read(ctx, 3, time.Second)
	require.NoError(t, err)
	require.Len(t, b.Events, 2)
	b, err = r.Read(ctx, 3, time.Second)
	require.NoError(t, err)
	require.Empty(t, b.Events, "the tip")
	require.Equal(t, int64(0), b.MillisBehind)
	b, err = r.Read(ctx, 3, 0) // the idle wait after the tip
	require.NoError(t, err)
	require.Empty(t, b.Events)
	require.Equal(t, int64(0), b.MillisBehind, "not due after an empty answer at 0: still the tip")

	f2, src2 := newFake(t, kinesissrc.WithTrimCheck(false)) // pages behind by 5000 ms
	f2.addShard("shardId-0", 1, 1, 1, 1, 1)
	r2, err := src2.Open(ctx, "shardId-0", "")
	require.NoError(t, err)
	b, err = r2.Read(ctx, 3, time.Second)
	require.NoError(t, err)
	require.Equal(t, int64(5000), b.MillisBehind)
	b, err = r2.Read(ctx, 3, 0)
	require.NoError(t, err)
	require.Empty(t, b.Events)
	require.Equal(t, int64(5000), b.MillisBehind, "not due, still behind")
}

// TestTrimmedCursor: a cursor whose record is older than the retention falls back to
// TRIM_HORIZON, counted, whether Kinesis refuses it or answers with later records; a cursor
// still in the shard does not.
func TestTrimmedCursor(t *testing.T) {
	tests := []struct {
		name         string
		trimmed      int // records gone
		invalid      bool
		trimCheck    bool
		after        string
		want         []string
		wantFallback int64
	}{
		{"refused with InvalidArgument", 4, true, true, "1001", seqRange(4, 8), 1},
		{"refused, trim check off", 4, true, false, "1001", seqRange(4, 8), 1},
		{"records starting later", 4, false, true, "1001", seqRange(4, 8), 1},
		{"records starting later, trim check off: not detected", 4, false, false, "1001", seqRange(4, 8), 0},
		{"cursor still there", 2, false, true, "1003", seqRange(4, 8), 0},
		{"cursor is the oldest record", 2, true, true, "1002", seqRange(3, 8), 0},
		{"no cursor", 4, true, true, "", seqRange(4, 8), 0},
	}
	// A cursor of another stream: refused although not older than the oldest record.
	t.Run("refused, not trimmed", func(t *testing.T) {
		f, src := newFake(t)
		f.addShard("shardId-0", 1, 1, 1, 1).trimmed = 1
		f.refuseAfter = true
		_, err := src.Open(context.Background(), "shardId-0", "1002")
		require.ErrorIs(t, err, kinesissrc.ErrCursorRefused)
		require.Equal(t, int64(0), src.Stats().TrimmedFallbacks)
	})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, src := newFake(t, kinesissrc.WithTrimCheck(tt.trimCheck))
			sh := f.addShard("shardId-0", 1, 1, 1, 1, 1, 1, 1, 1)
			sh.trimmed = tt.trimmed
			f.invalidTrimmed = tt.invalid
			r, err := src.Open(context.Background(), "shardId-0", tt.after)
			require.NoError(t, err)
			got := readAll(t, r, 10, len(tt.want))
			require.Equal(t, tt.want, seqs(got))
			require.Equal(t, tt.wantFallback, src.Stats().TrimmedFallbacks)
		})
	}
}

// TestShardsLineage: ListShards pages are followed (NextToken alone), parents come before
// children whatever the listing's order, parents no longer listed are dropped, and Closed
// follows EndingSequenceNumber.
func TestShardsLineage(t *testing.T) {
	f, src := newFake(t)
	mk := func(id, parent, adjacent string, closed bool) {
		s := f.addShard(id)
		if parent != "" {
			s.shard.ParentShardId = aws.String(parent)
		}
		if adjacent != "" {
			s.shard.AdjacentParentShardId = aws.String(adjacent)
		}
		if closed {
			s.shard.SequenceNumberRange.EndingSequenceNumber = aws.String("2000")
		}
	}
	mk("c", "a", "b", false)  // a merge of a and b, listed first
	mk("a", "gone", "", true) // its parent is past the retention
	mk("b", "", "", true)
	mk("d", "", "", false)
	f.pageSize = 2
	ss, err := src.Shards(context.Background())
	require.NoError(t, err)
	var ids []string
	byID := map[string]source.Shard{}
	for _, s := range ss {
		ids = append(ids, s.ID)
		byID[s.ID] = s
	}
	require.Equal(t, []string{"a", "b", "c", "d"}, ids)
	require.Equal(t, []string{"a", "b"}, byID["c"].ParentIDs)
	require.Nil(t, byID["a"].ParentIDs)
	require.True(t, byID["a"].Closed)
	require.False(t, byID["c"].Closed)
	require.Len(t, f.listCalls, 2)
	require.Equal(t, "s", aws.ToString(f.listCalls[0].StreamName))
	require.Nil(t, f.listCalls[1].StreamName)
}

// TestOpenUnknownShard: a shard the stream does not have is source.ErrUnknownShard.
func TestOpenUnknownShard(t *testing.T) {
	f, src := newFake(t)
	f.addShard("shardId-0")
	_, err := src.Open(context.Background(), "shardId-9", "")
	require.ErrorIs(t, err, source.ErrUnknownShard)
	_, err = src.Open(context.Background(), "shardId-0", "12x")
	require.ErrorIs(t, err, kinesissrc.ErrInvalid)
}

func TestParseInitialPosition(t *testing.T) {
	ts := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	tests := []struct {
		in      string
		want    kinesissrc.InitialPosition
		wantErr bool
	}{
		{"TRIM_HORIZON", kinesissrc.TrimHorizon, false},
		{"trim_horizon", kinesissrc.TrimHorizon, false},
		{"LATEST", kinesissrc.Latest(), false},
		{"AT_TIMESTAMP=2026-01-02T15:04:05Z", kinesissrc.AtTimestamp(ts), false},
		{"at_timestamp=2026-01-02T16:04:05+01:00", kinesissrc.AtTimestamp(ts.In(time.FixedZone("", 3600))), false},
		{"AT_TIMESTAMP", kinesissrc.InitialPosition{}, true},
		{"AT_TIMESTAMP=yesterday", kinesissrc.InitialPosition{}, true},
		{"LATEST=now", kinesissrc.InitialPosition{}, true},
		{"EARLIEST", kinesissrc.InitialPosition{}, true},
		{"", kinesissrc.InitialPosition{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := kinesissrc.ParseInitialPosition(tt.in)
			if tt.wantErr {
				require.ErrorIs(t, err, kinesissrc.ErrInvalid)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want.Type, got.Type)
			require.True(t, tt.want.Timestamp.Equal(got.Timestamp))
			back, err := kinesissrc.ParseInitialPosition(got.String())
			require.NoError(t, err)
			require.True(t, back.Timestamp.Equal(got.Timestamp) && back.Type == got.Type)
		})
	}
}

func TestNewInvalid(t *testing.T) {
	f := &fakeKinesis{clock: newFakeClock()}
	for name, fn := range map[string]func() (*kinesissrc.Source, error){
		"no stream": func() (*kinesissrc.Source, error) { return kinesissrc.New(f, "") },
		"no client": func() (*kinesissrc.Source, error) { return kinesissrc.New(nil, "s") },
		"negative idle": func() (*kinesissrc.Source, error) {
			return kinesissrc.New(f, "s", kinesissrc.WithIdleTime(-time.Second))
		},
		"AT_TIMESTAMP no ts": func() (*kinesissrc.Source, error) {
			return kinesissrc.New(f, "s", kinesissrc.WithInitialPosition(kinesissrc.AtTimestamp(time.Time{})))
		},
		"unknown type": func() (*kinesissrc.Source, error) {
			return kinesissrc.New(f, "s", kinesissrc.WithInitialPosition(kinesissrc.InitialPosition{Type: "AT_SEQUENCE_NUMBER"}))
		},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := fn()
			require.ErrorIs(t, err, kinesissrc.ErrInvalid)
		})
	}
}
