package host

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"unsafe"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/sys"

	"github.com/projhost/projhost/event"
	"github.com/projhost/projhost/wasmabi"
)

// DocReader serves the projhost.read import: the current document of collection/key as the host
// will have it once everything accepted so far is committed (ABI.md §5: the stored state overlaid
// with applied-but-uncommitted mutations). The Handler calls it only from inside Handle, on the
// Handle caller's goroutine. key is the guest's own bytes (a valid document key), valid only
// during the call: an implementation that keeps it must copy it (string(key) does; a map
// lookup m[string(key)] does not allocate). The returned doc is only read, never kept past the
// call.
type DocReader interface {
	ReadDoc(ctx context.Context, collection string, key []byte) (doc []byte, found bool, err error)
}

// MemoryDocReader is a DocReader that answers some reads from memory at once (a cache, pending
// mutations). The Handler asks it first, and calls ReadDoc, with the batch deadline's clock
// stopped, only for the reads it cannot answer: a read from memory takes too little time to be
// taken out of the guest's time (stopping the clock costs more than such a read).
type MemoryDocReader interface {
	DocReader
	// ReadDocFromMemory is ReadDoc answered from memory alone, without blocking: ok is false
	// when the answer needs more (a store read); doc and found are then meaningless. key is
	// valid only during the call, as for ReadDoc.
	ReadDocFromMemory(collection string, key []byte) (doc []byte, found, ok bool)
}

// Handler runs one shard's batches through one guest instance at a time. It is safe for
// concurrent use, but calls are serialized: the guest is never entered concurrently. The instance
// is created lazily by the first Handle (calling _initialize once), kept across batches, and
// discarded after any trap, exit, deadline or bad output; the next Handle creates a fresh one.
type Handler struct {
	mod    *Module
	shard  string
	logger *slog.Logger
	stdout *lineWriter
	stderr *lineWriter
	// logLimit rate-limits the guest's log lines (GuestLogRate); shared by stdout, stderr and
	// projhost.log, kept across instances.
	logLimit *logLimiter

	mu        sync.Mutex
	closed    bool
	inst      api.Module
	mem       api.Memory
	alloc     api.Function
	handle    api.Function
	stack     []uint64
	events    []wasmabi.Event // reused conversion buffer; aliases the caller's events
	call      callState
	instances int
	intr      interrupter // deadline and context of instrumented modules
	colls     []string    // collection names read so far (collName)
	// lm is the current instance's memory when the host allocator backs it (memory.go); pinned
	// is the memory the current Handle call pinned, unpinned when the call returns.
	lm        *linearMemory
	pinned    *linearMemory
	allocator experimental.MemoryAllocator
	// native is the guest of a native module (native.go), nbatch its batch buffer, imports
	// its imports.
	native  NativeGuest
	nbatch  []byte
	imports NativeImports
	// fields are the names the current instance (or native guest) registered with the field
	// import (ABI.md §2.1), in slot order; a new instance starts with none. fieldSpans and
	// fieldIndex are the per-batch buffers of the index.
	fields     []string
	fieldSpans []event.FieldSpan
	fieldIndex []byte
}

// callState is the state of the current projhost_handle call, read by the host functions.
type callState struct {
	inHandle  bool
	reader    DocReader
	memory    MemoryDocReader // reader, when it is one
	ctx       context.Context // Handle's, for the reads of a native guest
	failed    bool
	failMsg   string
	lastValid bool
	lastFound bool
	lastColl  string
	lastKey   []byte // a copy; its buffer is kept across calls
	lastDoc   []byte
}

// newCallState is the state of a call reading from reader, reusing the buffer of lastKey.
func newCallState(reader DocReader, lastKey []byte) callState {
	m, _ := reader.(MemoryDocReader)
	return callState{inHandle: true, reader: reader, memory: m, lastKey: lastKey[:0]}
}

// NewHandler returns the handler of shardID (at most wasmabi.MaxShardIDLen bytes). Close it when
// the shard is released.
func (m *Module) NewHandler(shardID string) *Handler {
	lg := m.logger.With("shard", shardID)
	lim := newLogLimiter(lg)
	h := &Handler{
		mod:      m,
		shard:    shardID,
		logger:   lg,
		stdout:   &lineWriter{logger: lg, limit: lim, level: slog.LevelInfo, stream: "stdout"},
		stderr:   &lineWriter{logger: lg, limit: lim, level: slog.LevelWarn, stream: "stderr"},
		logLimit: lim,
		stack:    make([]uint64, 2),
	}
	if hostMemory != nil {
		h.allocator = experimental.MemoryAllocatorFunc(h.allocate)
	}
	return h
}

// allocate backs the memory of the instance being created (memory.go), pinned for the Handle
// call creating it. When the address space cannot be reserved it falls back to Go memory.
func (h *Handler) allocate(_, max uint64) experimental.LinearMemory {
	lm, err := newLinearMemory(hostMemory, max, &h.intr)
	if err != nil {
		h.logger.Warn("cannot reserve the guest's memory; using Go memory instead (growth copies it, and the GC frees it late)",
			"bytes", max, "err", err)
		return &heapMemory{max: max}
	}
	h.lm, h.pinned = lm, lm
	return lm
}

// errGrowRefused: a guest call returned after the host refused it memory because the call was
// interrupted (memory.go); it is handled as the interruption.
var errGrowRefused = errors.New("host: memory growth refused after the deadline")

// callGuest calls f with stack. A call that returned although the host refused it a memory growth
// because it was interrupted fails (errGrowRefused): it went on with a memory.grow failure a
// timely call would not have seen.
func (h *Handler) callGuest(ctx context.Context, f api.Function, stack []uint64) error {
	err := f.CallWithStack(ctx, stack)
	if err == nil && h.lm != nil && h.lm.takeRefused() {
		return errGrowRefused
	}
	return err
}

// unpin ends the pin of the current call (see allocate and Handle).
func (h *Handler) unpin() {
	if h.pinned != nil {
		h.pinned.unpin()
		h.pinned = nil
	}
}

// LogDropped returns how many guest log lines the handler has dropped so far (projhost.log
// messages and WASI stdout/stderr lines past the rate limit, GuestLogRate), across instances.
// Safe for concurrent use; it waits for a running Handle.
func (h *Handler) LogDropped() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.logLimit.dropped
}

// Instances returns how many guest instances the handler has created so far (1 + the number of
// replacements after poisoning, once running).
func (h *Handler) Instances() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.instances
}

// MemorySize returns the size in bytes of the current instance's linear memory (a multiple of
// 64 KiB; at most the runtime's memory limit), 0 without an instance.
func (h *Handler) MemorySize() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.mem == nil {
		return 0
	}
	return uint64(h.mem.Size())
}

// Close closes the current instance. Handle returns ErrClosed afterwards.
func (h *Handler) Close(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	err := h.discard(ctx)
	h.logLimit.report(true)
	return err
}

func (h *Handler) discard(ctx context.Context) error {
	h.stdout.flush()
	h.stderr.flush()
	h.native = nil
	h.fields = h.fields[:0]
	if h.inst == nil {
		return nil
	}
	h.intr.attach(nil)
	err := h.inst.Close(ctx) // frees the memory (at once, or when the pinning call returns)
	h.inst, h.mem, h.alloc, h.handle, h.lm = nil, nil, nil, nil, nil
	var ee *sys.ExitError
	if errors.As(err, &ee) {
		err = nil // already closed by an exit or the deadline
	}
	return err
}

func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// Handle runs one batch: events (in sequence order, all of the handler's shard, at least one)
// are encoded into the guest (projhost_alloc, then projhost_handle), reads are served from
// reader, and the output is decoded and validated (ABI.md §4; documents must be JSON objects).
// It returns the mutations in order, copied out of the guest (Doc nil for a delete); nil when
// there are none.
//
// Errors: a *HandlerError (errors.Is ErrHandlerFailed, ErrTrap, ErrExit, ErrDeadline or
// ErrBadOutput) when the guest is at fault; otherwise an infrastructure error: reader's error
// wrapped, the caller's context error, an event exceeding an ABI limit (wasmabi.ErrMalformed), an
// event of another shard, or ErrClosed.
func (h *Handler) Handle(ctx context.Context, events []event.Event, reader DocReader) ([]event.Mutation, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, ErrClosed
	}
	if len(events) == 0 {
		return nil, nil
	}
	if reader == nil {
		return nil, errors.New("host: Handle needs a DocReader")
	}
	h.events = h.events[:0]
	for i := range events {
		e := &events[i]
		if e.ShardID != h.shard {
			return nil, fmt.Errorf("host: event %d (seq %s) is of shard %q, the handler's shard is %q", i, e.Seq, e.ShardID, h.shard)
		}
		ae := wasmabi.Event{Seq: bytesOf(e.Seq), PartitionKey: bytesOf(e.PartitionKey), ArrivalMs: e.ArrivalMs, Data: e.Data}
		if err := wasmabi.CheckEvent(&ae); err != nil {
			return nil, fmt.Errorf("host: shard %s event seq %s cannot be passed to a handler: %w", h.shard, e.Seq, err)
		}
		h.events = append(h.events, ae)
	}
	nf := h.indexEvents()
	size := wasmabi.IndexedBatchSize(h.shard, h.events, nf)
	if size > 1<<31-1 {
		return nil, fmt.Errorf("host: batch of %d bytes is too large for a wasm32 guest; use smaller batches", size)
	}
	first, last := events[0].Seq, events[len(events)-1].Seq
	if h.mod.native != nil {
		if h.mod.isClosed() {
			return nil, fmt.Errorf("host: module %q shard %s: %w (Close the handlers before their module)", h.mod.name, h.shard, ErrClosed)
		}
		return h.handleNative(ctx, reader, first, last, nf)
	}

	callCtx := context.WithValue(ctx, handlerKey{}, h)
	switch {
	case h.mod.interruptible:
		deadline := h.mod.cfg.deadline
		if h.mod.cfg.trusted {
			deadline = 0 // the caller's context only
		}
		h.intr.arm(ctx, deadline)
		defer h.intr.disarm()
	case h.mod.cfg.trusted:
		// wazero's WithCloseOnContextDone stops the guest when ctx ends.
	default:
		var cancel context.CancelFunc
		callCtx, cancel = context.WithTimeout(callCtx, h.mod.cfg.deadline)
		defer cancel()
	}
	// The guest's memory stays mapped until the call returns, even if the instance is closed
	// under it (Runtime.Close): the host still reads and writes it.
	defer h.unpin()
	if h.inst != nil && h.lm != nil {
		h.pinned = h.lm
		if !h.pinned.pin() {
			h.discard(ctx)
			return nil, fmt.Errorf("host: module %q shard %s: the instance was closed: %w (Close the handlers before their module and runtime)", h.mod.name, h.shard, ErrClosed)
		}
	}
	if h.inst == nil {
		if err := h.instantiate(ctx, callCtx, first, last); err != nil {
			return nil, err
		}
	}
	h.stdout.resetCapture()
	h.stderr.resetCapture()

	h.stack[0] = uint64(size)
	if err := h.callGuest(callCtx, h.alloc, h.stack); err != nil {
		return nil, h.callFailed(ctx, err, wasmabi.ExportAlloc, first, last)
	}
	ptr := api.DecodeU32(h.stack[0])
	if ptr == 0 {
		return nil, h.poison(ctx, ErrTrap, first, last, fmt.Sprintf("%s(%d) returned 0 (out of memory%s)", wasmabi.ExportAlloc, size, h.memoryHint()))
	}
	view, ok := h.mem.Read(ptr, uint32(size))
	if !ok {
		return nil, h.poison(ctx, ErrBadOutput, first, last, fmt.Sprintf("%s(%d) returned %d, a buffer outside guest memory (%d bytes)", wasmabi.ExportAlloc, size, ptr, h.mem.Size()))
	}
	enc, err := wasmabi.AppendIndexedBatch(view[:0:size], h.shard, h.events, nf)
	if err != nil {
		return nil, fmt.Errorf("host: encoding batch for shard %s: %w", h.shard, err)
	}
	if len(enc) != size || &enc[0] != &view[0] {
		panic("host: BUG: batch encoding size differs from wasmabi.IndexedBatchSize")
	}

	h.call = newCallState(reader, h.call.lastKey)
	h.stack[0], h.stack[1] = uint64(ptr), uint64(size)
	err = h.callGuest(callCtx, h.handle, h.stack)
	failed, failMsg := h.call.failed, h.call.failMsg
	h.call = callState{lastKey: h.call.lastKey[:0]}
	h.logLimit.report(false)
	if err != nil {
		return nil, h.callFailed(ctx, err, wasmabi.ExportHandle, first, last)
	}
	if failed {
		return nil, &HandlerError{Module: h.mod.name, Shard: h.shard, FirstSeq: first, LastSeq: last, Kind: ErrHandlerFailed,
			Message: failMsg + " (the guest called projhost.fail; the batch's output was discarded, the instance kept)"}
	}
	outPtr, outLen := uint32(h.stack[0]>>32), uint32(h.stack[0])
	if outLen == 0 {
		return nil, nil
	}
	out, ok := h.mem.Read(outPtr, outLen)
	if !ok {
		return nil, h.poison(ctx, ErrBadOutput, first, last, fmt.Sprintf("output range %d..%d is outside guest memory (%d bytes); the handler must return (ptr<<32 | len) of its output", outPtr, uint64(outPtr)+uint64(outLen), h.mem.Size()))
	}
	return h.output(ctx, out, first, last)
}

// output decodes and validates a guest's output into copied mutations (decodeMutations); a bad
// one discards the guest (ErrBadOutput).
func (h *Handler) output(ctx context.Context, out []byte, first, last string) ([]event.Mutation, error) {
	muts, err := decodeMutations(out)
	if err != nil {
		if _, ok := err.(*outputLimitError); ok {
			herr := h.poison(ctx, ErrBadOutput, first, last, err.Error()+
				"; nothing was applied (hand the handler smaller batches (run --batch-size) or have it write fewer or smaller documents per event)")
			herr.(*HandlerError).TooLarge = true
			return nil, herr
		}
		return nil, h.poison(ctx, ErrBadOutput, first, last, err.Error()+"; nothing was applied (guests should write output with a projhost SDK)")
	}
	return muts, nil
}

// indexEvents builds the field index of h.events (ABI.md §2.1) for the fields the guest
// registered, setting each event's Index (nil when its data is not indexed), and returns the
// number of fields it covers: 0 when the guest registered none (the batch then has no index).
func (h *Handler) indexEvents() int {
	nf := len(h.fields)
	if nf == 0 {
		return 0
	}
	if cap(h.fieldSpans) < nf {
		h.fieldSpans = make([]event.FieldSpan, wasmabi.MaxIndexedFields)
	}
	spans := h.fieldSpans[:nf]
	// Room for every event's entries up front, so that the Index slices handed out stay valid.
	if need := len(h.events) * nf * wasmabi.FieldEntryLen; cap(h.fieldIndex) < need {
		h.fieldIndex = make([]byte, 0, need)
	}
	h.fieldIndex = h.fieldIndex[:0]
	for i := range h.events {
		e := &h.events[i]
		if !event.IndexFields(e.Data, h.fields, spans) {
			e.Index = nil
			continue
		}
		start := len(h.fieldIndex)
		for _, sp := range spans {
			h.fieldIndex = wasmabi.AppendFieldEntry(h.fieldIndex, sp.Start, sp.End, sp.Escaped)
		}
		e.Index = h.fieldIndex[start:len(h.fieldIndex):len(h.fieldIndex)]
	}
	return nf
}

func (h *Handler) instantiate(ctx, callCtx context.Context, first, last string) error {
	if h.mod.isClosed() {
		return fmt.Errorf("host: module %q shard %s: %w (Close the handlers before their module and runtime)", h.mod.name, h.shard, ErrClosed)
	}
	cfg := wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions(). // _initialize is called below, under the deadline
		WithStdout(h.stdout).
		WithStderr(h.stderr)
	h.stdout.resetCapture()
	h.stderr.resetCapture()
	ictx := callCtx
	if h.allocator != nil {
		ictx = experimental.WithMemoryAllocator(callCtx, h.allocator)
	}
	inst, err := h.mod.wrt.InstantiateModule(ictx, h.mod.compiled, cfg)
	if err != nil {
		if h.lm != nil { // wazero does not free the memory of a failed instantiation
			h.lm.Free()
			h.lm = nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("host: module %q shard %s: instantiating: %w", h.mod.name, h.shard, ctx.Err())
		}
		return h.callFailed(ctx, err, "instantiating (start section)", first, last)
	}
	h.inst = inst
	if h.mod.interruptible {
		g, ok := inst.ExportedGlobal(interruptExport).(api.MutableGlobal)
		if !ok {
			h.discard(ctx)
			return fmt.Errorf("host: BUG: instrumented module %q lacks the mutable global %s", h.mod.name, interruptExport)
		}
		h.intr.attach(g)
		if h.mod.hasStart {
			if err := h.callGuest(callCtx, inst.ExportedFunction(startExport), nil); err != nil {
				return h.callFailed(ctx, err, "instantiating (start section)", first, last)
			}
		}
	}
	h.instances++
	h.mem = inst.ExportedMemory(wasmabi.ExportMemory)
	h.alloc = inst.ExportedFunction(wasmabi.ExportAlloc)
	h.handle = inst.ExportedFunction(wasmabi.ExportHandle)
	if h.mem == nil || h.alloc == nil || h.handle == nil {
		h.discard(ctx)
		return fmt.Errorf("%w %q: instance lacks memory, %s or %s", ErrInvalidModule, h.mod.name, wasmabi.ExportAlloc, wasmabi.ExportHandle)
	}
	if h.mod.hasInit {
		if err := h.callGuest(callCtx, inst.ExportedFunction(wasmabi.ExportInitialize), nil); err != nil {
			return h.callFailed(ctx, err, wasmabi.ExportInitialize, first, last)
		}
	}
	return nil
}

// callFailed classifies an error returned by a call into the guest and discards the instance.
func (h *Handler) callFailed(ctx context.Context, err error, fn, first, last string) error {
	if h.mod.isClosed() {
		h.discard(ctx)
		return fmt.Errorf("host: module %q shard %s: %s interrupted: %w", h.mod.name, h.shard, fn, ErrClosed)
	}
	if h.mod.interruptible && h.intr.disarm() {
		return h.deadlineFailed(ctx, fn, first, last)
	}
	var rp *readErrorPanic
	if errors.As(err, &rp) {
		h.discard(ctx)
		return fmt.Errorf("host: module %q shard %s: %w (the guest was interrupted and its instance discarded; retry the batch)", h.mod.name, h.shard, rp.err)
	}
	var ee *sys.ExitError
	if errors.As(err, &ee) {
		code := ee.ExitCode()
		if code == sys.ExitCodeDeadlineExceeded || code == sys.ExitCodeContextCanceled {
			return h.deadlineFailed(ctx, fn, first, last)
		}
		msg := fmt.Sprintf("%s: the guest called proc_exit(%d); the instance was discarded", fn, code)
		if s := h.stderr.summary(4); s != "" {
			msg += "; guest stderr: " + s
		}
		herr := h.poison(ctx, ErrExit, first, last, msg)
		herr.(*HandlerError).ExitCode = code
		return herr
	}
	var gt *guestTrap
	if errors.As(err, &gt) {
		return h.poison(ctx, ErrTrap, first, last, fmt.Sprintf("%s: %s; the instance was discarded", fn, gt.msg))
	}
	h.logger.Warn("guest trapped", "func", fn, "err", err.Error())
	msg := fmt.Sprintf("%s: %s%s; the instance was discarded (the full wasm stack trace is in the log)", fn, trapSummary(err.Error()), h.memoryHint())
	if s := h.stderr.summary(4); s != "" {
		// A Go reactor that panics prints the panic and calls runtime.abort (unreachable).
		if strings.Contains(err.Error(), "\t.runtime.abort(") && (strings.HasPrefix(s, "panic: ") || strings.HasPrefix(s, "fatal error: ")) {
			msg = fmt.Sprintf("%s: the Go guest panicked: %s%s; the instance was discarded", fn, s, h.memoryHint())
		} else {
			msg += "; guest stderr: " + s
		}
	} else if s := h.stdout.panicText(4); s != "" && strings.Contains(err.Error(), "wasm error: unreachable") && strings.Contains(err.Error(), ".runtime.") {
		// A TinyGo guest that panics prints the panic to stdout and traps (unreachable) in its
		// runtime's panic functions.
		msg = fmt.Sprintf("%s: the Go guest panicked: %s%s; the instance was discarded", fn, s, h.memoryHint())
	}
	return h.poison(ctx, ErrTrap, first, last, msg)
}

// deadlineFailed reports a call interrupted by the batch deadline or by the caller's context
// and discards the instance.
func (h *Handler) deadlineFailed(ctx context.Context, fn, first, last string) error {
	if cerr := ctx.Err(); cerr != nil {
		h.discard(ctx)
		return fmt.Errorf("host: module %q shard %s: %s interrupted: %w", h.mod.name, h.shard, fn, cerr)
	}
	return h.poison(ctx, ErrDeadline, first, last, fmt.Sprintf(
		"%s did not return within the %v batch deadline (a runaway loop?); the instance was discarded; fix the handler, use smaller batches or raise the deadline",
		fn, h.mod.cfg.deadline))
}

// memoryHint says so when the guest's memory is near the cap (a likely cause of the failure).
func (h *Handler) memoryHint() string {
	if h.mem == nil {
		return ""
	}
	limit := uint64(h.mod.rt.cfg.memPages)
	pages := uint64(h.mem.Size()) / 65536
	if pages*10 >= limit*9 { // within 10% of the cap: memory.grow probably failed
		return fmt.Sprintf("; guest memory is at %d of at most %d pages (%s): fix the handler's memory use or raise the memory limit", pages, limit, FormatMemoryLimit(uint32(limit)))
	}
	return ""
}

func (h *Handler) poison(ctx context.Context, kind error, first, last, msg string) error {
	herr := &HandlerError{Module: h.mod.name, Shard: h.shard, FirstSeq: first, LastSeq: last, Kind: kind, Message: msg, Poisoned: true}
	h.discard(ctx)
	return herr
}

// trapSummary turns wazero's error text ("wasm error: X\nwasm stack trace:\n\tframe\n...") into
// one line: the cause and the innermost frame.
func trapSummary(s string) string {
	lines := strings.Split(s, "\n")
	msg := strings.TrimSuffix(lines[0], " (recovered by wazero)")
	for i, l := range lines {
		if strings.HasPrefix(l, "wasm stack trace:") && i+1 < len(lines) {
			if f := strings.TrimSpace(lines[i+1]); f != "" {
				msg += " in " + f
			}
			break
		}
	}
	return msg
}

// outputLimitError is an output past wasmabi.MaxOutputMutations or MaxOutputBytes; it wraps
// wasmabi.ErrMalformed.
type outputLimitError struct{ msg string }

func (e *outputLimitError) Error() string { return wasmabi.ErrMalformed.Error() + ": " + e.msg }
func (e *outputLimitError) Unwrap() error { return wasmabi.ErrMalformed }

// decodeMutations validates a guest output (ABI.md §4) and copies it out: every string and
// document of the result points into one new buffer, so the result stays valid after the guest
// runs again. Errors wrap wasmabi.ErrMalformed.
func decodeMutations(out []byte) ([]event.Mutation, error) {
	if len(out) == 0 {
		return nil, nil
	}
	if len(out) > wasmabi.MaxOutputBytes {
		return nil, &outputLimitError{fmt.Sprintf("output of %d bytes exceeds the limit of %d bytes per handler call (wasmabi.MaxOutputBytes)",
			len(out), wasmabi.MaxOutputBytes)}
	}
	if len(out) >= 8 && binary.LittleEndian.Uint32(out) == wasmabi.Version {
		if n := binary.LittleEndian.Uint32(out[4:]); n > wasmabi.MaxOutputMutations {
			return nil, &outputLimitError{fmt.Sprintf("output of %d mutations exceeds the limit of %d per handler call (wasmabi.MaxOutputMutations)",
				n, wasmabi.MaxOutputMutations)}
		}
	}
	arena := bytes.Clone(out)
	n := 0
	if len(arena) >= 8 {
		// A put or delete needs at least 1+2+1+2+1+4 bytes: bound the allocation by the size.
		n = min(int(binary.LittleEndian.Uint32(arena[4:])), len(arena)/11)
	}
	muts := make([]event.Mutation, 0, n)
	err := wasmabi.DecodeOutput(arena, event.CheckDoc, func(m wasmabi.Mutation) error {
		rm := event.Mutation{
			Collection: unsafe.String(unsafe.SliceData(m.Collection), len(m.Collection)),
			Key:        unsafe.String(unsafe.SliceData(m.Key), len(m.Key)),
		}
		if m.Op == wasmabi.OpPut {
			rm.Doc = m.Doc[:len(m.Doc):len(m.Doc)]
		}
		muts = append(muts, rm)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(muts) == 0 {
		return nil, nil
	}
	return muts, nil
}
