// Package leasetest is the conformance suite for shardmap.LeaseStore implementations.
//
// Run it from an implementation's tests:
//
//	func TestConformance(t *testing.T) {
//		leasetest.Run(t, func(t *testing.T) shardmap.LeaseStore { return openStore(t) })
//	}
//
// The factory is called once per subtest. It may return the same backing table every time: each
// subtest uses its own fresh projection name, so leftovers of other subtests or earlier runs never
// interfere. The suite checks only the documented contract of shardmap.LeaseStore (no storage
// details; UpdateMany only when the store is a shardmap.BatchUpdater) and keeps write counts low (about 150 conditional writes in all) so that it runs in a
// few seconds against a local DynamoDB-compatible server.
package leasetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/projhost/projhost/internal/suitekit"
	"github.com/projhost/projhost/shardmap"
)

// Run runs the suite. newStore returns the store under test.
func Run(t *testing.T, newStore func(t *testing.T) shardmap.LeaseStore) {
	t.Helper()
	suitekit.Run(t, newStore, []suitekit.Case[shardmap.LeaseStore]{
		{Name: "CreateAndList", Fn: testCreateAndList},
		{Name: "CreateExisting", Fn: testCreateExisting},
		{Name: "ListOrderAndIsolation", Fn: testListOrderAndIsolation},
		{Name: "Update", Fn: testUpdate},
		{Name: "UpdateConflict", Fn: testUpdateConflict},
		{Name: "UpdateMissing", Fn: testUpdateMissing},
		{Name: "RaceUpdate", Fn: testRaceUpdate},
		{Name: "RaceCreate", Fn: testRaceCreate},
		{Name: "Module", Fn: testModule},
		{Name: "UpdateMany", Fn: testUpdateMany},
		{Name: "RaceUpdateMany", Fn: testRaceUpdateMany},
	})
}

func ctxT(t *testing.T) context.Context { return suitekit.Context(t) }

// projection returns a projection name unique to this test run.
func projection(t *testing.T) string { return suitekit.Name(t, "leasetest") }

// equal compares leases, treating nil and empty ParentIDs alike.
func equal(a, b shardmap.Lease) bool {
	return a.Projection == b.Projection && a.ShardID == b.ShardID && a.Owner == b.Owner && a.Module == b.Module &&
		a.Counter == b.Counter && a.Epoch == b.Epoch && a.State == b.State &&
		slices.Equal(a.ParentIDs, b.ParentIDs)
}

func mustList(t *testing.T, s shardmap.LeaseStore, proj string) []shardmap.Lease {
	t.Helper()
	ls, err := s.List(ctxT(t), proj)
	if err != nil {
		t.Fatalf("List(%q): %v", proj, err)
	}
	return ls
}

func mustGet(t *testing.T, s shardmap.LeaseStore, proj, shard string) shardmap.Lease {
	t.Helper()
	for _, l := range mustList(t, s, proj) {
		if l.ShardID == shard {
			return l
		}
	}
	t.Fatalf("lease %s/%s not listed", proj, shard)
	return shardmap.Lease{}
}

func testCreateAndList(t *testing.T, s shardmap.LeaseStore) {
	ctx := ctxT(t)
	proj := projection(t)
	if ls := mustList(t, s, proj); len(ls) != 0 {
		t.Fatalf("List of a new projection = %+v, want none", ls)
	}
	leases := []shardmap.Lease{
		{Projection: proj, ShardID: "shardId-000000000000", State: shardmap.StateActive},
		{Projection: proj, ShardID: "shardId-000000000001", Owner: "worker-a", Counter: 7, Epoch: 3,
			State: shardmap.StateFinished},
		{Projection: proj, ShardID: "shardId-000000000002", Counter: 1, Epoch: 1,
			ParentIDs: []string{"shardId-000000000000", "shardId-000000000001"}, State: shardmap.StateActive},
	}
	for _, l := range leases {
		if err := s.Create(ctx, l); err != nil {
			t.Fatalf("Create(%+v): %v", l, err)
		}
	}
	got := mustList(t, s, proj)
	if len(got) != len(leases) {
		t.Fatalf("List returned %d leases, want %d: %+v", len(got), len(leases), got)
	}
	for i := range leases {
		if !equal(got[i], leases[i]) {
			t.Errorf("List()[%d] = %+v, want %+v", i, got[i], leases[i])
		}
	}
}

func testCreateExisting(t *testing.T, s shardmap.LeaseStore) {
	ctx := ctxT(t)
	proj := projection(t)
	orig := shardmap.Lease{Projection: proj, ShardID: "s1", Owner: "w1", Counter: 4, Epoch: 2, State: shardmap.StateActive}
	if err := s.Create(ctx, orig); err != nil {
		t.Fatal(err)
	}
	dup := orig
	dup.Owner, dup.Counter, dup.Epoch = "w2", 0, 9
	if err := s.Create(ctx, dup); !errors.Is(err, shardmap.ErrExists) {
		t.Fatalf("Create of an existing lease: err = %v, want ErrExists", err)
	}
	if got := mustGet(t, s, proj, "s1"); !equal(got, orig) {
		t.Fatalf("after refused Create, lease = %+v, want unchanged %+v", got, orig)
	}
}

func testListOrderAndIsolation(t *testing.T, s shardmap.LeaseStore) {
	ctx := ctxT(t)
	p1, p2 := projection(t), projection(t)
	// Created out of order; List must order by shard id.
	ids := []string{"shardId-000000000010", "shardId-000000000002", "shardId-000000000001", "shardId-000000000100"}
	for _, id := range ids {
		if err := s.Create(ctx, shardmap.Lease{Projection: p1, ShardID: id, State: shardmap.StateActive}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Create(ctx, shardmap.Lease{Projection: p2, ShardID: "shardId-000000000001", Owner: "other",
		State: shardmap.StateActive}); err != nil {
		t.Fatalf("Create of the same shard id in another projection: %v", err)
	}
	var got []string
	for _, l := range mustList(t, s, p1) {
		if l.Projection != p1 {
			t.Errorf("List(%q) returned a lease of projection %q", p1, l.Projection)
		}
		got = append(got, l.ShardID)
	}
	want := slices.Clone(ids)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("List order = %v, want %v", got, want)
	}
	l2 := mustList(t, s, p2)
	if len(l2) != 1 || l2[0].Owner != "other" {
		t.Fatalf("List(%q) = %+v, want the one lease owned by other", p2, l2)
	}
}

func testUpdate(t *testing.T, s shardmap.LeaseStore) {
	ctx := ctxT(t)
	proj := projection(t)
	l := shardmap.Lease{Projection: proj, ShardID: "s1", Counter: 5, State: shardmap.StateActive}
	if err := s.Create(ctx, l); err != nil {
		t.Fatal(err)
	}
	// Take: new owner, new epoch.
	l.Owner, l.Epoch = "w1", 1
	got, err := s.Update(ctx, l)
	if err != nil {
		t.Fatalf("Update with the stored counter: %v", err)
	}
	want := l
	want.Counter = 6
	if !equal(got, want) {
		t.Fatalf("Update returned %+v, want %+v", got, want)
	}
	if stored := mustGet(t, s, proj, "s1"); !equal(stored, want) {
		t.Fatalf("stored lease = %+v, want %+v", stored, want)
	}
	// Renew with the returned lease, then finish with parents set; every field is replaced.
	got, err = s.Update(ctx, got)
	if err != nil || got.Counter != 7 {
		t.Fatalf("renewal: lease %+v, err %v; want counter 7", got, err)
	}
	got.State, got.Owner, got.ParentIDs = shardmap.StateFinished, "", []string{"p0"}
	got, err = s.Update(ctx, got)
	if err != nil {
		t.Fatal(err)
	}
	want = shardmap.Lease{Projection: proj, ShardID: "s1", Counter: 8, Epoch: 1, ParentIDs: []string{"p0"},
		State: shardmap.StateFinished}
	if stored := mustGet(t, s, proj, "s1"); !equal(stored, want) || !equal(got, want) {
		t.Fatalf("after finish: returned %+v, stored %+v, want %+v", got, stored, want)
	}
}

func testUpdateConflict(t *testing.T, s shardmap.LeaseStore) {
	ctx := ctxT(t)
	proj := projection(t)
	l := shardmap.Lease{Projection: proj, ShardID: "s1", Owner: "w1", Counter: 3, Epoch: 1, State: shardmap.StateActive}
	if err := s.Create(ctx, l); err != nil {
		t.Fatal(err)
	}
	current, err := s.Update(ctx, l) // counter now 4
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []int64{3, 5, 0, -1} {
		stale := current
		stale.Counter, stale.Owner, stale.Epoch = c, "thief", 2
		_, err := s.Update(ctx, stale)
		if !errors.Is(err, shardmap.ErrConflict) {
			t.Fatalf("Update with counter %d (stored 4): err = %v, want ErrConflict", c, err)
		}
		requireConflict(t, err, stale, &current)
	}
	if stored := mustGet(t, s, proj, "s1"); !equal(stored, current) {
		t.Fatalf("after refused updates, lease = %+v, want %+v", stored, current)
	}
}

// requireConflict fails t unless err is a *shardmap.ConflictError of the write of l carrying
// stored (nil: the lease is missing).
func requireConflict(t *testing.T, err error, l shardmap.Lease, stored *shardmap.Lease) {
	t.Helper()
	var ce *shardmap.ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("conflict error %v (%T) is no *shardmap.ConflictError", err, err)
	}
	if ce.Projection != l.Projection || ce.ShardID != l.ShardID || ce.Counter != l.Counter {
		t.Errorf("ConflictError is of %s/%s counter %d, want %s/%s counter %d", ce.Projection, ce.ShardID, ce.Counter,
			l.Projection, l.ShardID, l.Counter)
	}
	switch {
	case stored == nil && ce.Stored != nil:
		t.Errorf("ConflictError.Stored = %+v for a missing lease, want nil", *ce.Stored)
	case stored != nil && ce.Stored == nil:
		t.Errorf("ConflictError.Stored = nil, want %+v", *stored)
	case stored != nil && !equal(*ce.Stored, *stored):
		t.Errorf("ConflictError.Stored = %+v, want %+v", *ce.Stored, *stored)
	}
}

func testUpdateMissing(t *testing.T, s shardmap.LeaseStore) {
	ctx := ctxT(t)
	proj := projection(t)
	_, err := s.Update(ctx, shardmap.Lease{Projection: proj, ShardID: "nope", Owner: "w", State: shardmap.StateActive})
	if !errors.Is(err, shardmap.ErrConflict) {
		t.Fatalf("Update of a missing lease: err = %v, want ErrConflict", err)
	}
	requireConflict(t, err, shardmap.Lease{Projection: proj, ShardID: "nope"}, nil)
	if ls := mustList(t, s, proj); len(ls) != 0 {
		t.Fatalf("Update of a missing lease created %+v", ls)
	}
}

// testRaceUpdate races many workers taking the same lease with the same counter: exactly one
// wins each round, and the stored lease is the winner's.
func testRaceUpdate(t *testing.T, s shardmap.LeaseStore) {
	ctx := ctxT(t)
	proj := projection(t)
	const workers, rounds = 12, 3
	cur := shardmap.Lease{Projection: proj, ShardID: "s1", State: shardmap.StateActive}
	if err := s.Create(ctx, cur); err != nil {
		t.Fatal(err)
	}
	for r := 0; r < rounds; r++ {
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			winners []shardmap.Lease
			errs    []error
		)
		start := make(chan struct{})
		for w := 0; w < workers; w++ {
			l := cur
			l.Owner = fmt.Sprintf("w%d", w)
			l.Epoch = cur.Epoch + 1
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				got, err := s.Update(ctx, l)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					winners = append(winners, got)
				case errors.Is(err, shardmap.ErrConflict):
				default:
					errs = append(errs, err)
				}
			}()
		}
		close(start)
		wg.Wait()
		if len(errs) > 0 {
			t.Fatalf("round %d: unexpected errors: %v", r, errs)
		}
		if len(winners) != 1 {
			t.Fatalf("round %d: %d workers won the same counter, want exactly 1: %+v", r, len(winners), winners)
		}
		stored := mustGet(t, s, proj, "s1")
		if !equal(stored, winners[0]) || stored.Counter != cur.Counter+1 {
			t.Fatalf("round %d: stored %+v, winner %+v, want counter %d", r, stored, winners[0], cur.Counter+1)
		}
		cur = stored
	}
}

// testRaceCreate races workers creating the same lease: exactly one succeeds.
func testRaceCreate(t *testing.T, s shardmap.LeaseStore) {
	ctx := ctxT(t)
	proj := projection(t)
	const workers = 12
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		won  []string
		errs []error
	)
	start := make(chan struct{})
	for w := 0; w < workers; w++ {
		owner := fmt.Sprintf("w%d", w)
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			err := s.Create(ctx, shardmap.Lease{Projection: proj, ShardID: "s1", Owner: owner, State: shardmap.StateActive})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won = append(won, owner)
			case errors.Is(err, shardmap.ErrExists):
			default:
				errs = append(errs, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("unexpected errors: %v", errs)
	}
	if len(won) != 1 {
		t.Fatalf("%d concurrent Creates succeeded, want exactly 1: %v", len(won), won)
	}
	if got := mustGet(t, s, proj, "s1"); got.Owner != won[0] || got.Counter != 0 {
		t.Fatalf("stored lease %+v, want owner %s counter 0", got, won[0])
	}
}

// testModule: Lease.Module is stored by Create and Update like every other field, and
// replaced (cleared too) by the next Update.
func testModule(t *testing.T, s shardmap.LeaseStore) {
	ctx := ctxT(t)
	proj := projection(t)
	l := shardmap.Lease{Projection: proj, ShardID: "s1", Owner: "w1", Module: "sha256:aa", Epoch: 1, State: shardmap.StateActive}
	if err := s.Create(ctx, l); err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, s, proj, "s1"); !equal(got, l) {
		t.Fatalf("created %+v, listed %+v", l, got)
	}
	for _, m := range []string{"sha256:bb", "", "sha256:" + strings.Repeat("0123456789abcdef", 4)} {
		l.Module = m
		got, err := s.Update(ctx, l)
		if err != nil {
			t.Fatalf("Update with module %q: %v", m, err)
		}
		l.Counter++
		if !equal(got, l) {
			t.Fatalf("Update returned %+v, want %+v", got, l)
		}
		if stored := mustGet(t, s, proj, "s1"); !equal(stored, l) {
			t.Fatalf("stored %+v, want %+v", stored, l)
		}
	}
}

// testUpdateMany: each lease of a batch is written or refused on its own counter (not
// all-or-nothing); results come in the order of the input.
func testUpdateMany(t *testing.T, s shardmap.LeaseStore) {
	b := batchUpdater(t, s)
	ctx, proj := ctxT(t), projection(t)
	var ls []shardmap.Lease
	for _, id := range []string{"s0", "s1", "s2", "s3"} {
		l := shardmap.Lease{Projection: proj, ShardID: id, Counter: 10, State: shardmap.StateActive}
		if err := s.Create(ctx, l); err != nil {
			t.Fatal(err)
		}
		l.Owner, l.Module, l.Epoch = "w1", "sha256:aa", 1
		ls = append(ls, l)
	}
	if res, err := b.UpdateMany(ctx, nil); err != nil || len(res) != 0 {
		t.Fatalf("UpdateMany(nil) = %v, %v; want no results, no error", res, err)
	}
	stale := ls[1]
	stale.Counter = 9
	missing := shardmap.Lease{Projection: proj, ShardID: "nope", Owner: "w1", State: shardmap.StateActive}
	in := []shardmap.Lease{ls[2], stale, missing, ls[0]}
	res, err := b.UpdateMany(ctx, in)
	if err != nil {
		t.Fatalf("UpdateMany: %v", err)
	}
	if len(res) != len(in) {
		t.Fatalf("UpdateMany returned %d results for %d leases", len(res), len(in))
	}
	for i, wantOK := range []bool{true, false, false, true} {
		r := res[i]
		if !wantOK {
			if !errors.Is(r.Err, shardmap.ErrConflict) {
				t.Fatalf("result %d (%s): err = %v, want ErrConflict", i, in[i].ShardID, r.Err)
			}
			if in[i].ShardID == "nope" {
				requireConflict(t, r.Err, in[i], nil)
			} else {
				stored := shardmap.Lease{Projection: proj, ShardID: in[i].ShardID, Counter: 10, State: shardmap.StateActive}
				requireConflict(t, r.Err, in[i], &stored)
			}
			continue
		}
		want := in[i]
		want.Counter++
		if r.Err != nil || !equal(r.Lease, want) {
			t.Fatalf("result %d: %+v, %v; want %+v", i, r.Lease, r.Err, want)
		}
	}
	got := mustList(t, s, proj)
	want := []int64{11, 10, 11, 10}
	for i, l := range got {
		if l.Counter != want[i] || (want[i] == 11) != (l.Owner == "w1") {
			t.Fatalf("after UpdateMany: %s = %+v, want counter %d (written: owner w1)", l.ShardID, l, want[i])
		}
	}
	if len(got) != 4 {
		t.Fatalf("after UpdateMany: %d leases listed, want 4 (a missing lease must not be created)", len(got))
	}
}

// testRaceUpdateMany: workers renewing overlapping batches with the same counters: each lease
// is won by exactly one of them.
func testRaceUpdateMany(t *testing.T, s shardmap.LeaseStore) {
	b := batchUpdater(t, s)
	ctx, proj := ctxT(t), projection(t)
	const workers, shards = 6, 8
	var base []shardmap.Lease
	for i := 0; i < shards; i++ {
		l := shardmap.Lease{Projection: proj, ShardID: fmt.Sprintf("s%d", i), State: shardmap.StateActive}
		if err := s.Create(ctx, l); err != nil {
			t.Fatal(err)
		}
		base = append(base, l)
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		won  = map[string][]string{}
		errs []error
	)
	start := make(chan struct{})
	for w := 0; w < workers; w++ {
		owner := fmt.Sprintf("w%d", w)
		var mine []shardmap.Lease
		for i, l := range base {
			if (i+w)%3 != 0 { // overlapping subsets
				l.Owner, l.Epoch = owner, 1
				mine = append(mine, l)
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res, err := b.UpdateMany(ctx, mine)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			for i, r := range res {
				switch {
				case r.Err == nil:
					won[mine[i].ShardID] = append(won[mine[i].ShardID], owner)
				case !errors.Is(r.Err, shardmap.ErrConflict):
					errs = append(errs, r.Err)
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("unexpected errors: %v", errs)
	}
	for _, l := range mustList(t, s, proj) {
		if w := won[l.ShardID]; len(w) != 1 || l.Owner != w[0] || l.Counter != 1 {
			t.Fatalf("lease %+v: winners %v, want exactly one, stored as owner with counter 1", l, w)
		}
	}
}

// batchUpdater returns s as a shardmap.BatchUpdater, or skips the test when it is none.
func batchUpdater(t *testing.T, s shardmap.LeaseStore) shardmap.BatchUpdater {
	t.Helper()
	b, ok := s.(shardmap.BatchUpdater)
	if !ok {
		t.Skip("the store is not a shardmap.BatchUpdater")
	}
	return b
}
