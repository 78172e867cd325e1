package e2esuite

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/projhost/projhost/internal/flightcheck"
	"github.com/projhost/projhost/internal/reshardcheck"
	"github.com/projhost/projhost/projection"
	"github.com/projhost/projhost/shardmap"
	"github.com/projhost/projhost/source"
)

// Reshard splits one shard or merges two with the CLI (`journal split|merge` or `kinesis
// split|merge`; verb is "split" or "merge", more flags in extra), adds the children to the
// case's shards, and returns them with the time the command returned (the change committed
// before it). The journal's command prints the children it made: they must be the new shards.
func (e *Env) Reshard(verb string, shards []string, extra ...string) (children []string, at time.Time) {
	e.t.Helper()
	before := e.sourceShards()
	args := append(e.stream.reshardArgs(verb, shards), extra...)
	out := e.Projhost(args...)
	at = time.Now()
	after := e.sourceShards()
	var ids []string
	for _, s := range after {
		ids = append(ids, s.ID)
		if !slices.ContainsFunc(before, func(b source.Shard) bool { return b.ID == s.ID }) {
			children = append(children, s.ID)
		}
	}
	if _, journal := e.stream.(*journalStream); journal {
		var printed []string
		for _, l := range lines(out) {
			printed = append(printed, strings.Fields(l)[0])
		}
		if !slices.Equal(printed, children) {
			e.t.Fatalf("%s printed the children %q; the journal's new shards are %q", strings.Join(args, " "), printed, children)
		}
	}
	if want := map[string]int{"split": 2, "merge": 1}[verb]; len(children) != want {
		e.t.Fatalf("after %s the stream lists %d new shards, want %d: %v", strings.Join(args, " "), len(children), want, children)
	}
	e.mu.Lock()
	e.shards = ids
	e.mu.Unlock()
	return children, at
}

// sourceShards lists the stream's shards with their lineage.
func (e *Env) sourceShards() []source.Shard {
	e.t.Helper()
	ss, err := e.stream.source().Shards(context.Background())
	if err != nil {
		e.t.Fatalf("listing shards: %v", err)
	}
	return ss
}

// WaitFinished waits until the lease of every closed shard is finished.
func (e *Env) WaitFinished(d time.Duration) {
	e.t.Helper()
	e.Eventually("every closed shard finished", d, func() (bool, string) {
		state := map[string]shardmap.State{}
		for _, l := range e.leases() {
			state[l.ShardID] = l.State
		}
		var open []string
		for _, s := range e.sourceShards() {
			if s.Closed && state[s.ID] != shardmap.StateFinished {
				open = append(open, fmt.Sprintf("%s %q", s.ID, state[s.ID]))
			}
		}
		return len(open) == 0, strings.Join(open, ", ")
	})
}

// timed is a trace record with the index of its worker process.
type timed struct {
	proc int
	r    projection.TraceRecord
}

// merged returns the batch and lease records of every worker in time order (the workers run
// on one machine: the wall clock orders what one worker did after another's lease finish).
func (h *History) merged() []timed {
	var out []timed
	for i, wt := range h.workers {
		for _, r := range wt.recs {
			if r.Event == "batch" || r.Event == "lease" {
				out = append(out, timed{i, r})
			}
		}
	}
	slices.SortStableFunc(out, func(a, b timed) int { return a.r.Time.Compare(b.r.Time) })
	return out
}

// CheckLineage fails the case unless the workers honoured the journal's lineage: from the traces
// in time order, every closed shard was finished and no shard was handled before its parents
// were finished (reshardcheck.Order), and for every partition key no event of a shard was
// applied after one of its descendants' (reshardcheck.CheckKeys; each batch's events are looked
// up in the journal by shard and sequence number). It returns the merged records.
func (e *Env) CheckLineage() []timed {
	e.t.Helper()
	ss := e.sourceShards()
	keys := e.keysBySeq(ss)
	recs := e.History().merged()
	ord := reshardcheck.New()
	hooks := ord.Hooks()
	var applied []reshardcheck.Applied
	for _, tr := range recs {
		r := tr.r
		si := projection.ShardInfo{Projection: r.Projection, ShardID: r.Shard, Epoch: r.Epoch}
		switch {
		case r.Event == "batch":
			hooks.Batch(projection.BatchInfo{ShardInfo: si, FirstSeq: r.FirstSeq, LastSeq: r.LastSeq, Events: r.Events})
			evs := keys[r.Shard]
			i := sort.Search(len(evs), func(i int) bool { return cmpSeq(evs[i].Seq, r.FirstSeq) >= 0 })
			j := sort.Search(len(evs), func(i int) bool { return cmpSeq(evs[i].Seq, r.LastSeq) > 0 })
			if i == len(evs) || evs[i].Seq != r.FirstSeq || j == 0 || evs[j-1].Seq != r.LastSeq || j-i != r.Events {
				e.t.Fatalf("a batch of %s covers %s..%s (%d events), which the stream does not hold as such", r.Shard, r.FirstSeq, r.LastSeq, r.Events)
			}
			for _, ev := range evs[i:j] {
				applied = append(applied, reshardcheck.Applied{Key: ev.PartitionKey, Shard: r.Shard})
			}
		case r.Event == "lease" && r.Kind == string(projection.LeaseFinished):
			hooks.Lease(projection.LeaseInfo{ShardInfo: si, Event: projection.LeaseFinished})
		}
	}
	ord.Check(e.t, ss, false)
	reshardcheck.CheckKeys(e.t, ss, applied)
	e.t.Logf("lineage order holds over %d shards: %d events applied (with re-applications after kill -9), %d partition keys", len(ss), len(applied), countKeys(applied))
	return recs
}

func countKeys(as []reshardcheck.Applied) int {
	m := map[string]bool{}
	for _, a := range as {
		m[a.Key] = true
	}
	return len(m)
}

// keysBySeq reads every shard of ss to its end: its events in order.
func (e *Env) keysBySeq(ss []source.Shard) map[string][]source.Event {
	e.t.Helper()
	ids := make([]string, len(ss))
	for i, s := range ss {
		ids[i] = s.ID
	}
	out, err := e.stream.contents(context.Background(), ids)
	if err != nil {
		e.t.Fatalf("reading the stream: %v", err)
	}
	return out
}

// firstBatch returns the time of the first batch record on any of shards (zero when none).
func firstBatch(recs []timed, shards []string) time.Time {
	for _, tr := range recs {
		if tr.r.Event == "batch" && slices.Contains(shards, tr.r.Shard) {
			return tr.r.Time
		}
	}
	return time.Time{}
}

// finishedAt returns the time the last of shards was finished (zero unless all were).
func finishedAt(recs []timed, shards []string) time.Time {
	var at time.Time
	left := slices.Clone(shards)
	for _, tr := range recs {
		if tr.r.Event == "lease" && tr.r.Kind == string(projection.LeaseFinished) && slices.Contains(left, tr.r.Shard) {
			left = slices.DeleteFunc(left, func(s string) bool { return s == tr.r.Shard })
			at = tr.r.Time
		}
	}
	if len(left) > 0 {
		return time.Time{}
	}
	return at
}

// testReshard (issue 10): flights-20k appended to a 4-shard journal in four parts while two
// workers project; after the first part shard 0 is split (`journal split`), after the second
// shards 2 and 3 are merged (`journal merge`), during the third one worker is killed -9. The read
// model is exact; every closed shard is finished by the host; no shard is handled before its
// parents are finished and, for every origin airport, every event of a parent shard is applied
// before any event of its children (CheckLineage). Logs the time from each change to its
// children's first batch, and from the parents' finish to it.
func testReshard(t *testing.T, e *Env) {
	fs := flights(t)
	e.Create(4)
	spec := Spec{Flags: flags()}
	w1, w2 := e.Start("w1", spec), e.Start("w2", spec)
	e.WaitOwners("2/2", time.Minute, func(m map[string]int) bool { return m["w1"] == 2 && m["w2"] == 2 })
	parts := [][]flightcheck.Flight{fs[:5000], fs[5000:10000], fs[10000:15000], fs[15000:]}
	batches := func() int {
		n := 0
		for _, w := range []*Worker{w1, w2} {
			n += len(Where(w.Records(t), Is("batch")))
		}
		return n
	}
	e.Append(parts[0])
	e.Eventually("the workers handling events", time.Minute, func() (bool, string) { return batches() > 0, "no batch yet" })
	split, splitAt := e.Reshard("split", []string{e.ShardAt(0)})
	<-e.AppendChunks(parts[1], 5, 100*time.Millisecond)
	merged, mergeAt := e.Reshard("merge", []string{e.ShardAt(2), e.ShardAt(3)})
	appended := e.AppendChunks(parts[2], 5, 200*time.Millisecond)
	time.Sleep(500 * time.Millisecond)
	w1.Kill(t)
	t.Log("killed w1")
	<-appended
	e.Append(parts[3])
	e.WaitCaughtUp(3 * time.Minute)
	e.WaitFinished(time.Minute)
	w2.Stop(t)
	e.Finish(fs)
	recs := e.CheckLineage()
	ss := e.sourceShards()
	if len(ss) != 4+2+1 {
		t.Fatalf("after a split and a merge of 4 shards the journal lists %d: %+v", len(ss), ss)
	}
	for _, c := range []struct {
		what     string
		at       time.Time
		parents  []string
		children []string
	}{
		{"split of " + e.ShardAt(0), splitAt, []string{e.ShardAt(0)}, split},
		{"merge of " + e.ShardAt(2) + " and " + e.ShardAt(3), mergeAt, []string{e.ShardAt(2), e.ShardAt(3)}, merged},
	} {
		first, fin := firstBatch(recs, c.children), finishedAt(recs, c.parents)
		if first.IsZero() || fin.IsZero() {
			t.Fatalf("%s: children %v first batch at %v, parents finished at %v; want both", c.what, c.children, first, fin)
		}
		t.Logf("%s: children processing %s after the change returned (parents finished %s after it, children's first batch %s after that)",
			c.what, first.Sub(c.at).Round(time.Millisecond), fin.Sub(c.at).Round(time.Millisecond), first.Sub(fin).Round(time.Millisecond))
	}
}
