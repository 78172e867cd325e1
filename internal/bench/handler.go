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
	"github.com/projhost/projhost/sdk/go/guest"
	"github.com/projhost/projhost/source"
)

// HandlerModule is one WebAssembly module of MeasureHandlers.
type HandlerModule struct {
	Name string // its name in the report, e.g. "count-as.wasm"; required, unique
	WASM []byte // the module; required
}

// HandlerOptions configures MeasureHandlers.
type HandlerOptions struct {
	Modules []HandlerModule // the modules, reported in this order; at least one
	// Native, when set, is the native baseline: a Go handler doing the modules' work, compiled
	// into the host and run through the same host.Handler path as the modules
	// (host.NewNativeModule with NativeGuests). NativeName names it in the report (required
	// with Native).
	Native     guest.Handler
	NativeName string
	Events     []source.Event // the events of one pass, all on host.TestShardID; at least one
	BatchSizes []int          // events per Handle call; default DefaultBatchSizes
	// Duration is the measuring time per (batch size, module, deadline setting) cell, and for
	// the native baseline per batch size; default DefaultDuration.
	Duration time.Duration
	// InstantiateRuns is how many fresh instances the instantiate time is the median of; default 5.
	InstantiateRuns int
	Logger          *slog.Logger // host and guest log output; default slog.Default()
}

func (o HandlerOptions) withDefaults() (HandlerOptions, error) {
	if len(o.Modules) == 0 {
		return o, fmt.Errorf("%w: no module", ErrArgs)
	}
	seen := map[string]bool{}
	for _, m := range o.Modules {
		if m.Name == "" || len(m.WASM) == 0 {
			return o, fmt.Errorf("%w: a module and its name are required", ErrArgs)
		}
		if seen[m.Name] {
			return o, fmt.Errorf("%w: module name %q given twice", ErrArgs, m.Name)
		}
		seen[m.Name] = true
	}
	if o.Native != nil && o.NativeName == "" {
		return o, fmt.Errorf("%w: the native handler needs a name", ErrArgs)
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
		if b > events {
			return nil, 0, fmt.Errorf("%w: batch size %d exceeds the %d events of a pass: give a smaller size, more events or --repeat", ErrArgs, b, events)
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

// HandlerReport is what MeasureHandlers measured of one module.
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

// HandlersReport is what MeasureHandlers measured.
type HandlersReport struct {
	Modules []*HandlerReport // in the order of HandlerOptions.Modules
	// Native is the native baseline's rates by batch size, measured in the same rounds as the
	// modules' (nil without HandlerOptions.Native).
	Native *NativeReport
}

// MeasureHandlers measures modules through host.Runtime/Module/Handler over opts.Events against
// a host.MemReadModel, like host.Run. First, module by module, the compile (cold and warm cache),
// instantiate and memory costs. Then, for every batch size, one interleaved rotation (see
// measureInterleaved) over every module with the per-batch deadline on and off (WithTrusted)
// and, with opts.Native, the native baseline, for opts.Duration per member: the members take
// turns of 10 ms (whole batches), each going on with its passes over the events, so every rate
// of a batch size (and every ratio of two of them, wasm/native included) comes from the same
// moments of the machine. Each member runs in a fresh host.Handler with a read model of its
// own, after one untimed warm-up batch; the read models keep growing across passes, as a
// long-running projection's would. A rate is the median of the member's passes.
//
// The native baseline runs through the same host path as the modules: host.NewNativeModule
// with NativeGuests (batch encoding, reads, output decoding and event.CheckDoc, the
// MemReadModel), without WebAssembly, sandbox or deadline.
//
// Errors: ErrArgs for bad options, the host's errors (host.ErrInvalidModule, a
// *host.HandlerError when a handler fails a batch), a temporary-directory error, ctx's error.
func MeasureHandlers(ctx context.Context, opts HandlerOptions) (*HandlersReport, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	res := &HandlersReport{}
	var mods []*host.Module // per module: deadline on, trusted; then the native one
	for _, m := range opts.Modules {
		rep, deadlineMod, trustedMod, closeAll, err := measureCosts(ctx, m, opts)
		if err != nil {
			return nil, err
		}
		defer closeAll()
		res.Modules = append(res.Modules, rep)
		mods = append(mods, deadlineMod, trustedMod)
	}
	if opts.Native != nil {
		res.Native = &NativeReport{Name: opts.NativeName, Events: len(opts.Events)}
		mods = append(mods, host.NewNativeModule(opts.NativeName, NativeGuests(opts.Native, opts.Logger), opts.Logger))
	}
	for _, size := range opts.BatchSizes {
		rates, err := measureThroughput(ctx, mods, opts.Events, size, opts.Duration)
		if err != nil {
			return nil, fmt.Errorf("bench: batch size %d: %w", size, err)
		}
		for i, rep := range res.Modules {
			rep.Rows = append(rep.Rows,
				HandlerRow{BatchSize: size, Deadline: true, Rate: rates[2*i]},
				HandlerRow{BatchSize: size, Deadline: false, Rate: rates[2*i+1]})
		}
		if res.Native != nil {
			res.Native.Rows = append(res.Native.Rows, NativeRow{BatchSize: size, Rate: rates[len(rates)-1]})
		}
	}
	return res, nil
}

// measureCosts measures m's compile, instantiate and memory costs and returns them with the
// module loaded with the deadline on and trusted, on a runtime that closeAll closes with them.
func measureCosts(ctx context.Context, m HandlerModule, opts HandlerOptions) (rep *HandlerReport, deadlineMod, trustedMod *host.Module, closeAll func(), err error) {
	rep = &HandlerReport{Name: m.Name, Events: len(opts.Events)}
	cacheDir, err := os.MkdirTemp("", "projhost-bench-cache-")
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("bench: compilation cache dir: %w", err)
	}
	var closers []func()
	closeStarted := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	defer func() {
		if err != nil {
			closeStarted()
		}
	}()
	closers = append(closers, func() { os.RemoveAll(cacheDir) })
	bg := context.WithoutCancel(ctx)

	// Cold: a new runtime on an empty cache directory.
	rt, err := host.NewRuntime(ctx, host.WithCacheDir(cacheDir), host.WithLogger(opts.Logger))
	if err != nil {
		return nil, nil, nil, nil, err
	}
	t0 := time.Now()
	mod, err := rt.Load(ctx, m.Name, m.WASM)
	rep.CompileCold = time.Since(t0)
	if err != nil {
		rt.Close(ctx)
		return nil, nil, nil, nil, err
	}
	mod.Close(ctx)
	if err := rt.Close(ctx); err != nil {
		return nil, nil, nil, nil, fmt.Errorf("bench: closing runtime: %w", err)
	}

	// Warm: a new runtime on the same directory; this one runs the rest.
	if rt, err = host.NewRuntime(ctx, host.WithCacheDir(cacheDir), host.WithLogger(opts.Logger)); err != nil {
		return nil, nil, nil, nil, err
	}
	closers = append(closers, func() { rt.Close(bg) })
	t0 = time.Now()
	deadlineMod, err = rt.Load(ctx, m.Name, m.WASM)
	rep.CompileWarm = time.Since(t0)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	dm := deadlineMod // the closers keep the modules: an error return sets the results to nil
	closers = append(closers, func() { dm.Close(bg) })
	if trustedMod, err = rt.Load(ctx, m.Name, m.WASM, host.WithTrusted(true)); err != nil {
		return nil, nil, nil, nil, err
	}
	tm := trustedMod
	closers = append(closers, func() { tm.Close(bg) })

	if rep.Instantiate, err = measureInstantiate(ctx, deadlineMod, opts.Events[0], opts.InstantiateRuns); err != nil {
		return nil, nil, nil, nil, err
	}
	rep.MemBatch = min(slices.Max(opts.BatchSizes), len(opts.Events))
	if rep.GuestMemory, rep.HeapDelta, err = measureMemory(ctx, deadlineMod, opts.Events[:rep.MemBatch]); err != nil {
		return nil, nil, nil, nil, err
	}
	return rep, deadlineMod, trustedMod, closeStarted, nil
}

// measureThroughput runs passes of events in batches of size through a fresh handler of each
// module, interleaved a batch at a time (see measureInterleaved), and returns the modules'
// rates in order.
func measureThroughput(ctx context.Context, mods []*host.Module, events []source.Event, size int, d time.Duration) ([]Rate, error) {
	runtime.GC()
	members := make([]member, len(mods))
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
		members[i] = member{
			steps: (len(events) + size - 1) / size,
			step:  func(b int) error { return handle(events[b*size : min((b+1)*size, len(events))]) },
		}
	}
	return measureInterleaved(ctx, d, len(events), members...)
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
