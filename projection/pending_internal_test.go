package projection

import (
	"fmt"
	"testing"

	"github.com/projhost/projhost/event"
	"github.com/projhost/projhost/wasmabi"
)

// TestPendingFull: pending mutations reach the one-commit bound at the output limits, counted
// as distinct keys (mutations) and as document bytes added.
func TestPendingFull(t *testing.T) {
	var p pending
	ms := make([]event.Mutation, wasmabi.MaxOutputMutations-1)
	for i := range ms {
		ms[i] = event.Mutation{Collection: "c", Key: fmt.Sprint(i), Doc: []byte(`{}`)}
	}
	p.add(ms)
	p.add(ms[:10]) // the same keys again: still MaxOutputMutations-1 mutations
	if p.full() {
		t.Fatalf("full at %d mutations, %d bytes", len(p.muts), p.bytes)
	}
	p.add([]event.Mutation{{Collection: "c", Key: "one more", Doc: []byte(`{}`)}})
	if !p.full() {
		t.Fatalf("not full at %d mutations", len(p.muts))
	}
	p.reset()
	big := make([]byte, wasmabi.MaxOutputBytes/4)
	for i := range 3 {
		p.add([]event.Mutation{{Collection: "c", Key: "k", Doc: big}})
		if p.full() {
			t.Fatalf("full after %d documents of %d bytes", i+1, len(big))
		}
	}
	p.add([]event.Mutation{{Collection: "c", Key: "k", Doc: big}})
	if !p.full() || len(p.muts) != 1 {
		t.Fatalf("not full after %d bytes (%d mutations)", p.bytes, len(p.muts))
	}
	if !p.overflows([]event.Mutation{{Collection: "c", Key: "k", Doc: []byte(`{}`)}}) {
		t.Fatal("a full pending set does not overflow with one more mutation")
	}
	p.reset()
	if p.full() || p.bytes != 0 {
		t.Fatal("full after reset")
	}
	if p.overflows(make([]event.Mutation, wasmabi.MaxOutputMutations+1)) {
		t.Fatal("an empty pending set overflows (one output is committed alone, however big)")
	}
	p.add(ms[:1])
	if p.overflows(ms) || !p.overflows(append(ms, ms[:2]...)) {
		t.Fatalf("overflows wrong at %d pending + %d / %d new", len(p.muts), len(ms), len(ms)+2)
	}
}
