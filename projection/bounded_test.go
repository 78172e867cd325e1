package projection_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/event"
	"github.com/projhost/projhost/internal/storetest"
	"github.com/projhost/projhost/internal/testwasm"
	"github.com/projhost/projhost/projection"
	"github.com/projhost/projhost/wasmabi"
)

// No commit holds more than one handler output's limit of mutations (wasmabi.MaxOutputMutations),
// however many outputs are pending: big outputs are committed one at a time (the flush hook
// tells). A batch whose output is past the limit is handed over in halves (no retries), and
// only an event whose own output is past it is bad output under the policy.
func TestCommitsBoundedByOutputLimits(t *testing.T) {
	ctx := context.Background()
	mod := load(t, testwasm.Fanout)
	var rec recorder
	st := storetest.Backends()[0].Open(t)
	p := newProc(t, st, projection.Fixed(mod), func(c *projection.Config) {
		c.Hooks = rec.hooks()
		c.Policy = projection.Policy{OnError: projection.DeadLetter, MaxAttempts: 1}
	})
	sh, err := p.Open(ctx, shard, 1, projection.ShardOptions{})
	require.NoError(t, err)
	var evs []event.Event
	for i, n := range []int{260, 260, wasmabi.MaxOutputMutations/100 + 1, 260} { // fanout: 100 puts per byte
		evs = append(evs, event.Event{ShardID: shard, Seq: fmt.Sprint(i + 1), PartitionKey: "k", Data: []byte(strings.Repeat("x", n))})
	}
	require.NoError(t, sh.Handle(ctx, evs))
	require.NoError(t, sh.Flush(ctx))
	sh.Close(ctx)

	total := 0
	for _, f := range rec.flushes {
		require.LessOrEqual(t, f.Mutations, wasmabi.MaxOutputMutations, "one commit")
		total += f.Mutations
	}
	require.Equal(t, 3*26_000, total, "every event but the one past the limit")
	var sizes []int
	for _, f := range rec.flushes {
		sizes = append(sizes, f.Mutations)
	}
	require.Equal(t, []int{26_000, 26_000, 26_000}, sizes, "event 1 alone (with event 2 it would pass the limit), event 2 (committed before event 3 fails), event 4")
	var split, failed int
	for _, e := range rec.errs {
		require.Equal(t, projection.KindBadOutput, e.Kind)
		if e.FirstSeq == e.LastSeq {
			failed++
		} else {
			split++
		}
	}
	require.Equal(t, 3, split, "calls of 1-4, 1-2 and 3-4, each split in halves without a retry")
	require.Equal(t, 1, failed, "event 3 alone, once (MaxAttempts 1)")
	require.Len(t, rec.dead, 1)
	require.Equal(t, "3", rec.dead[0].Seq)
	require.Equal(t, projection.KindBadOutput, rec.dead[0].ErrorKind)
	require.Contains(t, rec.dead[0].Error, "output of 50100 mutations exceeds the limit of 50000 per handler call")
}
