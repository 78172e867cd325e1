# Example WebAssembly handlers: build/wasm/{flightdelays,count}-{go,as}.wasm, and the benchmark-only
# hand-tuned flightdelays they replaced (internal/bench/tuned/flightdelays and flightdelays-as):
# build/wasm/flightdelays-{go,as}-tuned.wasm.
# Included by the top-level Makefile (which defines GO and WASM_DIR and the deps target).
# Each module is rebuilt only when its sources, the guest SDKs or the toolchain pins change, and
# is written through a temporary file so a concurrent reader never sees half a module.

EXAMPLES := flightdelays count
WASM_MODULES := $(foreach e,$(EXAMPLES),$(WASM_DIR)/$(e)-go.wasm $(WASM_DIR)/$(e)-as.wasm) $(WASM_DIR)/flightdelays-as-tuned.wasm

# The Go SDK is its own module (sdk/go: the guest package and its internal ABI codec); the main
# module's go.mod replaces it with this checkout's copy.
GUEST_GO_SRC := go.mod go.sum sdk/go/go.mod $(filter-out %_test.go,$(wildcard sdk/go/guest/*.go sdk/go/internal/*/*.go))
# The AssemblyScript library, sdk/as: the examples import it as the package @projhost/sdk, which
# `npm ci` links into node_modules (the repository's package.json depends on it by path).
GUEST_AS_SRC := $(wildcard sdk/as/*.ts) sdk/as/package.json node_modules/.installed
GO_WASM_FLAGS := -buildmode=c-shared -trimpath -ldflags='-s -w'
ASC := node_modules/.bin/asc
ASC_FLAGS := --runtime minimal -O3

# The hand-tuned flightdelays handler (internal/bench/tuned/flightdelays): the baseline the
# documented example is compared against by `projhost bench compare` (make bench).
TUNED_GO_SRC := $(filter-out %_test.go,$(wildcard internal/bench/tuned/flightdelays/*.go internal/bench/tuned/flightdelays/go/*.go plugins/examples/flightdelays/*.go))
WASM_MODULES += $(WASM_DIR)/flightdelays-go-tuned.wasm

wasm: $(WASM_MODULES)
	@ls -l $(WASM_MODULES)

# $(1) = example name
define example_rules
$(WASM_DIR)/$(1)-go.wasm: $(GUEST_GO_SRC) $(filter-out %_test.go,$(wildcard plugins/examples/$(1)/*.go plugins/examples/$(1)/go/*.go))
	@mkdir -p $$(@D)
	GOOS=wasip1 GOARCH=wasm $(GO) build $(GO_WASM_FLAGS) -o $$@.tmp ./plugins/examples/$(1)/go
	@mv $$@.tmp $$@

$(WASM_DIR)/$(1)-as.wasm: $(GUEST_AS_SRC) $(wildcard plugins/examples/$(1)/as/*.ts)
	@mkdir -p $$(@D)
	$(ASC) plugins/examples/$(1)/as/index.ts -o $$@.tmp.wasm $(ASC_FLAGS)
	@mv $$@.tmp.wasm $$@
endef
$(foreach e,$(EXAMPLES),$(eval $(call example_rules,$(e))))

$(WASM_DIR)/flightdelays-go-tuned.wasm: $(GUEST_GO_SRC) $(TUNED_GO_SRC)
	@mkdir -p $(@D)
	GOOS=wasip1 GOARCH=wasm $(GO) build $(GO_WASM_FLAGS) -o $@.tmp ./internal/bench/tuned/flightdelays/go
	@mv $@.tmp $@

# Benchmark-only: flightdelays as it was tuned by hand before the library's State (issue 14).
$(WASM_DIR)/flightdelays-as-tuned.wasm: $(GUEST_AS_SRC) $(wildcard internal/bench/tuned/flightdelays-as/*.ts)
	@mkdir -p $(@D)
	$(ASC) internal/bench/tuned/flightdelays-as/index.ts -o $@.tmp.wasm $(ASC_FLAGS)
	@mv $@.tmp.wasm $@

# The lenient flightdelays build (quoted numbers accepted): the "fixed handler" of the dead-letter
# replay tests. Not part of `make wasm`.
$(WASM_DIR)/flightdelays-go-lenient.wasm: $(GUEST_GO_SRC) $(filter-out %_test.go,$(wildcard plugins/examples/flightdelays/*.go plugins/examples/flightdelays/go/*.go))
	@mkdir -p $(@D)
	GOOS=wasip1 GOARCH=wasm $(GO) build -tags lenient $(GO_WASM_FLAGS) -o $@.tmp ./plugins/examples/flightdelays/go
	@mv $@.tmp $@

# TinyGo builds of the Go examples: build/wasm/{flightdelays,count}-tinygo.wasm (issue 14). TinyGo
# 0.42.0 is installed into $(TINYGO_DIR) by tools/tinygo/install.sh (`make tinygo`; Debian
# packages and the Go module proxy, about a minute). Not part of `make wasm` yet.
# -buildmode=c-shared makes a WASI reactor (exports _initialize, no _start); -scheduler=none
# drops the asyncify pass (a handler has no goroutines that block); -no-debug drops DWARF; -opt=2
# optimizes for speed (wasip1's default is -opt=z, size): flightdelays 1.2-1.25x events/s at batch
# 100 and 1000 (two interleaved bench handler runs), for a module of 178 KB instead of 141 KB.
TINYGO_DIR := build/tinygo
TINYGO := $(TINYGO_DIR)/bin/tinygo
TINYGO_WASM_FLAGS := -target=wasip1 -buildmode=c-shared -no-debug -scheduler=none -opt=2
TINYGO_MODULES := $(foreach e,$(EXAMPLES),$(WASM_DIR)/$(e)-tinygo.wasm) $(WASM_DIR)/flightdelays-tinygo-tuned.wasm

.PHONY: tinygo wasm-tinygo
tinygo:
	tools/tinygo/install.sh $(TINYGO_DIR)

$(TINYGO):
	tools/tinygo/install.sh $(TINYGO_DIR)

wasm-tinygo: $(TINYGO_MODULES)
	@ls -l $(TINYGO_MODULES)

define example_tinygo_rules
$(WASM_DIR)/$(1)-tinygo.wasm: $(GUEST_GO_SRC) $(filter-out %_test.go,$(wildcard plugins/examples/$(1)/*.go plugins/examples/$(1)/go/*.go)) | $(TINYGO)
	@mkdir -p $$(@D)
	$(TINYGO) build $(TINYGO_WASM_FLAGS) -o $$@.tmp.wasm ./plugins/examples/$(1)/go
	@mv $$@.tmp.wasm $$@
endef
$(foreach e,$(EXAMPLES),$(eval $(call example_tinygo_rules,$(e))))

# The tuned flightdelays baseline built with TinyGo (bench compare).
$(WASM_DIR)/flightdelays-tinygo-tuned.wasm: $(GUEST_GO_SRC) $(TUNED_GO_SRC) | $(TINYGO)
	@mkdir -p $(@D)
	$(TINYGO) build $(TINYGO_WASM_FLAGS) -o $@.tmp.wasm ./internal/bench/tuned/flightdelays/go
	@mv $@.tmp.wasm $@

# Test-only builds of the AssemblyScript examples that export the runtime (__new & co.), so that
# plugins/examples TestASExamplesAllocateNothingPerEvent can count allocations (not part of
# `make wasm`).
$(WASM_DIR)/%-as-rt.wasm: $(GUEST_AS_SRC) plugins/examples/%/as/index.ts
	@mkdir -p $(@D)
	$(ASC) plugins/examples/$*/as/index.ts -o $@.tmp.wasm $(ASC_FLAGS) --exportRuntime
	@mv $@.tmp.wasm $@

# Test-only module of sdk/as/json_test.go (not an ABI handler; not part of `make wasm`).
$(WASM_DIR)/as-jsonprobe.wasm: $(GUEST_AS_SRC) sdk/as/testdata/jsonprobe.ts
	@mkdir -p $(@D)
	$(ASC) sdk/as/testdata/jsonprobe.ts -o $@.tmp.wasm $(ASC_FLAGS)
	@mv $@.tmp.wasm $@

# Test-only handler of sdk/as/gc_test.go, with the examples' runtime and with the two others (not
# part of `make wasm`).
$(WASM_DIR)/as-garbageprobe.wasm: $(GUEST_AS_SRC) sdk/as/testdata/garbageprobe.ts
	@mkdir -p $(@D)
	$(ASC) sdk/as/testdata/garbageprobe.ts -o $@.tmp.wasm $(ASC_FLAGS)
	@mv $@.tmp.wasm $@
$(WASM_DIR)/as-garbageprobe-%.wasm: $(GUEST_AS_SRC) sdk/as/testdata/garbageprobe.ts
	@mkdir -p $(@D)
	$(ASC) sdk/as/testdata/garbageprobe.ts -o $@.tmp.wasm -O3 --runtime $*
	@mv $@.tmp.wasm $@

# Test-only handler of sdk/as/state_test.go (not part of `make wasm`).
$(WASM_DIR)/as-stateprobe.wasm: $(GUEST_AS_SRC) sdk/as/testdata/stateprobe.ts
	@mkdir -p $(@D)
	$(ASC) sdk/as/testdata/stateprobe.ts -o $@.tmp.wasm $(ASC_FLAGS)
	@mv $@.tmp.wasm $@

# Test-only handler of sdk/as/index_test.go (not part of `make wasm`).
$(WASM_DIR)/as-indexprobe.wasm: $(GUEST_AS_SRC) sdk/as/testdata/indexprobe.ts
	@mkdir -p $(@D)
	$(ASC) sdk/as/testdata/indexprobe.ts -o $@.tmp.wasm $(ASC_FLAGS)
	@mv $@.tmp.wasm $@

# Test-only handler of sdk/as/keepgc_test.go (not part of `make wasm`).
$(WASM_DIR)/as-keepgcprobe.wasm: $(GUEST_AS_SRC) sdk/as/testdata/keepgcprobe.ts
	@mkdir -p $(@D)
	$(ASC) sdk/as/testdata/keepgcprobe.ts -o $@.tmp.wasm $(ASC_FLAGS)
	@mv $@.tmp.wasm $@
