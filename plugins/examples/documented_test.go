package examples_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"

	"github.com/projhost/projhost/event"
	"github.com/projhost/projhost/host"
	"github.com/projhost/projhost/internal/testwasm"
)

// BenchmarkASDocumentedVsTuned runs the AssemblyScript flightdelays example, written the
// documented way (typed documents of the library's State), and the hand-tuned version it
// replaced (internal/bench/tuned/flightdelays-as: per-batch arrays, raw pointers, unchecked),
// through the real host (host.Runtime, per-batch deadline on, a host.MemReadModel that keeps
// growing across passes as a long-running projection's would) over flights-20k, at batch 100 and
// 1000. Each iteration is one pass of each module, in alternating order, so that the machine's
// load hits both alike. It reports both rates in events per second of the thread's CPU time and
// their ratio, documented/tuned (issue 14's target: at least 0.9), and the ratio of wall times:
//
//	go test -run '^$' -bench ASDocumentedVsTuned -benchtime 20x ./plugins/examples/
func BenchmarkASDocumentedVsTuned(b *testing.B) {
	evs := hostEvents(b, "flights-20k.json")
	ctx := context.Background()
	rt, err := host.NewRuntime(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close(ctx)
	load := func(name string) *host.Module {
		wasm, err := os.ReadFile(testwasm.Path(b, name))
		if err != nil {
			b.Fatal(err)
		}
		mod, err := rt.Load(ctx, name, wasm)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { mod.Close(ctx) })
		return mod
	}
	mods := []*host.Module{load(testwasm.FlightDelaysAS), load(testwasm.FlightDelaysASTuned)}
	for _, size := range []int{100, 1000} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			var wall, cpu [2]time.Duration
			passes := make([]func(), len(mods))
			for i, mod := range mods {
				h := mod.NewHandler(host.TestShardID)
				defer h.Close(ctx)
				rm := host.NewMemReadModel()
				passes[i] = func() {
					// The guest runs on the calling goroutine's thread: its CPU time leaves out the
					// time other processes of a loaded machine hold the core.
					runtime.LockOSThread()
					defer runtime.UnlockOSThread()
					c0, t0 := threadCPU(b), time.Now()
					for start := 0; start < len(evs); start += size {
						muts, err := h.Handle(ctx, evs[start:min(start+size, len(evs))], rm)
						if err != nil {
							b.Fatalf("%s: %v", mod.Name(), err)
						}
						rm.Apply(muts)
					}
					wall[i] += time.Since(t0)
					cpu[i] += threadCPU(b) - c0
				}
				passes[i]() // warm-up: instantiation, and every document stored
				wall[i], cpu[i] = 0, 0
			}
			b.ResetTimer()
			for n := range b.N {
				passes[n%2]()
				passes[1-n%2]()
			}
			events := float64(len(evs) * b.N)
			b.ReportMetric(events/cpu[0].Seconds(), "documented-events/cpu-s")
			b.ReportMetric(events/cpu[1].Seconds(), "tuned-events/cpu-s")
			b.ReportMetric(cpu[1].Seconds()/cpu[0].Seconds(), "documented/tuned")
			b.ReportMetric(wall[1].Seconds()/wall[0].Seconds(), "documented/tuned-wall")
		})
	}
}

// BenchmarkASDocumentedVsTunedGuestOnly is BenchmarkASDocumentedVsTuned without the host's
// work: each module runs in a bare wazero runtime (newBareGuest) whose projhost.read finds
// nothing and whose output is dropped, so the ratio is the guest code's alone (every key is new
// in every batch).
// The host's share dilutes the guest's difference in BenchmarkASDocumentedVsTuned; this one shows
// it whole:
//
//	go test -run '^$' -bench ASDocumentedVsTunedGuestOnly -benchtime 20x ./plugins/examples/
func BenchmarkASDocumentedVsTunedGuestOnly(b *testing.B) {
	evs := flights(b, "flights-20k.json")
	gs := []*bareGuest{newBareGuest(b, testwasm.FlightDelaysAS), newBareGuest(b, testwasm.FlightDelaysASTuned)}
	for _, size := range []int{100, 1000} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			bs := batches(b, evs, size)
			cpu := alternate(b, func(i int) {
				for _, batch := range bs {
					gs[i].run(b, batch)
				}
			})
			events := float64(len(evs) * b.N)
			b.ReportMetric(events/cpu[0].Seconds(), "documented-events/cpu-s")
			b.ReportMetric(events/cpu[1].Seconds(), "tuned-events/cpu-s")
			b.ReportMetric(cpu[1].Seconds()/cpu[0].Seconds(), "documented/tuned")
		})
	}
}

// threadCPU returns the calling thread's CPU time (user + system; Linux RUSAGE_THREAD).
func threadCPU(tb testing.TB) time.Duration {
	const rusageThread = 1
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// hostEvents is flights for host.Handler: the events of one shard, host.TestShardID.
func hostEvents(tb testing.TB, name string) []event.Event {
	raw := flights(tb, name)
	evs := make([]event.Event, len(raw))
	for i, e := range raw {
		evs[i] = event.Event{ShardID: host.TestShardID, Seq: string(e.Seq), PartitionKey: string(e.PartitionKey), ArrivalMs: e.ArrivalMs, Data: e.Data}
	}
	return evs
}

// TestASExamplesAllocateNothingPerEvent: once warmed up (buffers, pools and per-batch tables
// grown by two passes: the first batch of the first goes without a field index, as the handler
// registers its fields during it), the AssemblyScript examples create no object at all in a
// third and fourth pass over the same events: no allocation per event, nothing for the GC to
// collect. It
// counts calls of the runtime's __new in builds that export it (build/wasm/<example>-as-rt.wasm,
// the same sources with --exportRuntime).
func TestASExamplesAllocateNothingPerEvent(t *testing.T) {
	evs := flights(t, "flights-2k.json")
	for _, example := range []string{"flightdelays", "count"} {
		for _, size := range []int{1, 100, 1000} {
			t.Run(fmt.Sprintf("%s/batch=%d", example, size), func(t *testing.T) {
				var news atomic.Int64
				found := false
				factory := experimental.FunctionListenerFactoryFunc(func(def api.FunctionDefinition) experimental.FunctionListener {
					if !slices.Contains(def.ExportNames(), "__new") {
						return nil
					}
					found = true
					return experimental.FunctionListenerFunc(func(context.Context, api.Module, api.FunctionDefinition, []uint64, experimental.StackIterator) {
						news.Add(1)
					})
				})
				h := newMiniHostCtx(experimental.WithFunctionListenerFactory(context.Background(), factory), t, example+"-as-rt")
				if !found {
					t.Fatal("the module does not export __new")
				}
				bs := batches(t, evs, size)
				for pass := range 4 {
					news.Store(0)
					for _, b := range bs {
						if msg := h.run(t, b); msg != "" {
							t.Fatal(msg)
						}
					}
					if n := news.Load(); pass > 1 && n != 0 {
						t.Errorf("pass %d over %d events: %d allocations, want none", pass+1, len(evs), n)
					} else if pass == 0 && n == 0 {
						t.Errorf("first pass: no allocation counted: is the listener attached?")
					}
				}
			})
		}
	}
}
