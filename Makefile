# projhost — build, test, demo and benchmark targets. `make help` lists them.
SHELL := /bin/bash
GO ?= go
WASM_DIR := build/wasm
export GOFLAGS ?= -mod=mod

.PHONY: help build wasm test test-short bench demo deps clean

help:
	@echo "make build   - build ./bin/projhost"
	@echo "make wasm    - build the example WASM handlers into $(WASM_DIR)/"
	@echo "make test    - the full test suite (needs node/npm for AssemblyScript and wabt)"
	@echo "make bench   - benchmarks (see README)"
	@echo "make demo    - flights demo on a local 4-shard journal"

deps: node_modules/.installed

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund
	touch $@

build:
	$(GO) build -o bin/projhost ./cmd/projhost

include plugins/examples/examples.mk

test: deps wasm
	$(GO) test -race -count=1 ./...

clean:
	rm -rf bin build .projhost
