# projhost — build, test, demo and benchmark targets. `make help` lists them.
SHELL := /bin/bash
GO ?= go
WASM_DIR := build/wasm
export GOFLAGS ?= -mod=mod

.PHONY: help build bootstrap build-ProjectionFunction wasm test test-sdk test-dynamo test-short bench bench-kinesis demo deps clean

help:
	@echo "make build   - build ./bin/projhost"
	@echo "make bootstrap - build ./bin/bootstrap, the Lambda function (linux, BOOTSTRAP_ARCH=arm64|amd64; cmd/bootstrap)"
	@echo "make wasm    - build the example WASM handlers into $(WASM_DIR)/"
	@echo "make tinygo  - install TinyGo 0.42.0 into build/tinygo (tools/tinygo/install.sh; Debian's LLVM 19)"
	@echo "make wasm-tinygo - the Go examples built with TinyGo: $(WASM_DIR)/{count,flightdelays}-tinygo.wasm"
	@echo "make test    - the full test suite (needs node/npm for AssemblyScript and wabt), then the"
	@echo "               DynamoDB suites again against Amazon's DynamoDB Local (needs Java 11+)"
	@echo "make test-sdk - only the Go SDK module's tests (sdk/go; make test runs them too)"
	@echo "make test-dynamo - only the DynamoDB suites (at \$$PROJHOST_DYNAMODB_ENDPOINT, else dynalite)"
	@echo "make bench   - benchmarks (see README)"
	@echo "make bench-kinesis - projhost's Kinesis source beside vmware-go-kcl-v2 and harlow/kinesis-consumer"
	@echo "               (bench/kinesispeers; kinesis-local + dynalite; 15-30 minutes; see README)"
	@echo "make demo    - flights demo on a local 4-shard journal"

deps: node_modules/.installed

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund
	touch $@

build:
	$(GO) build -o bin/projhost ./cmd/projhost

# The Lambda function's bootstrap (provided.al2023): static, no cgo, without aws-lambda-go's RPC
# mode. build-ProjectionFunction is AWS SAM's makefile build (BuildMethod: makefile): SAM sets
# ARTIFACTS_DIR and copies $(ARTIFACTS_DIR)/bootstrap. template.yaml's function is arm64, the default
# BOOTSTRAP_ARCH.
BOOTSTRAP_ARCH ?= arm64
BOOTSTRAP_BUILD = CGO_ENABLED=0 GOOS=linux GOARCH=$(BOOTSTRAP_ARCH) $(GO) build -tags lambda.norpc -trimpath -ldflags=-s
bootstrap:
	$(BOOTSTRAP_BUILD) -o bin/bootstrap ./cmd/bootstrap

build-ProjectionFunction:
	$(if $(ARTIFACTS_DIR),,$(error ARTIFACTS_DIR is not set: sam build sets it; by hand, make build-ProjectionFunction ARTIFACTS_DIR=DIR))
	@mkdir -p $(ARTIFACTS_DIR)
	$(BOOTSTRAP_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./cmd/bootstrap

include plugins/examples/examples.mk

# Test modules written in WebAssembly text (internal/testwasm/wat; testwasm.Path builds them).
$(WASM_DIR)/%.wasm: internal/testwasm/wat/%.wat host/testdata/wat2wasm.js node_modules/.installed
	@mkdir -p $(@D)/.wat-$*
	node host/testdata/wat2wasm.js $(@D)/.wat-$* $<
	@mv $(@D)/.wat-$*/$*.wasm $@ && rmdir $(@D)/.wat-$*

# test: everything (the DynamoDB tests against dynalite: at $PROJHOST_DYNAMODB_ENDPOINT, or each
# test package starts its own), the Go SDK module's tests (test-sdk), then the DynamoDB suites
# against Amazon's DynamoDB Local (at $PROJHOST_DYNAMODB_LOCAL_ENDPOINT, or started for the run;
# skipped without Java unless CI=true).
# -timeout 40m: cmd/projhost runs the process suites (e2e, hostile, verbs, status page, admin
# API) in one test binary, which takes 14-20 minutes on a loaded 2-core machine (more than go
# test's default 10).
test: deps wasm
	$(GO) test -race -count=1 -timeout 40m ./...
	$(MAKE) --no-print-directory test-sdk
	tools/dynamodb-local/with.sh $(MAKE) --no-print-directory test-dynamo

# The Go SDK's own tests: sdk/go is a module of its own, which ./... at the root does not reach.
test-sdk:
	cd sdk/go && $(GO) vet ./... && $(GO) test -race -count=1 ./...

# The DynamoDB suites: the packages whose tests use internal/dynamotest, and the TestDynamo*
# process tests of cmd/projhost (the rest of that package does not touch DynamoDB).
DYNAMO_PKGS = $(shell $(GO) list -f '{{.ImportPath}} {{join .TestImports " "}} {{join .XTestImports " "}}' ./... | \
	awk '/ github.com\/projhost\/projhost\/internal\/dynamotest( |$$)/ && $$1 != "github.com/projhost/projhost/cmd/projhost" { print $$1 }')

test-dynamo: deps wasm
	@test -n "$(DYNAMO_PKGS)" || { echo "no test package uses internal/dynamotest: go list failed?" >&2; exit 1; }
	$(GO) test -race -count=1 $(DYNAMO_PKGS)
	$(GO) test -race -count=1 -run '^TestDynamo' ./cmd/projhost

# The demo: 20,000 real flight records through flightdelays (AssemblyScript) on a 4-shard journal.
DEMO_DIR := .projhost-demo
DEMO_SQL := SELECT key AS airport, json_extract(doc,'$$.flights') AS flights, \
	round(1.0*json_extract(doc,'$$.total_delay')/json_extract(doc,'$$.flights'),1) AS avg_delay_min, \
	json_extract(doc,'$$.delayed') AS delayed_over_15min, json_extract(doc,'$$.max_delay') AS max_delay_min \
	FROM docs WHERE projection='flights' AND collection='airports' AND json_extract(doc,'$$.flights') >= 100 \
	ORDER BY avg_delay_min DESC LIMIT 10

demo: build build/wasm/flightdelays-as.wasm
	rm -rf $(DEMO_DIR)
	./bin/projhost journal create --data $(DEMO_DIR) --shards 4
	./bin/projhost journal append --data $(DEMO_DIR) --key-field origin plugins/examples/flightdelays/data/flights-20k.json
	./bin/projhost run --data $(DEMO_DIR) --name flights --handler build/wasm/flightdelays-as.wasm --until-caught-up --log-level warn
	./bin/projhost status --data $(DEMO_DIR) --name flights
	@echo
	@echo "The ten airports with the highest average arrival delay (at least 100 flights), from the read model:"
	@./bin/projhost sql --data $(DEMO_DIR) "$(DEMO_SQL)"

# bench: handler tables (flights-20k) for count and flightdelays, Go and AssemblyScript builds, with
# the native baseline and wasm/native ratios, the documented/tuned ratio of the Go and the
# AssemblyScript flightdelays (bench compare; and the AssemblyScript one's without the host's work,
# plugins/examples BenchmarkASDocumentedVsTunedGuestOnly), then e2e (journal append + one runner per build) with 4, 16 and 100 shards:
# flightdelays in AssemblyScript, Go and (when TinyGo is installed: make tinygo) TinyGo, and
# compiled into the host (--native), with the wasm/native ratios. e2e uses the first
# BENCH_E2E_LIMIT events of flights-3m.ndjson.gz when present (0: all 3M, six times as long),
# else flights-20k x BENCH_REPEAT. Then sustained: the same file appended (for at most
# BENCH_SUSTAINED_DURATION, at most BENCH_SUSTAINED_RATE events/s) while two workers project it,
# 100 shards.
BENCH_DURATION ?= 2s
BENCH_REPEAT ?= 10
BENCH_E2E_LIMIT ?= 500000
BENCH_SUSTAINED_DURATION ?= 60s
BENCH_SUSTAINED_RATE ?= 100000
BENCH_SMALL := plugins/examples/flightdelays/data/flights-20k.json
BENCH_BIG := $(firstword $(wildcard /work/shared/data/flights-3m.ndjson.gz ../shared/data/flights-3m.ndjson.gz))

bench: build wasm $(if $(wildcard $(TINYGO)),wasm-tinygo)
	@set -e; start=$$SECONDS; P=bin/projhost; W=$(WASM_DIR); \
	echo "== projhost bench on $$(nproc) cores, $$(date -u +%FT%TZ), commit $$(git rev-parse --short HEAD 2>/dev/null)"; \
	tgc=; tgf=; tg=; if [ -f $$W/flightdelays-tinygo.wasm ]; then tgc="--handler $$W/count-tinygo.wasm"; \
		tgf="--handler $$W/flightdelays-tinygo.wasm"; tg=$$tgf; else echo "== TinyGo is not installed (make tinygo): no TinyGo builds"; fi; \
	echo "== handler throughput over $(BENCH_SMALL), $(BENCH_DURATION) per cell"; \
	$$P bench handler --events $(BENCH_SMALL) --duration $(BENCH_DURATION) --batch-sizes 1,100,1000 \
		--handler $$W/count-go.wasm --handler $$W/count-as.wasm $$tgc --native count; echo; \
	$$P bench handler --events $(BENCH_SMALL) --duration $(BENCH_DURATION) --batch-sizes 1,100,1000 \
		--handler $$W/flightdelays-go.wasm --handler $$W/flightdelays-as.wasm $$tgf --native flightdelays; echo; \
	echo "== the documented flightdelays (guest.State) against the hand-tuned one it replaced (internal/bench/tuned)"; \
	$$P bench compare --events $(BENCH_SMALL) --duration $(BENCH_DURATION) --batch-sizes 100,1000 \
		--handler $$W/flightdelays-go.wasm --baseline $$W/flightdelays-go-tuned.wasm \
		--native flightdelays --native-baseline flightdelays-tuned; echo; \
	if [ -n "$$tg" ]; then echo "== the same, both built with TinyGo"; \
	$$P bench compare --events $(BENCH_SMALL) --duration $(BENCH_DURATION) --batch-sizes 100,1000 \
		--handler $$W/flightdelays-tinygo.wasm --baseline $$W/flightdelays-tinygo-tuned.wasm; echo; fi; \
	echo "== the documented AssemblyScript flightdelays (State) against the hand-tuned one it replaced (internal/bench/tuned/flightdelays-as)"; \
	$$P bench compare --events $(BENCH_SMALL) --duration $(BENCH_DURATION) --batch-sizes 100,1000 \
		--handler $$W/flightdelays-as.wasm --baseline $$W/flightdelays-as-tuned.wasm; echo; \
	echo "== the same, guest code only (a stub host: nothing to read, output dropped; documented/tuned per CPU second)"; \
	$(GO) test -run '^$$' -bench ASDocumentedVsTunedGuestOnly -benchtime 10x ./plugins/examples/ | grep -E '^Benchmark'; echo; \
	if [ -n "$(BENCH_BIG)" ]; then ev="--events $(BENCH_BIG) --limit $(BENCH_E2E_LIMIT)"; \
		echo "== e2e over $(BENCH_BIG) (first $(BENCH_E2E_LIMIT) events; 0 = all)"; \
	else ev="--events $(BENCH_SMALL) --repeat $(BENCH_REPEAT)"; \
		echo "== e2e: flights-3m.ndjson.gz not in /work/shared/data or ../shared/data; using flights-20k repeated $(BENCH_REPEAT) times"; fi; \
	$$P bench e2e $$ev --shards 4,16,100 --trusted --handler $$W/flightdelays-as.wasm \
		--handler $$W/flightdelays-go.wasm $$tg --native flightdelays; echo; \
	if [ -n "$(BENCH_BIG)" ]; then ev="$(BENCH_BIG)"; else ev=$$(mktemp); \
		node -e 'for (const f of require(process.argv[1])) console.log(JSON.stringify(f))' $(BENCH_SMALL) > $$ev; fi; \
	echo "== sustained: $$ev appended by one process while two workers project it, 100 shards"; \
	$$P bench sustained --events $$ev --shards 100 --workers 2 --trusted --handler $$W/flightdelays-as.wasm \
		--check flightdelays --duration $(BENCH_SUSTAINED_DURATION) --rate $(BENCH_SUSTAINED_RATE); \
	echo "== make bench took $$((SECONDS - start)) s (after building)"

# bench-kinesis: projhost, vmware-go-kcl-v2 v1.0.0 and harlow/kinesis-consumer v0.3.5 side by side
# on kinesis-local and dynalite (at $PROJHOST_KINESIS_ENDPOINT / $PROJHOST_DYNAMODB_ENDPOINT, or
# started for the run). bench/kinesispeers is a module of its own, so the peers stay out of
# go.mod; not part of `make test`. BENCH_KINESIS_FLAGS passes flags to the driver
# (bin/kinesispeers run -h), e.g. BENCH_KINESIS_FLAGS=-consumers=projhost,harlow.
BENCH_KINESIS_FLAGS ?=
bench-kinesis: build $(WASM_DIR)/count-go.wasm $(WASM_DIR)/noop.wasm
	cd bench/kinesispeers && $(GO) build -o ../../bin/kinesispeers .
	bin/kinesispeers run $(BENCH_KINESIS_FLAGS)

# The handler that writes nothing (bench/kinesispeers: projhost without a read model).
$(WASM_DIR)/noop.wasm: bench/kinesispeers/noop.wat host/testdata/wat2wasm.js node_modules/.installed
	@mkdir -p $(@D)/.wat-noop
	node host/testdata/wat2wasm.js $(@D)/.wat-noop $<
	@mv $(@D)/.wat-noop/noop.wasm $@ && rmdir $(@D)/.wat-noop

clean:
	rm -rf bin build .projhost $(DEMO_DIR)
