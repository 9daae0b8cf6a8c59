# echostore — the whole set-up on a fresh machine is `make run` and `make test`.
SHELL := bash
GO ?= go
PKGS ?= ./...
FUZZTIME ?= 10s
BENCHCOUNT ?= 5

.PHONY: all build run test test-short lint bench fuzz deps clean

all: build

## build: the echostore binary, into bin/echostore
build:
	$(GO) build -o bin/echostore ./cmd/echostore

## run: the main job on embedded defaults (installs redis-server if it can)
run: build
	bash scripts/run.sh

## test: lint, then every test with the race detector against real servers
test: lint
	bash scripts/deps.sh redis minio
	$(GO) test -race -count=1 -timeout 20m $(PKGS)

## test-short: the tests without the race detector (faster while editing)
test-short:
	$(GO) test -count=1 $(PKGS)

## lint: gofmt and go vet must be clean
lint:
	@out=$$(gofmt -l . | grep -v '^vendor/' || true); \
	if [[ -n $$out ]]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

## bench: every go benchmark, $(BENCHCOUNT) runs each (feed the output to benchstat)
bench:
	bash scripts/deps.sh redis minio
	$(GO) test -run='^$$' -bench=. -benchmem -count=$(BENCHCOUNT) $(PKGS)

## fuzz: a short run ($(FUZZTIME)) of every fuzz target in the module
fuzz:
	bash scripts/fuzz.sh $(FUZZTIME)

deps:
	bash scripts/deps.sh redis minio

clean:
	rm -rf bin
