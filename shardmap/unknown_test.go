package shardmap_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/shardmap"
)

// Writes whose outcome the store did not tell (applied, then an error) must never cost the
// worker its own lease: the next write meets a conflict with the worker's own lease and writes
// on top of it (RoundReport.Resolved).

func oneShard(t *testing.T) (*cluster, *worker) {
	t.Helper()
	c := newCluster(t, 1)
	a := c.add("a")
	rep, err := a.m.Round(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, rep.Taken)
	return c, a
}

func TestUnknownRenewalIsResolved(t *testing.T) {
	ctx := context.Background()
	c, a := oneShard(t)
	id := a.m.Owned()[0].ShardID

	a.store.applyThenFail(1)
	a.clk.Advance(renew)
	rep, err := a.m.Round(ctx)
	require.NoError(t, err)
	assert.Equal(t, shardmap.RoundReport{Available: 1, Workers: 1, Target: 1, Owned: 1, Writes: 1, Resolved: 1}, rep,
		"the renewal's outcome is unknown: not renewed; the List then shows it as the worker's own")
	stored := mustList(t, c)[0]
	require.Equal(t, int64(2), stored.Counter, "the renewal was applied")
	assert.Equal(t, stored, a.m.Owned()[0], "adopted")

	a.clk.Advance(renew)
	rep, err = a.m.Round(ctx)
	require.NoError(t, err)
	assert.Equal(t, shardmap.RoundReport{Available: 1, Workers: 1, Target: 1, Owned: 1, Renewed: 1, Writes: 1}, rep)
	_, lost, _ := a.events()
	assert.Empty(t, lost)
	epoch, ok := a.m.Valid(id)
	assert.True(t, ok)
	assert.Equal(t, int64(1), epoch)
	stored = mustList(t, c)[0]
	assert.Equal(t, shardmap.Lease{Projection: proj, ShardID: id, Owner: "a", Counter: 3, Epoch: 1, State: shardmap.StateActive}, stored)
	assert.Equal(t, stored, a.m.Owned()[0])
}

// TestUnknownRenewalStartsNoValidity: the applied renewal whose outcome the worker did not learn
// does not extend its validity: with the store down afterwards, the lease is lost a lease
// duration after the last renewal it knows of.
func TestUnknownRenewalStartsNoValidity(t *testing.T) {
	ctx := context.Background()
	_, a := oneShard(t)
	id := a.m.Owned()[0].ShardID
	a.store.applyThenFail(1)
	a.clk.Advance(renew)
	_, err := a.m.Round(ctx)
	require.NoError(t, err)
	a.store.down.Store(true)
	a.clk.Advance(dur - renew - 1)
	_, ok := a.m.Valid(id)
	assert.True(t, ok, "just under a lease duration after the take")
	a.clk.Advance(1)
	_, ok = a.m.Valid(id)
	assert.False(t, ok, "a lease duration after the last write the worker knows was applied")
}

func TestUnknownTakeIsTakenAgain(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 2)
	a := c.add("a")
	a.store.applyThenFail(1) // one of the two takes (they run in parallel); the other one is taken
	rep, err := a.m.Round(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, rep.Taken)
	require.Len(t, a.m.Owned(), 1)
	held := a.m.Owned()[0].ShardID
	var unknown shardmap.Lease
	for _, l := range mustList(t, c) {
		require.Equal(t, "a", l.Owner, "both takes were applied")
		require.Equal(t, int64(1), l.Epoch)
		if l.ShardID != held {
			unknown = l
		}
	}

	a.clk.Advance(renew) // far less than a lease duration: the lease is not expired
	rep, err = a.m.Round(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, rep.Taken, "the worker's own take of unknown outcome is taken again at once")
	assert.Equal(t, 0, rep.Lost)
	require.Len(t, a.m.Owned(), 2)
	acq, lost, _ := a.events()
	assert.Empty(t, lost)
	require.Len(t, acq, 2)
	assert.Equal(t, unknown.ShardID, acq[1].ShardID)
	assert.Equal(t, int64(2), acq[1].Epoch, "a fresh take: a new epoch")
	assert.Equal(t, []string{"free ", "retake a"}, a.how)
}

// unknownRenewalUnseen makes a's next renewal apply and fail, with the List of that round
// failing too, so that a still holds the lease at its old counter.
func unknownRenewalUnseen(t *testing.T, a *worker) {
	t.Helper()
	a.store.applyThenFail(1)
	a.store.listDown.Store(true)
	a.clk.Advance(renew)
	_, err := a.m.Round(context.Background())
	require.ErrorIs(t, err, errDown)
	a.store.listDown.Store(false)
	require.Equal(t, int64(1), a.m.Owned()[0].Counter)
}

// TestUnknownRenewalConflictIsResolved: the next renewal meets the worker's own applied one
// and writes on top of it.
func TestUnknownRenewalConflictIsResolved(t *testing.T) {
	ctx := context.Background()
	c, a := oneShard(t)
	id := a.m.Owned()[0].ShardID
	unknownRenewalUnseen(t, a)
	a.clk.Advance(renew)
	rep, err := a.m.Round(ctx)
	require.NoError(t, err)
	assert.Equal(t, shardmap.RoundReport{Available: 1, Workers: 1, Target: 1, Owned: 1, Renewed: 1, Writes: 2, Resolved: 1}, rep,
		"the conflicting renewal and the one written on top of it")
	_, lost, _ := a.events()
	assert.Empty(t, lost)
	_, ok := a.m.Valid(id)
	assert.True(t, ok)
	assert.Equal(t, int64(3), mustList(t, c)[0].Counter)
}

func TestUnknownRenewalThenRelease(t *testing.T) {
	ctx := context.Background()
	c, a := oneShard(t)
	id := a.m.Owned()[0].ShardID
	unknownRenewalUnseen(t, a)
	require.NoError(t, a.m.Release(ctx, id))
	stored := mustList(t, c)[0]
	assert.Equal(t, shardmap.Lease{Projection: proj, ShardID: id, Counter: 3, Epoch: 1, State: shardmap.StateActive}, stored,
		"released on top of the renewal of unknown outcome")
}

// TestConflictWithAnotherWriterIsLost: a conflict with a lease that is not the worker's own
// write is a loss, also right after a write of unknown outcome.
func TestConflictWithAnotherWriterIsLost(t *testing.T) {
	ctx := context.Background()
	c, a := oneShard(t)
	id := a.m.Owned()[0].ShardID
	a.store.applyThenFail(1)
	a.clk.Advance(renew)
	_, err := a.m.Round(ctx)
	require.NoError(t, err)
	// Another worker takes it (as after an expiry on its clock).
	cur := mustList(t, c)[0]
	thief := cur
	thief.Owner, thief.Epoch = "b", cur.Epoch+1
	_, err = c.backing.Update(ctx, thief)
	require.NoError(t, err)

	a.clk.Advance(renew)
	rep, err := a.m.Round(ctx)
	require.NoError(t, err)
	assert.Equal(t, 0, rep.Resolved)
	assert.Equal(t, 1, rep.Lost)
	_, lost, _ := a.events()
	assert.Equal(t, []string{id}, lost)
	assert.Equal(t, []string{shardmap.WhyConflict}, a.why)
}

// TestReleaseAfterTakeOver: a release that meets the lease taken by another worker with a newer
// epoch (its own write applied and the answer lost, or a steal after the final save) is a
// release.
func TestReleaseAfterTakeOver(t *testing.T) {
	ctx := context.Background()
	c, a := oneShard(t)
	id := a.m.Owned()[0].ShardID
	cur := mustList(t, c)[0]
	// The release applied, then b took the free lease, then the answer to a was lost.
	free := cur
	free.Owner = ""
	free, err := c.backing.Update(ctx, free)
	require.NoError(t, err)
	taken := free
	taken.Owner, taken.Epoch = "b", free.Epoch+1
	_, err = c.backing.Update(ctx, taken)
	require.NoError(t, err)
	require.NoError(t, a.m.Release(ctx, id))
	assert.Empty(t, a.m.Owned())

	// A conflict at the same epoch is not a take-over: still an error.
	c2, a2 := oneShard(t)
	id2 := a2.m.Owned()[0].ShardID
	cur2 := mustList(t, c2)[0]
	changed := cur2
	changed.Module = "sha256:other"
	_, err = c2.backing.Update(ctx, changed)
	require.NoError(t, err)
	require.ErrorIs(t, a2.m.Release(ctx, id2), shardmap.ErrConflict)
}
