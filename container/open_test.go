package container_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/container"
	"github.com/projhost/projhost/cursorstore"
	"github.com/projhost/projhost/internal/flightcheck"
	"github.com/projhost/projhost/projection"
)

// busyClaims fails the first n cursor claims of every shard with a store error (what a claim
// waiting for the write lock of a paused process gets), then claims.
type busyClaims struct {
	cursorstore.Store
	n      int
	mu     sync.Mutex
	failed map[string]int
}

var errLocked = errors.New("the embedded store is locked by another process")

func (b *busyClaims) Claim(ctx context.Context, projection, shardID string, epoch int64) (cursorstore.Cursor, error) {
	b.mu.Lock()
	if b.failed[shardID] < b.n {
		b.failed[shardID]++
		b.mu.Unlock()
		return cursorstore.Cursor{}, errLocked
	}
	b.mu.Unlock()
	return b.Store.Claim(ctx, projection, shardID, epoch)
}

// TestOpenRetriesStoreErrors: a shard whose cursor claim fails with a store error keeps its
// lease and opens once the claim succeeds, instead of giving the lease up (reported lost,
// taken again, failing again).
func TestOpenRetriesStoreErrors(t *testing.T) {
	fs := flightcheck.Load(t, flightcheck.DataPath("flights-2k.json"))
	e := newEnv(t, 4)
	e.append(t, fs)
	claims := &busyClaims{Store: e.st.Cursors, n: 5, failed: map[string]int{}}
	st := *e.st
	st.Cursors = claims
	e.st = &st
	var log leaseLog
	r := e.runner(t, func(c *container.Config) { c.Hooks.Lease = log.hook })
	require.NoError(t, r.Run(ctx2m(t)))
	for _, i := range log.all() {
		require.NotEqual(t, projection.LeaseLost, i.Event, "shard %s epoch %d lost: %s", i.ShardID, i.Epoch, i.Reason)
		if i.Event == projection.LeaseAcquired {
			require.EqualValues(t, 1, i.Epoch, "%s acquired once", i.ShardID)
		}
	}
	require.Equal(t, map[string]int{"shardId-000000000000": 5, "shardId-000000000001": 5, "shardId-000000000002": 5, "shardId-000000000003": 5}, claims.failed)
	e.check(t, fs)
}
