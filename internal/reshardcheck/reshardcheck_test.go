package reshardcheck

import (
	"fmt"
	"testing"

	"github.com/projhost/projhost/projection"
	"github.com/projhost/projhost/source"
)

// errs is a testing.TB keeping what Errorf reports.
type errs struct {
	testing.TB
	got []string
}

func (e *errs) Helper()                      {}
func (e *errs) Errorf(f string, args ...any) { e.got = append(e.got, fmt.Sprintf(f, args...)) }

func TestCheck(t *testing.T) {
	ss := []source.Shard{{ID: "p", Closed: true}, {ID: "q", Closed: true}, {ID: "c", ParentIDs: []string{"p", "q"}}}
	batch := func(h projection.Hooks, id string) {
		h.Batch(projection.BatchInfo{ShardInfo: projection.ShardInfo{ShardID: id}})
	}
	finish := func(h projection.Hooks, id string) {
		h.Lease(projection.LeaseInfo{ShardInfo: projection.ShardInfo{ShardID: id}, Event: projection.LeaseFinished})
	}
	tests := []struct {
		name         string
		steps        func(h projection.Hooks)
		everyHandled bool
		want         int // errors
	}{
		{"in order", func(h projection.Hooks) { batch(h, "p"); batch(h, "q"); finish(h, "p"); finish(h, "q"); batch(h, "c") }, true, 0},
		{"child before one parent finished", func(h projection.Hooks) { batch(h, "p"); finish(h, "p"); batch(h, "c"); finish(h, "q") }, false, 1},
		{"parent never finished", func(h projection.Hooks) { batch(h, "p"); finish(h, "q"); batch(h, "c") }, false, 2},
		{"child unhandled, allowed", func(h projection.Hooks) { finish(h, "p"); finish(h, "q") }, false, 0},
		{"child unhandled, required", func(h projection.Hooks) { finish(h, "p"); finish(h, "q") }, true, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := New()
			tt.steps(o.Hooks())
			e := &errs{TB: t}
			o.Check(e, ss, tt.everyHandled)
			if len(e.got) != tt.want {
				t.Fatalf("Check reported %d errors, want %d: %q", len(e.got), tt.want, e.got)
			}
		})
	}
}
