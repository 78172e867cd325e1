package projection

import (
	"context"
	"fmt"
	"testing"

	"github.com/projhost/projhost/event"
	"github.com/projhost/projhost/readmodel"
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

// storeGets is a read model store whose Get serves docs and counts the calls.
type storeGets struct {
	readmodel.Store
	docs map[string][]byte // by collection/key
	gets int
}

func (s *storeGets) Get(_ context.Context, _, collection, key string) ([]byte, bool, error) {
	s.gets++
	d, ok := s.docs[collection+"/"+key]
	return d, ok, nil
}

// TestOverlayReadDoc: the handler's reads see pending mutations (a delete as absent), then the
// documents known as committed (both from memory: ReadDocFromMemory), then the store, whose
// answers are remembered (Transactional mode) under a copy of the key; reads served from
// memory do not allocate.
func TestOverlayReadDoc(t *testing.T) {
	st := &storeGets{docs: map[string][]byte{"c/stored": []byte(`{"s":1}`), "c/pending": []byte(`{"old":1}`)}}
	var p pending
	p.add([]event.Mutation{{Collection: "c", Key: "pending", Doc: []byte(`{"p":1}`)}, {Collection: "c", Key: "gone"}})
	p.remember(docKey{"c", "known"}, []byte(`{"k":1}`))
	o := overlay{p: &p, store: st, proj: "proj", cache: true}
	ctx := context.Background()
	if _, _, ok := o.ReadDocFromMemory("c", []byte("stored")); ok {
		t.Fatal("ReadDocFromMemory answered a read only the store can")
	}
	if d, found, ok := o.ReadDocFromMemory("c", []byte("gone")); !ok || found || d != nil {
		t.Fatalf("ReadDocFromMemory of a pending delete = %s, %v, %v", d, found, ok)
	}
	key := []byte("stored")
	for _, tt := range []struct {
		key, doc string
		found    bool
		gets     int
	}{
		{"pending", `{"p":1}`, true, 0},
		{"gone", "", false, 0},
		{"known", `{"k":1}`, true, 0},
		{"stored", `{"s":1}`, true, 1},
		{"stored", `{"s":1}`, true, 1}, // remembered
		{"absent", "", false, 2},
		{"absent", "", false, 2}, // remembered as absent
	} {
		key = append(key[:0], tt.key...)
		doc, found, err := o.ReadDoc(ctx, "c", key)
		if err != nil || found != tt.found || string(doc) != tt.doc || st.gets != tt.gets {
			t.Fatalf("ReadDoc(c, %s) = %s, %v, %v after %d store reads; want %s, %v after %d", tt.key, doc, found, err, st.gets, tt.doc, tt.found, tt.gets)
		}
		copy(key, "XXXXXX") // the caller's buffer changes: the overlay kept no alias of it
	}
	if _, ok := p.known[docKey{"c", "stored"}]; !ok {
		t.Fatalf("the store's answer is not remembered under its key: %q", p.known)
	}
	for _, k := range []string{"pending", "known", "stored"} {
		key := []byte(k)
		if n := testing.AllocsPerRun(100, func() { o.ReadDoc(ctx, "c", key) }); n != 0 {
			t.Errorf("ReadDoc(c, %s) from memory allocates %v times, want 0", k, n)
		}
	}
}
