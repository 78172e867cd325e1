package readmodeltest

import (
	"errors"
	"fmt"
	"strconv"
	"testing"

	"github.com/buger/jsonparser"

	"github.com/projhost/projhost/cursorstore"
	"github.com/projhost/projhost/readmodel"
)

// Feature is optional behaviour a store declares to Run and RunCommitter. The only one is
// Replay.
type Feature interface{ names() []string }

// Replay declares that the store honours readmodel.Write.Replay: a replay write of (shard,
// Replay) is applied once, however often it is repeated and whatever the shard's sequence
// numbers, and is still fenced by its epoch.
type Replay struct {
	// Request, when not nil, is called before each replay the suite applies, with the replay's
	// identity, for stores that apply replays of requested dead letters only (the embedded
	// store: the letter must be in deadletter.StateReplayRequested).
	Request func(t *testing.T, s readmodel.Store, projection, shardID, seq string)
	// Interrupt, when not nil, makes the store apply w as a crash half-way through would leave
	// it: at least one of its distinct keys written and at least one not (the Apply fails).
	// Stores that apply a Write atomically leave it nil; the half-applied case is skipped.
	Interrupt func(t *testing.T, s readmodel.Store, w readmodel.Write)
}

// Feature names, for suitekit.
const (
	featureReplay            = "replay"
	featureInterruptedReplay = "replay-interrupted"
)

func (r Replay) names() []string {
	if r.Interrupt != nil {
		return []string{featureReplay, featureInterruptedReplay}
	}
	return []string{featureReplay}
}

// declare returns the declared Replay (zero when none) and the names of all declared features.
func declare(features []Feature) (Replay, []string) {
	var rp Replay
	var names []string
	for _, f := range features {
		if r, ok := f.(Replay); ok {
			rp = r
		}
		names = append(names, f.names()...)
	}
	return rp, names
}

// counter returns the document {"n":n}.
func counter(coll, key string, n int) readmodel.Mutation {
	return put(coll, key, fmt.Sprintf(`{"n":%d}`, n))
}

// count returns n of the document coll/key (0 when absent), as a handler reading it would.
func count(t *testing.T, s readmodel.Store, proj, coll, key string) int {
	t.Helper()
	doc, found, err := s.Get(ctxT(t), proj, coll, key)
	if err != nil {
		t.Fatalf("Get(%s, %s): %v", coll, key, err)
	}
	if !found {
		return 0
	}
	n, err := jsonparser.GetInt(doc, "n")
	if err != nil {
		t.Fatalf("Get(%s, %s) = %s: no number n: %v", coll, key, doc, err)
	}
	return int(n)
}

// increments computes a replay's mutations the way a read-modify-write handler would: each key's
// count plus one, from the store's current documents.
func increments(t *testing.T, s readmodel.Store, proj string, keys ...string) []readmodel.Mutation {
	t.Helper()
	ms := make([]readmodel.Mutation, len(keys))
	for i, k := range keys {
		ms[i] = counter("c", k, count(t, s, proj, "c", k)+1)
	}
	return ms
}

func expectCounts(t *testing.T, s readmodel.Store, proj string, want map[string]int) {
	t.Helper()
	for k, n := range want {
		if got := count(t, s, proj, "c", k); got != n {
			t.Fatalf("document c/%s has n = %d, want %d (all: want %v)", k, got, n, want)
		}
	}
}

func (rp Replay) request(t *testing.T, s readmodel.Store, proj, shard, seq string) {
	t.Helper()
	if rp.Request != nil {
		rp.Request(t, s, proj, shard, seq)
	}
}

func replayWrite(proj, shard string, epoch int64, seq, replay string, ms []readmodel.Mutation) readmodel.Write {
	return readmodel.Write{Projection: proj, ShardID: shard, Epoch: epoch, Seq: seq, Replay: replay, Mutations: ms}
}

func applyReplay(t *testing.T, s readmodel.Store, w readmodel.Write) {
	t.Helper()
	if err := s.Apply(ctxT(t), w); err != nil {
		t.Fatalf("Apply of the replay of %s/%s by epoch %d at seq %s: %v", w.ShardID, w.Replay, w.Epoch, w.Seq, err)
	}
}

// testOnce: a replay applies once; repeating it, with mutations computed again from the state
// it left, changes nothing; the shard's sequence-number idempotency is undisturbed by it.
func (rp Replay) testOnce(t *testing.T, s readmodel.Store) {
	proj := projection(t)
	apply(t, s, proj, shardA, 1, "10", counter("c", "a", 1), counter("c", "b", 1))
	rp.request(t, s, proj, shardA, "5")
	keys := []string{"a", "b", "new"}
	applyReplay(t, s, replayWrite(proj, shardA, 1, "10", "5", increments(t, s, proj, keys...)))
	want := map[string]int{"a": 2, "b": 2, "new": 1}
	expectCounts(t, s, proj, want)
	for range 2 {
		applyReplay(t, s, replayWrite(proj, shardA, 1, "10", "5", increments(t, s, proj, keys...)))
		expectCounts(t, s, proj, want)
	}
	// Events up to 10 are still applied (a repeated batch at 10 is skipped), later ones are not.
	apply(t, s, proj, shardA, 1, "10", counter("c", "a", 99))
	expectCounts(t, s, proj, want)
	apply(t, s, proj, shardA, 1, "11", counter("c", "a", 3))
	want["a"] = 3
	expectCounts(t, s, proj, want)
}

// testPerEvent: replays are idempotent per (shard, event): two dead letters of one shard, and
// the same sequence number in another shard, each apply once.
func (rp Replay) testPerEvent(t *testing.T, s readmodel.Store) {
	proj := projection(t)
	apply(t, s, proj, shardA, 1, "20", counter("c", "a", 1))
	apply(t, s, proj, shardB, 4, "20", counter("c", "b", 1))
	n := 1
	for _, r := range []struct {
		shard string
		epoch int64
		seq   string
	}{{shardA, 1, "5"}, {shardA, 1, "17"}, {shardB, 4, "5"}} {
		rp.request(t, s, proj, r.shard, r.seq)
		for range 2 { // the second time changes nothing
			applyReplay(t, s, replayWrite(proj, r.shard, r.epoch, "20", r.seq, increments(t, s, proj, "a")))
		}
		n++
		expectCounts(t, s, proj, map[string]int{"a": n, "b": 1})
	}
}

// testFenced: a replay by a stale epoch is refused and applies nothing (nor uses the replay up:
// the current owner applies it afterwards); a newer owner repeating it changes nothing.
func (rp Replay) testFenced(t *testing.T, s readmodel.Store) {
	ctx := ctxT(t)
	proj := projection(t)
	apply(t, s, proj, shardA, 1, "10", counter("c", "a", 1))
	apply(t, s, proj, shardA, 2, "11", counter("c", "a", 2), counter("c", "b", 1))
	rp.request(t, s, proj, shardA, "5")
	err := s.Apply(ctx, replayWrite(proj, shardA, 1, "11", "5", []readmodel.Mutation{counter("c", "a", 100), counter("c", "b", 100)}))
	if !errors.Is(err, readmodel.ErrFenced) {
		t.Fatalf("replay by stale epoch 1 after epoch 2: err = %v, want ErrFenced", err)
	}
	expectCounts(t, s, proj, map[string]int{"a": 2, "b": 1})
	applyReplay(t, s, replayWrite(proj, shardA, 2, "11", "5", increments(t, s, proj, "a", "b")))
	expectCounts(t, s, proj, map[string]int{"a": 3, "b": 2})
	applyReplay(t, s, replayWrite(proj, shardA, 3, "11", "5", increments(t, s, proj, "a", "b")))
	expectCounts(t, s, proj, map[string]int{"a": 3, "b": 2})
}

// testInterrupted: a replay that stopped half-way, applied again with mutations computed from
// the state it left, completes it: every document has the replay's effect once.
func (rp Replay) testInterrupted(t *testing.T, s readmodel.Store) {
	proj := projection(t)
	var keys []string
	var initial []readmodel.Mutation
	want := map[string]int{}
	for i := range 8 {
		k := "k" + strconv.Itoa(i)
		keys, initial, want[k] = append(keys, k), append(initial, counter("c", k, 1)), 2
	}
	apply(t, s, proj, shardA, 1, "10", initial...)
	rp.request(t, s, proj, shardA, "5")
	rp.Interrupt(t, s, replayWrite(proj, shardA, 1, "10", "5", increments(t, s, proj, keys...)))
	written := 0
	for _, k := range keys {
		written += count(t, s, proj, "c", k) - 1
	}
	if written == 0 || written == len(keys) {
		t.Fatalf("the interrupted replay wrote %d of %d documents; Interrupt must stop it half-way", written, len(keys))
	}
	applyReplay(t, s, replayWrite(proj, shardA, 1, "10", "5", increments(t, s, proj, keys...)))
	expectCounts(t, s, proj, want)
}

// testCommit: a replay Commit applies once, keeps the cursor where it is (and its stopped
// state), and is fenced for documents and cursor.
func (rp Replay) testCommit(t *testing.T, st Stores) {
	ctx := ctxT(t)
	proj := projection(t)
	s, cs := st.ReadModel, st.Cursors
	c := s.(readmodel.Committer)
	if _, err := cs.Claim(ctx, proj, shardA, 1); err != nil {
		t.Fatal(err)
	}
	if err := c.Commit(ctx, readmodel.Write{Projection: proj, ShardID: shardA, Epoch: 1, Seq: "10",
		Mutations: []readmodel.Mutation{counter("c", "a", 1)}}); err != nil {
		t.Fatal(err)
	}
	if err := cs.Stop(ctx, proj, shardA, 1, "stopped"); err != nil {
		t.Fatal(err)
	}
	rp.request(t, s, proj, shardA, "5")
	for range 2 {
		if err := c.Commit(ctx, replayWrite(proj, shardA, 1, "10", "5", increments(t, s, proj, "a", "b"))); err != nil {
			t.Fatalf("replay Commit: %v", err)
		}
		expectCounts(t, s, proj, map[string]int{"a": 2, "b": 1})
		expectCursor(t, cs, proj, cursorstore.Cursor{Seq: "10", Epoch: 1, Stopped: "stopped"})
	}
	rp.request(t, s, proj, shardA, "7")
	if _, err := cs.Claim(ctx, proj, shardA, 2); err != nil {
		t.Fatal(err)
	}
	err := c.Commit(ctx, replayWrite(proj, shardA, 1, "10", "7", increments(t, s, proj, "a")))
	if !errors.Is(err, readmodel.ErrFenced) || !errors.Is(err, cursorstore.ErrFenced) {
		t.Fatalf("stale-epoch replay Commit: err = %v, want readmodel.ErrFenced and cursorstore.ErrFenced", err)
	}
	expectCounts(t, s, proj, map[string]int{"a": 2})
	if err := c.Commit(ctx, replayWrite(proj, shardA, 2, "10", "7", increments(t, s, proj, "a"))); err != nil {
		t.Fatal(err)
	}
	expectCounts(t, s, proj, map[string]int{"a": 3})
	expectCursor(t, cs, proj, cursorstore.Cursor{Seq: "10", Epoch: 2, Stopped: "stopped"})
}

// testCommitKeepsStopped: a Commit saves the cursor but keeps its stopped state.
func testCommitKeepsStopped(t *testing.T, st Stores) {
	ctx := ctxT(t)
	proj := projection(t)
	c := st.ReadModel.(readmodel.Committer)
	if _, err := st.Cursors.Claim(ctx, proj, shardA, 3); err != nil {
		t.Fatal(err)
	}
	if err := st.Cursors.Stop(ctx, proj, shardA, 3, "stopped by policy"); err != nil {
		t.Fatal(err)
	}
	for _, seq := range []string{"1", "2", "2"} {
		if err := c.Commit(ctx, readmodel.Write{Projection: proj, ShardID: shardA, Epoch: 3, Seq: seq,
			Mutations: []readmodel.Mutation{counter("c", "a", 1)}}); err != nil {
			t.Fatal(err)
		}
		expectCursor(t, st.Cursors, proj, cursorstore.Cursor{Seq: seq, Epoch: 3, Stopped: "stopped by policy"})
	}
}

// expectCursor checks Seq, Epoch and Stopped of proj/shardA's cursor (StoppedMs only for being
// set).
func expectCursor(t *testing.T, cs cursorstore.Store, proj string, want cursorstore.Cursor) {
	t.Helper()
	got, err := cs.Get(ctxT(t), proj, shardA)
	if err != nil {
		t.Fatal(err)
	}
	if got.Seq != want.Seq || got.Epoch != want.Epoch || got.Stopped != want.Stopped || (got.StoppedMs == 0) != (want.Stopped == "") {
		t.Fatalf("cursor = %+v, want seq %q epoch %d stopped %q", got, want.Seq, want.Epoch, want.Stopped)
	}
}
