package kinesisadmin

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/stretchr/testify/require"
)

// fakePut records PutRecords calls and refuses the entries refuse picks.
type fakePut struct {
	API
	calls  [][]string // partition keys of each call
	bytes  []int      // data+key bytes of each call
	stored []string
	refuse func(call int, key string) bool
}

func (f *fakePut) PutRecords(_ context.Context, in *kinesis.PutRecordsInput, _ ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error) {
	call := len(f.calls)
	var keys []string
	n := 0
	out := &kinesis.PutRecordsOutput{}
	for _, e := range in.Records {
		k := aws.ToString(e.PartitionKey)
		keys = append(keys, k)
		n += len(e.Data) + len(k)
		if f.refuse != nil && f.refuse(call, k) {
			out.Records = append(out.Records, types.PutRecordsResultEntry{ErrorCode: aws.String("ProvisionedThroughputExceededException")})
			continue
		}
		f.stored = append(f.stored, k)
		out.Records = append(out.Records, types.PutRecordsResultEntry{SequenceNumber: aws.String(fmt.Sprint(len(f.stored)))})
	}
	f.calls, f.bytes = append(f.calls, keys), append(f.bytes, n)
	return out, nil
}

// TestPutterBatches: calls hold at most 500 records and 5 MiB of data and keys, records go in
// input order, and each call is as full as the limits allow.
func TestPutterBatches(t *testing.T) {
	for _, tc := range []struct {
		name      string
		n, size   int
		wantCalls []int // records per call
	}{
		{"1,201 small records: 500, 500, 201", 1201, 10, []int{500, 500, 201}},
		{"exactly 500", 500, 10, []int{500}},
		{"12 records of 1 MiB less the key: 5 a call (5 MiB)", 12, MaxRecordBytes - 3, []int{5, 5, 2}},
		{"records of 600 KiB: 8 a call", 17, 600 << 10, []int{8, 8, 1}},
		{"none", 0, 10, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakePut{}
			p := NewPutter(f, "s")
			for i := range tc.n {
				require.NoError(t, p.Add(context.Background(), Record{PartitionKey: fmt.Sprintf("%03d", i%1000), Data: bytes.Repeat([]byte{'x'}, tc.size)}))
			}
			require.NoError(t, p.Flush(context.Background()))
			var got []int
			for i, c := range f.calls {
				got = append(got, len(c))
				require.LessOrEqual(t, f.bytes[i], MaxPutBytes)
			}
			require.Equal(t, tc.wantCalls, got)
			require.Len(t, f.stored, tc.n)
			require.Equal(t, PutStats{Records: tc.n, Calls: len(tc.wantCalls)}, p.Stats())
			require.Equal(t, tc.n, p.Stored())
		})
	}
}

// TestPutterResendsOnlyRefused: refused entries are sent again alone, each record is stored
// once, and Resent counts them.
func TestPutterResendsOnlyRefused(t *testing.T) {
	f := &fakePut{refuse: func(call int, key string) bool {
		// The first call refuses keys ending in 7, the second (the retry) those ending in 77.
		return call == 0 && strings.HasSuffix(key, "7") || call == 1 && strings.HasSuffix(key, "77")
	}}
	p := NewPutter(f, "s")
	for i := range 300 {
		require.NoError(t, p.Add(context.Background(), Record{PartitionKey: fmt.Sprintf("%03d", i), Data: []byte("{}")}))
	}
	require.NoError(t, p.Flush(context.Background()))
	require.Len(t, f.calls, 3)
	require.Len(t, f.calls[0], 300)
	require.Len(t, f.calls[1], 30) // 007, 017, ..., 297
	require.Equal(t, []string{"077", "177", "277"}, f.calls[2])
	require.Len(t, f.stored, 300)
	seen := map[string]bool{}
	for _, k := range f.stored {
		require.False(t, seen[k], "stored twice: %s", k)
		seen[k] = true
	}
	require.Equal(t, PutStats{Records: 300, Calls: 3, Resent: 33}, p.Stats())
}

// TestPutterGivesUp: an entry refused MaxRounds times ends the put in ErrRefused, after
// MaxRounds calls; the other entries of its batch are stored once, the refused one stays
// pending, and Stored counts only the batches confirmed whole (none).
func TestPutterGivesUp(t *testing.T) {
	f := &fakePut{refuse: func(_ int, key string) bool { return key == "b" }}
	p := NewPutter(f, "s")
	p.retryMin, p.retryMax = time.Millisecond, 2*time.Millisecond
	ctx := context.Background()
	for _, k := range []string{"a", "b", "c"} {
		require.NoError(t, p.Add(ctx, Record{PartitionKey: k, Data: []byte("{}")}))
	}
	err := p.Flush(ctx)
	require.ErrorIs(t, err, ErrRefused)
	require.Len(t, f.calls, MaxRounds)
	require.Equal(t, []string{"a", "c"}, f.stored)
	require.Equal(t, 1, p.Pending())
	require.Equal(t, 0, p.Stored())
	require.Equal(t, PutStats{Records: 2, Calls: MaxRounds, Resent: MaxRounds - 1}, p.Stats())
}

func TestPutterTooLarge(t *testing.T) {
	f := &fakePut{}
	p := NewPutter(f, "s")
	err := p.Add(context.Background(), Record{PartitionKey: "k", Data: make([]byte, MaxRecordBytes)})
	require.ErrorIs(t, err, ErrTooLarge)
	require.Empty(t, f.calls)
	require.Equal(t, 0, p.Pending())
}

func TestMidHashKeyAndSplitKey(t *testing.T) {
	sh := func(lo, hi string) types.Shard {
		return types.Shard{ShardId: aws.String("s"), HashKeyRange: &types.HashKeyRange{StartingHashKey: aws.String(lo), EndingHashKey: aws.String(hi)}}
	}
	full := sh("0", "340282366920938463463374607431768211455")
	mid, err := MidHashKey(full)
	require.NoError(t, err)
	require.Equal(t, "170141183460469231731687303715884105728", mid) // 2^127: Kinesis' own split of 2 shards
	mid, err = MidHashKey(sh("10", "13"))
	require.NoError(t, err)
	require.Equal(t, "12", mid) // children [10, 11] and [12, 13]
	_, err = MidHashKey(sh("5", "5"))
	require.ErrorContains(t, err, "single hash key")
	for _, tc := range []struct {
		key string
		ok  bool
	}{{"11", true}, {"13", true}, {"10", false}, {"14", false}, {"x", false}, {"-1", false}} {
		err := CheckSplitKey(sh("10", "13"), tc.key)
		require.Equal(t, tc.ok, err == nil, "%s: %v", tc.key, err)
	}
}
