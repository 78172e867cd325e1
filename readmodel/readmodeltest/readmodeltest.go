// Package readmodeltest is the conformance suite for readmodel.Store implementations, and for
// readmodel.Committer when the store implements it.
//
// Run it from an implementation's tests:
//
//	func TestConformance(t *testing.T) {
//		readmodeltest.Run(t, func(t *testing.T) readmodel.Store { return openStore(t) })
//	}
//
// A store that implements readmodel.Committer and keeps cursors (the embedded SQLite store) also
// runs RunCommitter, which checks that a Commit moves documents and cursor together.
//
// Optional behaviour is declared to Run and RunCommitter as a Feature: a store that honours
// readmodel.Write.Replay passes Replay (with the hooks its kind of store needs), which adds the
// dead-letter replay cases; without it they are skipped.
//
// The factory is called once per subtest and may return the same backing tables every time: each
// subtest uses fresh projection names. Documents are compared as JSON values (a store may
// re-encode them). Only the documented contract is checked; in particular replay and fencing are
// checked on keys the newer write touched, which per-item markers (DESIGN §3) can guarantee, and
// not on keys it did not touch. About 300 item writes in all.
package readmodeltest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/projhost/projhost/cursorstore"
	"github.com/projhost/projhost/internal/suitekit"
	"github.com/projhost/projhost/readmodel"
)

// Run runs the suite. newStore returns the store under test; features declares the optional
// behaviour it implements (Replay), whose cases are skipped otherwise.
func Run(t *testing.T, newStore func(t *testing.T) readmodel.Store, features ...Feature) {
	t.Helper()
	rp, declared := declare(features)
	suitekit.Run(t, newStore, []suitekit.Case[readmodel.Store]{
		{Name: "GetMissing", Fn: testGetMissing},
		{Name: "PutGet", Fn: testPutGet},
		{Name: "LastWriteWins", Fn: testLastWriteWins},
		{Name: "Delete", Fn: testDelete},
		{Name: "Replay", Fn: testReplay},
		{Name: "ReplayAfterDelete", Fn: testReplayAfterDelete},
		{Name: "ShardsIndependent", Fn: testShardsIndependent},
		{Name: "Fenced", Fn: testFenced},
		{Name: "NewOwnerBehind", Fn: testNewOwnerBehind},
		{Name: "Scan", Fn: testScan},
		{Name: "LargeWrite", Fn: testLargeWrite},
		{Name: "RaceEpochs", Fn: testRaceEpochs},
		{Name: "RaceShards", Fn: testRaceShards},
		{Name: "Commit", Fn: func(t *testing.T, s readmodel.Store) { testCommit(t, s, nil) }},
		{Name: "DeadLetterReplayOnce", Feature: featureReplay, Fn: rp.testOnce},
		{Name: "DeadLetterReplayPerEvent", Feature: featureReplay, Fn: rp.testPerEvent},
		{Name: "DeadLetterReplayFenced", Feature: featureReplay, Fn: rp.testFenced},
		{Name: "DeadLetterReplayInterrupted", Feature: featureInterruptedReplay, Fn: rp.testInterrupted},
	}, declared...)
}

// Stores is a read-model store and the cursor store backed by the same storage.
type Stores struct {
	ReadModel readmodel.Store // must implement readmodel.Committer
	Cursors   cursorstore.Store
}

// RunCommitter checks readmodel.Committer together with the cursor store the committer writes
// cursors to. newStores returns the read-model store (which must implement readmodel.Committer)
// and the cursor store backed by the same storage; features as for Run.
func RunCommitter(t *testing.T, newStores func(t *testing.T) (readmodel.Store, cursorstore.Store), features ...Feature) {
	t.Helper()
	rp, declared := declare(features)
	newPair := func(t *testing.T) Stores {
		s, cs := newStores(t)
		if _, ok := s.(readmodel.Committer); !ok {
			t.Fatalf("%T does not implement readmodel.Committer", s)
		}
		return Stores{ReadModel: s, Cursors: cs}
	}
	suitekit.Run(t, newPair, []suitekit.Case[Stores]{
		{Name: "CommitWithCursor", Fn: func(t *testing.T, s Stores) { testCommit(t, s.ReadModel, s.Cursors) }},
		{Name: "CommitKeepsStopped", Fn: testCommitKeepsStopped},
		{Name: "DeadLetterReplayCommit", Feature: featureReplay, Fn: rp.testCommit},
	}, declared...)
}

const (
	shardA = "shardId-000000000000"
	shardB = "shardId-000000000001"
)

func ctxT(t *testing.T) context.Context { return suitekit.Context(t) }

func projection(t *testing.T) string { return suitekit.Name(t, "rmtest") }

func put(coll, key, doc string) readmodel.Mutation {
	return readmodel.Mutation{Collection: coll, Key: key, Doc: []byte(doc)}
}

func del(coll, key string) readmodel.Mutation {
	return readmodel.Mutation{Collection: coll, Key: key}
}

func apply(t *testing.T, s readmodel.Store, proj, shard string, epoch int64, seq string, ms ...readmodel.Mutation) {
	t.Helper()
	w := readmodel.Write{Projection: proj, ShardID: shard, Epoch: epoch, Seq: seq, Mutations: ms}
	if err := s.Apply(ctxT(t), w); err != nil {
		t.Fatalf("Apply(shard %s epoch %d seq %s): %v", shard, epoch, seq, err)
	}
}

// jsonEqual reports whether a and b hold the same JSON value.
func jsonEqual(a, b []byte) bool {
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return bytes.Equal(a, b)
	}
	return reflect.DeepEqual(va, vb)
}

// expect checks the document at coll/key; want "" means absent.
func expect(t *testing.T, s readmodel.Store, proj, coll, key, want string) {
	t.Helper()
	doc, found, err := s.Get(ctxT(t), proj, coll, key)
	if err != nil {
		t.Fatalf("Get(%s, %s): %v", coll, key, err)
	}
	switch {
	case want == "" && found:
		t.Fatalf("Get(%s, %s) = %s, want absent", coll, key, doc)
	case want != "" && !found:
		t.Fatalf("Get(%s, %s) absent, want %s", coll, key, want)
	case want != "" && !jsonEqual(doc, []byte(want)):
		t.Fatalf("Get(%s, %s) = %s, want %s", coll, key, doc, want)
	}
}

func scanKeys(t *testing.T, s readmodel.Store, proj, coll string) []string {
	t.Helper()
	docs, err := s.Scan(ctxT(t), proj, coll)
	if err != nil {
		t.Fatalf("Scan(%q): %v", coll, err)
	}
	keys := make([]string, 0, len(docs))
	for _, d := range docs {
		keys = append(keys, d.Collection+"/"+d.Key)
	}
	return keys
}

func testGetMissing(t *testing.T, s readmodel.Store) {
	doc, found, err := s.Get(ctxT(t), projection(t), "c", "k")
	if err != nil || found || doc != nil {
		t.Fatalf("Get of a missing document = %q, %v, %v; want nil, false, nil", doc, found, err)
	}
}

func testPutGet(t *testing.T, s readmodel.Store) {
	proj := projection(t)
	docs := map[[2]string]string{
		{"airports", "DTW"}:   `{"origin":"DTW","count":3,"delay":{"sum":198,"max":66.5}}`,
		{"airports", "LAS"}:   `{"origin":"LAS","tags":["a","b"],"ok":true,"none":null}`,
		{"routes", "DTW-LAS"}: `{"name":"Détroit → Las Vegas","n":1}`,
		{"routes", "empty"}:   `{}`,
	}
	var ms []readmodel.Mutation
	for k, d := range docs {
		ms = append(ms, put(k[0], k[1], d))
	}
	apply(t, s, proj, shardA, 1, "1", ms...)
	for k, d := range docs {
		expect(t, s, proj, k[0], k[1], d)
	}
	expect(t, s, proj, "airports", "routes", "")       // key of another collection
	expect(t, s, projection(t), "airports", "DTW", "") // other projection
}

func testLastWriteWins(t *testing.T, s readmodel.Store) {
	proj := projection(t)
	apply(t, s, proj, shardA, 1, "5",
		put("c", "a", `{"v":1}`), put("c", "a", `{"v":2}`), // put, put
		put("c", "b", `{"v":1}`), del("c", "b"), // put, delete
		del("c", "d"), put("c", "d", `{"v":3}`), // delete, put
		put("c", "e", `{"v":1}`), del("c", "e"), put("c", "e", `{"v":4}`), del("c", "e"), // ends deleted
	)
	expect(t, s, proj, "c", "a", `{"v":2}`)
	expect(t, s, proj, "c", "b", "")
	expect(t, s, proj, "c", "d", `{"v":3}`)
	expect(t, s, proj, "c", "e", "")
	if got, want := scanKeys(t, s, proj, "c"), []string{"c/a", "c/d"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Scan = %v, want %v", got, want)
	}
}

func testDelete(t *testing.T, s readmodel.Store) {
	proj := projection(t)
	apply(t, s, proj, shardA, 1, "1", put("c", "a", `{"v":1}`), put("c", "b", `{"v":1}`))
	apply(t, s, proj, shardA, 1, "2", del("c", "a"), del("c", "never-written"))
	expect(t, s, proj, "c", "a", "")
	expect(t, s, proj, "c", "b", `{"v":1}`)
	expect(t, s, proj, "c", "never-written", "")
	// A deleted key can be written again later.
	apply(t, s, proj, shardA, 1, "3", put("c", "a", `{"v":3}`))
	expect(t, s, proj, "c", "a", `{"v":3}`)
	if got, want := scanKeys(t, s, proj, ""), []string{"c/a", "c/b"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Scan = %v, want %v", got, want)
	}
}

// testReplay: a Write at the same or a lower sequence number from the same shard changes nothing;
// sequence numbers compare numerically.
func testReplay(t *testing.T, s readmodel.Store) {
	proj := projection(t)
	apply(t, s, proj, shardA, 1, "10", put("c", "a", `{"v":1}`), put("c", "b", `{"v":1}`))
	apply(t, s, proj, shardA, 1, "10", put("c", "a", `{"v":2}`), put("c", "b", `{"v":2}`)) // same seq
	apply(t, s, proj, shardA, 1, "9", put("c", "a", `{"v":3}`), del("c", "b"))             // lower; "9" > "10" as strings
	expect(t, s, proj, "c", "a", `{"v":1}`)
	expect(t, s, proj, "c", "b", `{"v":1}`)
	apply(t, s, proj, shardA, 1, "11", put("c", "a", `{"v":4}`))
	expect(t, s, proj, "c", "a", `{"v":4}`)
	expect(t, s, proj, "c", "b", `{"v":1}`)
	// Kinesis-sized sequence numbers (56 digits).
	const big1 = "49590338271490256608559692538361571095921575989136588898"
	const big2 = "49590338271490256608559692540925702759324208523137515618"
	apply(t, s, proj, shardA, 1, big2, put("c", "a", `{"v":5}`))
	apply(t, s, proj, shardA, 1, big1, put("c", "a", `{"v":6}`))
	apply(t, s, proj, shardA, 1, "12", put("c", "a", `{"v":7}`))
	expect(t, s, proj, "c", "a", `{"v":5}`)
}

// testReplayAfterDelete: replaying a put older than a delete must not resurrect the document.
func testReplayAfterDelete(t *testing.T, s readmodel.Store) {
	proj := projection(t)
	apply(t, s, proj, shardA, 1, "10", put("c", "a", `{"v":1}`))
	apply(t, s, proj, shardA, 1, "20", del("c", "a"))
	apply(t, s, proj, shardA, 1, "10", put("c", "a", `{"v":1}`))
	apply(t, s, proj, shardA, 1, "15", put("c", "a", `{"v":2}`))
	expect(t, s, proj, "c", "a", "")
	if got := scanKeys(t, s, proj, ""); len(got) != 0 {
		t.Fatalf("Scan after delete = %v, want nothing", got)
	}
	apply(t, s, proj, shardA, 1, "21", put("c", "a", `{"v":3}`))
	expect(t, s, proj, "c", "a", `{"v":3}`)
}

// testShardsIndependent: sequence numbers of different shards are unrelated.
func testShardsIndependent(t *testing.T, s readmodel.Store) {
	proj := projection(t)
	apply(t, s, proj, shardA, 1, "100", put("c", "k", `{"from":"A100"}`))
	apply(t, s, proj, shardB, 1, "5", put("c", "k", `{"from":"B5"}`))
	expect(t, s, proj, "c", "k", `{"from":"B5"}`)
	apply(t, s, proj, shardA, 1, "100", put("c", "k", `{"from":"A100-replay"}`))
	expect(t, s, proj, "c", "k", `{"from":"B5"}`)
	apply(t, s, proj, shardB, 1, "6", put("c", "k", `{"from":"B6"}`))
	expect(t, s, proj, "c", "k", `{"from":"B6"}`)
	// Same shard id in another projection is another stream of writes.
	other := projection(t)
	apply(t, s, other, shardA, 1, "1", put("c", "k", `{"from":"other"}`))
	expect(t, s, other, "c", "k", `{"from":"other"}`)
	expect(t, s, proj, "c", "k", `{"from":"B6"}`)
}

func testFenced(t *testing.T, s readmodel.Store) {
	ctx := ctxT(t)
	proj := projection(t)
	apply(t, s, proj, shardA, 1, "10", put("c", "k", `{"owner":1}`))
	apply(t, s, proj, shardA, 2, "20", put("c", "k", `{"owner":2}`))
	for _, w := range []readmodel.Write{
		{Projection: proj, ShardID: shardA, Epoch: 1, Seq: "30", Mutations: []readmodel.Mutation{put("c", "k", `{"owner":"zombie"}`)}},
		{Projection: proj, ShardID: shardA, Epoch: 1, Seq: "31", Mutations: []readmodel.Mutation{del("c", "k")}},
	} {
		if err := s.Apply(ctx, w); !errors.Is(err, readmodel.ErrFenced) {
			t.Fatalf("Apply with stale epoch 1 after epoch 2 (seq %s): err = %v, want ErrFenced", w.Seq, err)
		}
	}
	expect(t, s, proj, "c", "k", `{"owner":2}`)
	// Epochs are per shard: epoch 1 of another shard still writes.
	apply(t, s, proj, shardB, 1, "40", put("c", "k", `{"owner":"B1"}`))
	expect(t, s, proj, "c", "k", `{"owner":"B1"}`)
	// The current owner carries on.
	apply(t, s, proj, shardA, 2, "21", put("c", "k", `{"owner":2,"n":2}`))
	expect(t, s, proj, "c", "k", `{"owner":2,"n":2}`)
}

// testNewOwnerBehind: a new owner resuming from an older cursor replays events whose effects the
// previous owner already applied; those writes are skipped, later ones applied.
func testNewOwnerBehind(t *testing.T, s readmodel.Store) {
	proj := projection(t)
	apply(t, s, proj, shardA, 1, "200", put("c", "k", `{"n":200}`))
	apply(t, s, proj, shardA, 2, "150", put("c", "k", `{"n":150}`))
	expect(t, s, proj, "c", "k", `{"n":200}`)
	apply(t, s, proj, shardA, 2, "201", put("c", "k", `{"n":201}`))
	expect(t, s, proj, "c", "k", `{"n":201}`)
}

func testScan(t *testing.T, s readmodel.Store) {
	ctx := ctxT(t)
	proj := projection(t)
	apply(t, s, proj, shardA, 1, "1",
		put("b", "z", `{"i":1}`), put("b", "B", `{"i":2}`), put("b", "a", `{"i":3}`), put("b", "10", `{"i":4}`),
		put("b", "9", `{"i":5}`), put("a", "x", `{"i":6}`), put("c", "gone", `{"i":7}`), put("ab", "a", `{"i":8}`))
	apply(t, s, proj, shardA, 1, "2", del("c", "gone"))
	apply(t, s, projection(t), shardA, 1, "1", put("b", "other", `{"i":9}`))

	// Keys are ordered by their bytes (UTF-8): digits < upper case < lower case, "10" < "9".
	docs, err := s.Scan(ctx, proj, "b")
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ key, doc string }{{"10", `{"i":4}`}, {"9", `{"i":5}`}, {"B", `{"i":2}`}, {"a", `{"i":3}`}, {"z", `{"i":1}`}}
	if len(docs) != len(want) {
		t.Fatalf("Scan(b) returned %d documents, want %d: %v", len(docs), len(want), scanKeys(t, s, proj, "b"))
	}
	for i, w := range want {
		if docs[i].Collection != "b" || docs[i].Key != w.key || !jsonEqual(docs[i].Doc, []byte(w.doc)) {
			t.Fatalf("Scan(b)[%d] = %s/%s %s, want b/%s %s", i, docs[i].Collection, docs[i].Key, docs[i].Doc, w.key, w.doc)
		}
	}
	all := []string{"a/x", "ab/a", "b/10", "b/9", "b/B", "b/a", "b/z"}
	if got := scanKeys(t, s, proj, ""); !reflect.DeepEqual(got, all) {
		t.Fatalf("Scan(\"\") = %v, want %v", got, all)
	}
	if got := scanKeys(t, s, proj, "c"); len(got) != 0 {
		t.Fatalf("Scan of a collection whose only document was deleted = %v, want nothing", got)
	}
	if got := scanKeys(t, s, proj, "missing"); len(got) != 0 {
		t.Fatalf("Scan of a missing collection = %v", got)
	}
}

// testLargeWrite: one Write larger than DynamoDB's 25-item batch.
func testLargeWrite(t *testing.T, s readmodel.Store) {
	proj := projection(t)
	var ms []readmodel.Mutation
	var want []string
	for i := 0; i < 60; i++ {
		coll := fmt.Sprintf("c%d", i%3)
		key := fmt.Sprintf("k%03d", i)
		ms = append(ms, put(coll, key, fmt.Sprintf(`{"i":%d}`, i)))
	}
	ms = append(ms, del("c0", "k000"), put("c1", "k001", `{"i":"last"}`))
	apply(t, s, proj, shardA, 1, "1", ms...)
	for c := 0; c < 3; c++ {
		for i := c; i < 60; i += 3 {
			if c == 0 && i == 0 {
				continue
			}
			want = append(want, fmt.Sprintf("c%d/k%03d", c, i))
		}
	}
	if got := scanKeys(t, s, proj, ""); !reflect.DeepEqual(got, want) {
		t.Fatalf("Scan after a 62-mutation write = %v, want %v", got, want)
	}
	expect(t, s, proj, "c1", "k001", `{"i":"last"}`)
	expect(t, s, proj, "c2", "k059", `{"i":59}`)
}

// testRaceEpochs races writers of one shard with epochs 1..n (higher epoch, higher sequence):
// each is applied, skipped or fenced, and the highest epoch's document wins.
func testRaceEpochs(t *testing.T, s readmodel.Store) {
	ctx := ctxT(t)
	proj := projection(t)
	const n = 10
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	start := make(chan struct{})
	for e := 1; e <= n; e++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			w := readmodel.Write{Projection: proj, ShardID: shardA, Epoch: int64(e), Seq: fmt.Sprint(e * 10),
				Mutations: []readmodel.Mutation{put("c", "k", fmt.Sprintf(`{"epoch":%d}`, e))}}
			err := s.Apply(ctx, w)
			if err != nil && (e == n || !errors.Is(err, readmodel.ErrFenced)) {
				mu.Lock()
				errs = append(errs, fmt.Errorf("epoch %d: %w", e, err))
				mu.Unlock()
			}
		}()
	}
	close(start)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	expect(t, s, proj, "c", "k", fmt.Sprintf(`{"epoch":%d}`, n))
}

// testRaceShards: several shards write concurrently (as one worker's shard loops do), each its own
// keys plus one shared aggregate key; replays race the originals.
func testRaceShards(t *testing.T, s readmodel.Store) {
	ctx := ctxT(t)
	proj := projection(t)
	const shards, writes = 6, 3
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for sh := 0; sh < shards; sh++ {
		for dup := 0; dup < 2; dup++ { // the second copy is a concurrent replay
			wg.Add(1)
			go func() {
				defer wg.Done()
				shard := fmt.Sprintf("shardId-%012d", sh)
				for i := 1; i <= writes; i++ {
					w := readmodel.Write{Projection: proj, ShardID: shard, Epoch: 1, Seq: fmt.Sprint(i), Mutations: []readmodel.Mutation{
						put("own", fmt.Sprintf("s%d-%d", sh, i), fmt.Sprintf(`{"shard":%d,"i":%d}`, sh, i)),
						put("last", fmt.Sprintf("s%d", sh), fmt.Sprintf(`{"i":%d}`, i)),
					}}
					if err := s.Apply(ctx, w); err != nil {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
					}
				}
			}()
		}
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if got := scanKeys(t, s, proj, "own"); len(got) != shards*writes {
		t.Fatalf("Scan(own) returned %d documents, want %d: %v", len(got), shards*writes, got)
	}
	for sh := 0; sh < shards; sh++ {
		expect(t, s, proj, "last", fmt.Sprintf("s%d", sh), fmt.Sprintf(`{"i":%d}`, writes))
	}
}

// testCommit checks readmodel.Committer when the store implements it; with a cursor store (cs not
// nil) it also checks that the cursor moves with the documents.
func testCommit(t *testing.T, s readmodel.Store, cs cursorstore.Store) {
	c, ok := s.(readmodel.Committer)
	if !ok {
		t.Skip("store does not implement readmodel.Committer")
	}
	ctx := ctxT(t)
	proj := projection(t)
	hasCursors := cs != nil
	expectCursor := func(seq string, epoch int64) {
		t.Helper()
		if !hasCursors {
			return
		}
		cur, err := cs.Get(ctx, proj, shardA)
		if err != nil || cur.Seq != seq || cur.Epoch != epoch {
			t.Fatalf("cursor = %+v, %v; want seq %q epoch %d", cur, err, seq, epoch)
		}
	}
	claim := func(epoch int64) {
		t.Helper()
		if hasCursors {
			if _, err := cs.Claim(ctx, proj, shardA, epoch); err != nil {
				t.Fatal(err)
			}
		}
	}
	commit := func(epoch int64, seq string, ms ...readmodel.Mutation) error {
		return c.Commit(ctx, readmodel.Write{Projection: proj, ShardID: shardA, Epoch: epoch, Seq: seq, Mutations: ms})
	}

	claim(1)
	if err := commit(1, "10", put("c", "a", `{"v":1}`), put("c", "b", `{"v":1}`)); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	expect(t, s, proj, "c", "a", `{"v":1}`)
	expectCursor("10", 1)

	if err := commit(1, "12", del("c", "b"), put("c", "a", `{"v":2}`)); err != nil {
		t.Fatal(err)
	}
	expect(t, s, proj, "c", "a", `{"v":2}`)
	expect(t, s, proj, "c", "b", "")
	expectCursor("12", 1)

	// Replays change nothing and never move the cursor back.
	for _, seq := range []string{"12", "11"} {
		err := commit(1, seq, put("c", "a", `{"v":"replay"}`), put("c", "b", `{"v":"replay"}`))
		if err != nil && !errors.Is(err, cursorstore.ErrBackwards) {
			t.Fatalf("replayed Commit at seq %s: %v", seq, err)
		}
	}
	expect(t, s, proj, "c", "a", `{"v":2}`)
	expect(t, s, proj, "c", "b", "")
	expectCursor("12", 1)

	// A new owner; the old one is fenced for both documents and cursor.
	claim(2)
	if err := commit(2, "13", put("c", "a", `{"v":3}`)); err != nil {
		t.Fatal(err)
	}
	err := commit(1, "20", put("c", "a", `{"v":"zombie"}`), put("c", "z", `{"v":"zombie"}`))
	if !errors.Is(err, readmodel.ErrFenced) || !errors.Is(err, cursorstore.ErrFenced) {
		t.Fatalf("stale-epoch Commit: err = %v, want readmodel.ErrFenced and cursorstore.ErrFenced", err)
	}
	expect(t, s, proj, "c", "a", `{"v":3}`)
	expect(t, s, proj, "c", "z", "")
	expectCursor("13", 2)
}
