// Package cursortest is the conformance suite for cursorstore.Store implementations.
//
// Run it from an implementation's tests:
//
//	func TestConformance(t *testing.T) {
//		cursortest.Run(t, func(t *testing.T) cursorstore.Store { return openStore(t) })
//	}
//
// The factory is called once per subtest and may return the same backing table every time: each
// subtest uses fresh projection names. The suite checks only the documented contract (no storage
// details) with about 200 writes in all. Sequence numbers must come back exactly as saved (no
// padding), because callers hand them to Source.Open.
package cursortest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/projhost/projhost/cursorstore"
	"github.com/projhost/projhost/internal/suitekit"
)

// Run runs the suite. newStore returns the store under test.
func Run(t *testing.T, newStore func(t *testing.T) cursorstore.Store) {
	t.Helper()
	suitekit.Run(t, newStore, []suitekit.Case[cursorstore.Store]{
		{Name: "GetMissing", Fn: testGetMissing},
		{Name: "ClaimCreates", Fn: testClaimCreates},
		{Name: "ClaimRaisesAndFences", Fn: testClaimRaisesAndFences},
		{Name: "SaveAndGet", Fn: testSaveAndGet},
		{Name: "SaveFenced", Fn: testSaveFenced},
		{Name: "SaveBackwards", Fn: testSaveBackwards},
		{Name: "NumericOrder", Fn: testNumericOrder},
		{Name: "Isolation", Fn: testIsolation},
		{Name: "ZombieHandoff", Fn: testZombieHandoff},
		{Name: "RaceClaim", Fn: testRaceClaim},
		{Name: "RaceSave", Fn: testRaceSave},
		{Name: "StopFenced", Fn: testStopFenced},
		{Name: "StopKeptBySaveAndClaim", Fn: testStopKept},
		{Name: "StopAgain", Fn: testStopAgain},
		{Name: "StopEmptyReason", Fn: testStopEmptyReason},
		{Name: "Resume", Fn: testResume},
		{Name: "RaceStopSave", Fn: testRaceStopSave},
		{Name: "Pauses", Fn: testPauses},
		{Name: "PauseIsolation", Fn: testPauseIsolation},
		{Name: "Reset", Fn: testReset},
	})
}

const shard = "shardId-000000000000"

// Real Kinesis sequence numbers: 56 decimal digits (the API allows up to 129).
const (
	bigSeq1 = "49590338271490256608559692538361571095921575989136588898"
	bigSeq2 = "49590338271490256608559692540925702759324208523137515618"
)

func ctxT(t *testing.T) context.Context { return suitekit.Context(t) }

func projection(t *testing.T) string { return suitekit.Name(t, "cursortest") }

func expect(t *testing.T, s cursorstore.Store, proj, shardID, seq string, epoch int64) {
	t.Helper()
	c, err := s.Get(ctxT(t), proj, shardID)
	if err != nil {
		t.Fatalf("Get(%s, %s): %v", proj, shardID, err)
	}
	if c.Seq != seq || c.Epoch != epoch {
		t.Fatalf("Get(%s, %s) = seq %q epoch %d, want seq %q epoch %d", proj, shardID, c.Seq, c.Epoch, seq, epoch)
	}
	if c.Projection != proj || c.ShardID != shardID {
		t.Fatalf("Get(%s, %s) returned cursor of %s/%s", proj, shardID, c.Projection, c.ShardID)
	}
}

// claimSaved claims the cursor of proj/shard with epoch and saves seq.
func claimSaved(t *testing.T, s cursorstore.Store, proj string, epoch int64, seq string) {
	t.Helper()
	if _, err := s.Claim(ctxT(t), proj, shard, epoch); err != nil {
		t.Fatalf("Claim(%s, epoch %d): %v", proj, epoch, err)
	}
	if err := s.Save(ctxT(t), proj, shard, epoch, seq); err != nil {
		t.Fatalf("Save(%s, epoch %d, %s): %v", proj, epoch, seq, err)
	}
}

func testGetMissing(t *testing.T, s cursorstore.Store) {
	c, err := s.Get(ctxT(t), projection(t), shard)
	if err != nil {
		t.Fatalf("Get of a missing cursor: %v, want no error", err)
	}
	if c.Seq != "" || c.Epoch != 0 {
		t.Fatalf("Get of a missing cursor = %+v, want Seq \"\" Epoch 0", c)
	}
}

func testClaimCreates(t *testing.T, s cursorstore.Store) {
	ctx := ctxT(t)
	proj := projection(t)
	c, err := s.Claim(ctx, proj, shard, 1)
	if err != nil {
		t.Fatalf("Claim of a missing cursor: %v", err)
	}
	if c.Projection != proj || c.ShardID != shard || c.Seq != "" || c.Epoch != 1 {
		t.Fatalf("Claim returned %+v, want %s/%s seq \"\" epoch 1", c, proj, shard)
	}
	expect(t, s, proj, shard, "", 1)
}

func testClaimRaisesAndFences(t *testing.T, s cursorstore.Store) {
	ctx := ctxT(t)
	proj := projection(t)
	claimSaved(t, s, proj, 2, "100")
	// Idempotent re-claim keeps the sequence number.
	c, err := s.Claim(ctx, proj, shard, 2)
	if err != nil || c.Seq != "100" || c.Epoch != 2 {
		t.Fatalf("re-Claim with the stored epoch = %+v, %v; want seq 100 epoch 2", c, err)
	}
	// A higher epoch raises it and keeps the sequence number (the new owner resumes from it).
	c, err = s.Claim(ctx, proj, shard, 5)
	if err != nil || c.Seq != "100" || c.Epoch != 5 {
		t.Fatalf("Claim with a higher epoch = %+v, %v; want seq 100 epoch 5", c, err)
	}
	// Lower epochs are fenced and change nothing.
	for _, e := range []int64{4, 2, 0} {
		if _, err := s.Claim(ctx, proj, shard, e); !errors.Is(err, cursorstore.ErrFenced) {
			t.Fatalf("Claim with epoch %d (stored 5): err = %v, want ErrFenced", e, err)
		}
	}
	expect(t, s, proj, shard, "100", 5)
}

func testSaveAndGet(t *testing.T, s cursorstore.Store) {
	ctx := ctxT(t)
	proj := projection(t)
	if _, err := s.Claim(ctx, proj, shard, 1); err != nil {
		t.Fatal(err)
	}
	for _, seq := range []string{"1", "2", "2", "17", bigSeq1, bigSeq1, bigSeq2} {
		if err := s.Save(ctx, proj, shard, 1, seq); err != nil {
			t.Fatalf("Save(%s): %v", seq, err)
		}
		expect(t, s, proj, shard, seq, 1)
	}
}

func testSaveFenced(t *testing.T, s cursorstore.Store) {
	ctx := ctxT(t)
	proj := projection(t)
	claimSaved(t, s, proj, 3, "10")
	// Older epochs are fenced, and so is a newer epoch that never claimed: Save requires the
	// stored epoch exactly.
	for _, e := range []int64{2, 0, 4} {
		if err := s.Save(ctx, proj, shard, e, "20"); !errors.Is(err, cursorstore.ErrFenced) {
			t.Fatalf("Save with epoch %d (stored 3): err = %v, want ErrFenced", e, err)
		}
	}
	expect(t, s, proj, shard, "10", 3)
}

func testSaveBackwards(t *testing.T, s cursorstore.Store) {
	ctx := ctxT(t)
	proj := projection(t)
	claimSaved(t, s, proj, 1, bigSeq2)
	for _, seq := range []string{bigSeq1, "5"} {
		err := s.Save(ctx, proj, shard, 1, seq)
		if !errors.Is(err, cursorstore.ErrBackwards) {
			t.Fatalf("Save(%s) after %s: err = %v, want ErrBackwards", seq, bigSeq2, err)
		}
		if errors.Is(err, cursorstore.ErrFenced) {
			t.Fatalf("Save backwards with the right epoch must not report ErrFenced: %v", err)
		}
	}
	expect(t, s, proj, shard, bigSeq2, 1)
}

// testNumericOrder checks that sequence numbers compare as numbers, not as strings.
func testNumericOrder(t *testing.T, s cursorstore.Store) {
	ctx := ctxT(t)
	proj := projection(t)
	if _, err := s.Claim(ctx, proj, shard, 1); err != nil {
		t.Fatal(err)
	}
	for _, seq := range []string{"9", "10", "99", "100"} {
		if err := s.Save(ctx, proj, shard, 1, seq); err != nil {
			t.Fatalf("Save(%s) after a numerically lower one: %v", seq, err)
		}
	}
	if err := s.Save(ctx, proj, shard, 1, "99"); !errors.Is(err, cursorstore.ErrBackwards) {
		t.Fatalf("Save(99) after 100: err = %v, want ErrBackwards", err)
	}
	expect(t, s, proj, shard, "100", 1)
}

func testIsolation(t *testing.T, s cursorstore.Store) {
	ctx := ctxT(t)
	p1, p2 := projection(t), projection(t)
	s0, s1 := "shardId-000000000000", "shardId-000000000001"
	for i, k := range []struct {
		proj, shard string
		epoch       int64
	}{{p1, s0, 1}, {p1, s1, 2}, {p2, s0, 3}} {
		if _, err := s.Claim(ctx, k.proj, k.shard, k.epoch); err != nil {
			t.Fatal(err)
		}
		if err := s.Save(ctx, k.proj, k.shard, k.epoch, strconv.Itoa(10*(i+1))); err != nil {
			t.Fatal(err)
		}
	}
	expect(t, s, p1, s0, "10", 1)
	expect(t, s, p1, s1, "20", 2)
	expect(t, s, p2, s0, "30", 3)
	c, err := s.Get(ctx, p2, s1)
	if err != nil || c.Seq != "" || c.Epoch != 0 {
		t.Fatalf("Get of an untouched cursor = %+v, %v; want empty", c, err)
	}
}

// testZombieHandoff is the scenario fencing exists for: worker A (epoch 1) pauses, B takes the
// shard (epoch 2) and moves on; A wakes up and tries to save.
func testZombieHandoff(t *testing.T, s cursorstore.Store) {
	ctx := ctxT(t)
	proj := projection(t)
	claimSaved(t, s, proj, 1, "100")
	c, err := s.Claim(ctx, proj, shard, 2)
	if err != nil || c.Seq != "100" {
		t.Fatalf("new owner Claim = %+v, %v; want to resume after 100", c, err)
	}
	if err := s.Save(ctx, proj, shard, 1, "200"); !errors.Is(err, cursorstore.ErrFenced) {
		t.Fatalf("zombie Save: err = %v, want ErrFenced", err)
	}
	expect(t, s, proj, shard, "100", 2)
	if err := s.Save(ctx, proj, shard, 2, "150"); err != nil {
		t.Fatal(err)
	}
	expect(t, s, proj, shard, "150", 2)
}

// testRaceClaim races Claims with distinct epochs: the stored epoch ends at the maximum, each
// Claim either succeeds or is fenced, and the maximum's Claim succeeds.
func testRaceClaim(t *testing.T, s cursorstore.Store) {
	ctx := ctxT(t)
	proj := projection(t)
	const n = 12
	var wg sync.WaitGroup
	errs := make([]error, n+1)
	start := make(chan struct{})
	for e := 1; e <= n; e++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			c, err := s.Claim(ctx, proj, shard, int64(e))
			if err == nil && c.Epoch != int64(e) {
				err = fmt.Errorf("Claim(%d) succeeded but returned epoch %d", e, c.Epoch)
			}
			errs[e] = err
		}()
	}
	close(start)
	wg.Wait()
	for e := 1; e <= n; e++ {
		if errs[e] != nil && !errors.Is(errs[e], cursorstore.ErrFenced) {
			t.Fatalf("Claim(%d): %v", e, errs[e])
		}
	}
	if errs[n] != nil {
		t.Fatalf("Claim with the highest epoch %d failed: %v", n, errs[n])
	}
	expect(t, s, proj, shard, "", n)
}

// testRaceSave races Saves of distinct sequence numbers at one epoch, plus zombie Saves at an
// older one: the cursor ends at the highest sequence (the backwards check is atomic), every
// zombie is fenced.
func testRaceSave(t *testing.T, s cursorstore.Store) {
	ctx := ctxT(t)
	proj := projection(t)
	if _, err := s.Claim(ctx, proj, shard, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim(ctx, proj, shard, 2); err != nil {
		t.Fatal(err)
	}
	const n = 16
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	start := make(chan struct{})
	for i := 1; i <= n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			epoch := int64(2)
			if i%4 == 0 {
				epoch = 1 // zombie
			}
			err := s.Save(ctx, proj, shard, epoch, strconv.Itoa(i*1000))
			ok := err == nil || (epoch == 2 && errors.Is(err, cursorstore.ErrBackwards))
			if epoch == 1 {
				ok = errors.Is(err, cursorstore.ErrFenced)
			}
			if !ok {
				mu.Lock()
				errs = append(errs, fmt.Errorf("Save(epoch %d, seq %d): %v", epoch, i*1000, err))
				mu.Unlock()
			}
		}()
	}
	close(start)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	// The highest non-zombie sequence number is 15000.
	expect(t, s, proj, shard, "15000", 2)
}

// expectStopped checks the cursor's stopped state: reason "" means not stopped (StoppedMs 0);
// otherwise StoppedMs must lie in [from, to] (ms since the Unix epoch, as taken around Stop).
func expectStopped(t *testing.T, s cursorstore.Store, proj, shardID, reason string, from, to int64) {
	t.Helper()
	c, err := s.Get(ctxT(t), proj, shardID)
	if err != nil {
		t.Fatalf("Get(%s, %s): %v", proj, shardID, err)
	}
	if c.Stopped != reason {
		t.Fatalf("Get(%s, %s).Stopped = %q, want %q", proj, shardID, c.Stopped, reason)
	}
	if reason == "" && c.StoppedMs != 0 {
		t.Fatalf("Get(%s, %s).StoppedMs = %d for a cursor that is not stopped, want 0", proj, shardID, c.StoppedMs)
	}
	if reason != "" && (c.StoppedMs < from || c.StoppedMs > to) {
		t.Fatalf("Get(%s, %s).StoppedMs = %d, want the time of Stop, in [%d, %d]", proj, shardID, c.StoppedMs, from, to)
	}
}

// stop calls Stop and returns the time window around the call (ms since the Unix epoch).
func stop(t *testing.T, s cursorstore.Store, proj, shardID string, epoch int64, reason string) (from, to int64) {
	t.Helper()
	from = time.Now().UnixMilli()
	if err := s.Stop(ctxT(t), proj, shardID, epoch, reason); err != nil {
		t.Fatalf("Stop(%s, %s, epoch %d): %v", proj, shardID, epoch, err)
	}
	return from, time.Now().UnixMilli()
}

const reason = `handler failed on seq 17: projhost.fail: "bad record" — ünïcode`

// testStopFenced: Stop requires the stored epoch exactly, like Save, and changes nothing else.
func testStopFenced(t *testing.T, s cursorstore.Store) {
	ctx := ctxT(t)
	proj := projection(t)
	claimSaved(t, s, proj, 3, bigSeq1)
	for _, e := range []int64{2, 0, 4} {
		if err := s.Stop(ctx, proj, shard, e, reason); !errors.Is(err, cursorstore.ErrFenced) {
			t.Fatalf("Stop with epoch %d (stored 3): err = %v, want ErrFenced", e, err)
		}
	}
	expectStopped(t, s, proj, shard, "", 0, 0)
	from, to := stop(t, s, proj, shard, 3, reason)
	expectStopped(t, s, proj, shard, reason, from, to)
	expect(t, s, proj, shard, bigSeq1, 3)
	// The stopped state belongs to the one cursor.
	expectStopped(t, s, proj, "shardId-000000000001", "", 0, 0)
	expectStopped(t, s, projection(t), shard, "", 0, 0)
}

// testStopKept: Save and Claim (by the owner or a new one) keep the stopped state; only the
// owner may stop, so a new owner fences the old one's Stop.
func testStopKept(t *testing.T, s cursorstore.Store) {
	ctx := ctxT(t)
	proj := projection(t)
	if _, err := s.Claim(ctx, proj, shard, 1); err != nil {
		t.Fatal(err)
	}
	from, to := stop(t, s, proj, shard, 1, reason)
	if err := s.Save(ctx, proj, shard, 1, "20"); err != nil {
		t.Fatalf("Save on a stopped cursor: %v", err)
	}
	expectStopped(t, s, proj, shard, reason, from, to)
	expect(t, s, proj, shard, "20", 1)
	for _, e := range []int64{1, 2} { // re-claim, then a new owner
		c, err := s.Claim(ctx, proj, shard, e)
		if err != nil {
			t.Fatalf("Claim(%d) of a stopped cursor: %v", e, err)
		}
		if c.Stopped != reason || c.StoppedMs < from || c.StoppedMs > to || c.Seq != "20" {
			t.Fatalf("Claim(%d) returned %+v, want seq 20 and the stopped state %q at [%d, %d]", e, c, reason, from, to)
		}
		expectStopped(t, s, proj, shard, reason, from, to)
	}
	if err := s.Stop(ctx, proj, shard, 1, "zombie"); !errors.Is(err, cursorstore.ErrFenced) {
		t.Fatalf("Stop by the old owner after a new Claim: err = %v, want ErrFenced", err)
	}
	expectStopped(t, s, proj, shard, reason, from, to)
	expect(t, s, proj, shard, "20", 2)
}

// testStopAgain: stopping a stopped cursor replaces reason and time; Stop of a missing cursor
// with epoch 0 (the stored epoch of a missing cursor) stops it.
func testStopAgain(t *testing.T, s cursorstore.Store) {
	proj := projection(t)
	from, to := stop(t, s, proj, shard, 0, "first")
	expectStopped(t, s, proj, shard, "first", from, to)
	expect(t, s, proj, shard, "", 0)
	time.Sleep(2 * time.Millisecond)
	from, to = stop(t, s, proj, shard, 0, "second")
	expectStopped(t, s, proj, shard, "second", from, to)
}

func testStopEmptyReason(t *testing.T, s cursorstore.Store) {
	ctx := ctxT(t)
	proj := projection(t)
	if _, err := s.Claim(ctx, proj, shard, 1); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(ctx, proj, shard, 1, ""); err == nil {
		t.Fatal("Stop with an empty reason succeeded, want an error")
	}
	expectStopped(t, s, proj, shard, "", 0, 0)
}

// testResume: Resume is not fenced, clears only the stopped state, and is idempotent; resuming a
// cursor that is not stopped or does not exist changes nothing.
func testResume(t *testing.T, s cursorstore.Store) {
	ctx := ctxT(t)
	proj := projection(t)
	if err := s.Resume(ctx, proj, shard); err != nil {
		t.Fatalf("Resume of a missing cursor: %v", err)
	}
	c, err := s.Get(ctx, proj, shard)
	if err != nil || c != (cursorstore.Cursor{Projection: proj, ShardID: shard}) {
		t.Fatalf("Get after Resume of a missing cursor = %+v, %v; want an empty cursor", c, err)
	}
	claimSaved(t, s, proj, 4, bigSeq2)
	if err := s.Resume(ctx, proj, shard); err != nil {
		t.Fatalf("Resume of a cursor that is not stopped: %v", err)
	}
	expect(t, s, proj, shard, bigSeq2, 4)
	expectStopped(t, s, proj, shard, "", 0, 0)
	stop(t, s, proj, shard, 4, reason)
	for i := range 2 {
		if err := s.Resume(ctx, proj, shard); err != nil {
			t.Fatalf("Resume #%d: %v", i+1, err)
		}
		expectStopped(t, s, proj, shard, "", 0, 0)
		expect(t, s, proj, shard, bigSeq2, 4)
	}
	// The owner may stop it again, and Save still works.
	from, to := stop(t, s, proj, shard, 4, "again")
	expectStopped(t, s, proj, shard, "again", from, to)
	if err := s.Save(ctx, proj, shard, 4, bigSeq2); err != nil {
		t.Fatal(err)
	}
}

// testRaceStopSave races the owner's Saves with its Stop: neither loses the other's write (the
// stopped state survives every Save, the sequence number every Stop).
func testRaceStopSave(t *testing.T, s cursorstore.Store) {
	ctx := ctxT(t)
	proj := projection(t)
	if _, err := s.Claim(ctx, proj, shard, 1); err != nil {
		t.Fatal(err)
	}
	const n = 12
	var wg sync.WaitGroup
	errs := make([]error, n+1)
	start := make(chan struct{})
	from := time.Now().UnixMilli()
	for i := 0; i <= n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if i == n {
				errs[i] = s.Stop(ctx, proj, shard, 1, reason)
				return
			}
			if err := s.Save(ctx, proj, shard, 1, strconv.Itoa((i+1)*100)); err != nil && !errors.Is(err, cursorstore.ErrBackwards) {
				errs[i] = err
			}
		}()
	}
	close(start)
	wg.Wait()
	to := time.Now().UnixMilli()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	expect(t, s, proj, shard, strconv.Itoa(n*100), 1)
	expectStopped(t, s, proj, shard, reason, from, to)
}

func expectPauses(t *testing.T, s cursorstore.Store, proj string, want cursorstore.Pauses) {
	t.Helper()
	got, err := s.Pauses(ctxT(t), proj)
	if err != nil {
		t.Fatalf("Pauses(%s): %v", proj, err)
	}
	if got.All != want.All || strings.Join(got.Shards, ",") != strings.Join(want.Shards, ",") {
		t.Fatalf("Pauses(%s) = %+v, want %+v", proj, got, want)
	}
}

func setPaused(t *testing.T, s cursorstore.Store, proj, shardID string, paused bool) {
	t.Helper()
	if err := s.SetPaused(ctxT(t), proj, shardID, paused); err != nil {
		t.Fatalf("SetPaused(%s, %q, %v): %v", proj, shardID, paused, err)
	}
}

// testPauses: shard and projection pauses are set and lifted independently, idempotently, on
// shards with or without a cursor, and leave the cursors as they are.
func testPauses(t *testing.T, s cursorstore.Store) {
	proj := projection(t)
	expectPauses(t, s, proj, cursorstore.Pauses{})
	claimSaved(t, s, proj, 3, bigSeq1)
	steps := []struct {
		shard  string
		paused bool
		want   cursorstore.Pauses
	}{
		{shard, true, cursorstore.Pauses{Shards: []string{shard}}},
		{shard, true, cursorstore.Pauses{Shards: []string{shard}}},                                          // idempotent
		{"shardId-000000000009", true, cursorstore.Pauses{Shards: []string{shard, "shardId-000000000009"}}}, // no cursor
		{"", true, cursorstore.Pauses{All: true, Shards: []string{shard, "shardId-000000000009"}}},
		{shard, false, cursorstore.Pauses{All: true, Shards: []string{"shardId-000000000009"}}},
		{"", false, cursorstore.Pauses{Shards: []string{"shardId-000000000009"}}},
		{"", false, cursorstore.Pauses{Shards: []string{"shardId-000000000009"}}}, // idempotent
		{"shardId-000000000009", false, cursorstore.Pauses{}},
		{shard, false, cursorstore.Pauses{}}, // lifting what is not paused
	}
	for i, st := range steps {
		setPaused(t, s, proj, st.shard, st.paused)
		expectPauses(t, s, proj, st.want)
		for _, id := range []string{shard, "shardId-000000000009", "shardId-000000000005"} {
			if got, want := st.want.Paused(id), st.want.All || slices.Contains(st.want.Shards, id); got != want {
				t.Fatalf("step %d: Paused(%s) = %v, want %v", i, id, got, want)
			}
		}
	}
	expect(t, s, proj, shard, bigSeq1, 3)
	if _, err := s.Claim(ctxT(t), proj, shard, 4); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(ctxT(t), proj, shard, 4, bigSeq2); err != nil {
		t.Fatal(err)
	}
	expect(t, s, proj, shard, bigSeq2, 4)
}

// testPauseIsolation: one projection's pauses are not another's.
func testPauseIsolation(t *testing.T, s cursorstore.Store) {
	a, b := projection(t)+"-a", projection(t)+"-b"
	setPaused(t, s, a, "", true)
	setPaused(t, s, a, shard, true)
	expectPauses(t, s, b, cursorstore.Pauses{})
	setPaused(t, s, b, "other", true)
	expectPauses(t, s, a, cursorstore.Pauses{All: true, Shards: []string{shard}})
	expectPauses(t, s, b, cursorstore.Pauses{Shards: []string{"other"}})
}

// testReset: Reset moves a cursor in either direction, to nothing too, fenced like Claim, and
// keeps the stopped state; an owner of an older epoch can no longer save.
func testReset(t *testing.T, s cursorstore.Store) {
	ctx := ctxT(t)
	proj := projection(t)
	claimSaved(t, s, proj, 3, bigSeq2)
	if err := s.Reset(ctx, proj, shard, 2, "5"); !errors.Is(err, cursorstore.ErrFenced) {
		t.Fatalf("Reset by an older epoch = %v, want ErrFenced", err)
	}
	expect(t, s, proj, shard, bigSeq2, 3)
	for _, c := range []struct {
		epoch int64
		seq   string
	}{{4, bigSeq1}, {4, "17"}, {5, ""}, {5, bigSeq2}, {6, "9"}} {
		if err := s.Reset(ctx, proj, shard, c.epoch, c.seq); err != nil {
			t.Fatalf("Reset(epoch %d, %q): %v", c.epoch, c.seq, err)
		}
		expect(t, s, proj, shard, c.seq, c.epoch)
	}
	if err := s.Save(ctx, proj, shard, 3, bigSeq2); !errors.Is(err, cursorstore.ErrFenced) {
		t.Fatalf("Save by the epoch before the reset = %v, want ErrFenced", err)
	}
	// The next owner claims above the reset's epoch and goes on from the reset position.
	if c, err := s.Claim(ctx, proj, shard, 7); err != nil || c.Seq != "9" {
		t.Fatalf("Claim after Reset = %+v, %v; want seq 9", c, err)
	}
	if err := s.Save(ctx, proj, shard, 7, "10"); err != nil {
		t.Fatal(err)
	}
	stop(t, s, proj, shard, 7, reason)
	if err := s.Reset(ctx, proj, shard, 8, "3"); err != nil {
		t.Fatal(err)
	}
	expect(t, s, proj, shard, "3", 8)
	c, err := s.Get(ctx, proj, shard)
	if err != nil || c.Stopped != reason {
		t.Fatalf("Get after Reset of a stopped cursor = %+v, %v; want it still stopped", c, err)
	}
	// A missing cursor is created.
	if err := s.Reset(ctx, proj, "shardId-000000000007", 2, "44"); err != nil {
		t.Fatal(err)
	}
	expect(t, s, proj, "shardId-000000000007", "44", 2)
}
