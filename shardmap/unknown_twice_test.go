package shardmap_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/shardmap"
)

// TestTwoUnknownRenewalsUnseen: two renewals in a row apply and fail (the first renewal, then
// the write on top of it in the next round) with both rounds' Lists failing: the stored lease
// is the worker's own, two counters ahead. The worker keeps it (the next renewal writes on top
// of it): none of it is another worker's write.
func TestTwoUnknownRenewalsUnseen(t *testing.T) {
	ctx := context.Background()
	c, a := oneShard(t)
	id := a.m.Owned()[0].ShardID
	unknownRenewalUnseen(t, a) // stored counter 2, held 1
	// Next round: the renewal conflicts with its own write, the write on top of it
	// applies and fails; the List fails again.
	a.store.applyThenFail(2)
	a.store.listDown.Store(true)
	a.clk.Advance(renew / 2)
	_, err := a.m.Round(ctx)
	require.ErrorIs(t, err, errDown)
	a.store.listDown.Store(false)
	require.Equal(t, int64(3), mustList(t, c)[0].Counter, "both writes applied")
	require.Equal(t, int64(1), a.m.Owned()[0].Counter, "neither seen")

	a.clk.Advance(renew / 4)
	rep, err := a.m.Round(ctx)
	require.NoError(t, err)
	_, lost, _ := a.events()
	assert.Empty(t, lost, "lost to its own writes: %v", a.why)
	assert.Equal(t, 0, rep.Lost)
	_, ok := a.m.Valid(id)
	assert.True(t, ok)
	assert.Equal(t, shardmap.Lease{Projection: proj, ShardID: id, Owner: "a", Counter: 4, Epoch: 1, State: shardmap.StateActive}, mustList(t, c)[0])
}

// TestTwoUnknownRenewalsListAdopts: as TestTwoUnknownRenewalsUnseen, then once more a
// renewal that conflicts with its own write and a write on top of it of unknown outcome, the
// List of that round now working: the List shows the worker's own lease three counters ahead
// and adopts it (not "written by another worker").
func TestTwoUnknownRenewalsListAdopts(t *testing.T) {
	ctx := context.Background()
	c, a := oneShard(t)
	id := a.m.Owned()[0].ShardID
	unknownRenewalUnseen(t, a) // stored counter 2, held 1
	a.store.applyThenFail(2)   // the conflicting renewal, then the write on top of it
	a.clk.Advance(renew / 2)
	rep, err := a.m.Round(ctx)
	require.NoError(t, err)
	assert.Equal(t, 0, rep.Lost, "lost to its own writes: %v", a.why)
	assert.Equal(t, 2, rep.Resolved, "written on top, then adopted by the List")
	stored := mustList(t, c)[0]
	require.Equal(t, int64(3), stored.Counter)
	assert.Equal(t, stored, a.m.Owned()[0], "adopted")
	_, ok := a.m.Valid(id)
	assert.True(t, ok, "within a lease duration of the take, the last write known to be applied")
}
