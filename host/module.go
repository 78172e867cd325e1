package host

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/projhost/projhost/internal/looprewrite"
	"github.com/projhost/projhost/internal/wasmbounds"
	"github.com/projhost/projhost/wasmabi"
)

// DefaultBatchDeadline is how long one handler call (one batch, or _initialize) may run before
// the instance is closed with ErrDeadline, unless the module is trusted.
const DefaultBatchDeadline = 5 * time.Second

// Module is a compiled, validated handler module. It is safe for concurrent use; each shard gets
// its own Handler from NewHandler.
type Module struct {
	rt       *Runtime
	name     string
	cfg      moduleConfig
	wrt      wazero.Runtime
	compiled wazero.CompiledModule
	hasInit  bool
	logger   *slog.Logger
	// interruptible: the module was instrumented (instrument.go) and runs on the runtime without
	// WithCloseOnContextDone; its deadline and the caller's context are enforced through the
	// interruptExport global.
	// hasStart: its start section was turned into the startExport function.
	interruptible bool
	hasStart      bool
	// native makes the guests of a native module (NewNativeModule), which has no runtime and
	// no compiled module; nil for WebAssembly modules.
	native func(shardID string) NativeGuest

	mu     sync.Mutex
	closed bool
}

// ModuleOption configures Load. Options are immutable values.
type ModuleOption func(*moduleConfig)

type moduleConfig struct {
	trusted  bool
	deadline time.Duration
}

// WithTrusted runs the module without a batch deadline: a handler call may run as long as it
// takes. It does not make the module uninterruptible: trusted modules are instrumented like the
// others (internal/looprewrite), so a trusted guest stuck in a loop still leaves native code
// regularly (the Go GC's stop-the-world, and with it every other shard, signal handling and
// lease renewal, keeps working) and stops with the context passed to Handle (a graceful stop,
// a lost shard), like an untrusted one; only the timer is gone. Trust is rarely worth it: the
// deadline's timer costs one timer reset per batch. A module the host cannot instrument runs
// under wazero's WithCloseOnContextDone (5-8x slower guest code), trusted or not. Default false.
func WithTrusted(trusted bool) ModuleOption {
	return func(c *moduleConfig) { c.trusted = trusted }
}

// WithBatchDeadline sets how long one handler call may run (default DefaultBatchDeadline; values
// <= 0 mean the default). Ignored for trusted modules.
func WithBatchDeadline(d time.Duration) ModuleOption {
	return func(c *moduleConfig) { c.deadline = d }
}

// Name returns the module name given to Load.
func (m *Module) Name() string { return m.name }

// Trusted reports whether the module runs without a batch deadline (WithTrusted).
func (m *Module) Trusted() bool { return m.cfg.trusted }

// Load validates wasm as an ABI v1 handler (wasmabi/ABI.md §1) and compiles it (once; the
// compilation cache makes a reload of the same bytes fast). name labels logs and errors.
//
// Checks, each failing with an error wrapping ErrInvalidModule that names the problem: the bytes
// are a WebAssembly binary; it declares no count or length past the bytes that follow and keeps
// to internal/wasmbounds' limits on locals (reported as "does not compile"); it compiles and its
// declared minimum memory fits the runtime's memory cap; it exports projhost_abi_v1 (not another
// version), memory, projhost_alloc (i32)->i32 and projhost_handle (i32,i32)->i64, optionally
// _initialize ()->(), and not _start; it imports only functions of projhost (log, fail, read),
// wasi_snapshot_preview1 and env.abort, with the signatures the host provides, and no memory.
func (r *Runtime) Load(ctx context.Context, name string, wasm []byte, opts ...ModuleOption) (*Module, error) {
	cfg := moduleConfig{deadline: DefaultBatchDeadline}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.deadline <= 0 {
		cfg.deadline = DefaultBatchDeadline
	}
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	if len(wasm) < 8 || !bytes.Equal(wasm[:4], []byte("\x00asm")) {
		return nil, invalidModule(name, "not a WebAssembly module (no \\0asm magic at the start; build the handler for wasm32)")
	}
	if v := wasm[4:8]; !bytes.Equal(v, []byte{1, 0, 0, 0}) {
		return nil, invalidModule(name, "WebAssembly binary format version %d not supported (want 1; components are not supported)", uint32(v[0])|uint32(v[1])<<8|uint32(v[2])<<16|uint32(v[3])<<24)
	}
	if err := wasmbounds.Check(wasm); err != nil { // before wazero, which could run out of memory
		return nil, invalidModule(name, "does not compile: %s", err)
	}
	// Prefer the instrumented module on the runtime without WithCloseOnContextDone (see
	// instrument.go), trusted or not; fall back to wazero's mechanism when it cannot be
	// instrumented.
	wrt := r.fallback
	var compiled wazero.CompiledModule
	var err error
	interruptible, hasStart := false, false
	if iw, start, ierr := looprewrite.Rewrite(wasm); ierr == nil {
		if c, cerr := r.instrumented.CompileModule(ctx, iw); cerr == nil {
			compiled, wrt, interruptible, hasStart = c, r.instrumented, true, start
		}
	}
	if compiled == nil {
		compiled, err = wrt.CompileModule(ctx, wasm)
	}
	if err != nil {
		msg := oneLine(err.Error())
		if strings.Contains(msg, "over limit of") {
			return nil, invalidModule(name, "memory exceeds the host's cap: %s; shrink the module's initial/maximum memory or raise the memory limit", msg)
		}
		return nil, invalidModule(name, "does not compile: %s", msg)
	}
	hasInit, err := validateShape(wrt, compiled)
	if err != nil {
		compiled.Close(ctx)
		return nil, invalidModule(name, "%s", err)
	}
	return &Module{
		rt: r, name: name, cfg: cfg, wrt: wrt, compiled: compiled, hasInit: hasInit,
		interruptible: interruptible, hasStart: hasStart,
		logger: r.cfg.logger.With("module", name),
	}, nil
}

// isClosed reports whether the module or its runtime was closed.
func (m *Module) isClosed() bool {
	m.mu.Lock()
	closed := m.closed
	m.mu.Unlock()
	if m.rt == nil {
		return closed
	}
	m.rt.mu.Lock()
	defer m.rt.mu.Unlock()
	return closed || m.rt.closed
}

// Close releases the compiled module. Close every Handler of the module first.
func (m *Module) Close(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	if m.compiled == nil {
		return nil
	}
	return m.compiled.Close(ctx)
}

type signature struct{ params, results []api.ValueType }

func (s signature) String() string {
	f := func(ts []api.ValueType) string {
		names := make([]string, len(ts))
		for i, t := range ts {
			names[i] = api.ValueTypeName(t)
		}
		return "(" + strings.Join(names, ",") + ")"
	}
	return f(s.params) + " -> " + f(s.results)
}

func sigOf(d api.FunctionDefinition) signature { return signature{d.ParamTypes(), d.ResultTypes()} }

func (s signature) equal(o signature) bool {
	return bytes.Equal(s.params, o.params) && bytes.Equal(s.results, o.results)
}

var requiredExports = []struct {
	name string
	sig  signature
}{
	{wasmabi.ExportAlloc, signature{[]api.ValueType{api.ValueTypeI32}, []api.ValueType{api.ValueTypeI32}}},
	{wasmabi.ExportHandle, signature{[]api.ValueType{api.ValueTypeI32, api.ValueTypeI32}, []api.ValueType{api.ValueTypeI64}}},
}

// validateShape checks the exports and imports of a compiled module against ABI v1 §1. It returns
// whether the module exports _initialize.
func validateShape(wrt wazero.Runtime, c wazero.CompiledModule) (hasInit bool, err error) {
	exports := c.ExportedFunctions()
	if _, ok := exports["_start"]; ok {
		return false, fmt.Errorf("exports _start: it is a WASI command, not a reactor; rebuild it as a library (Go: -buildmode=c-shared with //go:wasmexport)")
	}
	// ABI marker: exactly projhost_abi_v1 (ABI.md §1: a module exporting the marker of another
	// version is refused, with it or without v1's).
	var other []string
	for name := range exports {
		if v, ok := strings.CutPrefix(name, wasmabi.MarkerPrefix); ok && name != wasmabi.ExportMarker {
			if _, err := strconv.ParseUint(v, 10, 32); err == nil {
				other = append(other, v)
			}
		}
	}
	sort.Strings(other)
	d, hasV1 := exports[wasmabi.ExportMarker]
	switch {
	case len(other) > 0 && hasV1:
		return false, fmt.Errorf("exports the markers of ABI v%d and of ABI %s: a module declares one ABI version; rebuild the handler with one projhost SDK", wasmabi.Version, strings.Join(other, ", "))
	case len(other) > 0:
		return false, fmt.Errorf("ABI version %s not supported (host speaks v%d); rebuild the handler with a projhost SDK for ABI v%d", strings.Join(other, ", "), wasmabi.Version, wasmabi.Version)
	case !hasV1:
		return false, fmt.Errorf("missing export %s: not a projhost handler (build it with the projhost Go or AssemblyScript SDK)", wasmabi.ExportMarker)
	}
	if s := sigOf(d); !s.equal(signature{}) {
		return false, fmt.Errorf("export %s has signature %s, want () -> ()", wasmabi.ExportMarker, s)
	}
	if _, ok := c.ExportedMemories()[wasmabi.ExportMemory]; !ok {
		return false, fmt.Errorf("missing export %s (the guest's linear memory must be exported as %q)", wasmabi.ExportMemory, wasmabi.ExportMemory)
	}
	for _, want := range requiredExports {
		d, ok := exports[want.name]
		if !ok {
			return false, fmt.Errorf("missing export %s %s", want.name, want.sig)
		}
		if s := sigOf(d); !s.equal(want.sig) {
			return false, fmt.Errorf("export %s has signature %s, want %s", want.name, s, want.sig)
		}
	}
	if d, ok := exports[wasmabi.ExportInitialize]; ok {
		if s := sigOf(d); !s.equal(signature{}) {
			return false, fmt.Errorf("export %s has signature %s, want () -> ()", wasmabi.ExportInitialize, s)
		}
		hasInit = true
	}
	for _, m := range c.ImportedMemories() {
		mod, name, _ := m.Import()
		return false, fmt.Errorf("unknown import %s.%s: a handler must define and export its own memory, not import it", mod, name)
	}
	for _, d := range c.ImportedFunctions() {
		mod, name, _ := d.Import()
		if !hostImportAllowed(mod) {
			return false, fmt.Errorf("unknown import %s.%s (a handler may import only projhost.{log,fail,read,field}, wasi_snapshot_preview1.* and env.abort)", mod, name)
		}
		hm := wrt.Module(mod)
		var have api.FunctionDefinition
		if hm != nil {
			have = hm.ExportedFunctionDefinitions()[name]
		}
		if have == nil {
			return false, fmt.Errorf("unknown import %s.%s (the host provides no such function in module %s)", mod, name, mod)
		}
		if s, want := sigOf(d), sigOf(have); !s.equal(want) {
			return false, fmt.Errorf("import %s.%s has signature %s, the host provides %s", mod, name, s, want)
		}
	}
	return hasInit, nil
}

// oneLine returns the first line of s.
func oneLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
