package projection_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/event"
	"github.com/projhost/projhost/internal/storetest"
	"github.com/projhost/projhost/internal/testwasm"
	"github.com/projhost/projhost/projection"
)

// BatchInfo.MemoryBytes is the handler instance's linear memory after the batch: echo starts
// with 2 pages and grows to hold its input and an output as large (1088 + 2 x the batch's
// encoded size, in whole 64 KiB pages).
func TestBatchMemoryBytes(t *testing.T) {
	ctx := context.Background()
	var got []uint64
	st := storetest.Backends()[0].Open(t)
	p := newProc(t, st, projection.Fixed(load(t, testwasm.Echo)), func(c *projection.Config) {
		c.Hooks = projection.Hooks{Batch: func(i projection.BatchInfo) { got = append(got, i.MemoryBytes) }}
	})
	sh, err := p.Open(ctx, shard, 1, projection.ShardOptions{})
	require.NoError(t, err)
	defer sh.Close(ctx)
	const big = 200_000
	doc := append(append([]byte(`{"x":"`), bytes.Repeat([]byte("a"), big)...), `"}`...)
	require.NoError(t, sh.Handle(ctx, []event.Event{{ShardID: shard, Seq: "1", PartitionKey: "k", Data: []byte(`{"a":1}`)}}))
	require.NoError(t, sh.Handle(ctx, []event.Event{{ShardID: shard, Seq: "2", PartitionKey: "k", Data: doc}}))
	require.Len(t, got, 2)
	require.Equal(t, uint64(2<<16), got[0], "a small batch fits echo's initial 2 pages")
	require.Zero(t, got[1]%(1<<16), "whole pages")
	require.GreaterOrEqual(t, got[1], uint64(1088+2*len(doc)), "grown to hold the batch and its output")
	require.Less(t, got[1], uint64(1088+2*(len(doc)+256)+1<<16), "no more than the page holding the batch's encoding (its header: under 256 bytes)")
}
