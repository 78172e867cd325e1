package shardmap_test

import (
	"context"
	"fmt"

	"github.com/projhost/projhost/shardmap"
	"github.com/projhost/projhost/shardmap/memlease"
	"github.com/projhost/projhost/source"
)

// A runner wires the Manager's events to its per-shard loops and checks Valid before every
// batch and cursor save.
func ExampleManager() {
	ctx := context.Background()
	store := memlease.New()
	var m *shardmap.Manager
	m = shardmap.NewManager(store, "flights", "worker-1",
		shardmap.WithLogger(quiet),
		shardmap.WithEvents(shardmap.Events{
			Acquired: func(shard string, l shardmap.Lease, _, _ string) {
				fmt.Printf("start %s at epoch %d (claim the cursor with it)\n", shard, l.Epoch)
			},
			Lost: func(shard, _ string) { fmt.Println("stop", shard, "now, save nothing") },
			ReleaseRequested: func(shard string) {
				// finish the batch, save the cursor, then:
				_ = m.Release(ctx, shard)
			},
		}))
	shards := []source.Shard{{ID: "shardId-0"}, {ID: "shardId-1", ParentIDs: []string{"shardId-0"}}}
	if err := m.EnsureShards(ctx, shards); err != nil {
		fmt.Println(err)
		return
	}
	_, _ = m.Round(ctx) // Run does this every renew interval
	if epoch, ok := m.Valid("shardId-0"); ok {
		fmt.Println("shardId-0 valid at epoch", epoch)
	}
	_ = m.Finish(ctx, "shardId-0") // read to source.ErrShardEnded: the child may start
	_, _ = m.Round(ctx)
	// Output:
	// start shardId-0 at epoch 1 (claim the cursor with it)
	// shardId-0 valid at epoch 1
	// start shardId-1 at epoch 1 (claim the cursor with it)
}
