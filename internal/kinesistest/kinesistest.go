// Package kinesistest gives tests a Kinesis Data Streams client for a real local
// Kinesis-compatible server, and fresh streams on it.
//
// Use it from a test package's TestMain:
//
//	func TestMain(m *testing.M) { kinesistest.Main(m) }
//
// Main uses the server at $PROJHOST_KINESIS_ENDPOINT when set (e.g. "http://127.0.0.1:4568" from
// tools/kinesis-local/start.sh, which .ci/run starts); otherwise it starts tools/kinesis-local on
// a free loopback port for the package's tests and stops it afterwards. When no server can be
// had, tests calling Client are skipped — unless CI=true, where Main fails the run instead.
//
// kinesis-local 0.6.2 (a build of kinesis-mock) behaves as Kinesis where the tests look: StreamARN
// calls, ListShards paging, ChildShards, MillisBehindLatest, SplitShard, MergeShards and
// UpdateShardCount (a stream is UPDATING for a moment after each: WaitActive). Its shard and
// stream operations take 0 ms as started by tools/kinesis-local.
package kinesistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/projhost/projhost/internal/kinesisadmin"
	"github.com/projhost/projhost/internal/localserver"
	"github.com/projhost/projhost/source"
	kinesissrc "github.com/projhost/projhost/source/kinesis"
)

// EndpointEnv names the environment variable with an already running server's endpoint URL.
const EndpointEnv = "PROJHOST_KINESIS_ENDPOINT"

var harness = &localserver.Harness{Name: "kinesistest",
	Server: localserver.Server{Tool: "kinesis-local", PidEnv: "KINESIS_LOCAL_PIDFILE", EndpointEnv: EndpointEnv}}

// Main finds or starts the server, runs the tests, stops a server it started, and exits with
// the tests' code. It never returns.
func Main(m *testing.M) { os.Exit(Run(m)) }

// Run is Main without the exit, for a TestMain with more to clean up: it returns the exit code.
func Run(m *testing.M) int { return harness.Run(m) }

// RunFunc is Run around run: a TestMain that needs another server too calls
// kinesistest.RunFunc(func() int { return dynamotest.Run(m) }).
func RunFunc(run func() int) int { return harness.RunFunc(run) }

// Endpoint returns the server's endpoint URL, or skips t when there is none.
func Endpoint(t testing.TB) string {
	t.Helper()
	return harness.Endpoint(t)
}

// AttemptTimeout bounds one HTTP attempt of Client's calls: long, because kinesis-local takes
// seconds for a PutRecords of 500 on a loaded machine, and a timed-out attempt that the SDK
// retries may be applied twice.
const AttemptTimeout = 2 * time.Minute

// Client returns a client for the server (region us-east-1, dummy credentials, AttemptTimeout),
// or skips t.
func Client(t testing.TB) *kinesis.Client {
	t.Helper()
	ep := Endpoint(t)
	c, err := kinesissrc.NewClient(context.Background(), kinesissrc.WithEndpoint(ep),
		kinesissrc.WithStaticCredentials("local", "local"), kinesissrc.WithRegion(kinesissrc.LocalRegion),
		kinesissrc.WithAttemptTimeout(AttemptTimeout))
	if err != nil {
		t.Fatalf("kinesistest: client for %s: %v", ep, err)
	}
	return c
}

// Stream creates a stream of n shards (provisioned mode) under a fresh random name
// ("t<hex>"), waits until it is ACTIVE, deletes it when t ends, and returns its name and ARN.
func Stream(t testing.TB, c *kinesis.Client, shards int) (name, arn string) {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name = "t" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(name), ShardCount: aws.Int32(int32(shards))}); err != nil {
		t.Fatalf("kinesistest: create stream %s of %d shards: %v", name, shards, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := c.DeleteStream(ctx, &kinesis.DeleteStreamInput{StreamName: aws.String(name), EnforceConsumerDeletion: aws.Bool(true)}); err != nil {
			t.Errorf("kinesistest: delete stream %s: %v", name, err)
		}
	})
	arn, err := WaitActive(ctx, c, name)
	if err != nil {
		t.Fatalf("kinesistest: %v", err)
	}
	return name, arn
}

// WaitActive is kinesisadmin.WaitActive: it polls DescribeStreamSummary until the stream is
// ACTIVE (the SDK's waiter waits 10 s at least) and returns its ARN.
func WaitActive(ctx context.Context, c *kinesis.Client, stream string) (arn string, err error) {
	return kinesisadmin.WaitActive(ctx, c, stream)
}

// PutBatch is the most records one PutRecords call takes (Kinesis Data Streams API reference).
const PutBatch = 500

// Put writes recs to stream with PutRecords, PutBatch records a call, in order. Entries a call
// refuses (FailedRecordCount: throttling, an internal error) are sent again, alone, up to 10 times
// with a growing pause; records of one partition key keep their order only while none is refused,
// so Put reports how many entries it sent again (tests that need the order check it is 0).
// Errors: a call failed, or an entry was still refused after the last try.
func Put(ctx context.Context, c *kinesis.Client, stream string, recs []types.PutRecordsRequestEntry) (resent int, err error) {
	for len(recs) > 0 {
		batch := recs[:min(len(recs), PutBatch)]
		recs = recs[len(batch):]
		for try := 0; len(batch) > 0; try++ {
			if try == 10 {
				return resent, errors.New("kinesistest: put: entries still refused after 10 tries")
			}
			if try > 0 {
				resent += len(batch)
				select {
				case <-ctx.Done():
					return resent, ctx.Err()
				case <-time.After(time.Duration(try) * 50 * time.Millisecond):
				}
			}
			out, err := c.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: batch})
			if err != nil {
				return resent, fmt.Errorf("kinesistest: put %d records: %w", len(batch), err)
			}
			var failed []types.PutRecordsRequestEntry
			for i, r := range out.Records {
				if r.ErrorCode != nil {
					failed = append(failed, batch[i])
				}
			}
			batch = failed
		}
	}
	return resent, nil
}

// ReadStream reads every shard of stream from TRIM_HORIZON with a plain source
// (source/kinesis, idle time 50 ms): a closed shard to its end, an open one to its tip (an empty
// answer at MillisBehindLatest 0). It returns the shards (source.Shards: parents first) and each
// shard's records in order, for tests that compare what workers applied with the stream.
// Errors: the source's; a shard with no end or tip after 1,000 reads.
func ReadStream(ctx context.Context, c *kinesis.Client, stream string) ([]source.Shard, map[string][]source.Event, error) {
	src, err := kinesissrc.New(c, stream, kinesissrc.WithIdleTime(50*time.Millisecond))
	if err != nil {
		return nil, nil, err
	}
	ss, err := src.Shards(ctx)
	if err != nil {
		return nil, nil, err
	}
	out := map[string][]source.Event{}
	for _, s := range ss {
		if err := readShard(ctx, src, stream, s, out); err != nil {
			return nil, nil, err
		}
	}
	return ss, out, nil
}

func readShard(ctx context.Context, src *kinesissrc.Source, stream string, s source.Shard, out map[string][]source.Event) error {
	r, err := src.Open(ctx, s.ID, "")
	if err != nil {
		return err
	}
	defer r.Close()
	for i := 0; i < 1000; i++ {
		b, err := r.Read(ctx, kinesissrc.MaxRead, time.Second)
		if errors.Is(err, source.ErrShardEnded) {
			return nil
		}
		if err != nil {
			return err
		}
		out[s.ID] = append(out[s.ID], b.Events...)
		if !s.Closed && len(b.Events) == 0 && b.MillisBehind == 0 {
			return nil
		}
	}
	return fmt.Errorf("kinesistest: shard %s of %s: no end or tip after 1000 reads", s.ID, stream)
}
