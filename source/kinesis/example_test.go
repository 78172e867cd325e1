package kinesis_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/projhost/projhost/source"
	kinesissrc "github.com/projhost/projhost/source/kinesis"
)

// Reading a stream on a local server from its oldest records: one reader per shard, a shard
// only after its parents ended (container mode does this with leases).
func Example() {
	ctx := context.Background()
	client, err := kinesissrc.NewClient(ctx, kinesissrc.WithEndpoint("http://127.0.0.1:4568"))
	if err != nil {
		log.Fatal(err)
	}
	pos, err := kinesissrc.ParseInitialPosition("TRIM_HORIZON") // or LATEST, AT_TIMESTAMP=2026-01-02T15:04:05Z
	if err != nil {
		log.Fatal(err)
	}
	src, err := kinesissrc.New(client, "flights", kinesissrc.WithInitialPosition(pos))
	if err != nil {
		log.Fatal(err)
	}
	shards, err := src.Shards(ctx) // parents before children
	if err != nil {
		log.Fatal(err)
	}
	for _, sh := range shards {
		r, err := src.Open(ctx, sh.ID, "") // "" = the initial position; else the cursor
		if err != nil {
			log.Fatal(err)
		}
		for {
			b, err := r.Read(ctx, 1000, time.Second)
			if errors.Is(err, source.ErrShardEnded) {
				break // a closed shard read to its end: its children may start
			}
			if err != nil {
				log.Fatal(err)
			}
			for _, e := range b.Events {
				fmt.Println(e.ShardID, e.Seq, e.PartitionKey, len(e.Data))
			}
			if len(b.Events) == 0 && b.MillisBehind == 0 && !sh.Closed {
				break // an open shard, caught up
			}
		}
		r.Close()
	}
	fmt.Println("throttled GetRecords:", src.Stats().Throttled)
}
