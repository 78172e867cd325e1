package kinesis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/projhost/projhost/internal/kinesistest"
	"github.com/projhost/projhost/source"
	"github.com/projhost/projhost/source/sourcetest"
)

// TestProbe on kinesis-local: a probe at the start of a shard with records finds them; after its
// last record it is caught up (MillisBehindLatest 0); after the last record of a closed shard it
// is caught up and ended; a malformed cursor is refused with ErrInvalid; a probe moves no reader.
func TestProbe(t *testing.T) {
	src, app, c, name := newStream(t, 1, false)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const shard = "shardId-000000000000"
	p, err := src.Probe(ctx, shard, "")
	if err != nil || p.More || !p.CaughtUp() {
		t.Fatalf("empty shard: %+v, %v; want caught up", p, err)
	}
	if err := app(ctx, []sourcetest.Record{{PartitionKey: "a", Data: []byte("1")}, {PartitionKey: "b", Data: []byte("2")}}); err != nil {
		t.Fatal(err)
	}
	p, err = src.Probe(ctx, shard, "")
	if err != nil || !p.More || p.CaughtUp() {
		t.Fatalf("at TRIM_HORIZON of 2 records: %+v, %v; want records behind", p, err)
	}
	rd, err := src.Open(ctx, shard, "")
	if err != nil {
		t.Fatal(err)
	}
	var last string
	for n := 0; n < 2; {
		b, err := rd.Read(ctx, 10, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range b.Events {
			n, last = n+1, e.Seq
		}
	}
	first, err := src.Probe(ctx, shard, "")
	if err != nil || !first.More {
		t.Fatalf("probe after a read: %+v, %v", first, err)
	}
	p, err = src.Probe(ctx, shard, last)
	if err != nil || p.More || p.MillisBehind != 0 || p.Ended || !p.CaughtUp() {
		t.Fatalf("after the last record %s: %+v, %v; want caught up, MillisBehind 0, not ended", last, p, err)
	}

	// Close the shard by a split: after its last record the probe says ended.
	if _, err := c.SplitShard(ctx, &kinesis.SplitShardInput{StreamName: aws.String(name), ShardToSplit: aws.String(shard),
		NewStartingHashKey: aws.String("170141183460469231731687303715884105728")}); err != nil {
		t.Fatal(err)
	}
	if _, err := kinesistest.WaitActive(ctx, c, name); err != nil {
		t.Fatal(err)
	}
	p, err = src.Probe(ctx, shard, last)
	if err != nil || p.More || !p.Ended || !p.CaughtUp() {
		t.Fatalf("after the last record of the closed shard: %+v, %v; want ended", p, err)
	}
	if _, err := src.Probe(ctx, shard, "12x"); err == nil {
		t.Fatal("a malformed cursor was probed")
	}
	if _, err := src.Probe(ctx, "shardId-000000000099", ""); err == nil {
		t.Fatal("an unknown shard was probed")
	} else if !errors.Is(err, source.ErrUnknownShard) {
		t.Fatalf("unknown shard: %v; want source.ErrUnknownShard", err)
	}
}
