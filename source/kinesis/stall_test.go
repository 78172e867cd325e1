package kinesis_test

// A handler stalled past the shard iterators' expiry, in container mode over kinesis-local:
// the reader's iterator ages past the expiry between two GetRecords of a shard while records
// are pending, and the shard resumes without a gap or a duplicate.

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/container"
	"github.com/projhost/projhost/internal/flightcheck"
	"github.com/projhost/projhost/internal/kinesistest"
	"github.com/projhost/projhost/projection"
	kinesissrc "github.com/projhost/projhost/source/kinesis"
)

// agingClient applies Kinesis' iterator expiry (5 minutes: GetShardIterator API reference) at a
// test's scale: a GetRecords whose iterator was issued (by GetShardIterator, or as the
// NextShardIterator of a GetRecords) more than expiry ago is answered with
// ExpiredIteratorException without asking the server. Safe for concurrent use.
type agingClient struct {
	kinesissrc.API
	expiry time.Duration

	mu      sync.Mutex
	issued  map[string]time.Time // iterator -> when it was handed out
	expired int                  // GetRecords answered with ExpiredIteratorException
}

func newAgingClient(api kinesissrc.API, expiry time.Duration) *agingClient {
	return &agingClient{API: api, expiry: expiry, issued: map[string]time.Time{}}
}

func (c *agingClient) issue(it *string) {
	if it != nil {
		c.mu.Lock()
		c.issued[*it] = time.Now()
		c.mu.Unlock()
	}
}

func (c *agingClient) GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, optFns ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	out, err := c.API.GetShardIterator(ctx, in, optFns...)
	if err == nil {
		c.issue(out.ShardIterator)
	}
	return out, err
}

func (c *agingClient) GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	it := aws.ToString(in.ShardIterator)
	c.mu.Lock()
	at, ok := c.issued[it]
	age := time.Since(at)
	if ok && age > c.expiry {
		c.expired++
		c.mu.Unlock()
		return nil, &types.ExpiredIteratorException{Message: aws.String(fmt.Sprintf(
			"Iterator expired. The iterator was created %v ago, longer than the tolerated delay of %v.", age.Round(time.Millisecond), c.expiry))}
	}
	c.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("agingClient: GetRecords with an iterator it never handed out: %.40q", it)
	}
	out, err := c.API.GetRecords(ctx, in, optFns...)
	if err == nil {
		c.issue(out.NextShardIterator)
	}
	return out, err
}

// expiries returns how many GetRecords the client answered with ExpiredIteratorException.
func (c *agingClient) expiries() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.expired
}

// TestStalledHandlerPastIteratorExpiry: a container worker projects 2,000 flights from a
// 2-shard kinesis-local stream through a client whose iterators expire after 300 ms, while a
// Batch hook stalls the shard's loop for 700 ms after every third batch of a shard that has
// records left. The stall ages the reader's iterator past the expiry between two GetRecords
// with records pending; the reader renews it after the last record it returned. Every record
// of every shard is applied exactly once and in order (the batches of a shard, end to end, are
// the shard's records as a plain reader reads them), the read model equals the independent
// computation, the expiries happened (Stats().ExpiredIterators at least the stalls, and equal
// to the expiries the client answered) and no cursor fell back to TRIM_HORIZON.
func TestStalledHandlerPastIteratorExpiry(t *testing.T) {
	const (
		expiry = 300 * time.Millisecond
		stall  = 700 * time.Millisecond
		batch  = 100
	)
	c := kinesistest.Client(t)
	name, _ := kinesistest.Stream(t, c, 2)
	fs := flightcheck.Load(t, flightcheck.DataPath("flights-2k.json"))
	ctx := context.Background()
	putFlights(t, c, name, fs)
	_, recs, err := kinesistest.ReadStream(ctx, c, name)
	require.NoError(t, err)
	want := map[string][]string{} // shard -> its records' sequence numbers in order
	for id, evs := range recs {
		for _, e := range evs {
			want[id] = append(want[id], e.Seq)
		}
	}
	total := 0
	for id, seqs := range want {
		require.NotEmpty(t, seqs, "shard %s got no flight", id)
		total += len(seqs)
	}
	require.Equal(t, len(fs), total)

	aging := newAgingClient(c, expiry)
	src, err := kinesissrc.New(aging, name, kinesissrc.WithLogger(quiet))
	require.NoError(t, err)
	st, mod := flightStore(t)

	type span struct {
		first, last string
		n           int
	}
	var mu sync.Mutex
	batches := map[string][]span{}
	stalls := 0
	hooks := projection.Hooks{Batch: func(i projection.BatchInfo) {
		mu.Lock()
		bs := append(batches[i.ShardID], span{i.FirstSeq, i.LastSeq, i.Events})
		batches[i.ShardID] = bs
		handled := 0
		for _, b := range bs {
			handled += b.n
		}
		pause := len(bs)%3 == 1 && handled < len(want[i.ShardID])
		if pause {
			stalls++
		}
		mu.Unlock()
		if pause {
			// The shard's loop waits here (the hook runs in it), after the read that
			// returned this batch and before the next one: the reader's iterator ages.
			time.Sleep(stall)
		}
	}}
	r, err := container.New(container.Config{
		Config: projection.Config{Projection: "flights", Stores: st, Modules: projection.Fixed(mod), Logger: quiet,
			Hooks: hooks, CursorEveryEvents: batch},
		WorkerID: "w1", Source: src, BatchSize: batch, UntilCaughtUp: true,
	})
	require.NoError(t, err)
	runCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	start := time.Now()
	require.NoError(t, r.Run(runCtx))
	require.NoError(t, runCtx.Err(), "the worker did not catch up within 60 s")
	elapsed := time.Since(start)

	docs, err := st.ReadModel.Scan(ctx, "flights", "")
	require.NoError(t, err)
	flightcheck.Check(t, fs, docs)
	mu.Lock()
	defer mu.Unlock()
	for id, seqs := range want {
		next := 0 // index in seqs of the record the next batch must start with
		for _, b := range batches[id] {
			require.Less(t, next, len(seqs), "shard %s: a batch %s..%s after its last record", id, b.first, b.last)
			require.Equal(t, seqs[next], b.first, "shard %s: batch after record %d starts at %s (a gap or a duplicate)", id, next, b.first)
			next += b.n
			require.LessOrEqual(t, next, len(seqs), "shard %s: batch %s..%s runs past the shard's records", id, b.first, b.last)
			require.Equal(t, seqs[next-1], b.last, "shard %s: batch of %d from %s ends at %s", id, b.n, b.first, b.last)
		}
		require.Equal(t, len(seqs), next, "shard %s: records applied", id)
	}
	require.Len(t, batches, len(want))
	stats := src.Stats()
	require.Positive(t, stalls)
	require.GreaterOrEqual(t, stats.ExpiredIterators, int64(stalls), "every stall with records left ages the iterator past the expiry")
	require.Equal(t, int64(aging.expiries()), stats.ExpiredIterators, "every expiry answered got a new iterator")
	require.Zero(t, stats.TrimmedFallbacks)
	require.Zero(t, r.Stats().LeasesLost)
	t.Logf("%d records over %d shards in %v: %d stalls of %v, %d expired iterators renewed (expiry %v), %d GetRecords",
		total, len(want), elapsed.Round(time.Millisecond), stalls, stall, stats.ExpiredIterators, expiry, stats.GetRecords)
}
