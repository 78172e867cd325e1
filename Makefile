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

clean:
	rm -rf bin build .projhost $(DEMO_DIR)
