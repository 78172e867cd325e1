package host

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/projhost/projhost/event"
	"github.com/projhost/projhost/internal/flightcheck"
	"github.com/projhost/projhost/internal/testwasm"
)

// Benchmarks (DESIGN §2 targets: AS flightdelays >= 300K events/s with the deadline off, >= 100K
// on; Go >= 100K off). Run e.g.
//
//	go test -run XXX -bench 'Handle/(flightdelays|count)-.*/batch=(100|1000)/' -benchtime 20000x -count 6 ./host/
//
// and take the best of the runs on a shared machine (interference only ever slows a run down).
// deadline=true runs the module under the batch deadline (instrumented loops, instrument.go);
// deadline=false loads it WithTrusted.
//
// Handle benchmarks report events/s over the 20k flights, including decoding the output and
// applying it to an in-memory read model (the host's cost per batch, without storage), and
// events/cpu-s (see cpuTime).

type benchModule struct {
	name string
	wasm func(b *testing.B) []byte
}

func benchModules() []benchModule {
	example := func(name string) func(b *testing.B) []byte {
		return func(b *testing.B) []byte {
			w, err := os.ReadFile(testwasm.Path(b, name))
			if err != nil {
				b.Fatal(err)
			}
			return w
		}
	}
	return []benchModule{
		{"sink-wat", func(b *testing.B) []byte { return wat(b, "sink") }},
		{"good-wat", func(b *testing.B) []byte { return wat(b, "good") }},
		{"flightdelays-as", example(testwasm.FlightDelaysAS)},
		{"flightdelays-go", example(testwasm.FlightDelaysGo)},
		{"count-as", example(testwasm.CountAS)},
		{"count-go", example(testwasm.CountGo)},
	}
}

func benchEvents(b *testing.B) []event.Event {
	f, err := os.Open(flightcheck.DataPath("flights-20k.json"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	events, err := ReadEvents(f, "origin")
	if err != nil {
		b.Fatal(err)
	}
	return events
}

func benchRuntime(b *testing.B, cacheDir string) *Runtime {
	rt, err := NewRuntime(context.Background(), WithCacheDir(cacheDir), WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rt.Close(context.Background()) })
	return rt
}

// cpuTime returns the process's user+system CPU time. The events/cpu-s metric divides by it,
// which makes figures comparable on a shared machine where wall time depends on other load
// (it counts every thread: the GC and wazero's deadline goroutines too).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkHandle: one op = one event.
func BenchmarkHandle(b *testing.B) {
	events := benchEvents(b)
	for _, bm := range benchModules() {
		for _, deadline := range []bool{true, false} {
			for _, batch := range []int{1, 100, 1000} {
				b.Run(fmt.Sprintf("%s/batch=%d/deadline=%v", bm.name, batch, deadline), func(b *testing.B) {
					rt := benchRuntime(b, testCacheDir())
					m, err := rt.Load(context.Background(), bm.name, bm.wasm(b), WithTrusted(!deadline))
					if err != nil {
						b.Fatal(err)
					}
					h := m.NewHandler(TestShardID)
					defer h.Close(context.Background())
					rm := NewMemReadModel()
					ctx := context.Background()
					if _, err := h.Handle(ctx, events[:1], rm); err != nil { // instantiate outside the timer
						b.Fatal(err)
					}
					cpu0 := cpuTime()
					b.ResetTimer()
					for done := 0; done < b.N; {
						start := done % len(events)
						n := min(batch, b.N-done, len(events)-start)
						muts, err := h.Handle(ctx, events[start:start+n], rm)
						if err != nil {
							b.Fatal(err)
						}
						rm.Apply(muts)
						done += n
					}
					b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
					b.ReportMetric(float64(b.N)/(cpuTime()-cpu0).Seconds(), "events/cpu-s")
				})
			}
		}
	}
}

// BenchmarkLoad: one op = one Load (validate + compile) in a new Runtime, with an empty cache
// directory (cold) or one already holding the module (warm).
func BenchmarkLoad(b *testing.B) {
	for _, bm := range benchModules() {
		for _, warm := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/warm=%v", bm.name, warm), func(b *testing.B) {
				wasm := bm.wasm(b)
				dir := b.TempDir()
				if warm {
					rt := benchRuntime(b, dir)
					if _, err := rt.Load(context.Background(), bm.name, wasm); err != nil {
						b.Fatal(err)
					}
				}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					d := dir
					if !warm {
						d = b.TempDir()
					}
					rt, err := NewRuntime(context.Background(), WithCacheDir(d), WithLogger(slog.New(slog.DiscardHandler)))
					if err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					if _, err := rt.Load(context.Background(), bm.name, wasm); err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					rt.Close(context.Background())
					b.StartTimer()
				}
			})
		}
	}
}

// BenchmarkInstantiate: one op = instantiating one instance and calling _initialize. Also
// reports the guest's linear memory and the Go heap growth per live instance.
func BenchmarkInstantiate(b *testing.B) {
	for _, bm := range benchModules() {
		b.Run(bm.name, func(b *testing.B) {
			rt := benchRuntime(b, testCacheDir())
			m, err := rt.Load(context.Background(), bm.name, bm.wasm(b))
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			handlers := make([]*Handler, 0, b.N)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				h := m.NewHandler(TestShardID)
				if err := h.instantiate(ctx, ctx, "", ""); err != nil {
					b.Fatal(err)
				}
				handlers = append(handlers, h)
			}
			b.StopTimer()
			runtime.GC()
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(handlers[0].mem.Size())/1024, "KiB-linear-memory")
			b.ReportMetric(float64(int64(after.HeapInuse)-int64(before.HeapInuse))/float64(b.N)/1024, "KiB-heap/instance")
			for _, h := range handlers {
				h.Close(ctx)
			}
		})
	}
}
