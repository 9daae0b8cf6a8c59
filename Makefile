# echostore — the whole set-up on a fresh machine is `make run` and `make test`.
SHELL := bash
GO ?= go
PKGS ?= ./...
# The order the tests run in: the slowest packages first, so that the last
# to start is not one that then runs alone for a minute and a half.
TESTPKGS ?= $(if $(filter ./...,$(PKGS)),./server/ ./faults/ ./archive/ ./cmd/echostore/ . ./graft/ $(PKGS),$(PKGS))
FUZZTIME ?= 10s
BENCHCOUNT ?= 5
BENCHARGS ?=
SOAK ?= 10m
SOAKTIMEOUT ?= 40m
# The peers the benchmarks measure (asynq, River and pgx) are behind the
# peers build tag: the default build links none of them; every target here
# that builds, vets or tests the benchmarks passes it.
TAGS ?= peers
# The packages whose crash, fence, outage and corruption tests the fault
# suite runs beside its own (docs/RELIABILITY.md says what each proves): the
# tests marked //echostore:fault on the line above their func, collected and
# checked by internal/faultlist.
FAULTPKGS ?= ./graft/ ./graft/remote/ ./archive/ ./accept/ ./mq/
# A race-built process sleeps a second as it exits (the race runtime's
# GORACE atexit_sleep_ms, 1000 by default) so that other threads may finish a
# report. The tests start hundreds of race-built processes (the CLI's
# scripts, the crash tests' children, each test binary). Without the wait,
# a race found before the exit is still reported and still fails the run.
export GORACE ?= atexit_sleep_ms=0
FUZZPKGS ?= ./brand ./names ./mq ./graft ./graft/remote ./graft/remote/sealed ./archive ./accept

.PHONY: all build run test test-short lint bench gobench fuzz deps clean faults faults-list soak

all: build

## build: the echostore binary and the benchmarks' echostore-bench, into bin/
build:
	$(GO) build -o bin/echostore ./cmd/echostore
	$(GO) build -tags $(TAGS) -o bin/echostore-bench ./cmd/echostore-bench

## run: the main job on embedded defaults (installs redis-server if it can)
run: build
	bash scripts/run.sh

## test: lint, then every test with the race detector against real servers
test: lint
	bash scripts/deps.sh redis minio
	@mkdir -p bin
	$(GO) tool gotestsum --format pkgname-and-test-fails --jsonfile bin/test.json -- -tags $(TAGS) -race -count=1 -timeout 20m $(TESTPKGS)
	@echo "the ten slowest tests:"; $(GO) tool gotestsum tool slowest --jsonfile bin/test.json --threshold 1s | head -10

## test-short: the tests without the race detector (faster while editing)
test-short:
	$(GO) test -tags $(TAGS) -count=1 $(PKGS)

## lint: gofmt and go vet must be clean
lint:
	@out=$$(gofmt -l . | grep -v '^vendor/' || true); \
	if [[ -n $$out ]]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) vet -tags $(TAGS) ./cmd/echostore-bench/... ./internal/testserver/
	$(GO) run ./internal/faultlist -list $(FAULTPKGS) >/dev/null

## bench: every suite of bin/echostore-bench, rewriting docs/BENCHMARKS.md's
## generated block, docs/bench/report.json and the plots (BENCHARGS=--quick for a smoke run)
bench: build
	bash scripts/deps.sh redis minio
	bin/echostore-bench all $(BENCHARGS)

## gobench: every go benchmark, $(BENCHCOUNT) runs each (feed the output to benchstat)
gobench:
	bash scripts/deps.sh redis minio
	$(GO) test -tags $(TAGS) -run='^$$' -bench=. -benchmem -count=$(BENCHCOUNT) $(PKGS)

## fuzz: a short run ($(FUZZTIME)) of every fuzz target in the module
fuzz:
	bash scripts/fuzz.sh $(FUZZTIME)

## faults: the fault suite (faults/) and the parts' crash, fence, outage and
## corruption tests, with the race detector, then every checked-in fuzz input
faults:
	bash scripts/deps.sh redis minio
	$(GO) test -race -count=1 -timeout 15m ./faults/ ./internal/faultfs/ ./internal/faultstore/ ./graft/diskguard/
	$(GO) run ./internal/faultlist -race -count=1 -timeout 15m $(FAULTPKGS)
	$(GO) test -count=1 -run '^Fuzz' $(FUZZPKGS)

## faults-list: check the //echostore:fault marks and print the marked tests
faults-list:
	$(GO) run ./internal/faultlist -list $(FAULTPKGS)

## soak: $(SOAK) of mixed load with random faults, then the full audit (SOAK=60s for a short one)
soak:
	bash scripts/deps.sh redis minio
	ECHOSTORE_SOAK=$(SOAK) $(GO) test -count=1 -v -timeout $(SOAKTIMEOUT) -run '^TestSoak$$' ./faults/

deps:
	bash scripts/deps.sh redis minio

clean:
	rm -rf bin
