package kinesis_test

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/projhost/projhost/internal/kinesistest"
	"github.com/projhost/projhost/source"
	kinesissrc "github.com/projhost/projhost/source/kinesis"
	"github.com/projhost/projhost/source/sourcetest"
)

func TestMain(m *testing.M) { kinesistest.Main(m) }

// newStream creates a fresh stream of n shards on the local server and returns the source over
// it (by name, or by ARN when byARN), its appender and the client.
func newStream(t *testing.T, n int, byARN bool) (*kinesissrc.Source, sourcetest.Appender, *kinesis.Client, string) {
	t.Helper()
	c := kinesistest.Client(t)
	name, arn := kinesistest.Stream(t, c, n)
	id := name
	if byARN {
		id = arn
	}
	src, err := kinesissrc.New(c, id)
	if err != nil {
		t.Fatal(err)
	}
	app := func(ctx context.Context, recs []sourcetest.Record) error {
		entries := make([]types.PutRecordsRequestEntry, len(recs))
		for i, r := range recs {
			entries[i] = types.PutRecordsRequestEntry{PartitionKey: aws.String(r.PartitionKey), Data: r.Data}
		}
		resent, err := kinesistest.Put(ctx, c, name, entries)
		if err == nil && resent > 0 {
			err = fmt.Errorf("%d entries were refused and sent again: the order of their keys is lost", resent)
		}
		return err
	}
	return src, app, c, name
}

func TestConformance(t *testing.T) {
	sourcetest.Run(t, func(t *testing.T, shards int) (source.Source, sourcetest.Appender) {
		src, app, _, _ := newStream(t, shards, false)
		return src, app
	}, kinesisLocalSlack)
}

// TestConformanceByARN: the same suite naming the stream by its ARN only.
func TestConformanceByARN(t *testing.T) {
	sourcetest.Run(t, func(t *testing.T, shards int) (source.Source, sourcetest.Appender) {
		src, app, _, _ := newStream(t, shards, true)
		return src, app
	}, kinesisLocalSlack)
}

// kinesisLocalSlack: kinesis-local's CreateStream rounds the even split its own way (the suite
// makes streams of at most 4 shards).
var kinesisLocalSlack = sourcetest.EvenSplitSlack(4)

func TestResharding(t *testing.T) {
	sourcetest.RunResharding(t, func(t *testing.T, shards int) (source.Source, sourcetest.Appender, sourcetest.Resharder) {
		src, app, c, name := newStream(t, shards, false)
		return src, app, resharder(c, name)
	})
}

// resharder splits and merges with SplitShard and MergeShards, waiting for the stream to be
// ACTIVE again, and finds the children in ListShards.
func resharder(c *kinesis.Client, stream string) sourcetest.Resharder {
	children := func(ctx context.Context, parents ...string) ([]types.Shard, error) {
		var kids []types.Shard
		in := &kinesis.ListShardsInput{StreamName: aws.String(stream)}
		for {
			out, err := c.ListShards(ctx, in)
			if err != nil {
				return nil, err
			}
			for _, s := range out.Shards {
				if aws.ToString(s.ParentShardId) == parents[0] && (len(parents) == 1 || aws.ToString(s.AdjacentParentShardId) == parents[1]) {
					kids = append(kids, s)
				}
			}
			if out.NextToken == nil {
				return kids, nil
			}
			in = &kinesis.ListShardsInput{NextToken: out.NextToken}
		}
	}
	shard := func(ctx context.Context, id string) (*types.Shard, error) {
		out, err := c.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String(stream)})
		if err != nil {
			return nil, err
		}
		for _, s := range out.Shards {
			if aws.ToString(s.ShardId) == id {
				return &s, nil
			}
		}
		return nil, fmt.Errorf("shard %s: %w", id, source.ErrUnknownShard)
	}
	unknown := func(err error) error {
		var nf *types.ResourceNotFoundException
		if errors.As(err, &nf) {
			return fmt.Errorf("%w: %v", source.ErrUnknownShard, err)
		}
		return err
	}
	return sourcetest.Resharder{
		Split: func(ctx context.Context, id string) (kids [2]string, err error) {
			s, err := shard(ctx, id)
			if err != nil {
				return kids, err
			}
			lo, _ := new(big.Int).SetString(aws.ToString(s.HashKeyRange.StartingHashKey), 10)
			hi, _ := new(big.Int).SetString(aws.ToString(s.HashKeyRange.EndingHashKey), 10)
			mid := new(big.Int).Add(lo, new(big.Int).Rsh(new(big.Int).Sub(hi, lo), 1))
			mid.Add(mid, big.NewInt(1))
			if _, err := c.SplitShard(ctx, &kinesis.SplitShardInput{StreamName: aws.String(stream), ShardToSplit: aws.String(id),
				NewStartingHashKey: aws.String(mid.String())}); err != nil {
				return kids, unknown(err)
			}
			if _, err := kinesistest.WaitActive(ctx, c, stream); err != nil {
				return kids, err
			}
			ks, err := children(ctx, id)
			if err != nil || len(ks) != 2 {
				return kids, fmt.Errorf("children of %s after the split: %v, %v", id, ks, err)
			}
			return [2]string{aws.ToString(ks[0].ShardId), aws.ToString(ks[1].ShardId)}, nil
		},
		Merge: func(ctx context.Context, a, b string) (string, error) {
			// kinesis-local takes the lower shard as ShardToMerge only (AWS takes either order).
			if sa, err := shard(ctx, a); err != nil {
				return "", err
			} else if sb, err := shard(ctx, b); err != nil {
				return "", err
			} else if hashLess(aws.ToString(sb.HashKeyRange.StartingHashKey), aws.ToString(sa.HashKeyRange.StartingHashKey)) {
				a, b = b, a
			}
			if _, err := c.MergeShards(ctx, &kinesis.MergeShardsInput{StreamName: aws.String(stream), ShardToMerge: aws.String(a),
				AdjacentShardToMerge: aws.String(b)}); err != nil {
				return "", unknown(err)
			}
			if _, err := kinesistest.WaitActive(ctx, c, stream); err != nil {
				return "", err
			}
			ks, err := children(ctx, a, b)
			if err != nil || len(ks) != 1 {
				return "", fmt.Errorf("child of %s and %s after the merge: %v, %v", a, b, ks, err)
			}
			return aws.ToString(ks[0].ShardId), nil
		},
	}
}

func hashLess(a, b string) bool {
	x, _ := new(big.Int).SetString(a, 10)
	y, _ := new(big.Int).SetString(b, 10)
	return x.Cmp(y) < 0
}

// expiringClient answers the GetRecords calls numbered in expire (from 0) with
// ExpiredIteratorException instead of asking the server: what Kinesis answers a reader whose
// handler stalled past the iterators' 5 minutes.
type expiringClient struct {
	*kinesis.Client
	expire map[int]bool
	n      int
}

func (c *expiringClient) GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	n := c.n
	c.n++
	if c.expire[n] {
		return nil, &types.ExpiredIteratorException{Message: aws.String("Iterator expired. The iterator was created at time X while right now it is Y which is further in the future than the tolerated delay of 300000 milliseconds.")}
	}
	return c.Client.GetRecords(ctx, in, optFns...)
}

// TestExpiredIteratorOnServer: on kinesis-local, iterators that expire before the first read,
// in the middle and twice in a row are renewed after the last record returned: every record
// once, in order.
func TestExpiredIteratorOnServer(t *testing.T) {
	tests := []struct {
		name   string
		expire []int
	}{
		{"before the first record", []int{0}},
		{"mid-shard", []int{2}},
		{"twice in a row", []int{3, 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := kinesistest.Client(t)
			name, _ := kinesistest.Stream(t, c, 1)
			const n = 40
			var entries []types.PutRecordsRequestEntry
			for i := 0; i < n; i++ {
				entries = append(entries, types.PutRecordsRequestEntry{PartitionKey: aws.String("k"), Data: fmt.Appendf(nil, "rec-%02d", i)})
			}
			if _, err := kinesistest.Put(context.Background(), c, name, entries); err != nil {
				t.Fatal(err)
			}
			ec := &expiringClient{Client: c, expire: map[int]bool{}}
			for _, e := range tt.expire {
				ec.expire[e] = true
			}
			src, err := kinesissrc.New(ec, name)
			if err != nil {
				t.Fatal(err)
			}
			ss, err := src.Shards(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			r, err := src.Open(context.Background(), ss[0].ID, "")
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for i := 0; len(got) < n && i < 100; i++ {
				b, err := r.Read(context.Background(), 7, time.Second)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range b.Events {
					got = append(got, string(e.Data))
				}
			}
			var want []string
			for i := 0; i < n; i++ {
				want = append(want, fmt.Sprintf("rec-%02d", i))
			}
			if !slices.Equal(got, want) {
				t.Fatalf("read %q, want %q", got, want)
			}
			if st := src.Stats(); st.ExpiredIterators != int64(len(tt.expire)) {
				t.Fatalf("ExpiredIterators = %d, want %d", st.ExpiredIterators, len(tt.expire))
			}
		})
	}
}

// TestUpdateShardCount: after UpdateShardCount 2 -> 4 on kinesis-local, Shards lists the closed
// parents before their children, 4 open shards cover the hash key range, and records put before
// and after the change are all read, parents to the end (ErrShardEnded) before children.
func TestUpdateShardCount(t *testing.T) {
	src, app, c, name := newStream(t, 2, false)
	ctx := context.Background()
	keys := make([]string, 30)
	for i := range keys {
		keys[i] = fmt.Sprintf("key-%d", i)
	}
	put := func(round int) {
		var recs []sourcetest.Record
		for _, k := range keys {
			recs = append(recs, sourcetest.Record{PartitionKey: k, Data: fmt.Appendf(nil, "%s/%d", k, round)})
		}
		if err := app(ctx, recs); err != nil {
			t.Fatal(err)
		}
	}
	put(0)
	if _, err := c.UpdateShardCount(ctx, &kinesis.UpdateShardCountInput{StreamName: aws.String(name), TargetShardCount: aws.Int32(4),
		ScalingType: types.ScalingTypeUniformScaling}); err != nil {
		t.Fatal(err)
	}
	if _, err := kinesistest.WaitActive(ctx, c, name); err != nil {
		t.Fatal(err)
	}
	put(1)
	ss, err := src.Shards(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]source.Shard{}
	var open []source.Shard
	for _, s := range ss {
		for _, p := range s.ParentIDs {
			if ps, ok := seen[p]; !ok || !ps.Closed {
				t.Fatalf("shard %s: parent %s not listed before it, or open: %+v", s.ID, p, ss)
			}
		}
		seen[s.ID] = s
		if !s.Closed {
			open = append(open, s)
		}
	}
	if len(open) != 4 {
		t.Fatalf("%d open shards after UpdateShardCount to 4: %+v", len(open), ss)
	}
	slices.SortFunc(open, func(a, b source.Shard) int {
		if hashLess(a.HashKeyStart, b.HashKeyStart) {
			return -1
		}
		return 1
	})
	next := big.NewInt(0)
	for _, s := range open {
		start, _ := new(big.Int).SetString(s.HashKeyStart, 10)
		end, _ := new(big.Int).SetString(s.HashKeyEnd, 10)
		if start.Cmp(next) != 0 {
			t.Fatalf("open shard %s starts at %s, want %s: %+v", s.ID, start, next, open)
		}
		next = end.Add(end, big.NewInt(1))
	}
	if next.Cmp(new(big.Int).Lsh(big.NewInt(1), 128)) != 0 {
		t.Fatalf("open shards end at %s, want 2^128-1", next)
	}
	// Read in lineage order: a shard only after its parents ended.
	perKey := map[string][]string{}
	for _, s := range ss {
		r, err := src.Open(ctx, s.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; ; i++ {
			b, err := r.Read(ctx, 100, 200*time.Millisecond)
			if errors.Is(err, source.ErrShardEnded) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range b.Events {
				perKey[e.PartitionKey] = append(perKey[e.PartitionKey], string(e.Data))
			}
			if !s.Closed && len(b.Events) == 0 && b.MillisBehind == 0 {
				break
			}
			if i > 200 {
				t.Fatalf("shard %s: no end after %d reads", s.ID, i)
			}
		}
		r.Close()
	}
	for _, k := range keys {
		if want := []string{k + "/0", k + "/1"}; !slices.Equal(perKey[k], want) {
			t.Fatalf("records of %s in lineage order = %q, want %q", k, perKey[k], want)
		}
	}
	t.Logf("after UpdateShardCount 2 -> 4: %d shards listed, 4 open", len(ss))
}
