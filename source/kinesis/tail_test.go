package kinesis_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/internal/kinesistest"
	"github.com/projhost/projhost/source"
	kinesissrc "github.com/projhost/projhost/source/kinesis"
)

// addAged adds an open shard of n records that arrived every step, the last one step ago.
func (f *fakeKinesis) addAged(id string, n int, step time.Duration) *fakeShard {
	s := f.addShard(id, make([]int, n)...)
	now := f.clock.Now()
	for i := range s.recs {
		s.recs[i].ApproximateArrivalTimestamp = aws.Time(now.Add(-time.Duration(n-i) * step))
	}
	return s
}

// TestTailFake: Tail widens its window ×10 from 10 s until n records came (TRIM_HORIZON past the
// retention), reads each wider window only up to what the narrower one found, and returns the
// last n oldest first; its GetRecords calls are paced (MinCallInterval, no idle wait between
// windows) and bounded (WithTailCalls).
func TestTailFake(t *testing.T) {
	ctx := context.Background()
	aged := func(f *fakeKinesis) { f.addAged("a", 300, time.Minute) } // 0 records in 10 s, 1 in 100 s, 16 in 1000 s, 166 in 10,000 s
	closed := func(f *fakeKinesis) {
		f.addAged("closed", 30, time.Millisecond).shard.SequenceNumberRange.EndingSequenceNumber = aws.String("1029")
	}
	for _, tc := range []struct {
		setup      func(*fakeKinesis)
		shard      string
		n          int
		want       []string
		getRecords int // GetRecords calls
	}{
		// 10 s: one empty call; 100 s: the record and an empty call at the tip; 1000 s: the 15
		// before it (the call stops at the first record known); 10,000 s: 34 more.
		{aged, "a", 50, seqRange(250, 300), 5},
		{aged, "a", 1000, seqRange(0, 300), 6}, // ... and TRIM_HORIZON (past the 24 h default retention), the last window
		{aged, "a", 1, seqRange(299, 300), 3},
		{func(f *fakeKinesis) { f.addShard("empty") }, "empty", 100, nil, 5}, // 10 s, 100 s, 1000 s, 10,000 s, TRIM_HORIZON
		{closed, "closed", 5, seqRange(25, 30), 1},                           // the records and the end in one answer
		{closed, "closed", 100, seqRange(0, 30), 5},                          // every window meets the first record at once
		// 3 pages of MaxRead, then the tip.
		{func(f *fakeKinesis) { f.addAged("hot", 3*kinesissrc.MaxRead, time.Microsecond) }, "hot", 2, seqRange(3*kinesissrc.MaxRead-2, 3*kinesissrc.MaxRead), 4},
	} {
		f, src := newFake(t)
		tc.setup(f)
		evs, err := src.Tail(ctx, tc.shard, tc.n)
		require.NoError(t, err, tc.shard)
		require.Equal(t, tc.want, seqs(evs), "%s n=%d", tc.shard, tc.n)
		for _, e := range evs {
			require.Equal(t, tc.shard, e.ShardID)
		}
		require.Len(t, f.calls, tc.getRecords, "GetRecords calls of %s n=%d", tc.shard, tc.n)
		require.Equal(t, int64(tc.getRecords), src.Stats().GetRecords)
		for i, g := range f.gaps() {
			require.GreaterOrEqual(t, g, kinesissrc.MinCallInterval, "%s n=%d: gap %d", tc.shard, tc.n, i)
			require.Less(t, g, kinesissrc.DefaultIdleTime, "%s n=%d: gap %d: an idle wait between windows", tc.shard, tc.n, i)
		}
	}
	f, src := newFake(t)
	aged(f)
	evs, err := src.Tail(ctx, "a", 0)
	require.NoError(t, err)
	require.Empty(t, evs)
	require.Empty(t, f.calls, "n = 0: no call")
	_, err = src.Tail(ctx, "nope", 10)
	require.ErrorIs(t, err, source.ErrUnknownShard)
}

// TestTailBudget: a Tail whose GetRecords budget runs out in a wider window returns what the
// narrower ones found (the latest records, fewer than n); before any window reached the tip it
// fails with ErrTailBudget.
func TestTailBudget(t *testing.T) {
	ctx := context.Background()
	f, src := newFake(t, kinesissrc.WithTailCalls(3))
	f.addAged("a", 300, time.Minute)
	f.addAged("hot", 4*kinesissrc.MaxRead, time.Microsecond)
	evs, err := src.Tail(ctx, "a", 50)
	require.NoError(t, err)
	require.Equal(t, seqRange(299, 300), seqs(evs), "10 s (1 call) and 100 s (2 calls) were read; 1000 s has no call left")
	require.Len(t, f.calls, 3)
	_, err = src.Tail(ctx, "hot", 50)
	require.ErrorIs(t, err, kinesissrc.ErrTailBudget)
	require.Len(t, f.calls, 6)
	for _, c := range f.calls {
		require.Equal(t, int32(kinesissrc.MaxRead), c.limit)
	}
	_, err = kinesissrc.New(f, "s", kinesissrc.WithTailCalls(0))
	require.ErrorIs(t, err, kinesissrc.ErrInvalid)
}

// TestTailOnServer: 300 records put across 4 shards of kinesis-local; Tail(50) of each shard is
// the last 50 of the shard as a full read gives them, in order; logs the GetRecords calls.
func TestTailOnServer(t *testing.T) {
	ctx := context.Background()
	src, _, c, name := newStream(t, 4, false)
	entries := make([]types.PutRecordsRequestEntry, 300)
	for i := range entries {
		entries[i] = types.PutRecordsRequestEntry{PartitionKey: aws.String(itoa(i % 37)), Data: []byte(`{"i":` + itoa(i) + `}`)}
	}
	for i := 0; i < len(entries); i += 100 { // in 3 calls: records of different arrival times
		_, err := c.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(name), Records: entries[i : i+100]})
		require.NoError(t, err)
	}
	ss, shards, err := kinesistest.ReadStream(ctx, c, name)
	require.NoError(t, err)
	total := 0
	for _, s := range ss {
		want := shards[s.ID]
		total += len(want)
		before := src.Stats().GetRecords
		start := time.Now()
		got, err := src.Tail(ctx, s.ID, 50)
		require.NoError(t, err)
		require.Equal(t, seqs(want[max(0, len(want)-50):]), seqs(got), s.ID)
		for i, e := range got {
			w := want[len(want)-len(got)+i]
			require.Equal(t, w.Data, e.Data)
			require.Equal(t, w.PartitionKey, e.PartitionKey)
		}
		t.Logf("%s: %d records, Tail(50) returned %d in %d GetRecords, %s", s.ID, len(want), len(got),
			src.Stats().GetRecords-before, time.Since(start).Round(time.Millisecond))
		before, start = src.Stats().GetRecords, time.Now()
		got, err = src.Tail(ctx, s.ID, 1000)
		require.NoError(t, err)
		require.Equal(t, seqs(want), seqs(got), "%s: fewer than n: the whole shard", s.ID)
		t.Logf("%s: Tail(1000) returned %d in %d GetRecords (every window to TRIM_HORIZON), %s", s.ID, len(got),
			src.Stats().GetRecords-before, time.Since(start).Round(time.Millisecond))
	}
	require.Equal(t, 300, total)
}
