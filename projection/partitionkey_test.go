package projection_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/deadletter"
	"github.com/projhost/projhost/event"
	"github.com/projhost/projhost/internal/storetest"
	"github.com/projhost/projhost/internal/testwasm"
	"github.com/projhost/projhost/projection"
)

// TestPartitionKeyLimit: on every backend, an event whose partition key is 256 characters of 4
// UTF-8 bytes (1024 bytes, the longest Kinesis accepts) is handled (count-as keeps its count
// under that key, which every store takes), while an event whose key is over 1024 bytes, which
// the ABI cannot carry, meets the error policy as malformed_event: dead-lettered whole with
// the reason under dead-letter, the shard stopped just before it under stop.
func TestPartitionKeyLimit(t *testing.T) {
	long, over := strings.Repeat("😀", 256), strings.Repeat("😀", 257)
	require.Len(t, long, 1024)
	keys := []string{"a", long, over, long, "a"}
	evs := make([]event.Event, len(keys))
	for i, k := range keys {
		evs[i] = event.Event{ShardID: shard, Seq: fmt.Sprint(i + 1), PartitionKey: k, ArrivalMs: 1_700_000_000_000, Data: []byte(`{}`)}
	}
	const reason = "partition key of 1028 bytes exceeds 1024 bytes (256 characters of up to 4 UTF-8 bytes each, the Kinesis limit)"
	count := load(t, testwasm.CountAS)
	for _, b := range storetest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Run("dead-letter", func(t *testing.T) {
				ctx := context.Background()
				st := b.Open(t)
				var rec recorder
				p := newProc(t, st, projection.Fixed(count), func(c *projection.Config) {
					c.Hooks = rec.hooks()
					c.Policy = projection.Policy{OnError: projection.DeadLetter, MaxAttempts: 2}
				})
				sh, err := p.Open(ctx, shard, 1, projection.ShardOptions{})
				require.NoError(t, err)
				defer sh.Close(ctx)
				push(t, sh, evs, len(evs))
				require.Equal(t, "5", cursor(t, st))
				for _, k := range []string{"a", long} {
					doc, ok, err := st.ReadModel.Get(ctx, "flights", "counts", k)
					require.NoError(t, err)
					require.True(t, ok, "counts/<%d-byte key>", len(k))
					require.JSONEq(t, `{"count":2}`, string(doc), "counts/<%d-byte key>", len(k))
				}
				_, ok, err := st.ReadModel.Get(ctx, "flights", "counts", over)
				require.NoError(t, err)
				require.False(t, ok, "the over-limit event was applied")
				ls, err := st.DeadLetters.List(ctx, "flights", deadletter.Filter{})
				require.NoError(t, err)
				require.Len(t, ls, 1)
				l := ls[0]
				require.Equal(t, "3", l.Seq)
				require.Equal(t, over, l.PartitionKey)
				require.Equal(t, []byte(`{}`), l.Data)
				require.Equal(t, projection.KindMalformedEvent, l.ErrorKind)
				require.Contains(t, l.Error, reason)
				require.Equal(t, deadletter.StateFailed, l.State)
				require.Len(t, rec.dead, 1)
			})
			t.Run("stop", func(t *testing.T) {
				ctx := context.Background()
				st := b.Open(t)
				p := newProc(t, st, projection.Fixed(count), func(c *projection.Config) {
					c.Policy = projection.Policy{MaxAttempts: 1}
				})
				require.Equal(t, projection.Stop, p.Config().Policy.OnError)
				sh, err := p.Open(ctx, shard, 1, projection.ShardOptions{})
				require.NoError(t, err)
				defer sh.Close(ctx)
				require.ErrorIs(t, sh.Handle(ctx, evs), projection.ErrStopped)
				require.Equal(t, "2", cursor(t, st), "the events before the over-limit one are committed")
				doc, ok, err := st.ReadModel.Get(ctx, "flights", "counts", long)
				require.NoError(t, err)
				require.True(t, ok)
				require.JSONEq(t, `{"count":1}`, string(doc))
				require.True(t, strings.HasPrefix(sh.Stopped(), "handler malformed_event at seq 3"), sh.Stopped())
				require.Contains(t, sh.Stopped(), reason)
			})
		})
	}
}
