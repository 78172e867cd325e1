// Smoke tests of the example modules in a minimal wazero host: the Go and AssemblyScript builds
// must write byte-identical documents, equal to the native run of the Go handler. The real host
// lives in host/; this harness implements just enough of ABI v1 to drive the modules directly,
// the field index (ABI.md §2.1) included.
package examples_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/projhost/projhost/event"
	"github.com/projhost/projhost/internal/testwasm"
	"github.com/projhost/projhost/plugins/examples/count"
	"github.com/projhost/projhost/plugins/examples/flightdelays"
	"github.com/projhost/projhost/sdk/go/guest"
	"github.com/projhost/projhost/wasmabi"
)

// miniHost runs one module instance against an in-memory read model.
type miniHost struct {
	rt      wazero.Runtime
	mod     api.Module
	alloc   api.Function
	handle  api.Function
	store   map[string][]byte // collection + "/" + key
	failed  string
	logs    []string
	batches int
	keyBuf  []byte

	reads, readsKnown, unchanged int // read and read_known calls; read_known's -2 answers

	fields  []string                // registered with the field import, by slot
	indexed int                     // events handed over with a field index
	spoil   func([]event.FieldSpan) // if set, changes every index before it is encoded
}

func newMiniHost(tb testing.TB, name string) *miniHost {
	tb.Helper()
	return newMiniHostCtx(context.Background(), tb, name)
}

// newMiniHostCtx is newMiniHost compiling the module with ctx (which may carry a wazero function
// listener factory).
func newMiniHostCtx(ctx context.Context, tb testing.TB, name string) *miniHost {
	tb.Helper()
	path := testwasm.Path(tb, name)
	cache, err := wazero.NewCompilationCacheWithDir(filepath.Join(testwasm.RepoRoot(tb), "build", "wazero-cache-examples"))
	if err != nil {
		tb.Fatal(err)
	}
	h := &miniHost{store: map[string][]byte{}}
	h.rt = wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCompilationCache(cache))
	tb.Cleanup(func() { h.rt.Close(ctx) })
	wasi_snapshot_preview1.MustInstantiate(ctx, h.rt)
	mem := func(m api.Module, ptr, n uint32) []byte {
		b, ok := m.Memory().Read(ptr, n)
		if !ok {
			panic(fmt.Sprintf("out of bounds range %d+%d", ptr, n))
		}
		return b
	}
	i32 := api.ValueTypeI32
	_, err = h.rt.NewHostModuleBuilder(wasmabi.ImportModule).
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, m api.Module, s []uint64) {
		h.logs = append(h.logs, fmt.Sprintf("%d:%s", uint32(s[0]), mem(m, uint32(s[1]), uint32(s[2]))))
	}), []api.ValueType{i32, i32, i32}, nil).Export(wasmabi.ImportLog).
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, m api.Module, s []uint64) {
		h.failed = string(mem(m, uint32(s[0]), uint32(s[1])))
	}), []api.ValueType{i32, i32}, nil).Export(wasmabi.ImportFail).
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, m api.Module, s []uint64) {
		h.reads++
		s[0] = api.EncodeI32(h.read(m, s[0:4], nil, s[4:6]))
	}), []api.ValueType{i32, i32, i32, i32, i32, i32}, []api.ValueType{i32}).Export(wasmabi.ImportRead).
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, m api.Module, s []uint64) {
		h.readsKnown++
		s[0] = api.EncodeI32(h.read(m, s[0:4], mem(m, uint32(s[4]), uint32(s[5])), s[6:8]))
	}), []api.ValueType{i32, i32, i32, i32, i32, i32, i32, i32}, []api.ValueType{i32}).Export(wasmabi.ImportReadKnown).
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, m api.Module, s []uint64) {
		name := string(mem(m, uint32(s[0]), uint32(s[1])))
		slot := slices.Index(h.fields, name)
		if slot < 0 && name != "" && len(name) <= wasmabi.MaxFieldNameLen && utf8.ValidString(name) && len(h.fields) < wasmabi.MaxIndexedFields {
			h.fields = append(h.fields, name)
			slot = len(h.fields) - 1
		}
		s[0] = api.EncodeI32(int32(slot))
	}), []api.ValueType{i32, i32}, []api.ValueType{i32}).Export(wasmabi.ImportField).
		Instantiate(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	_, err = h.rt.NewHostModuleBuilder("env").NewFunctionBuilder().
		WithFunc(func(_ context.Context, m api.Module, msg, file, line, col uint32) {
			panic(fmt.Sprintf("abort: %s at %s:%d:%d", asString(m, msg), asString(m, file), line, col))
		}).Export("abort").
		Instantiate(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	bin, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	compiled, err := h.rt.CompileModule(ctx, bin)
	if err != nil {
		tb.Fatal(err)
	}
	for _, want := range []string{wasmabi.ExportMarker, wasmabi.ExportAlloc, wasmabi.ExportHandle} {
		if _, ok := compiled.ExportedFunctions()[want]; !ok {
			tb.Fatalf("%s lacks export %s", name, want)
		}
	}
	if _, ok := compiled.ExportedFunctions()["_start"]; ok {
		tb.Fatalf("%s exports _start", name)
	}
	h.mod, err = h.rt.InstantiateModule(ctx, compiled, wazero.NewModuleConfig().WithStartFunctions().WithStderr(os.Stderr).WithStdout(os.Stdout))
	if err != nil {
		tb.Fatal(err)
	}
	if init := h.mod.ExportedFunction(wasmabi.ExportInitialize); init != nil {
		if _, err := init.Call(ctx); err != nil {
			tb.Fatal(err)
		}
	}
	h.alloc, h.handle = h.mod.ExportedFunction(wasmabi.ExportAlloc), h.mod.ExportedFunction(wasmabi.ExportHandle)
	return h
}

// read is the read import (known nil) and read_known: coll and key are the collection's and the
// key's pointer and length, buf the buffer's.
func (h *miniHost) read(m api.Module, collKey []uint64, known []byte, buf []uint64) int32 {
	mem := m.Memory()
	coll, _ := mem.Read(uint32(collKey[0]), uint32(collKey[1]))
	key, _ := mem.Read(uint32(collKey[2]), uint32(collKey[3]))
	h.keyBuf = append(append(append(h.keyBuf[:0], coll...), '/'), key...)
	d, ok := h.store[string(h.keyBuf)]
	switch {
	case !ok:
		return -1
	case known != nil && string(d) == string(known):
		h.unchanged++
		return wasmabi.ReadUnchanged
	case uint32(len(d)) <= uint32(buf[1]):
		if !mem.Write(uint32(buf[0]), d) {
			panic("read buffer out of bounds")
		}
	}
	return int32(len(d))
}

// withIndex returns batch encoded again with the field index of the names registered so far, as
// the host encodes its batches (ABI.md §2.1); batch itself when no name is registered or it does
// not decode.
func (h *miniHost) withIndex(batch []byte) []byte {
	if len(h.fields) == 0 {
		return batch
	}
	shard, evs, err := wasmabi.DecodeBatch(batch)
	if err != nil {
		return batch
	}
	spans := make([]event.FieldSpan, len(h.fields))
	for i := range evs {
		evs[i].Index = nil
		if !event.IndexFields(evs[i].Data, h.fields, spans) {
			continue
		}
		if h.spoil != nil {
			h.spoil(spans)
		}
		for _, sp := range spans {
			evs[i].Index = wasmabi.AppendFieldEntry(evs[i].Index, sp.Start, sp.End, sp.Escaped)
		}
		h.indexed++
	}
	out, err := wasmabi.AppendIndexedBatch(nil, shard, evs, len(h.fields))
	if err != nil {
		panic(err)
	}
	return out
}

// run hands one encoded batch to the guest, with the field index of the names it registered
// (withIndex); it returns the fail message ("" = success) and applies the output otherwise.
func (h *miniHost) run(tb testing.TB, batch []byte) string {
	ctx := context.Background()
	batch = h.withIndex(batch)
	res, err := h.alloc.Call(ctx, uint64(len(batch)))
	if err != nil || res[0] == 0 {
		tb.Fatalf("alloc: %v %v", res, err)
	}
	ptr := uint32(res[0])
	if !h.mod.Memory().Write(ptr, batch) {
		tb.Fatal("batch write out of bounds")
	}
	h.failed = ""
	res, err = h.handle.Call(ctx, uint64(ptr), uint64(len(batch)))
	if err != nil {
		tb.Fatalf("handle: %v", err)
	}
	h.batches++
	if h.failed != "" {
		return h.failed
	}
	outPtr, outLen := uint32(res[0]>>32), uint32(res[0])
	out, ok := h.mod.Memory().Read(outPtr, outLen)
	if !ok {
		tb.Fatal("output out of bounds")
	}
	err = wasmabi.DecodeOutput(out, func(d []byte) error {
		if !json.Valid(d) {
			return fmt.Errorf("invalid JSON %q", d)
		}
		return nil
	}, func(m wasmabi.Mutation) error {
		k := string(m.Collection) + "/" + string(m.Key)
		if m.Op == wasmabi.OpPut {
			h.store[k] = append([]byte(nil), m.Doc...)
		} else {
			delete(h.store, k)
		}
		return nil
	})
	if err != nil {
		tb.Fatalf("output: %v", err)
	}
	return ""
}

// asString decodes an AssemblyScript string (UTF-16, byte length at ptr-4).
func asString(m api.Module, ptr uint32) string {
	n, ok := m.Memory().ReadUint32Le(ptr - 4)
	if !ok || n > 1<<16 {
		return "?"
	}
	b, ok := m.Memory().Read(ptr, n)
	if !ok {
		return "?"
	}
	r := make([]rune, 0, n/2)
	for i := 0; i+1 < len(b); i += 2 {
		r = append(r, rune(binary.LittleEndian.Uint16(b[i:])))
	}
	return string(r)
}

func flights(tb testing.TB, name string) []wasmabi.Event {
	b, err := os.ReadFile("flightdelays/data/" + name)
	if err != nil {
		tb.Fatal(err)
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(b, &raws); err != nil {
		tb.Fatal(err)
	}
	evs := make([]wasmabi.Event, len(raws))
	for i, r := range raws {
		var f struct{ Origin string }
		if err := json.Unmarshal(r, &f); err != nil {
			tb.Fatal(err)
		}
		evs[i] = wasmabi.Event{Seq: []byte(fmt.Sprintf("%020d", i+1)), PartitionKey: []byte(f.Origin), ArrivalMs: 978307200000 + int64(i), Data: r}
	}
	return evs
}

func batches(tb testing.TB, evs []wasmabi.Event, size int) [][]byte {
	var out [][]byte
	for i := 0; i < len(evs); i += size {
		b, err := wasmabi.AppendBatch(nil, "shardId-000000000000", evs[i:min(i+size, len(evs))])
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// toGuest converts events of the host's codec to the Go SDK's (the same fields).
func toGuest(evs []wasmabi.Event) []guest.Event {
	out := make([]guest.Event, len(evs))
	for i, e := range evs {
		out[i] = guest.Event(e)
	}
	return out
}

func nativeStore(tb testing.TB, h guest.Handler, colls []string, hostEvs []wasmabi.Event, size int) map[string][]byte {
	n := guest.NewNative(h)
	evs := toGuest(hostEvs)
	for i := 0; i < len(evs); i += size {
		if _, err := n.Run("shardId-000000000000", evs[i:min(i+size, len(evs))]); err != nil {
			tb.Fatal(err)
		}
	}
	store := map[string][]byte{}
	for _, c := range colls {
		for k, d := range n.Collection(c) {
			store[c+"/"+k] = d
		}
	}
	return store
}

func diffStores(t *testing.T, name string, got, want map[string][]byte) {
	t.Helper()
	var bad []string
	for k, w := range want {
		if string(got[k]) != string(w) {
			bad = append(bad, fmt.Sprintf("%s: got %s want %s", k, got[k], w))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			bad = append(bad, fmt.Sprintf("%s: unexpected %s", k, got[k]))
		}
	}
	sort.Strings(bad)
	if len(bad) > 0 {
		t.Fatalf("%s: %d of %d documents differ from the native run, e.g.\n%s", name, len(bad), len(want), strings.Join(bad[:min(5, len(bad))], "\n"))
	}
}

func TestModulesMatchNative(t *testing.T) {
	evs := flights(t, "flights-2k.json")
	tests := []struct {
		module string
		h      guest.Handler
		colls  []string
		batch  int
	}{
		{testwasm.FlightDelaysGo, flightdelays.Handler, []string{flightdelays.Airports, flightdelays.Routes}, 100},
		{testwasm.FlightDelaysAS, flightdelays.Handler, []string{flightdelays.Airports, flightdelays.Routes}, 100},
		{testwasm.FlightDelaysAS, flightdelays.Handler, []string{flightdelays.Airports, flightdelays.Routes}, 1},
		{testwasm.FlightDelaysAS, flightdelays.Handler, []string{flightdelays.Airports, flightdelays.Routes}, 1000},
		{testwasm.FlightDelaysASTuned, flightdelays.Handler, []string{flightdelays.Airports, flightdelays.Routes}, 100},
		{testwasm.CountGo, count.Handler, []string{count.Collection}, 250},
		{testwasm.CountAS, count.Handler, []string{count.Collection}, 250},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/batch=%d", tt.module, tt.batch), func(t *testing.T) {
			want := nativeStore(t, tt.h, tt.colls, evs, tt.batch)
			h := newMiniHost(t, tt.module)
			for _, b := range batches(t, evs, tt.batch) {
				if msg := h.run(t, b); msg != "" {
					t.Fatalf("batch failed: %s", msg)
				}
			}
			diffStores(t, tt.module, h.store, want)
			// The AssemblyScript State keeps the documents it wrote: later batches touching the
			// same keys find them unchanged (read_known) rather than decoding them again.
			if (tt.module == testwasm.FlightDelaysAS || tt.module == testwasm.CountAS) && h.unchanged == 0 {
				t.Errorf("no read_known answered unchanged: the State kept nothing")
			}
			// The Go SDK's JSONFields registers flightdelays' fields during the first batch;
			// the host indexes every later flight.
			if tt.module == testwasm.FlightDelaysGo && h.indexed != len(evs)-tt.batch {
				t.Errorf("%d events handed over with a field index, want %d (fields %q)", h.indexed, len(evs)-tt.batch, h.fields)
			}
		})
	}
}

// TestGoModulesReadTheFieldIndex: flightdelays' JSONFields reads an event's fields where the
// host's field index points, in both toolchains' builds: an index spoiled to point every field at
// the value of "origin" makes the handler fail the batch on "delay", which is not an integer
// there. (TestModulesMatchNative checks that the true index gives the native results.)
func TestGoModulesReadTheFieldIndex(t *testing.T) {
	bs := batches(t, flights(t, "flights-2k.json")[:20], 10)
	for _, module := range append([]string{testwasm.FlightDelaysGo}, testwasm.TinyGoModules(t, testwasm.FlightDelaysTinyGo)...) {
		t.Run(module, func(t *testing.T) {
			h := newMiniHost(t, module)
			if msg := h.run(t, bs[0]); msg != "" {
				t.Fatalf("first batch failed: %s", msg)
			}
			if want := []string{"delay", "distance", "origin", "destination"}; !slices.Equal(h.fields, want) {
				t.Fatalf("fields registered %q, want %q", h.fields, want)
			}
			h.spoil = func(spans []event.FieldSpan) {
				for i := range spans {
					spans[i] = spans[2]
				}
			}
			if msg := h.run(t, bs[1]); !strings.Contains(msg, `field "delay" missing or not an integer`) {
				t.Fatalf("with a spoiled index: fail message %q, want one about \"delay\"", msg)
			}
			h.spoil = nil
			if msg := h.run(t, bs[1]); msg != "" {
				t.Fatalf("with the true index: %s", msg)
			}
		})
	}
}

// TestTinyGoModulesMatchGo: the examples built with TinyGo write the same documents, byte for
// byte, as the standard Go builds and the native run. Skipped unless TinyGo is installed
// (make tinygo; testwasm.RequireTinyGo).
func TestTinyGoModulesMatchGo(t *testing.T) {
	testwasm.RequireTinyGo(t)
	evs := flights(t, "flights-2k.json")
	tests := []struct {
		goModule, tinyModule string
		h                    guest.Handler
		colls                []string
		batch                int
	}{
		{testwasm.FlightDelaysGo, testwasm.FlightDelaysTinyGo, flightdelays.Handler, []string{flightdelays.Airports, flightdelays.Routes}, 100},
		{testwasm.FlightDelaysGo, testwasm.FlightDelaysTinyGo, flightdelays.Handler, []string{flightdelays.Airports, flightdelays.Routes}, 1},
		{testwasm.FlightDelaysGo, testwasm.FlightDelaysTinyGo, flightdelays.Handler, []string{flightdelays.Airports, flightdelays.Routes}, 1000},
		{testwasm.CountGo, testwasm.CountTinyGo, count.Handler, []string{count.Collection}, 250},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/batch=%d", tt.tinyModule, tt.batch), func(t *testing.T) {
			want := nativeStore(t, tt.h, tt.colls, evs, tt.batch)
			stores := map[string]map[string][]byte{}
			for _, module := range []string{tt.goModule, tt.tinyModule} {
				h := newMiniHost(t, module)
				for _, b := range batches(t, evs, tt.batch) {
					if msg := h.run(t, b); msg != "" {
						t.Fatalf("%s: batch failed: %s", module, msg)
					}
				}
				diffStores(t, module, h.store, want)
				stores[module] = h.store
				if tt.goModule == testwasm.FlightDelaysGo && h.indexed != len(evs)-tt.batch {
					t.Errorf("%s: %d events handed over with a field index, want %d", module, h.indexed, len(evs)-tt.batch)
				}
			}
			diffStores(t, tt.tinyModule+" against "+tt.goModule, stores[tt.tinyModule], stores[tt.goModule])
		})
	}
}

func TestModulesFailMalformedEvents(t *testing.T) {
	good := []byte(`{"delay":1,"distance":2,"origin":"A","destination":"B"}`)
	ev := func(seq, data string) wasmabi.Event {
		return wasmabi.Event{Seq: []byte(seq), PartitionKey: []byte("A"), Data: []byte(data)}
	}
	for _, module := range append([]string{testwasm.FlightDelaysGo, testwasm.FlightDelaysAS}, testwasm.TinyGoModules(t, testwasm.FlightDelaysTinyGo)...) {
		t.Run(module, func(t *testing.T) {
			h := newMiniHost(t, module)
			tests := []struct{ data, want string }{
				{`not json`, `field "delay" missing or not an integer`},
				{`{"delay":1,"distance":2,"origin":"A"}`, `field "destination" missing or not a non-empty string`},
				{`{"delay":1.5,"distance":2,"origin":"A","destination":"B"}`, `field "delay"`},
				{``, `field "delay"`},
			}
			for _, tt := range tests {
				b, err := wasmabi.AppendBatch(nil, "s", []wasmabi.Event{ev("41", string(good)), ev("42", tt.data)})
				if err != nil {
					t.Fatal(err)
				}
				msg := h.run(t, b)
				if !strings.Contains(msg, "event seq 42") || !strings.Contains(msg, tt.want) {
					t.Errorf("data %q: fail message %q, want event seq 42 and %q", tt.data, msg, tt.want)
				}
				if len(h.store) != 0 {
					t.Fatalf("failed batch applied %d documents", len(h.store))
				}
			}
			// The instance stays usable after fail.
			b, _ := wasmabi.AppendBatch(nil, "s", []wasmabi.Event{ev("43", string(good))})
			if msg := h.run(t, b); msg != "" {
				t.Fatalf("good batch after failures: %s", msg)
			}
			if got := string(h.store["airports/A"]); got != `{"flights":1,"delayed":0,"total_delay":1,"max_delay":1}` {
				t.Fatalf("airports/A = %s", got)
			}
			// A corrupt batch (trailing bytes) fails instead of trapping.
			b = append(b, 0)
			if msg := h.run(t, b); !strings.Contains(msg, "trailing") {
				t.Fatalf("batch with trailing bytes: fail message %q", msg)
			}
		})
	}
}

func TestReadBufferGrowsForLargeDocuments(t *testing.T) {
	for _, module := range append([]string{testwasm.CountGo, testwasm.CountAS}, testwasm.TinyGoModules(t, testwasm.CountTinyGo)...) {
		t.Run(module, func(t *testing.T) {
			h := newMiniHost(t, module)
			h.store["counts/K"] = []byte(`{"pad":"` + strings.Repeat("x", 10000) + `","count":41}`)
			b, _ := wasmabi.AppendBatch(nil, "s", []wasmabi.Event{{Seq: []byte("1"), PartitionKey: []byte("K")}})
			if msg := h.run(t, b); msg != "" {
				t.Fatal(msg)
			}
			if got := string(h.store["counts/K"]); got != `{"count":42}` {
				t.Fatalf("counts/K = %s", got)
			}
		})
	}
}

// BenchmarkModules runs each example module over flights-20k in batches of 100, without a
// per-batch deadline, in this test's minimal host (compare with BenchmarkNative in ./flightdelays).
// The host's work counts too: for a module that registered fields, run decodes each batch and
// encodes it again with its field index.
func BenchmarkModules(b *testing.B) {
	evs := flights(b, "flights-20k.json")
	bs := batches(b, evs, 100)
	for _, module := range append([]string{testwasm.FlightDelaysGo, testwasm.FlightDelaysAS, testwasm.FlightDelaysASTuned, testwasm.CountGo, testwasm.CountAS}, testwasm.TinyGoModules(b, testwasm.FlightDelaysTinyGo, testwasm.CountTinyGo)...) {
		b.Run(module, func(b *testing.B) {
			h := newMiniHost(b, module)
			b.ResetTimer()
			cpu0 := cpuTime()
			for range b.N {
				clear(h.store)
				for _, batch := range bs {
					if msg := h.run(b, batch); msg != "" {
						b.Fatal(msg)
					}
				}
			}
			reportRates(b, len(evs)*b.N, cpu0)
		})
	}
}

// cpuTime returns the process's user+system CPU time; on a shared, loaded machine CPU time per
// event is steadier than wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportRates reports events/s (wall) and CPU ns/event (all threads, including GC) since cpu0.
func reportRates(b *testing.B, events int, cpu0 time.Duration) {
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(events), "cpu-ns/event")
}

// FuzzBatchDecoding feeds arbitrary bytes as a batch to the count handler natively and in both
// modules: the AssemblyScript decoder must never trap, and must accept exactly the batches the Go
// codec accepts, with the same result.
func FuzzBatchDecoding(f *testing.F) {
	evs := flights(f, "flights-2k.json")[:5]
	for _, b := range batches(f, evs, 5) {
		f.Add(b)
		f.Add(b[:len(b)-1])
		f.Add(append(append([]byte(nil), b...), 0))
	}
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, '7', 1, 0, 'k', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{2, 0, 0, 0})
	as := newMiniHost(f, testwasm.CountAS)
	gw := newMiniHost(f, testwasm.CountGo)
	f.Fuzz(func(t *testing.T, batch []byte) {
		native := guest.NewNative(count.Handler)
		_, events, decErr := wasmabi.DecodeBatch(batch)
		var nerr error
		if decErr == nil {
			_, nerr = native.Run("s", toGuest(events))
		}
		clear(as.store)
		clear(gw.store)
		asMsg, goMsg := as.run(t, batch), gw.run(t, batch)
		if (decErr == nil && nerr == nil) != (goMsg == "") {
			t.Fatalf("Go module: fail %q; native: decode %v, run %v", goMsg, decErr, nerr)
		}
		if decErr != nil && asMsg == "" {
			t.Fatalf("Go codec rejects the batch (%v), AssemblyScript accepts it", decErr)
		}
		// Both SDKs decode lazily: the handler may fail on an early event before the decoder
		// reaches a later malformed one. Handler messages must then be the same (unless they quote
		// invalid UTF-8, which AssemblyScript strings cannot carry).
		if !strings.HasPrefix(asMsg, "guest:") && !strings.HasPrefix(goMsg, "guest:") && utf8.ValidString(goMsg) && asMsg != goMsg {
			t.Fatalf("fail messages differ: AssemblyScript %q, Go %q", asMsg, goMsg)
		}
		if decErr != nil || nerr != nil {
			return
		}
		for _, e := range events {
			if !utf8.Valid(e.PartitionKey) {
				return // AssemblyScript strings cannot carry invalid UTF-8 keys unchanged
			}
		}
		if asMsg != "" {
			t.Fatalf("AssemblyScript fails a batch the Go codec and handler accept: %s", asMsg)
		}
		want := map[string][]byte{}
		for k, d := range native.Collection(count.Collection) {
			want[count.Collection+"/"+k] = d
		}
		diffStores(t, "count-go", gw.store, want)
		diffStores(t, "count-as", as.store, want)
	})
}
