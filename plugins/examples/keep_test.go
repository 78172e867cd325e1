package examples_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/projhost/projhost/internal/testwasm"
	"github.com/projhost/projhost/plugins/examples/flightdelays"
	"github.com/projhost/projhost/sdk/go/guest"
	"github.com/projhost/projhost/wasmabi"
)

// mapRun runs batch on n natively against store (collection + "/" + key -> document), as the
// miniHost runs a module: reads through Imports.Read, the output applied to store. It returns
// the failure ("" = success).
func mapRun(tb testing.TB, n *guest.Native, store map[string][]byte, batch []byte) string {
	tb.Helper()
	out, err := n.RunBatchImports(batch, guest.Imports{Read: func(coll, key, buf []byte) int {
		d, ok := store[string(coll)+"/"+string(key)]
		if !ok {
			return -1
		}
		copy(buf, d)
		return len(d)
	}})
	if err != nil {
		return err.Error()
	}
	err = wasmabi.DecodeOutput(out, nil, func(m wasmabi.Mutation) error {
		if m.Op == wasmabi.OpPut {
			store[string(m.Collection)+"/"+string(m.Key)] = append([]byte(nil), m.Doc...)
		} else {
			delete(store, string(m.Collection)+"/"+string(m.Key))
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return ""
}

// TestGoModulesKeepDocuments: flightdelays' States keep their documents from batch to batch in
// both toolchains' builds (read_known answers -2 for most of them), and the results stay those
// of the native run when other writers change and delete documents between batches and when a
// batch fails after changing values.
func TestGoModulesKeepDocuments(t *testing.T) {
	evs := flights(t, "flights-2k.json")
	bs := batches(t, evs, 100)
	// Between batches 4 and 5: someone else rewrites the airport of the first event of batch 5
	// and deletes the first route of batch 5 that the batches before wrote.
	type flight struct{ Origin, Destination string }
	parse := func(ev wasmabi.Event) flight {
		var f flight
		if err := json.Unmarshal(ev.Data, &f); err != nil {
			t.Fatal(err)
		}
		return f
	}
	airport := flightdelays.Airports + "/" + parse(evs[500]).Origin
	written := map[flight]bool{}
	for _, ev := range evs[:500] {
		written[parse(ev)] = true
	}
	var route string
	for _, ev := range evs[500:600] {
		if f := parse(ev); written[f] {
			route = flightdelays.Routes + "/" + f.Origin + "-" + f.Destination
			break
		}
	}
	intervene := func(store map[string][]byte) {
		if store[airport] == nil || store[route] == nil {
			t.Fatalf("%s or %s is not stored before batch 5", airport, route)
		}
		store[airport] = []byte(`{"flights":100000,"delayed":0,"total_delay":0,"max_delay":0}`)
		delete(store, route)
	}
	// After batch 10: a batch of 50 good events and a bad one, which fails.
	bad := append(append([]wasmabi.Event(nil), evs[1000:1050]...), wasmabi.Event{Seq: []byte("99999"), PartitionKey: []byte("X"), Data: []byte(`{"delay":"late"}`)})
	failing, err := wasmabi.AppendBatch(nil, "shardId-000000000000", bad)
	if err != nil {
		t.Fatal(err)
	}
	// steps runs the batches with run, intervening with intervene.
	steps := func(run func(batch []byte) string, store map[string][]byte) {
		t.Helper()
		for i, b := range bs {
			if i == 5 {
				intervene(store)
			}
			if i == 10 {
				if msg := run(failing); !strings.Contains(msg, "event seq 99999") {
					t.Fatalf("the failing batch: %q, want a failure naming event seq 99999", msg)
				}
			}
			if msg := run(b); msg != "" {
				t.Fatalf("batch %d failed: %s", i, msg)
			}
		}
	}
	// The native run, with a new Native for every batch: its States (package variables) keep
	// nothing from one batch to the next (they drop what another Native's batch left).
	want := map[string][]byte{}
	steps(func(b []byte) string { return mapRun(t, guest.NewNative(flightdelays.Handler), want, b) }, want)
	if got := string(want[airport]); !strings.HasPrefix(got, `{"flights":1000`) {
		t.Fatalf("native: %s = %s, want the rewritten document's flights and more", airport, got)
	}
	for _, module := range append([]string{testwasm.FlightDelaysGo}, testwasm.TinyGoModules(t, testwasm.FlightDelaysTinyGo)...) {
		t.Run(module, func(t *testing.T) {
			h := newMiniHost(t, module)
			steps(func(b []byte) string { return h.run(t, b) }, h.store)
			diffStores(t, module, h.store, want)
			// Every document a batch wrote before is asked for with read_known, and all are
			// unchanged but the rewritten airport and the deleted route (the failed batch
			// drops the kept documents: the batch after it reads them all again).
			if h.unchanged == 0 || h.readsKnown-h.unchanged != 2 {
				t.Errorf("%d reads, %d read_known of which %d unchanged: want all unchanged but 2", h.reads, h.readsKnown, h.unchanged)
			}
			t.Logf("%d reads, %d read_known of which %d unchanged", h.reads, h.readsKnown, h.unchanged)
		})
	}
}
