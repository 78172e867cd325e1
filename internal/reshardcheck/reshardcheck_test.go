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

func TestCheckKeys(t *testing.T) {
	// p split into c1 and c2; c2 and q merged into m.
	ss := []source.Shard{
		{ID: "p", Closed: true}, {ID: "q", Closed: true},
		{ID: "c1", ParentIDs: []string{"p"}}, {ID: "c2", ParentIDs: []string{"p"}, Closed: true},
		{ID: "m", ParentIDs: []string{"c2", "q"}},
	}
	a := func(key, shard string) Applied { return Applied{Key: key, Shard: shard} }
	tests := []struct {
		name    string
		applied []Applied
		want    int // errors
	}{
		{"in order", []Applied{a("x", "p"), a("y", "q"), a("x", "p"), a("x", "c2"), a("y", "m"), a("x", "m")}, 0},
		{"keys interleave across shards", []Applied{a("x", "p"), a("y", "c1"), a("y", "p")}, 1},
		{"grandchild before grandparent", []Applied{a("x", "m"), a("x", "p")}, 1},
		{"other key's order does not matter", []Applied{a("x", "c1"), a("y", "p")}, 0},
		{"siblings in any order", []Applied{a("x", "c2"), a("x", "c1"), a("x", "c2")}, 0},
		{"a parent event applied again after the child", []Applied{a("x", "p"), a("x", "c1"), a("x", "p")}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := &errs{TB: t}
			CheckKeys(e, ss, tt.applied)
			if len(e.got) != tt.want {
				t.Fatalf("CheckKeys reported %d errors, want %d: %q", len(e.got), tt.want, e.got)
			}
		})
	}
}
