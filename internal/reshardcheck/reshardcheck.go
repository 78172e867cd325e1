// Package reshardcheck checks, from projection hooks, that workers honour shard lineage while a
// stream reshards: every closed shard's lease is finished, and no shard is handled before each
// of its parents was finished. Tests of container mode over resharding sources use it.
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
