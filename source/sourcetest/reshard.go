package sourcetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/big"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/projhost/projhost/source"
)

// Resharder changes the shard set of the stream under test. Each function returns once the
// change is complete: the parents are closed, Shards lists the children, and records appended
// afterwards go to the children. A refused change returns an error and changes nothing.
type Resharder struct {
	// Split splits the open shard shardID into two open children with ParentIDs [shardID] whose
	// hash key ranges together are the parent's (where the range is cut is the implementation's
	// choice). It fails for a closed shard, and with an error wrapping source.ErrUnknownShard for
	// a shard the stream does not have.
	Split func(ctx context.Context, shardID string) (children [2]string, err error)
	// Merge merges the open shards a and b, whose hash key ranges are adjacent, into one open
	// child over their union whose ParentIDs are a and b (in either order). It fails for a closed
	// shard, for shards that are not adjacent, for a == b, and with an error wrapping
	// source.ErrUnknownShard for a shard the stream does not have.
	Merge func(ctx context.Context, a, b string) (child string, err error)
}

// ReshardFactory returns a new empty stream with the given number of open, evenly split shards
// (as Factory does), its Appender, and its Resharder.
type ReshardFactory func(t *testing.T, shards int) (source.Source, Appender, Resharder)

// RunResharding runs the resharding part of the suite, for implementations that can split and
// merge shards (Run covers the rest). It checks that:
//
//   - after a split, the parent is listed closed, the children list it in ParentIDs and split its
//     range; readers of the parent, opened before or after the split, read its records to the end
//     and then get source.ErrShardEnded (again on every later Read), and its Head (when the
//     source is a source.Header) is its last record; new records of a key go to the child whose
//     range holds the key's hash key;
//   - after a merge, both parents are listed closed and end the same way, and one child over
//     their union lists both in ParentIDs and takes their keys' new records;
//   - across several generations, Shards lists parents before children, the open shards' ranges
//     cover [0, 2^128-1] without gaps or overlaps, and a reader that starts a shard only after
//     every parent ended gets every record once, each partition key's records in append order
//     and with increasing sequence numbers (parent to child too), also while records are
//     appended during the splits and merges;
//   - refused changes (closed, unknown, non-adjacent or identical shards) fail and change nothing.
//
// It appends a few hundred records in all and makes at most 4 changes per stream.
func RunResharding(t *testing.T, newStream ReshardFactory) {
	t.Helper()
	runSubtests(t, newStream, []subtest[ReshardFactory]{
		{"Split", testSplit},
		{"Merge", testMerge},
		{"Lineage", testLineage},
		{"Refusals", testRefusals},
		{"AppendDuringReshard", testAppendDuringReshard},
	})
}

// reshardKeys is enough keys that each half of any range gets some (a miss: about 2^-39).
func reshardKeys() []string {
	keys := make([]string, 40)
	for i := range keys {
		keys[i] = fmt.Sprintf("rk-%d", i)
	}
	return keys
}

// round returns one record of each key for round r.
func round(keys []string, r int) []Record {
	recs := make([]Record, len(keys))
	for i, k := range keys {
		recs[i] = record(k, r)
	}
	return recs
}

// checkPerKey checks that evs (in lineage order: parents' events before children's) hold, for
// each key, exactly the records of rounds 0 to rounds-1 in order, with increasing sequence
// numbers.
func checkPerKey(t *testing.T, evs []source.Event, keys []string, rounds int) {
	t.Helper()
	perKey := map[string][]source.Event{}
	for _, e := range evs {
		perKey[e.PartitionKey] = append(perKey[e.PartitionKey], e)
	}
	if len(perKey) != len(keys) {
		t.Fatalf("read records of %d partition keys, want %d", len(perKey), len(keys))
	}
	for _, k := range keys {
		got := perKey[k]
		if len(got) != rounds {
			t.Fatalf("read %d records of key %q, want %d", len(got), k, rounds)
		}
		for r, e := range got {
			if want := record(k, r).Data; !bytes.Equal(e.Data, want) {
				t.Fatalf("record %d of key %q = %q, want %q", r, k, e.Data, want)
			}
			if r > 0 && source.CompareSeq(e.Seq, got[r-1].Seq) <= 0 {
				t.Fatalf("key %q: record %d on %s has sequence number %s, record %d on %s has %s; want increasing across shards",
					k, r, e.ShardID, e.Seq, r-1, got[r-1].ShardID, got[r-1].Seq)
			}
		}
	}
}

// checkLineage checks a listing of a resharded stream: unique ids; parents listed before their
// children, closed, at most two of them; a split parent's children split its range; a merge's
// child covers its two parents' adjacent ranges; the open shards cover [0, 2^128-1]. It returns
// the shards by id.
func checkLineage(t *testing.T, ss []source.Shard) map[string]source.Shard {
	t.Helper()
	byID := map[string]source.Shard{}
	children := map[string][]source.Shard{} // split children by parent
	for _, s := range ss {
		if _, dup := byID[s.ID]; s.ID == "" || dup {
			t.Fatalf("shard id %q empty or repeated: %+v", s.ID, ss)
		}
		if len(s.ParentIDs) > 2 {
			t.Fatalf("shard %s has %d parents: %+v", s.ID, len(s.ParentIDs), s)
		}
		var parents []source.Shard
		for _, pid := range s.ParentIDs {
			p, ok := byID[pid]
			if !ok {
				t.Fatalf("shard %s lists parent %q, which is not listed before it: %+v", s.ID, pid, ss)
			}
			if !p.Closed {
				t.Fatalf("shard %s has the open parent %s: %+v", s.ID, pid, ss)
			}
			parents = append(parents, p)
		}
		switch len(parents) {
		case 1:
			children[parents[0].ID] = append(children[parents[0].ID], s)
		case 2:
			lo, hi := parents[0], parents[1]
			if parseHashKey(t, lo.HashKeyStart).Cmp(parseHashKey(t, hi.HashKeyStart)) > 0 {
				lo, hi = hi, lo
			}
			if !adjacent(t, lo, hi) || s.HashKeyStart != lo.HashKeyStart || s.HashKeyEnd != hi.HashKeyEnd {
				t.Fatalf("merged shard %s [%s, %s] is not the union of its parents' adjacent ranges %+v and %+v",
					s.ID, s.HashKeyStart, s.HashKeyEnd, lo, hi)
			}
		}
		byID[s.ID] = s
	}
	for pid, kids := range children {
		p := byID[pid]
		if len(kids) != 2 {
			t.Fatalf("split shard %s has %d children, want 2: %+v", pid, len(kids), kids)
		}
		lo, hi := kids[0], kids[1]
		if parseHashKey(t, lo.HashKeyStart).Cmp(parseHashKey(t, hi.HashKeyStart)) > 0 {
			lo, hi = hi, lo
		}
		if !adjacent(t, lo, hi) || lo.HashKeyStart != p.HashKeyStart || hi.HashKeyEnd != p.HashKeyEnd ||
			parseHashKey(t, lo.HashKeyEnd).Cmp(parseHashKey(t, lo.HashKeyStart)) < 0 ||
			parseHashKey(t, hi.HashKeyEnd).Cmp(parseHashKey(t, hi.HashKeyStart)) < 0 {
			t.Fatalf("children %+v and %+v do not split their parent's range [%s, %s]", lo, hi, p.HashKeyStart, p.HashKeyEnd)
		}
	}
	openCover(t, ss)
	return byID
}

// adjacent reports whether hi's range starts right after lo's.
func adjacent(t *testing.T, lo, hi source.Shard) bool {
	t.Helper()
	next := new(big.Int).Add(parseHashKey(t, lo.HashKeyEnd), big.NewInt(1))
	return next.Cmp(parseHashKey(t, hi.HashKeyStart)) == 0
}

// drainToEnd reads shard id through c until ErrShardEnded, checks that a further Read ends too,
// and returns every event c read from the shard.
func drainToEnd(c *collector, id string) []source.Event {
	t := c.t
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, ended := c.readOrEnd(id, 100, 50*time.Millisecond); ended {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("closed shard %s did not end within 30 s (%d events read)", id, len(c.got[id]))
		}
	}
	if b, ended := c.readOrEnd(id, 100, 50*time.Millisecond); !ended {
		t.Fatalf("Read(%s) after ErrShardEnded returned %d events and no error, want ErrShardEnded again", id, len(b.Events))
	}
	return c.got[id]
}

// checkParentEnds checks a closed parent: a reader opened before the change (before) and one
// opened now read the same events and end; a reader resumed after the last event ends at once;
// Head is the last event. It returns the events.
func checkParentEnds(t *testing.T, src source.Source, before *collector, id string) []source.Event {
	t.Helper()
	evs := drainToEnd(before, id)
	now := newCollector(t, src, nil)
	now.open(id)
	again := drainToEnd(now, id)
	if len(again) != len(evs) || (len(evs) > 0 && again[len(again)-1].Seq != evs[len(evs)-1].Seq) {
		t.Fatalf("closed shard %s: a reader opened before the change read %d events, one opened after %d", id, len(evs), len(again))
	}
	if len(evs) == 0 {
		return evs
	}
	last := evs[len(evs)-1].Seq
	resumed := newCollector(t, src, nil)
	resumed.openAt(id, last)
	if evs := drainToEnd(resumed, id); len(evs) != 0 {
		t.Fatalf("closed shard %s resumed after its last event %s returned %d events", id, last, len(evs))
	}
	if h, ok := src.(source.Header); ok {
		head, err := h.Head(ctxT(t), id)
		if err != nil || head != last {
			t.Fatalf("Head(%s) of a closed shard = %q, %v; want its last event %s", id, head, err, last)
		}
	}
	return evs
}

// checkChildRouting checks that each event read from a child is on the open shard holding its
// key and that every child got some.
func checkChildRouting(t *testing.T, ss []source.Shard, c *collector, kids []string) {
	t.Helper()
	for _, id := range kids {
		if len(c.got[id]) == 0 {
			t.Fatalf("child %s got none of the records appended after the change", id)
		}
		for _, e := range c.got[id] {
			if want := shardOf(t, ss, e.PartitionKey); want != id {
				t.Fatalf("record of key %q appended after the change read from %s, want %s (MD5 hash key range)", e.PartitionKey, id, want)
			}
		}
	}
}

func testSplit(t *testing.T, newStream ReshardFactory) {
	src, app, rs := newStream(t, 1)
	keys := reshardKeys()
	parent := shards(t, src)[0]
	before := newCollector(t, src, []source.Shard{parent})
	appendT(t, app, round(keys, 0))
	before.read(parent.ID, 10, 0) // part read before the split
	kids, err := rs.Split(ctxT(t), parent.ID)
	if err != nil {
		t.Fatalf("Split(%s): %v", parent.ID, err)
	}
	if kids[0] == kids[1] || slices.Contains(kids[:], parent.ID) {
		t.Fatalf("Split(%s) returned children %q", parent.ID, kids)
	}
	ss := shards(t, src)
	byID := checkLineage(t, ss)
	if len(ss) != 3 || !byID[parent.ID].Closed {
		t.Fatalf("after Split(%s), Shards = %+v; want the closed parent and two children", parent.ID, ss)
	}
	for _, id := range kids {
		if s, ok := byID[id]; !ok || s.Closed || !slices.Equal(s.ParentIDs, []string{parent.ID}) {
			t.Fatalf("child %s listed as %+v (listed: %v), want open with ParentIDs [%s]", id, s, ok, parent.ID)
		}
	}
	appendT(t, app, round(keys, 1))
	pevs := checkParentEnds(t, src, before, parent.ID)
	if len(pevs) != len(keys) {
		t.Fatalf("the split parent holds %d records, want the %d appended before the split", len(pevs), len(keys))
	}
	c := newCollector(t, src, []source.Shard{byID[kids[0]], byID[kids[1]]})
	c.readAll(len(keys))
	checkChildRouting(t, ss, c, kids[:])
	checkPerKey(t, slices.Concat(pevs, c.got[kids[0]], c.got[kids[1]]), keys, 2)
}

func testMerge(t *testing.T, newStream ReshardFactory) {
	src, app, rs := newStream(t, 2)
	keys := reshardKeys()
	ss := shards(t, src)
	a, b := ss[0], ss[1]
	before := newCollector(t, src, ss)
	appendT(t, app, round(keys, 0))
	child, err := rs.Merge(ctxT(t), b.ID, a.ID) // either order
	if err != nil {
		t.Fatalf("Merge(%s, %s): %v", b.ID, a.ID, err)
	}
	ss = shards(t, src)
	byID := checkLineage(t, ss)
	s, ok := byID[child]
	if len(ss) != 3 || !ok || s.Closed || !byID[a.ID].Closed || !byID[b.ID].Closed {
		t.Fatalf("after Merge(%s, %s) = %s, Shards = %+v; want both parents closed and the child open", b.ID, a.ID, child, ss)
	}
	if got := slices.Sorted(slices.Values(s.ParentIDs)); !slices.Equal(got, slices.Sorted(slices.Values([]string{a.ID, b.ID}))) {
		t.Fatalf("merged child %s has ParentIDs %q, want %s and %s", child, s.ParentIDs, a.ID, b.ID)
	}
	appendT(t, app, round(keys, 1))
	pevs := slices.Concat(checkParentEnds(t, src, before, a.ID), checkParentEnds(t, src, before, b.ID))
	if len(pevs) != len(keys) {
		t.Fatalf("the merged parents hold %d records, want the %d appended before the merge", len(pevs), len(keys))
	}
	c := newCollector(t, src, []source.Shard{s})
	c.readAll(len(keys))
	checkChildRouting(t, ss, c, []string{child})
	checkPerKey(t, slices.Concat(pevs, c.got[child]), keys, 2)
}

// follower reads a resharding stream as a worker set must: it starts a shard only after every
// parent ended, and reads each started shard until it ends.
type follower struct {
	c     *collector
	ended map[string]bool
	order []source.Event // in read order
}

func newFollower(t *testing.T, src source.Source) *follower {
	return &follower{c: newCollector(t, src, nil), ended: map[string]bool{}}
}

// step lists the shards, starts those whose parents all ended, and reads each started shard that
// has not ended once. It reports whether every listed shard was started and every closed one
// ended.
func (f *follower) step(wait time.Duration) (settled bool) {
	t := f.c.t
	t.Helper()
	ss := shards(t, f.c.src)
	settled = true
	listed := map[string]source.Shard{}
	for _, s := range ss {
		listed[s.ID] = s
		for _, p := range s.ParentIDs {
			if _, ok := listed[p]; !ok {
				t.Fatalf("shard %s is listed before its parent %s: %+v", s.ID, p, ss)
			}
		}
	}
	for _, s := range ss {
		if f.ended[s.ID] && !s.Closed {
			t.Fatalf("shard %s ended but is listed open", s.ID)
		}
		if _, started := f.c.readers[s.ID]; !started {
			if !allEnded(f.ended, s.ParentIDs) {
				settled = false
				continue
			}
			f.c.open(s.ID)
		}
		if f.ended[s.ID] {
			continue
		}
		n := len(f.c.got[s.ID])
		_, ended := f.c.readOrEnd(s.ID, 50, wait)
		f.order = append(f.order, f.c.got[s.ID][n:]...)
		if ended {
			// The shard may have closed since the listing: the next step checks that it is
			// listed closed.
			f.ended[s.ID] = true
			settled = false
		} else if s.Closed {
			settled = false
		}
	}
	return settled
}

func allEnded(ended map[string]bool, ids []string) bool {
	for _, id := range ids {
		if !ended[id] {
			return false
		}
	}
	return true
}

// follow steps until want events are read and the stream is settled.
func (f *follower) follow(want int) {
	t := f.c.t
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !f.step(20*time.Millisecond) || f.c.total < want {
		if time.Now().After(deadline) {
			t.Fatalf("followed %d records within 60 s, want %d", f.c.total, want)
		}
	}
	if f.c.total != want {
		t.Fatalf("followed %d records, want %d", f.c.total, want)
	}
}

// testLineage: three generations with records appended between the changes.
func testLineage(t *testing.T, newStream ReshardFactory) {
	src, app, rs := newStream(t, 2)
	keys := reshardKeys()
	ss := shards(t, src)
	s0, s1 := ss[0].ID, ss[1].ID
	f := newFollower(t, src)
	f.step(0)
	var a, b, x, y string
	steps := []struct {
		name   string
		change func() error
	}{
		{"split " + s0, func() (err error) {
			kids, err := rs.Split(ctxT(t), s0)
			a, b = kids[0], kids[1]
			return err
		}},
		{"merge the upper child of " + s0 + " with " + s1, func() (err error) {
			byID := checkLineage(t, shards(t, src))
			if parseHashKey(t, byID[a].HashKeyStart).Cmp(parseHashKey(t, byID[b].HashKeyStart)) > 0 {
				a, b = b, a
			}
			x, err = rs.Merge(ctxT(t), b, s1)
			return err
		}},
		{"split the merged shard", func() (err error) {
			kids, err := rs.Split(ctxT(t), x)
			if err != nil {
				return err
			}
			y = kids[0]
			byID := checkLineage(t, shards(t, src))
			if parseHashKey(t, byID[kids[1]].HashKeyStart).Cmp(parseHashKey(t, byID[y].HashKeyStart)) < 0 {
				y = kids[1]
			}
			return nil
		}},
		{"merge the lowest shard with its neighbour", func() (err error) {
			_, err = rs.Merge(ctxT(t), a, y)
			return err
		}},
	}
	appendT(t, app, round(keys, 0))
	f.step(0)
	for i, st := range steps {
		if err := st.change(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		checkLineage(t, shards(t, src))
		appendT(t, app, round(keys, i+1))
		f.step(0)
	}
	f.follow(len(keys) * (len(steps) + 1))
	checkPerKey(t, f.order, keys, len(steps)+1)
	ss = shards(t, src)
	if len(ss) != 2+2+1+2+1 {
		t.Fatalf("after 2 splits and 2 merges of 2 shards, Shards lists %d: %+v", len(ss), ss)
	}
	open := 0
	for _, s := range ss {
		if !s.Closed {
			open++
		}
	}
	if open != 2 {
		t.Fatalf("after 2 splits and 2 merges of 2 shards, %d are open, want 2: %+v", open, ss)
	}
}

// testRefusals: changes the stream must refuse, each leaving the shard list as it was.
func testRefusals(t *testing.T, newStream ReshardFactory) {
	src, _, rs := newStream(t, 3)
	ss := shards(t, src)
	s0, s1, s2 := ss[0].ID, ss[1].ID, ss[2].ID
	if _, err := rs.Split(ctxT(t), s1); err != nil {
		t.Fatalf("Split(%s): %v", s1, err)
	}
	const unknown = "shardId-000000009999"
	tests := []struct {
		name        string
		change      func() error
		wantUnknown bool
	}{
		{"split a closed shard", func() error { _, err := rs.Split(ctxT(t), s1); return err }, false},
		{"split an unknown shard", func() error { _, err := rs.Split(ctxT(t), unknown); return err }, true},
		{"merge a closed shard", func() error { _, err := rs.Merge(ctxT(t), s0, s1); return err }, false},
		{"merge non-adjacent shards", func() error { _, err := rs.Merge(ctxT(t), s0, s2); return err }, false},
		{"merge a shard with itself", func() error { _, err := rs.Merge(ctxT(t), s0, s0); return err }, false},
		{"merge with an unknown shard", func() error { _, err := rs.Merge(ctxT(t), s0, unknown); return err }, true},
	}
	for _, tt := range tests {
		before := shards(t, src)
		err := tt.change()
		if err == nil {
			t.Fatalf("%s: no error", tt.name)
		}
		if tt.wantUnknown && !errors.Is(err, source.ErrUnknownShard) {
			t.Fatalf("%s: err = %v, want source.ErrUnknownShard", tt.name, err)
		}
		if after := shards(t, src); !reflect.DeepEqual(after, before) {
			t.Fatalf("%s changed the shards from %+v to %+v", tt.name, before, after)
		}
	}
}

// testAppendDuringReshard: writers append while shards split and merge and a follower reads;
// every record is read once, each key's records in append order.
func testAppendDuringReshard(t *testing.T, newStream ReshardFactory) {
	src, app, rs := newStream(t, 2)
	ss := shards(t, src)
	const writers, per, minBatches = 3, 5, 10
	var written atomic.Int64
	var reshardDone atomic.Bool
	appended := make([]map[string][]string, writers) // by writer: key -> data in append order
	var wg sync.WaitGroup
	// On a failure of the test goroutine, stop the others before the test ends.
	stop := make(chan struct{})
	defer func() { close(stop); wg.Wait() }()
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return false
		}
	}
	for w := 0; w < writers; w++ {
		appended[w] = map[string][]string{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := 0; !stopped() && (b < minBatches || !reshardDone.Load()); b++ {
				recs := writerBatch(w, b, per)
				if err := app(ctxT(t), recs); err != nil {
					t.Errorf("writer %d: %v", w, err)
					return
				}
				for _, r := range recs {
					appended[w][r.PartitionKey] = append(appended[w][r.PartitionKey], string(r.Data))
				}
				written.Add(per)
				time.Sleep(time.Millisecond) // bounds how many records a change lets pile up
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer reshardDone.Store(true)
		// Each change waits for a few more records, so that appends run between and during them.
		gate := func(n int64) {
			for written.Load() < n && !stopped() {
				time.Sleep(time.Millisecond)
			}
		}
		gate(writers * per)
		lo, err := rs.Split(ctxT(t), ss[0].ID)
		if err != nil {
			t.Errorf("Split(%s): %v", ss[0].ID, err)
			return
		}
		gate(written.Load() + per)
		hi, err := rs.Split(ctxT(t), ss[1].ID)
		if err != nil {
			t.Errorf("Split(%s): %v", ss[1].ID, err)
			return
		}
		// The upper child of shard 0 and the lower child of shard 1 are adjacent.
		byID := map[string]source.Shard{}
		for _, s := range shardsE(t, src) {
			byID[s.ID] = s
		}
		upper, lower := lo[1], hi[0]
		if hashKeyLess(byID[lo[1]].HashKeyStart, byID[lo[0]].HashKeyStart) {
			upper = lo[0]
		}
		if hashKeyLess(byID[hi[1]].HashKeyStart, byID[hi[0]].HashKeyStart) {
			lower = hi[1]
		}
		gate(written.Load() + per)
		if _, err := rs.Merge(ctxT(t), upper, lower); err != nil {
			t.Errorf("Merge(%s, %s): %v", upper, lower, err)
		}
	}()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	f := newFollower(t, src)
	deadline := time.Now().Add(60 * time.Second)
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		f.step(5 * time.Millisecond)
		if time.Now().After(deadline) {
			t.Fatal("writers and changes did not finish within 60 s")
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	f.follow(int(written.Load()))
	perShard := map[string]int{}
	for id, evs := range f.c.got {
		perShard[id] = len(evs)
	}
	t.Logf("%d records appended during 2 splits and a merge; by shard: %v", written.Load(), perShard)
	checkLineage(t, shards(t, src))
	got := map[string][]string{}
	for _, e := range f.order {
		got[e.PartitionKey] = append(got[e.PartitionKey], string(e.Data))
	}
	for w := range appended {
		for k, want := range appended[w] {
			if !slices.Equal(got[k], want) {
				t.Fatalf("records of %s in lineage order = %q, want %q", k, got[k], want)
			}
		}
	}
}

// shardsE is shards for goroutines other than the test's: it reports with t.Errorf.
func shardsE(t *testing.T, src source.Source) []source.Shard {
	ss, err := src.Shards(ctxT(t))
	if err != nil {
		t.Errorf("Shards: %v", err)
	}
	return ss
}

// hashKeyLess compares two decimal hash keys (valid ones: Shards' output is checked elsewhere).
func hashKeyLess(a, b string) bool {
	x, _ := new(big.Int).SetString(a, 10)
	y, _ := new(big.Int).SetString(b, 10)
	return x != nil && y != nil && x.Cmp(y) < 0
}
