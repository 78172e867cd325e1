package bench

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"time"

	"github.com/projhost/projhost/host"
	"github.com/projhost/projhost/source"
)

// HandlerOptions configures MeasureHandler.
type HandlerOptions struct {
	Name       string         // module name in the report, e.g. "count-as.wasm"; required
	WASM       []byte         // the module; required
	Events     []source.Event // the events of one pass, all on host.TestShardID; at least one
	BatchSizes []int          // events per Handle call; default DefaultBatchSizes
	Duration   time.Duration  // measuring time per (batch size, deadline) cell; default DefaultDuration
	// InstantiateRuns is how many fresh instances the instantiate time is the median of; default 5.
	InstantiateRuns int
	Logger          *slog.Logger // host and guest log output; default slog.Default()
}

func (o HandlerOptions) withDefaults() (HandlerOptions, error) {
	if o.Name == "" || len(o.WASM) == 0 {
		return o, fmt.Errorf("%w: a module and its name are required", ErrArgs)
	}
	var err error
	if o.BatchSizes, o.Duration, err = runDefaults(len(o.Events), o.BatchSizes, o.Duration); err != nil {
		return o, err
	}
	if o.InstantiateRuns <= 0 {
		o.InstantiateRuns = 5
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o, nil
}

// runDefaults checks the arguments shared by the throughput benchmarks and applies their
// defaults (DefaultBatchSizes, DefaultDuration).
func runDefaults(events int, sizes []int, d time.Duration) ([]int, time.Duration, error) {
	if events == 0 {
		return nil, 0, fmt.Errorf("%w: no events", ErrArgs)
	}
	if d < 0 {
		return nil, 0, fmt.Errorf("%w: negative duration %v", ErrArgs, d)
	}
	if d == 0 {
		d = DefaultDuration
	}
	if len(sizes) == 0 {
		sizes = DefaultBatchSizes
	}
	for _, b := range sizes {
		if b <= 0 {
			return nil, 0, fmt.Errorf("%w: batch size %d is not positive", ErrArgs, b)
		}
	}
	return sizes, d, nil
}

// HandlerRow is one throughput cell of a HandlerReport.
type HandlerRow struct {
	BatchSize int
	Deadline  bool // true: the default untrusted module (per-batch deadline); false: WithTrusted
	Rate
}

// HandlerReport is what MeasureHandler measured.
type HandlerReport struct {
	Name   string
	Events int // events per pass

	// CompileCold is Runtime.Load with an empty compilation cache directory; CompileWarm is
	// Load of the same module by a new Runtime on the same (now filled) directory.
	CompileCold, CompileWarm time.Duration
	// Instantiate is the cost of creating a guest instance (wazero instantiation and the
	// module's _initialize): a fresh Handler's first 1-event Handle minus its second one, the
	// median of HandlerOptions.InstantiateRuns fresh handlers.
	Instantiate time.Duration
	// GuestMemory is the guest's linear memory in bytes after its first batch of MemBatch
	// events (a multiple of 64 KiB pages).
	GuestMemory uint64
	// HeapDelta is the growth of the Go heap (live bytes after a GC) from before the handler
	// was created to after that first batch: the instance's own structures, plus GuestMemory
	// where the host keeps it on the Go heap (not on Linux: host/RATIONALE.md).
	HeapDelta int64
	MemBatch  int

	Rows []HandlerRow // batch sizes in the order given, deadline on then off
}

// MeasureHandler measures one module through host.Runtime/Module/Handler over opts.Events against
// a host.MemReadModel, like host.Run: compile (cold and warm cache), instantiate and memory
// costs, then, for every batch size with the deadline on and off, the median events/s of
// repeated passes over the events for opts.Duration each (after one untimed warm-up batch; the
// passes of the two settings alternate; each handler's read model keeps growing across passes,
// as a long-running projection's would).
//
// Errors: ErrArgs for bad options, the host's errors (host.ErrInvalidModule, a
// *host.HandlerError when the handler fails a batch), a temporary-directory error, ctx's error.
func MeasureHandler(ctx context.Context, opts HandlerOptions) (*HandlerReport, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	rep := &HandlerReport{Name: opts.Name, Events: len(opts.Events)}
	cacheDir, err := os.MkdirTemp("", "projhost-bench-cache-")
	if err != nil {
		return nil, fmt.Errorf("bench: compilation cache dir: %w", err)
	}
	defer os.RemoveAll(cacheDir)

	// Cold: a new runtime on an empty cache directory.
	rt, err := host.NewRuntime(ctx, host.WithCacheDir(cacheDir), host.WithLogger(opts.Logger))
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	mod, err := rt.Load(ctx, opts.Name, opts.WASM)
	rep.CompileCold = time.Since(t0)
	if err != nil {
		rt.Close(ctx)
		return nil, err
	}
	mod.Close(ctx)
	if err := rt.Close(ctx); err != nil {
		return nil, fmt.Errorf("bench: closing runtime: %w", err)
	}

	// Warm: a new runtime on the same directory; this one runs the rest.
	rt, err = host.NewRuntime(ctx, host.WithCacheDir(cacheDir), host.WithLogger(opts.Logger))
	if err != nil {
		return nil, err
	}
	defer rt.Close(context.WithoutCancel(ctx))
	t0 = time.Now()
	deadlineMod, err := rt.Load(ctx, opts.Name, opts.WASM)
	rep.CompileWarm = time.Since(t0)
	if err != nil {
		return nil, err
	}
	defer deadlineMod.Close(context.WithoutCancel(ctx))
	trustedMod, err := rt.Load(ctx, opts.Name, opts.WASM, host.WithTrusted(true))
	if err != nil {
		return nil, err
	}
	defer trustedMod.Close(context.WithoutCancel(ctx))

	if rep.Instantiate, err = measureInstantiate(ctx, deadlineMod, opts.Events[0], opts.InstantiateRuns); err != nil {
		return nil, err
	}
	rep.MemBatch = min(slices.Max(opts.BatchSizes), len(opts.Events))
	if rep.GuestMemory, rep.HeapDelta, err = measureMemory(ctx, deadlineMod, opts.Events[:rep.MemBatch]); err != nil {
		return nil, err
	}

	for _, size := range opts.BatchSizes {
		rates, err := measureThroughput(ctx, []*host.Module{deadlineMod, trustedMod}, opts.Events, size, opts.Duration)
		if err != nil {
			return nil, fmt.Errorf("bench: %s batch size %d: %w", opts.Name, size, err)
		}
		rep.Rows = append(rep.Rows,
			HandlerRow{BatchSize: size, Deadline: true, Rate: rates[0]},
			HandlerRow{BatchSize: size, Deadline: false, Rate: rates[1]})
	}
	return rep, nil
}

// measureThroughput runs passes of events in batches of size through a fresh handler of each
// module, interleaved (see measureInterleaved), and returns the modules' rates in order.
func measureThroughput(ctx context.Context, mods []*host.Module, events []source.Event, size int, d time.Duration) ([]Rate, error) {
	runtime.GC()
	passes := make([]func() error, len(mods))
	for i, mod := range mods {
		h := mod.NewHandler(host.TestShardID)
		defer h.Close(context.WithoutCancel(ctx))
		rm := host.NewMemReadModel()
		handle := func(b []source.Event) error {
			muts, err := h.Handle(ctx, b, rm)
			if err != nil {
				return err
			}
			rm.Apply(muts)
			return nil
		}
		// Warm-up (instantiation): one batch, untimed.
		if err := handle(events[:min(size, len(events))]); err != nil {
			return nil, err
		}
		passes[i] = func() error { return batches(events, size, handle) }
	}
	return measureInterleaved(ctx, d, len(events), passes...)
}

// measureInstantiate returns the median over runs fresh handlers of (first Handle of a 1-event
// batch) - (second Handle of the same batch): the instantiation and _initialize cost.
func measureInstantiate(ctx context.Context, mod *host.Module, ev source.Event, runs int) (time.Duration, error) {
	one := []source.Event{ev}
	ds := make([]time.Duration, 0, runs)
	for range runs {
		h := mod.NewHandler(host.TestShardID)
		rm := host.NewMemReadModel()
		t0 := time.Now()
		_, err := h.Handle(ctx, one, rm)
		t1 := time.Now()
		if err == nil {
			_, err = h.Handle(ctx, one, rm)
		}
		t2 := time.Now()
		h.Close(ctx)
		if err != nil {
			return 0, fmt.Errorf("bench: instantiating %s: %w", mod.Name(), err)
		}
		ds = append(ds, max(t1.Sub(t0)-t2.Sub(t1), 0))
	}
	return median(ds), nil
}

// measureMemory creates a handler, runs batch through it with a memory allocator that records
// the guest's linear memory size, and returns that size and the Go heap growth.
func measureMemory(ctx context.Context, mod *host.Module, batch []source.Event) (guest uint64, heapDelta int64, err error) {
	before := liveHeap()
	h := mod.NewHandler(host.TestShardID)
	if _, err := h.Handle(ctx, batch, host.NewMemReadModel()); err != nil {
		h.Close(ctx)
		return 0, 0, fmt.Errorf("bench: first batch of %s: %w", mod.Name(), err)
	}
	after := liveHeap()
	guest = h.MemorySize()
	runtime.KeepAlive(h)
	if err := h.Close(ctx); err != nil {
		return 0, 0, fmt.Errorf("bench: closing handler: %w", err)
	}
	return guest, int64(after) - int64(before), nil
}

// liveHeap returns the bytes of live heap objects after full collections (three: objects
// reachable only from finalizers, which wazero uses, are freed a cycle later).
func liveHeap() uint64 {
	for range 3 {
		runtime.GC()
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
