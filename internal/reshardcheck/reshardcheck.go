// Package reshardcheck checks, from projection hooks, that workers honour shard lineage while a
// stream reshards: every closed shard's lease is finished, and no shard is handled before each
// of its parents was finished (Order); and, from the events in apply order, that for every
// partition key no event of a shard is applied after one of its descendants' (CheckKeys). Tests
// of container mode over resharding sources use it, in process (hooks) or across processes
// (the hooks called from `projhost run --trace` records).
package reshardcheck

import (
	"sync"
	"testing"

	"github.com/projhost/projhost/projection"
	"github.com/projhost/projhost/source"
)

// Order records, across workers, the order in which shards' first batches and lease finishes
// happened. Create it with New, install Hooks in every worker, then call Check. Safe for
// concurrent use.
type Order struct {
	mu       sync.Mutex
	n        int
	first    map[string]int // shard -> position of its first handled batch
	finished map[string]int // shard -> position of its lease finish
}

// New returns an empty Order.
func New() *Order { return &Order{first: map[string]int{}, finished: map[string]int{}} }

// Hooks returns the hooks that record into o (Batch and Lease).
func (o *Order) Hooks() projection.Hooks {
	return projection.Hooks{
		Batch: func(i projection.BatchInfo) {
			o.mu.Lock()
			defer o.mu.Unlock()
			o.n++
			if _, ok := o.first[i.ShardID]; !ok {
				o.first[i.ShardID] = o.n
			}
		},
		Lease: func(i projection.LeaseInfo) {
			if i.Event != projection.LeaseFinished {
				return
			}
			o.mu.Lock()
			defer o.mu.Unlock()
			o.n++
			o.finished[i.ShardID] = o.n
		},
	}
}

// Check fails t unless every closed shard of ss was finished and every shard's first batch came
// after the finish of each of its parents. With everyHandled, every shard must have had a batch;
// else a shard that got no record is let be.
func (o *Order) Check(t testing.TB, ss []source.Shard, everyHandled bool) {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, sh := range ss {
		if _, ok := o.finished[sh.ID]; sh.Closed && !ok {
			t.Errorf("closed shard %s was never finished", sh.ID)
		}
		first, ok := o.first[sh.ID]
		if !ok {
			if everyHandled {
				t.Errorf("shard %s was never handled", sh.ID)
			}
			continue
		}
		for _, p := range sh.ParentIDs {
			if f, ok := o.finished[p]; !ok || f >= first {
				t.Errorf("shard %s was handled before its parent %s finished", sh.ID, p)
			}
		}
	}
}

// Applied is one event as a handler got it: its partition key and shard. CheckKeys takes them
// in apply order, across workers (e.g. from `projhost run --trace` batch records in time order,
// each event looked up in the stream by shard and sequence number).
type Applied struct {
	Key, Shard string
}

// maxKeyErrors bounds what CheckKeys reports.
const maxKeyErrors = 10

// CheckKeys fails t unless, for every partition key, every event of a shard in applied comes
// before every event of that shard's descendants in ss (its children, their children, ...):
// the per-key order a resharded stream must keep. An event applied twice (at-least-once after
// a lost lease) counts at each place. It reports at most 10 violations.
func CheckKeys(t testing.TB, ss []source.Shard, applied []Applied) {
	t.Helper()
	parents := map[string][]string{}
	for _, s := range ss {
		parents[s.ID] = s.ParentIDs
	}
	ancestors := map[string][]string{}
	var walk func(id string) []string
	walk = func(id string) []string {
		if a, ok := ancestors[id]; ok {
			return a
		}
		var out []string
		for _, p := range parents[id] {
			out = append(out, p)
			out = append(out, walk(p)...)
		}
		ancestors[id] = out
		return out
	}
	type span struct{ first, last int }
	byKey := map[string]map[string]*span{} // key -> shard -> positions
	var keys []string
	for i, a := range applied {
		m := byKey[a.Key]
		if m == nil {
			m = map[string]*span{}
			byKey[a.Key] = m
			keys = append(keys, a.Key)
		}
		if s := m[a.Shard]; s != nil {
			s.last = i
		} else {
			m[a.Shard] = &span{i, i}
		}
	}
	reported := 0
	for _, k := range keys {
		for shard, s := range byKey[k] {
			for _, anc := range walk(shard) {
				if a, ok := byKey[k][anc]; ok && a.last >= s.first {
					if reported++; reported <= maxKeyErrors {
						t.Errorf("key %q: event %d applied from %s after event %d from its descendant %s",
							k, a.last, anc, s.first, shard)
					}
				}
			}
		}
	}
	if reported > maxKeyErrors {
		t.Errorf("... %d violations of the per-key lineage order in all", reported)
	}
}
