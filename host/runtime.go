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
	"strconv"
	"strings"
	"sync"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/projhost/projhost/wasmabi"
)

// DefaultMemoryLimitPages is the default cap on a guest's linear memory: 2048 pages of 64 KiB =
// 128 MiB per instance (DefaultMemoryLimit). A worker runs one instance per shard it owns, so a
// hostile or leaking handler can make it hold shards × the cap (16 shards: 2 GiB); the example
// handlers need 1-9 MiB (flightdelays-go: 5 MiB with batches of 500, 8.5 MiB with one batch of
// 20,000 flights), and a full 4 MiB batch (projection.DefaultMaxBatchBytes) leaves a Go guest
// ~10x headroom. 128 MB is also the smallest AWS Lambda memory size. Why it is not 1 GiB any
// more: host/RATIONALE.md. A Go guest needs at least ~64 pages to start.
const DefaultMemoryLimitPages = 2048

// DefaultMemoryLimit is DefaultMemoryLimitPages in the form ParseMemoryLimit accepts.
const DefaultMemoryLimit = "128MiB"

// MaxMemoryLimitPages is the largest memory limit: 65536 pages = 4 GiB, all a wasm32 memory can
// address (WebAssembly 1.0, "Memory instances").
const MaxMemoryLimitPages = 65536

// ErrBadMemoryLimit: a memory limit that ParseMemoryLimit or NewRuntime refuses; the message
// says what is accepted.
var ErrBadMemoryLimit = errors.New("bad memory limit")

// checkMemoryLimitPages is the one rule for memory limits, shared by NewRuntime and
// ParseMemoryLimit (and so by the CLI's --memory-limit).
func checkMemoryLimitPages(pages uint64) error {
	if pages == 0 || pages > MaxMemoryLimitPages {
		return fmt.Errorf("%w: %d pages of 64 KiB is not in 1..%d (64KiB..4GiB)", ErrBadMemoryLimit, pages, MaxMemoryLimitPages)
	}
	return nil
}

// ParseMemoryLimit parses a memory limit such as "128MiB", "64KiB", "1GiB" or "1048576" (bytes)
// into 64 KiB pages for WithMemoryLimitPages. Units are binary and case-insensitive: B, KiB,
// MiB, GiB (K, M and G mean the same); decimal units (KB, MB, GB) are refused rather than
// rounded. The size must be a whole number of 64 KiB wasm pages (it is not rounded: a cap is
// exact), from 64KiB to 4GiB. Errors wrap ErrBadMemoryLimit.
func ParseMemoryLimit(s string) (pages uint32, err error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	shift := map[string]uint{"": 0, "b": 0, "k": 10, "kib": 10, "m": 20, "mib": 20, "g": 30, "gib": 30}
	sh, ok := shift[unit]
	if num == "" || !ok {
		if unit == "kb" || unit == "mb" || unit == "gb" {
			return 0, fmt.Errorf("%w %q: decimal units are not accepted; use KiB, MiB or GiB (e.g. 128MiB)", ErrBadMemoryLimit, s)
		}
		return 0, fmt.Errorf("%w %q: want a size such as 64MiB, 256MiB or 1GiB (binary units B, KiB, MiB, GiB)", ErrBadMemoryLimit, s)
	}
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil || n > MaxMemoryLimitPages<<16>>sh {
		return 0, fmt.Errorf("%w %q: at most 4GiB (all a wasm32 memory can address)", ErrBadMemoryLimit, s)
	}
	b := n << sh
	if b%65536 != 0 {
		if b < 65536 {
			return 0, fmt.Errorf("%w %q: %d bytes is less than one 64 KiB wasm page: at least 64KiB", ErrBadMemoryLimit, s, b)
		}
		return 0, fmt.Errorf("%w %q: %d bytes is not a whole number of 64 KiB wasm pages (e.g. %dKiB or %dKiB)", ErrBadMemoryLimit, s, b, b>>16<<6, (b>>16+1)<<6)
	}
	if err := checkMemoryLimitPages(b >> 16); err != nil {
		return 0, fmt.Errorf("%q: %w", s, err)
	}
	return uint32(b >> 16), nil
}

// FormatMemoryLimit returns pages as ParseMemoryLimit reads it back, in the largest binary unit
// that divides it ("128MiB", "1GiB", "192KiB").
func FormatMemoryLimit(pages uint32) string {
	b := uint64(pages) << 16
	switch {
	case b != 0 && b%(1<<30) == 0:
		return strconv.FormatUint(b>>30, 10) + "GiB"
	case b%(1<<20) == 0:
		return strconv.FormatUint(b>>20, 10) + "MiB"
	}
	return strconv.FormatUint(b>>10, 10) + "KiB"
}

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

// WithMemoryLimitPages caps each guest instance's linear memory at pages × 64 KiB
// (1..MaxMemoryLimitPages; ParseMemoryLimit reads sizes such as "256MiB"). Default
// DefaultMemoryLimitPages (128 MiB). A module whose declared minimum exceeds the cap is rejected
// by Load; memory.grow past it fails inside the guest (usually ending in a trap). On Linux an
// instance's memory costs address space for the whole cap but resident memory only for the
// pages the guest writes, and is returned to the OS when the instance is discarded (see
// RATIONALE.md), so a worker's resident memory stays below shards × cap plus the host's own.
func WithMemoryLimitPages(pages uint32) RuntimeOption {
	return func(c *runtimeConfig) { c.memPages = pages }
}

// WithLogger sets the logger for guest output and host events. Default slog.Default().
func WithLogger(l *slog.Logger) RuntimeOption {
	return func(c *runtimeConfig) { c.logger = l }
}

// NewRuntime creates a Runtime. Errors: a memory limit out of range (wrapping
// ErrBadMemoryLimit), or a cache directory given with WithCacheDir that cannot be created.
func NewRuntime(ctx context.Context, opts ...RuntimeOption) (*Runtime, error) {
	cfg := runtimeConfig{memPages: DefaultMemoryLimitPages}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.logger == nil {
		cfg.logger = slog.Default()
	}
	if err := checkMemoryLimitPages(uint64(cfg.memPages)); err != nil {
		return nil, fmt.Errorf("host: %w", err)
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
