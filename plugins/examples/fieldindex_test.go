package examples_test

import (
	"context"
	"os"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/projhost/projhost/event"
	"github.com/projhost/projhost/internal/testwasm"
	"github.com/projhost/projhost/wasmabi"
)

// bareGuest is a module instance in a bare wazero runtime, for measuring the guest's code alone:
// projhost.read finds nothing, log and the output are dropped, fail and env.abort panic;
// projhost.field registers names as the host does (ABI.md §1).
type bareGuest struct {
	mod           api.Module
	alloc, handle api.Function
	fields        []string // registered, by slot
}

func newBareGuest(tb testing.TB, name string) *bareGuest {
	tb.Helper()
	ctx := context.Background()
	g := &bareGuest{}
	rt := wazero.NewRuntime(ctx)
	tb.Cleanup(func() { rt.Close(ctx) })
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)
	i32 := api.ValueTypeI32
	_, err := rt.NewHostModuleBuilder("env").NewFunctionBuilder().WithFunc(func(msg, file, line, col uint32) { panic("abort") }).Export("abort").Instantiate(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	_, err = rt.NewHostModuleBuilder(wasmabi.ImportModule).
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(context.Context, api.Module, []uint64) {}), []api.ValueType{i32, i32, i32}, nil).Export(wasmabi.ImportLog).
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, m api.Module, s []uint64) {
		msg, _ := m.Memory().Read(uint32(s[0]), uint32(s[1]))
		panic("the batch failed: " + string(msg))
	}), []api.ValueType{i32, i32}, nil).Export(wasmabi.ImportFail).
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, _ api.Module, s []uint64) {
		s[0] = api.EncodeI32(-1)
	}), []api.ValueType{i32, i32, i32, i32, i32, i32}, []api.ValueType{i32}).Export(wasmabi.ImportRead).
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, _ api.Module, s []uint64) {
		s[0] = api.EncodeI32(-1)
	}), []api.ValueType{i32, i32, i32, i32, i32, i32, i32, i32}, []api.ValueType{i32}).Export(wasmabi.ImportReadKnown).
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, m api.Module, s []uint64) {
		b, _ := m.Memory().Read(uint32(s[0]), uint32(s[1]))
		slot := slices.Index(g.fields, string(b))
		if slot < 0 && len(b) > 0 && len(g.fields) < wasmabi.MaxIndexedFields {
			g.fields = append(g.fields, string(b))
			slot = len(g.fields) - 1
		}
		s[0] = api.EncodeI32(int32(slot))
	}), []api.ValueType{i32, i32}, []api.ValueType{i32}).Export(wasmabi.ImportField).
		Instantiate(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	wasm, err := os.ReadFile(testwasm.Path(tb, name))
	if err != nil {
		tb.Fatal(err)
	}
	if g.mod, err = rt.InstantiateWithConfig(ctx, wasm, wazero.NewModuleConfig().WithStartFunctions("_initialize")); err != nil {
		tb.Fatal(err)
	}
	g.alloc, g.handle = g.mod.ExportedFunction(wasmabi.ExportAlloc), g.mod.ExportedFunction(wasmabi.ExportHandle)
	return g
}

// run hands batch to the guest.
func (g *bareGuest) run(tb testing.TB, batch []byte) {
	ctx := context.Background()
	res, err := g.alloc.Call(ctx, uint64(len(batch)))
	if err != nil || !g.mod.Memory().Write(uint32(res[0]), batch) {
		tb.Fatalf("alloc: %v", err)
	}
	if _, err := g.handle.Call(ctx, res[0], uint64(len(batch))); err != nil {
		tb.Fatal(err)
	}
}

// indexedBatches is batches with the field index of names (event.IndexFields, as the host
// encodes it).
func indexedBatches(tb testing.TB, evs []wasmabi.Event, size int, names []string) [][]byte {
	evs = slices.Clone(evs)
	spans := make([]event.FieldSpan, len(names))
	for i := range evs {
		if event.IndexFields(evs[i].Data, names, spans) {
			for _, sp := range spans {
				evs[i].Index = wasmabi.AppendFieldEntry(evs[i].Index, sp.Start, sp.End, sp.Escaped)
			}
		}
	}
	var out [][]byte
	for i := 0; i < len(evs); i += size {
		b, err := wasmabi.AppendIndexedBatch(nil, "shardId-000000000000", evs[i:min(i+size, len(evs))], len(names))
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// BenchmarkGoFieldIndexGuestOnly runs the Go flightdelays module (both toolchains' builds) in a
// bare runtime (newBareGuest: the guest's code alone, every key new in every batch) over
// flights-20k in batches of 100, the same instance alternately without the field index (its
// JSONFields scans every event) and with it (ABI.md §2.1; the host's work of indexing is not
// counted). It reports both rates in events per second of the thread's CPU time and their ratio:
//
//	go test -run '^$' -bench GoFieldIndexGuestOnly -benchtime 20x ./plugins/examples/
func BenchmarkGoFieldIndexGuestOnly(b *testing.B) {
	fieldIndexGuestOnly(b, append([]string{testwasm.FlightDelaysGo}, testwasm.TinyGoModules(b, testwasm.FlightDelaysTinyGo)...))
}

// BenchmarkASFieldIndexGuestOnly is BenchmarkGoFieldIndexGuestOnly for the AssemblyScript
// flightdelays, whose Event.json() reader scans every event without the index:
//
//	go test -run '^$' -bench ASFieldIndexGuestOnly -benchtime 20x ./plugins/examples/
func BenchmarkASFieldIndexGuestOnly(b *testing.B) {
	fieldIndexGuestOnly(b, []string{testwasm.FlightDelaysAS})
}

func fieldIndexGuestOnly(b *testing.B, modules []string) {
	evs := flights(b, "flights-20k.json")
	for _, module := range modules {
		b.Run(module, func(b *testing.B) {
			g := newBareGuest(b, module)
			plain := batches(b, evs, 100)
			g.run(b, plain[0]) // registers the fields
			if len(g.fields) == 0 {
				b.Fatal("the module registered no field")
			}
			bs := [2][][]byte{plain, indexedBatches(b, evs, 100, g.fields)}
			cpu := alternate(b, func(i int) {
				for _, batch := range bs[i] {
					g.run(b, batch)
				}
			})
			events := float64(len(evs) * b.N)
			b.ReportMetric(events/cpu[0].Seconds(), "scan-events/cpu-s")
			b.ReportMetric(events/cpu[1].Seconds(), "index-events/cpu-s")
			b.ReportMetric(cpu[0].Seconds()/cpu[1].Seconds(), "index/scan-speed")
		})
	}
}

// alternate runs pass(0) and pass(1) once to warm up, then b.N times each, in alternating order
// so that the machine's load hits both alike, and returns the thread CPU time each took.
func alternate(b *testing.B, pass func(i int)) [2]time.Duration {
	var cpu [2]time.Duration
	timed := func(i int) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		c0 := threadCPU(b)
		pass(i)
		cpu[i] += threadCPU(b) - c0
	}
	timed(0)
	timed(1)
	cpu = [2]time.Duration{}
	b.ResetTimer()
	for n := range b.N {
		timed(n % 2)
		timed(1 - n%2)
	}
	return cpu
}
