//go:build !wasip1

package guest_test

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/projhost/projhost/sdk/go/guest"
	"github.com/projhost/projhost/sdk/go/internal/abi"
)

// keepStep is one batch of the State keeping tests: first, before the batch, the read model's
// documents in write are changed by someone else (a batch of a handler that writes them without
// the State: "" deletes); then a batch in which the handler writes put with Batch.Put ("":
// Delete), Gets each key of keys with the State (a missing document starts at 100) and adds 1,
// and then returns an error (fail) or panics (panic).
type keepStep struct {
	write, put  map[string]string
	keys        []string
	fail, panic bool
	other       bool // run the batch on the second Native (sharing the read model)
	decodes     int  // decode calls in the batch, keeping
}

// keepRun is one run of keepSteps: how the Natives read the read model (mode) and whether the
// State decodes every batch.
type keepRun struct {
	mode  string // "own": the Native's store; "read": Imports.Read only; "known": Read and ReadKnown
	every bool
}

// keepResult is what a keepRun saw: per batch its mutations (or failure), the values and found
// flags of the first Gets, and its decode calls; the read model at the end.
type keepResult struct {
	outs, seen []string
	decodes    []int
	store      map[string]string
}

func (r keepRun) run(t *testing.T, steps []keepStep) keepResult {
	t.Helper()
	decodes := 0
	docs := guest.NewState("docs", func(d *Doc, doc []byte) error { decodes++; return d.Decode(doc) }, (*Doc).Append)
	if r.every {
		docs.DecodeEveryBatch()
	}
	var step *keepStep           // the batch's step; nil: the writer's batch
	var writes map[string]string // the writer's documents
	var seen []string
	h := func(b *guest.Batch) error {
		if step == nil {
			for b.Next() {
				k := string(b.Event().PartitionKey)
				if d, ok := writes[k]; ok && d != "" {
					b.Put("docs", []byte(k), []byte(d))
				} else {
					b.Delete("docs", []byte(k))
				}
			}
			return nil
		}
		for _, k := range slices.Sorted(maps.Keys(step.put)) {
			if d := step.put[k]; d != "" {
				b.Put("docs", []byte(k), []byte(d))
			} else {
				b.Delete("docs", []byte(k))
			}
		}
		var firsts []string
		for b.Next() {
			k := b.Event().PartitionKey
			d, found := docs.Get(b, k)
			if !slices.ContainsFunc(firsts, func(s string) bool { return strings.HasPrefix(s, string(k)+":") }) {
				firsts = append(firsts, fmt.Sprintf("%s:%d/%v", k, d.V, found))
			}
			if !found {
				d.V = 100
			}
			d.V++
		}
		seen = append(seen, strings.Join(firsts, " "))
		if step.panic {
			panic("on purpose")
		}
		if step.fail {
			return errors.New("on purpose")
		}
		return nil
	}
	natives := []*guest.Native{guest.NewNative(h), guest.NewNative(h)}
	store := map[string]string{}
	imp := storeImports(store, r.mode == "known")
	// runBatch runs events on n and returns its mutations, or its error.
	runBatch := func(n *guest.Native, evs []guest.Event) (out string) {
		defer func() {
			if p := recover(); p != nil {
				out = fmt.Sprint("panic: ", p)
			}
		}()
		if r.mode == "own" {
			ms, err := n.Run("s", evs)
			if err != nil {
				return err.Error()
			}
			return fmt.Sprint(muts(ms))
		}
		return runBatchApply(t, n, evs, imp, store)
	}
	var res keepResult
	for i := range steps {
		if len(steps[i].write) > 0 {
			step, writes = nil, steps[i].write
			for _, n := range natives {
				if out := runBatch(n, events(slices.Sorted(maps.Keys(steps[i].write))...)); strings.Contains(out, "fail") {
					t.Fatalf("step %d: writing: %s", i, out)
				}
			}
		}
		step = &steps[i]
		n := natives[0]
		if step.other {
			n = natives[1]
		}
		decodes = 0
		res.outs = append(res.outs, runBatch(n, events(step.keys...)))
		res.decodes = append(res.decodes, decodes)
	}
	res.seen = seen
	res.store = store
	if r.mode == "own" {
		res.store = map[string]string{}
		for k, d := range natives[0].Collection("docs") {
			res.store["docs/"+k] = string(d)
		}
	}
	return res
}

// TestStateKeepsDocuments: a State reuses the values it wrote without decoding them again as
// long as nothing else changed their documents, and gives the same results as a State that
// decodes every batch.
func TestStateKeepsDocuments(t *testing.T) {
	tests := []struct {
		name       string
		steps      []keepStep
		wantSeen   []string
		wantStore  map[string]string
		twoNatives bool
	}{
		{
			name: "a second batch over the same keys decodes nothing",
			steps: []keepStep{
				{write: map[string]string{"a": `{"v":1}`}, keys: []string{"a", "b", "a"}, decodes: 1},
				{keys: []string{"b", "a"}, decodes: 0},
				{keys: []string{"a", "a", "b"}, decodes: 0},
			},
			wantSeen:  []string{"a:1/true b:0/false", "b:101/true a:3/true", "a:4/true b:102/true"},
			wantStore: map[string]string{"docs/a": `{"v":6}`, "docs/b": `{"v":103}`},
		},
		{
			name: "a document someone else wrote between batches is decoded again, with its new value",
			steps: []keepStep{
				{keys: []string{"a", "b"}},
				{write: map[string]string{"a": `{"v":50,"pad":"` + strings.Repeat("x", 5000) + `"}`}, keys: []string{"a", "b"}, decodes: 1},
				{keys: []string{"a", "b"}, decodes: 0},
			},
			wantSeen:  []string{"a:0/false b:0/false", "a:50/true b:101/true", "a:51/true b:102/true"},
			wantStore: map[string]string{"docs/a": `{"v":52}`, "docs/b": `{"v":103}`},
		},
		{
			name: "a document written with Batch.Put in the batch before the State's Get is decoded",
			steps: []keepStep{
				{keys: []string{"a", "b"}},
				{put: map[string]string{"a": `{"v":7}`, "b": `{"v":101}`}, keys: []string{"a", "b"}, decodes: 1},
				{keys: []string{"a", "b"}, decodes: 0},
			},
			wantSeen:  []string{"a:0/false b:0/false", "a:7/true b:101/true", "a:8/true b:102/true"},
			wantStore: map[string]string{"docs/a": `{"v":9}`, "docs/b": `{"v":103}`},
		},
		{
			name: "a deleted document comes back as not found, zero",
			steps: []keepStep{
				{write: map[string]string{"a": `{"v":5}`}, keys: []string{"a", "b"}, decodes: 1},
				{write: map[string]string{"a": ""}, keys: []string{"a", "b"}, decodes: 0},
				{put: map[string]string{"b": ""}, keys: []string{"b", "a"}, decodes: 0},
				{keys: []string{"a", "b"}, decodes: 0},
			},
			wantSeen:  []string{"a:5/true b:0/false", "a:0/false b:101/true", "b:0/false a:101/true", "a:102/true b:101/true"},
			wantStore: map[string]string{"docs/a": `{"v":103}`, "docs/b": `{"v":102}`},
		},
		{
			name: "a failed batch leaves no trace",
			steps: []keepStep{
				{keys: []string{"a", "b"}},
				{keys: []string{"a", "a", "c"}, fail: true, decodes: 0},
				{keys: []string{"a", "b", "c"}, decodes: 2},
				{keys: []string{"a", "b", "c"}, decodes: 0},
			},
			wantSeen:  []string{"a:0/false b:0/false", "a:101/true c:0/false", "a:101/true b:101/true c:0/false", "a:102/true b:102/true c:101/true"},
			wantStore: map[string]string{"docs/a": `{"v":103}`, "docs/b": `{"v":103}`, "docs/c": `{"v":102}`},
		},
		{
			name: "a batch that panicked leaves no trace",
			steps: []keepStep{
				{keys: []string{"a", "b"}},
				{keys: []string{"a", "b"}, panic: true, decodes: 0},
				{keys: []string{"b"}, decodes: 1},
				{keys: []string{"a", "b"}, decodes: 1},
				{keys: []string{"a", "b"}, decodes: 0},
			},
			wantSeen:  []string{"a:0/false b:0/false", "a:101/true b:101/true", "b:101/true", "a:101/true b:102/true", "a:102/true b:103/true"},
			wantStore: map[string]string{"docs/a": `{"v":103}`, "docs/b": `{"v":104}`},
		},
		{
			name: "a document that does not decode fails the batch, and the next decodes again",
			steps: []keepStep{
				{keys: []string{"a", "b"}},
				{write: map[string]string{"b": `{"v":"x"}`}, keys: []string{"a", "b"}, decodes: 1},
				{write: map[string]string{"b": `{"v":9}`}, keys: []string{"a", "b"}, decodes: 2},
				{keys: []string{"a", "b"}, decodes: 0},
			},
			wantSeen:  []string{"a:0/false b:0/false", "a:101/true b:0/true", "a:101/true b:9/true", "a:102/true b:10/true"},
			wantStore: map[string]string{"docs/a": `{"v":103}`, "docs/b": `{"v":11}`},
		},
		{
			name: "another Native's batch makes the State drop what it keeps",
			steps: []keepStep{
				{keys: []string{"a", "b"}},
				{keys: []string{"a"}, other: true, decodes: 1},
				{keys: []string{"a", "b"}, decodes: 2},
				{keys: []string{"a", "b"}, decodes: 0},
			},
			wantSeen:   []string{"a:0/false b:0/false", "a:101/true", "a:102/true b:101/true", "a:103/true b:102/true"},
			wantStore:  map[string]string{"docs/a": `{"v":104}`, "docs/b": `{"v":103}`},
			twoNatives: true,
		},
	}
	for _, tt := range tests {
		for _, mode := range []string{"own", "read", "known"} {
			if tt.twoNatives && mode == "own" {
				continue // each Native has its own store
			}
			t.Run(tt.name+"/"+mode, func(t *testing.T) {
				got := keepRun{mode: mode}.run(t, tt.steps)
				every := keepRun{mode: mode, every: true}.run(t, tt.steps)
				if !slices.Equal(got.outs, every.outs) {
					t.Errorf("outputs\n got %q\nwant %q (decoding every batch)", got.outs, every.outs)
				}
				if !slices.Equal(got.seen, tt.wantSeen) || !slices.Equal(every.seen, tt.wantSeen) {
					t.Errorf("values at the first Gets\n got %q\n     %q (decoding every batch)\nwant %q", got.seen, every.seen, tt.wantSeen)
				}
				if !maps.Equal(got.store, tt.wantStore) || !maps.Equal(every.store, tt.wantStore) {
					t.Errorf("read model\n got %v\n     %v (decoding every batch)\nwant %v", got.store, every.store, tt.wantStore)
				}
				var want, wantEvery []int
				for i, s := range tt.steps {
					want = append(want, s.decodes)
					wantEvery = append(wantEvery, strings.Count(every.seen[min(i, len(every.seen)-1)], "/true"))
				}
				if !slices.Equal(got.decodes, want) {
					t.Errorf("decodes per batch %v, want %v", got.decodes, want)
				}
				if !slices.Equal(every.decodes, wantEvery) {
					t.Errorf("decodes per batch with DecodeEveryBatch %v, want %v (every document found)", every.decodes, wantEvery)
				}
			})
		}
	}
}

// TestStateKeepLimit: a State that holds more than StateKeepLimit documents drops them between
// batches, and its results stay exact; below the limit it keeps them all.
func TestStateKeepLimit(t *testing.T) {
	tests := []struct {
		keys        int
		wantDecodes []int
	}{
		{guest.StateKeepLimit - 1, []int{0, 0, 0}},
		{guest.StateKeepLimit, []int{0, guest.StateKeepLimit, guest.StateKeepLimit}},
		{guest.StateKeepLimit + 1, []int{0, guest.StateKeepLimit + 1, guest.StateKeepLimit + 1}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.keys), func(t *testing.T) {
			decodes := 0
			docs := guest.NewState("docs", func(d *Doc, doc []byte) error { decodes++; return d.Decode(doc) }, (*Doc).Append)
			var key []byte
			n := guest.NewNative(func(b *guest.Batch) error {
				for i := range tt.keys {
					key = fmt.Appendf(key[:0], "k%d", i)
					d, _ := docs.Get(b, key)
					d.V += int64(i)
				}
				return nil
			})
			var got []int
			for range tt.wantDecodes {
				decodes = 0
				if _, err := n.Run("s", events("x")); err != nil {
					t.Fatal(err)
				}
				got = append(got, decodes)
			}
			if !slices.Equal(got, tt.wantDecodes) {
				t.Errorf("decodes per batch %v, want %v", got, tt.wantDecodes)
			}
			c := n.Collection("docs")
			if len(c) != tt.keys {
				t.Fatalf("%d documents, want %d", len(c), tt.keys)
			}
			for i := range tt.keys {
				if d, want := string(c[fmt.Sprintf("k%d", i)]), fmt.Sprintf(`{"v":%d}`, 3*i); d != want {
					t.Fatalf("docs/k%d = %s, want %s", i, d, want)
				}
			}
		})
	}
}

// runBatchApply runs evs on n with imp, as a host would, applies the mutations to store ("coll/key"
// -> document) and returns them, or the batch's error.
func runBatchApply(t *testing.T, n *guest.Native, evs []guest.Event, imp guest.Imports, store map[string]string) string {
	t.Helper()
	batch, err := abi.AppendBatch(nil, "s", evs)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := n.RunBatchImports(batch, imp)
	if err != nil {
		return err.Error()
	}
	var ms []guest.Mutation
	if err := abi.DecodeOutput(enc, nil, func(m guest.Mutation) error { ms = append(ms, m); return nil }); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Op == abi.OpPut {
			store[string(m.Collection)+"/"+string(m.Key)] = string(m.Doc)
		} else {
			delete(store, string(m.Collection)+"/"+string(m.Key))
		}
	}
	return fmt.Sprint(muts(ms))
}

// storeImports are Imports serving reads from store ("coll/key" -> document), with a ReadKnown
// when known (else the SDK emulates it with Read).
func storeImports(store map[string]string, known bool) guest.Imports {
	imp := guest.Imports{Read: func(coll, key, buf []byte) int {
		d, ok := store[string(coll)+"/"+string(key)]
		if !ok {
			return -1
		}
		copy(buf, d)
		return len(d)
	}}
	if known {
		imp.ReadKnown = func(coll, key, known, buf []byte) int {
			if d, ok := store[string(coll)+"/"+string(key)]; ok && d == string(known) {
				return abi.ReadUnchanged
			}
			return imp.Read(coll, key, buf)
		}
	}
	return imp
}
