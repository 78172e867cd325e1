package esm_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/internal/esm"
)

const streamARN = "arn:aws:kinesis:us-east-1:123456789012:stream/flights"

// fakeKinesis is an in-memory stream: shards of records, iterators "shard|index".
type fakeKinesis struct {
	mu     sync.Mutex
	shards []fakeShard
}

type fakeShard struct {
	id, parent string
	closed     bool
	recs       []types.Record
}

func (f *fakeKinesis) shard(id string) *fakeShard {
	for i := range f.shards {
		if f.shards[i].id == id {
			return &f.shards[i]
		}
	}
	return nil
}

func (f *fakeKinesis) ListShards(_ context.Context, in *kinesis.ListShardsInput, _ ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := &kinesis.ListShardsOutput{}
	for _, s := range f.shards {
		sh := types.Shard{ShardId: aws.String(s.id)}
		if s.parent != "" {
			sh.ParentShardId = aws.String(s.parent)
		}
		out.Shards = append(out.Shards, sh)
	}
	return out, nil
}

func (f *fakeKinesis) GetShardIterator(_ context.Context, in *kinesis.GetShardIteratorInput, _ ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.shard(aws.ToString(in.ShardId))
	if s == nil {
		return nil, errors.New("no such shard")
	}
	i := 0
	switch in.ShardIteratorType {
	case types.ShardIteratorTypeLatest:
		i = len(s.recs)
	case types.ShardIteratorTypeAfterSequenceNumber:
		for i < len(s.recs) && aws.ToString(s.recs[i].SequenceNumber) != aws.ToString(in.StartingSequenceNumber) {
			i++
		}
		i++
	}
	return &kinesis.GetShardIteratorOutput{ShardIterator: aws.String(fmt.Sprintf("%s|%d", s.id, i))}, nil
}

func (f *fakeKinesis) GetRecords(_ context.Context, in *kinesis.GetRecordsInput, _ ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id, n, _ := strings.Cut(aws.ToString(in.ShardIterator), "|")
	i, _ := strconv.Atoi(n)
	s := f.shard(id)
	j := min(len(s.recs), i+int(aws.ToInt32(in.Limit)))
	out := &kinesis.GetRecordsOutput{Records: s.recs[i:j], MillisBehindLatest: aws.Int64(0)}
	if j < len(s.recs) {
		out.MillisBehindLatest = aws.Int64(1000)
	}
	if !s.closed || j < len(s.recs) {
		out.NextShardIterator = aws.String(fmt.Sprintf("%s|%d", id, j))
	}
	return out, nil
}

// seq is record i's sequence number in shard n.
func seq(n, i int) string { return fmt.Sprintf("4959%04d%048d", n, i+1) }

// recs are n records of shard sh with data "r<i>" (or what data returns), arrived at times.
func recs(sh, n int, arrival func(i int) time.Time) []types.Record {
	out := make([]types.Record, n)
	for i := range out {
		at := time.Now()
		if arrival != nil {
			at = arrival(i)
		}
		out[i] = types.Record{SequenceNumber: aws.String(seq(sh, i)), PartitionKey: aws.String("k" + strconv.Itoa(i%7)),
			Data: []byte("r" + strconv.Itoa(i)), ApproximateArrivalTimestamp: aws.Time(at)}
	}
	return out
}

func shardID(n int) string { return fmt.Sprintf("shardId-%012d", n) }

// fn is a fake function: behaviour per record index (from its data "r<i>"), counting what it
// handled. It handles a batch all or nothing up to the first failing record, like lambda's
// Handler does.
type fn struct {
	mu       sync.Mutex
	calls    []string // "shard:first-last" by index
	handled  map[string]int
	behave   func(call, i int) string // "" ok, "fail" (batchItemFailures), "error" (function error), "bogus", "empty"
	ncall    int
	reported []string
}

func (f *fn) handle(_ context.Context, in events.KinesisEvent) (events.KinesisEventResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ncall++
	idx := func(r events.KinesisEventRecord) int { i, _ := strconv.Atoi(string(r.Kinesis.Data[1:])); return i }
	rs := in.Records
	sid, _, _ := strings.Cut(rs[0].EventID, ":")
	f.calls = append(f.calls, fmt.Sprintf("%s:%d-%d", sid[len(sid)-1:], idx(rs[0]), idx(rs[len(rs)-1])))
	ok := events.KinesisEventResponse{BatchItemFailures: []events.KinesisBatchItemFailure{}}
	for n, r := range rs {
		switch f.behave(f.ncall, idx(r)) {
		case "error":
			return events.KinesisEventResponse{}, errors.New("boom")
		case "bogus":
			return events.KinesisEventResponse{BatchItemFailures: []events.KinesisBatchItemFailure{{ItemIdentifier: "123"}}}, nil
		case "empty":
			return events.KinesisEventResponse{BatchItemFailures: []events.KinesisBatchItemFailure{{ItemIdentifier: ""}}}, nil
		case "fail":
			f.commit(rs[:n])
			f.reported = append(f.reported, r.Kinesis.SequenceNumber)
			return events.KinesisEventResponse{BatchItemFailures: []events.KinesisBatchItemFailure{{ItemIdentifier: r.Kinesis.SequenceNumber}}}, nil
		}
	}
	f.commit(rs)
	return ok, nil
}

func (f *fn) commit(rs []events.KinesisEventRecord) {
	for _, r := range rs {
		f.handled[r.EventID]++
	}
}

type run struct {
	d        *esm.Driver
	f        *fn
	failures []esm.FailureRecord
}

func runDriver(t *testing.T, k *fakeKinesis, behave func(call, i int) string, mut func(*esm.Config)) *run {
	t.Helper()
	r := &run{f: &fn{handled: map[string]int{}, behave: behave}}
	if behave == nil {
		r.f.behave = func(int, int) string { return "" }
	}
	var mu sync.Mutex
	cfg := esm.Config{Kinesis: k, StreamARN: streamARN, Invoker: esm.HandlerInvoker(r.f.handle, time.Minute),
		ReportBatchItemFailures: true, MaximumRetryAttempts: -1, PollInterval: 5 * time.Millisecond,
		RetryBackoff: time.Millisecond, Logger: slog.New(slog.DiscardHandler),
		OnFailure: func(fr esm.FailureRecord) { mu.Lock(); r.failures = append(r.failures, fr); mu.Unlock() }}
	if mut != nil {
		mut(&cfg)
	}
	d, err := esm.New(cfg)
	require.NoError(t, err)
	r.d = d
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, d.RunToTip(ctx))
	return r
}

func oneShard(n int, arrival func(int) time.Time) *fakeKinesis {
	return &fakeKinesis{shards: []fakeShard{{id: shardID(0), recs: recs(0, n, arrival)}}}
}

// TestDriver: the mapping's behaviours, with a fake function invoked in-process.
func TestDriver(t *testing.T) {
	failAt := func(i0 int, times int) func(call, i int) string {
		return func(call, i int) string {
			if i == i0 && call <= times {
				return "fail"
			}
			return ""
		}
	}
	for _, c := range []struct {
		name     string
		n        int
		behave   func(call, i int) string
		mut      func(*esm.Config)
		calls    []string
		failures []string // condition:first-last (indexes)
		skipped  []int    // records never handled
	}{
		{name: "batches", n: 250, calls: []string{"0:0-99", "0:100-199", "0:200-249"}},
		{name: "partial failure: checkpoint before it, retry from it", n: 150, behave: failAt(42, 2),
			calls: []string{"0:0-99", "0:42-99", "0:42-99", "0:100-149"}},
		{name: "unknown identifier fails the whole batch", n: 100,
			behave: func(call, i int) string { return map[bool]string{true: "bogus"}[call == 1 && i == 3] },
			calls:  []string{"0:0-99", "0:0-99"}},
		{name: "empty identifier fails the whole batch", n: 100,
			behave: func(call, i int) string { return map[bool]string{true: "empty"}[call == 1 && i == 3] },
			calls:  []string{"0:0-99", "0:0-99"}},
		{name: "function error retries the whole batch", n: 20,
			behave: func(call, i int) string { return map[bool]string{true: "error"}[call <= 2 && i == 5] },
			mut:    func(c *esm.Config) { c.BatchSize = 10 },
			calls:  []string{"0:0-9", "0:0-9", "0:0-9", "0:10-19"}},
		{name: "retries exhausted: on-failure record, the shard goes on", n: 20,
			behave: func(call, i int) string { return map[bool]string{true: "error"}[i == 5] },
			mut:    func(c *esm.Config) { c.BatchSize = 10; c.MaximumRetryAttempts = 2 },
			calls:  []string{"0:0-9", "0:0-9", "0:0-9", "0:10-19"}, failures: []string{"RetryAttemptsExhausted:0-9"},
			skipped: []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}},
		{name: "partial failures exhausted: the remaining records given up", n: 20, behave: failAt(5, 100),
			mut:   func(c *esm.Config) { c.BatchSize = 10; c.MaximumRetryAttempts = 1 },
			calls: []string{"0:0-9", "0:5-9", "0:10-19"}, failures: []string{"RetryAttemptsExhausted:5-9"},
			skipped: []int{5, 6, 7, 8, 9}},
		{name: "function error and bisect", n: 16,
			behave: func(call, i int) string { return map[bool]string{true: "error"}[i == 10] },
			mut: func(c *esm.Config) {
				c.BatchSize = 16
				c.BisectBatchOnFunctionError = true
				c.MaximumRetryAttempts = 1
			},
			calls:    []string{"0:0-15", "0:0-7", "0:8-15", "0:8-11", "0:8-9", "0:10-11", "0:10-10", "0:10-10", "0:11-11", "0:12-15"},
			failures: []string{"RetryAttemptsExhausted:10-10"}, skipped: []int{10}},
		{name: "record age: old records given up uninvoked", n: 10,
			mut:   func(c *esm.Config) { c.MaximumRecordAge = time.Hour },
			calls: []string{"0:5-9"}, failures: []string{"RecordAgeExceeded:0-4"}, skipped: []int{0, 1, 2, 3, 4}},
		{name: "record age: a failing batch given up once too old", n: 10,
			behave:   func(call, i int) string { return map[bool]string{true: "error"}[i == 5] },
			mut:      func(c *esm.Config) { c.MaximumRecordAge = 300 * time.Millisecond; c.BatchSize = 5 },
			failures: []string{"RecordAgeExceeded:5-9"}, skipped: []int{5, 6, 7, 8, 9}},
	} {
		t.Run(c.name, func(t *testing.T) {
			arrival := func(int) time.Time { return time.Now() }
			if strings.Contains(c.name, "uninvoked") {
				arrival = func(i int) time.Time {
					if i < 5 {
						return time.Now().Add(-2 * time.Hour)
					}
					return time.Now()
				}
			}
			k := oneShard(c.n, arrival)
			r := runDriver(t, k, c.behave, c.mut)
			if c.calls != nil {
				require.Equal(t, c.calls, r.f.calls)
			}
			var got []string
			for _, fr := range r.failures {
				b := fr.KinesisBatchInfo
				first, last := index(t, b.StartSequenceNumber), index(t, b.EndSequenceNumber)
				got = append(got, fmt.Sprintf("%s:%d-%d", fr.RequestContext.Condition, first, last))
				require.Equal(t, last-first+1, b.BatchSize)
				require.Equal(t, shardID(0), b.ShardID)
				require.Equal(t, streamARN, b.StreamARN)
				require.Equal(t, "1.0", fr.Version)
				require.NotEmpty(t, fr.RequestContext.RequestID)
				require.Contains(t, fr.RequestContext.FunctionARN, "arn:aws:lambda:us-east-1:123456789012:function:")
				_, err := time.Parse(time.RFC3339Nano, b.ApproximateArrivalOfFirstRecord)
				require.NoError(t, err)
				if fr.RequestContext.Condition == esm.RetryAttemptsExhausted {
					require.Positive(t, fr.RequestContext.ApproximateInvokeCount)
					require.Equal(t, 200, fr.ResponseContext.StatusCode)
				}
			}
			require.Equal(t, c.failures, got)
			skipped := map[int]bool{}
			for _, i := range c.skipped {
				skipped[i] = true
			}
			for i := range c.n {
				want := 1
				if skipped[i] {
					want = 0
				}
				require.Equal(t, want, r.f.handled[shardID(0)+":"+seq(0, i)], "record %d", i)
			}
			require.Equal(t, map[string]string{shardID(0): seq(0, c.n-1)}, r.d.Checkpoints())
		})
	}
}

func index(t *testing.T, s string) int {
	t.Helper()
	i, err := strconv.Atoi(strings.TrimLeft(s[8:], "0"))
	require.NoError(t, err)
	return i - 1
}

// TestLineage: a closed parent is read to its end before its children start; the children
// run at once.
func TestLineage(t *testing.T) {
	k := &fakeKinesis{shards: []fakeShard{
		{id: shardID(0), closed: true, recs: recs(0, 300, nil)},
		{id: shardID(1), parent: shardID(0), recs: recs(1, 50, nil)},
		{id: shardID(2), parent: shardID(0), recs: recs(2, 50, nil)},
	}}
	r := runDriver(t, k, nil, nil)
	require.Len(t, r.f.calls, 5)
	require.Equal(t, []string{"0:0-99", "0:100-199", "0:200-299"}, r.f.calls[:3])
	rest := r.f.calls[3:]
	sort.Strings(rest)
	require.Equal(t, []string{"1:0-49", "2:0-49"}, rest)
	require.Equal(t, map[string]string{shardID(0): seq(0, 299), shardID(1): seq(1, 49), shardID(2): seq(2, 49)}, r.d.Checkpoints())
}

// TestBatchingWindow: fewer records than BatchSize wait for the window.
func TestBatchingWindow(t *testing.T) {
	k := oneShard(10, nil)
	start := time.Now()
	r := runDriver(t, k, nil, func(c *esm.Config) { c.MaximumBatchingWindow = 300 * time.Millisecond })
	require.Equal(t, []string{"0:0-9"}, r.f.calls)
	require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)
}

// TestCheckpoints: a driver starts after its given checkpoints; StartingPosition LATEST skips
// what is there.
func TestCheckpoints(t *testing.T) {
	r := runDriver(t, oneShard(30, nil), nil, func(c *esm.Config) { c.Checkpoints = map[string]string{shardID(0): seq(0, 9)} })
	require.Equal(t, []string{"0:10-29"}, r.f.calls)
	r = runDriver(t, oneShard(30, nil), nil, func(c *esm.Config) { c.StartingPosition = types.ShardIteratorTypeLatest })
	require.Empty(t, r.f.calls)
}

// TestEventShape: the event has the fields of aws-lambda-go's sample Kinesis event
// (events/testdata/kinesis-event.json, from the module cache), with the values the service sets.
func TestEventShape(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/aws/aws-lambda-go").Output()
	require.NoError(t, err)
	sample, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "events", "testdata", "kinesis-event.json"))
	require.NoError(t, err)
	keys := func(b []byte) (outer, inner []string) {
		var ev struct{ Records []map[string]json.RawMessage }
		require.NoError(t, json.Unmarshal(b, &ev))
		var k map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(ev.Records[0]["kinesis"], &k))
		return esm.SortedShards(ev.Records[0]), esm.SortedShards(k)
	}
	at := time.UnixMilli(1700000000123)
	ev := esm.Event(streamARN, "us-east-1", shardID(3), recs(3, 2, func(int) time.Time { return at }))
	b, err := json.Marshal(ev)
	require.NoError(t, err)
	wo, wi := keys(sample)
	go_, gi := keys(b)
	require.Equal(t, wo, go_)
	require.Equal(t, wi, gi)
	var back events.KinesisEvent
	require.NoError(t, json.Unmarshal(b, &back))
	r := back.Records[1]
	require.Equal(t, shardID(3)+":"+seq(3, 1), r.EventID)
	require.Equal(t, "aws:kinesis:record", r.EventName)
	require.Equal(t, "aws:kinesis", r.EventSource)
	require.Equal(t, "1.0", r.EventVersion)
	require.Equal(t, "us-east-1", r.AwsRegion)
	require.Equal(t, streamARN, r.EventSourceArn)
	require.Equal(t, "1.0", r.Kinesis.KinesisSchemaVersion)
	require.Equal(t, "r1", string(r.Kinesis.Data))
	require.Equal(t, "k1", r.Kinesis.PartitionKey)
	require.Equal(t, at.UnixMilli(), r.Kinesis.ApproximateArrivalTimestamp.Round(time.Millisecond).UnixMilli())
	require.Contains(t, string(b), `"data":"cjE="`, "data is base64")
}
