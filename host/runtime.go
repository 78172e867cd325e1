// Package host runs projection handlers compiled to WebAssembly (ABI v1, wasmabi/ABI.md) with
// wazero.
//
// A Runtime compiles modules (Load) and owns the sandbox: no preopened directories, no
// environment, no arguments, no network, wazero's fake clock and deterministic random source
// (replays are deterministic), a linear-memory cap, and a per-batch deadline for untrusted
// modules (DESIGN §2). A Module is a compiled handler; each shard gets its own Handler, which
// owns at most one guest instance at a time and calls it once per batch.
//
//	rt, _ := host.NewRuntime(ctx)
//	defer rt.Close(ctx)
//	mod, err := rt.Load(ctx, "flightdelays", wasm) // errors wrap ErrInvalidModule
//	h := mod.NewHandler("shardId-000000000000")
//	muts, err := h.Handle(ctx, events, reader)    // errors: *HandlerError or infrastructure
//
// Guest stdout and stderr become slog records (info and warn, one per line) with the module and
// shard attributes; the projhost.log import logs at the level the guest passes.
package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/projhost/projhost/wasmabi"
)

// DefaultMemoryLimitPages is the default cap on a guest's linear memory: 16384 pages of 64 KiB =
// 1 GiB per instance. A Go guest needs at least ~64 pages to start; flightdelays-go runs in ~5 MiB.
const DefaultMemoryLimitPages = 16384

// Runtime compiles and runs handler modules. It owns two wazero runtimes sharing one compilation
// cache: one without WithCloseOnContextDone for modules instrumented with the host's own cheap
// interrupt check (instrument.go), trusted or not, and one with it as the fallback for modules
// the host cannot instrument (it slows guest code 5-8x). A Runtime is safe for concurrent use.
type Runtime struct {
	cfg          runtimeConfig
	cache        wazero.CompilationCache // nil when disabled
	fallback     wazero.Runtime
	instrumented wazero.Runtime

	mu     sync.Mutex
	closed bool
}

// RuntimeOption configures NewRuntime. Options are immutable values.
type RuntimeOption func(*runtimeConfig)

type runtimeConfig struct {
	cacheDir    string
	cacheDirSet bool
	memPages    uint32
	logger      *slog.Logger
}

// WithCacheDir sets the directory of wazero's compilation cache, which makes compiling a module
// already seen (by content) on this machine ~20-40x faster (a Go handler: ~4 s cold, ~150 ms
// warm). Default: os.UserCacheDir()/projhost/wazero, or no cache when there is no user cache
// directory. "" disables the cache.
func WithCacheDir(dir string) RuntimeOption {
	return func(c *runtimeConfig) { c.cacheDir, c.cacheDirSet = dir, true }
}

// WithMemoryLimitPages caps each guest instance's linear memory at pages × 64 KiB (1..65536).
// Default DefaultMemoryLimitPages (1 GiB). A module whose declared minimum exceeds the cap is
// rejected by Load; memory.grow past it fails inside the guest (usually ending in a trap).
func WithMemoryLimitPages(pages uint32) RuntimeOption {
	return func(c *runtimeConfig) { c.memPages = pages }
}

// WithLogger sets the logger for guest output and host events. Default slog.Default().
func WithLogger(l *slog.Logger) RuntimeOption {
	return func(c *runtimeConfig) { c.logger = l }
}

// NewRuntime creates a Runtime. Errors: an invalid memory limit, or a cache directory given with
// WithCacheDir that cannot be created.
func NewRuntime(ctx context.Context, opts ...RuntimeOption) (*Runtime, error) {
	cfg := runtimeConfig{memPages: DefaultMemoryLimitPages}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.logger == nil {
		cfg.logger = slog.Default()
	}
	if cfg.memPages == 0 || cfg.memPages > 65536 {
		return nil, fmt.Errorf("host: memory limit of %d pages is not in 1..65536 (64 KiB pages)", cfg.memPages)
	}
	r := &Runtime{cfg: cfg}
	if !cfg.cacheDirSet {
		if base, err := os.UserCacheDir(); err == nil {
			dir := filepath.Join(base, "projhost", "wazero")
			if c, err := wazero.NewCompilationCacheWithDir(dir); err == nil {
				r.cache = c
			} else {
				cfg.logger.Warn("wazero compilation cache disabled", "dir", dir, "err", err)
			}
		}
	} else if cfg.cacheDir != "" {
		c, err := wazero.NewCompilationCacheWithDir(cfg.cacheDir)
		if err != nil {
			return nil, fmt.Errorf("host: compilation cache dir %s: %w", cfg.cacheDir, err)
		}
		r.cache = c
	}
	var err error
	if r.fallback, err = r.newWazero(ctx, true); err != nil {
		r.Close(ctx)
		return nil, err
	}
	if r.instrumented, err = r.newWazero(ctx, false); err != nil {
		r.Close(ctx)
		return nil, err
	}
	return r, nil
}

func (r *Runtime) newWazero(ctx context.Context, closeOnDone bool) (wazero.Runtime, error) {
	c := wazero.NewRuntimeConfig().
		WithCloseOnContextDone(closeOnDone).
		WithMemoryLimitPages(r.cfg.memPages)
	if r.cache != nil {
		c = c.WithCompilationCache(r.cache)
	}
	rt := wazero.NewRuntimeWithConfig(ctx, c)
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		rt.Close(ctx)
		return nil, fmt.Errorf("host: instantiating WASI: %w", err)
	}
	if err := instantiateHostModules(ctx, rt); err != nil {
		rt.Close(ctx)
		return nil, err
	}
	return rt, nil
}

// MemoryLimitPages returns the cap on each instance's linear memory in 64 KiB pages.
func (r *Runtime) MemoryLimitPages() uint32 { return r.cfg.memPages }

// Close closes every module and instance of the runtime and the compilation cache handle (the
// cache directory stays). Further calls return nil.
func (r *Runtime) Close(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	var errs []error
	for _, rt := range []wazero.Runtime{r.fallback, r.instrumented} {
		if rt != nil {
			errs = append(errs, rt.Close(ctx))
		}
	}
	if r.cache != nil {
		errs = append(errs, r.cache.Close(ctx))
	}
	return errors.Join(errs...)
}

// hostImportAllowed reports whether imports from module name are served by the runtime.
func hostImportAllowed(module string) bool {
	switch module {
	case wasmabi.ImportModule, wasi_snapshot_preview1.ModuleName, envModule:
		return true
	}
	return false
}
