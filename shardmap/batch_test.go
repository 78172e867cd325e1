package shardmap_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/projhost/projhost/shardmap"
	"github.com/projhost/projhost/shardmap/memlease"
)

// batchStore is a BatchUpdater over memlease that counts calls and advances a clock by perCall
// at every UpdateMany (a slow store as the Manager's clock sees it).
type batchStore struct {
	*memlease.Store
	clk                     *shardmap.ManualClock
	perCall                 time.Duration
	updates, batches, items atomic.Int64
	maxItems                atomic.Int64
}

func (s *batchStore) Update(ctx context.Context, l shardmap.Lease) (shardmap.Lease, error) {
	s.updates.Add(1)
	return s.Store.Update(ctx, l)
}

func (s *batchStore) UpdateMany(ctx context.Context, ls []shardmap.Lease) ([]shardmap.UpdateResult, error) {
	s.batches.Add(1)
	s.items.Add(int64(len(ls)))
	if n := int64(len(ls)); n > s.maxItems.Load() {
		s.maxItems.Store(n)
	}
	if s.clk != nil {
		s.clk.Advance(s.perCall)
	}
	return s.Store.UpdateMany(ctx, ls)
}

func newBatchManager(t *testing.T, shards int, perCall time.Duration, opts ...shardmap.Option) (*shardmap.Manager, *batchStore, *shardmap.ManualClock, *[]string) {
	t.Helper()
	clk := shardmap.NewManualClock(time.Hour)
	st := &batchStore{Store: memlease.New(), clk: clk, perCall: perCall}
	var lost []string
	all := append([]shardmap.Option{shardmap.WithLeaseDuration(dur), shardmap.WithClock(clk), shardmap.WithLogger(quiet),
		shardmap.WithEvents(shardmap.Events{Lost: func(id, why string) { lost = append(lost, id+": "+why) }})}, opts...)
	m := shardmap.NewManager(st, proj, "a", all...)
	if err := m.EnsureShards(context.Background(), shardList(shards)); err != nil {
		t.Fatal(err)
	}
	return m, st, clk, &lost
}

// TestBatchedRenewals: with a BatchUpdater, a round writes its leases MaxBatch per call and
// never one by one.
func TestBatchedRenewals(t *testing.T) {
	const shards = 1000
	m, st, clk, lost := newBatchManager(t, shards, 0)
	ctx := context.Background()
	rep, err := m.Round(ctx)
	if err != nil || rep.Taken != shards {
		t.Fatalf("first round: %+v, %v; want %d taken", rep, err, shards)
	}
	st.batches.Store(0)
	st.items.Store(0)
	for range 5 {
		clk.Advance(renew)
		rep, err := m.Round(ctx)
		if err != nil || rep.Renewed != shards || rep.Lost != 0 || rep.Writes != shards {
			t.Fatalf("round: %+v, %v; want %d renewed and written, none lost", rep, err, shards)
		}
	}
	want := int64(5 * shards / shardmap.MaxBatch)
	if st.batches.Load() != want || st.items.Load() != 5*shards || st.updates.Load() != 0 || st.maxItems.Load() != shardmap.MaxBatch {
		t.Fatalf("%d UpdateMany calls of %d leases (largest %d), %d Updates; want %d calls of at most %d, no Update",
			st.batches.Load(), st.items.Load(), st.maxItems.Load(), st.updates.Load(), want, shardmap.MaxBatch)
	}
	if len(*lost) != 0 {
		t.Fatalf("lost %v", *lost)
	}
}

// TestTakeBudget: a round stops taking once half a renew interval has passed since it began
// (after at least one write), so that the next round's renewals are not pushed back by a long
// run of takes; the rest are taken in the next rounds, and nothing is lost.
func TestTakeBudget(t *testing.T) {
	const shards = 300
	perCall := renew * 2 / 7 // each call of 100 leases: 0.29 renew intervals on the Manager's clock
	m, _, clk, lost := newBatchManager(t, shards, perCall)
	ctx := context.Background()
	rep, err := m.Round(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Call 2 starts at 0.29 renew intervals, call 3 would start at 0.57: past the budget.
	if rep.Taken != 2*shardmap.MaxBatch {
		t.Fatalf("first round took %d, want %d (two calls within the budget)", rep.Taken, 2*shardmap.MaxBatch)
	}
	// Round 2 spends its budget on renewals (2 calls) and still takes one call's worth.
	clk.Advance(renew)
	rep, err = m.Round(ctx)
	if err != nil || rep.Renewed != 2*shardmap.MaxBatch || rep.Taken != shardmap.MaxBatch {
		t.Fatalf("second round: %+v, %v; want %d renewed, %d taken", rep, err, 2*shardmap.MaxBatch, shardmap.MaxBatch)
	}
	for range 5 {
		clk.Advance(renew)
		if rep, err := m.Round(ctx); err != nil || rep.Renewed != shards {
			t.Fatalf("round: %+v, %v; want %d renewed", rep, err, shards)
		}
	}
	if len(*lost) != 0 {
		t.Fatalf("lost %d: %v", len(*lost), *lost)
	}
}

// TestBatchRenewConflict: a lease another worker wrote is reported lost by a batched renewal,
// the others of the batch are renewed.
func TestBatchRenewConflict(t *testing.T) {
	m, st, clk, lost := newBatchManager(t, 3, 0)
	ctx := context.Background()
	if _, err := m.Round(ctx); err != nil {
		t.Fatal(err)
	}
	ls, _ := st.List(ctx, proj)
	l := ls[1]
	l.Owner, l.Epoch = "thief", l.Epoch+1
	if _, err := st.Store.Update(ctx, l); err != nil {
		t.Fatal(err)
	}
	clk.Advance(renew)
	rep, err := m.Round(ctx)
	if err != nil || rep.Renewed != 2 || rep.Lost != 1 {
		t.Fatalf("round: %+v, %v; want 2 renewed, 1 lost", rep, err)
	}
	if len(*lost) != 1 || (*lost)[0] != l.ShardID+": "+shardmap.WhyConflict {
		t.Fatalf("lost %v, want %s by conflict", *lost, l.ShardID)
	}
}
