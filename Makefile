# stem: two commands matter.
#   make demo   set everything up on a fresh Debian 12 machine and start a demo instance
#   make test   run every test (what CI runs)
#   make check  the tests that need nothing but Go, with the race detector
SHELL := /bin/bash
.DEFAULT_GOAL := help

TAGS := remote,exclude_graphdriver_btrfs,btrfs_noversion,exclude_graphdriver_devicemapper,containers_image_openpgp
export GOFLAGS := -buildvcs=false -tags=$(TAGS)
export PATH := /usr/local/go/bin:$(PATH)

# setup.sh records in .cache/podman.env whether this host needs the repo's
# containers.conf; every recipe that touches Podman sources it.
PODMAN_ENV := set -a; [ -f .cache/podman.env ] && . .cache/podman.env; set +a;

GO_SOURCES := $(shell find cmd internal -name '*.go' -not -name '*_test.go' 2>/dev/null) go.mod go.sum

.PHONY: help setup build images agent-image check-images agent-clis demo test test-bin check fuzz bench lint clean

help:
	@echo "make demo        install what is missing, build images, start the demo instance"
	@echo "make test        run every test (CI runs this), then make fuzz"
	@echo "make check       the tests that need only Go (-short), with the race detector; about a minute"
	@echo "make fuzz        fuzz the container-byte decoders, FUZZTIME each (default 150000x: inputs)"
	@echo "make bench       run the benchmarks; write docs/benchmarks.md and the README table"
	@echo "make build       build bin/stemctl, bin/stem-mcp and bin/stem-dial"
	@echo "make images      build the three profile images (skipped when their inputs are unchanged)"
	@echo "make agent-image build the agent sandbox image (the pinned agent CLIs)"
	@echo "make check-images  check each image's toolchain and debugger"
	@echo "make lint        gofmt, go mod tidy -diff and go vet (with and without the Podman tags)"

setup:
	@scripts/setup.sh

bin/stemctl: $(GO_SOURCES)
	@mkdir -p bin
	go build -o $@ ./cmd/stemctl

# stem-mcp is bind-mounted into the containers (the gdb bridge runs there),
# so it is built static.
bin/stem-mcp: $(GO_SOURCES)
	@mkdir -p bin
	CGO_ENABLED=0 go build -trimpath -o $@ ./cmd/stem-mcp

# stem-dial is the teacher entries' ProxyCommand; install it beside stemctl.
bin/stem-dial: $(GO_SOURCES)
	@mkdir -p bin
	CGO_ENABLED=0 go build -trimpath -o $@ ./cmd/stem-dial

build: bin/stemctl bin/stem-mcp bin/stem-dial

images: setup
	@$(PODMAN_ENV) scripts/build-images.sh

# The toolchains, debuggers and tools each profile promises, run inside the
# built images (gcc, valgrind, qemu, picolibc, gdb-multiarch, OpenOCD, ...).
check-images: images
	@$(PODMAN_ENV) scripts/check-images.sh

agent-clis:
	@scripts/install-agent-clis.sh

# The sandbox `stemctl agent start` runs agent CLIs in: the base image plus
# the CLIs agent-clis installed and the host's node.
agent-image: setup agent-clis
	@$(PODMAN_ENV) scripts/build-images.sh agent

demo: setup build images
	@$(PODMAN_ENV) scripts/demo.sh

# Four packages at a time, not one per core: the real-program suites mostly
# wait (containers starting, CLIs answering), and at one per core a 2-core
# machine sat half idle through the run.
TEST_PARALLEL ?= 4
# go test starts packages in the order it is given them: the longest
# suites first, so that none of them starts last and runs alone.
TEST_FIRST := ./internal/agent ./internal/cmd/class ./internal/cmd/lab \
	./internal/cardgit/e2e ./internal/cmd/e2e ./internal/mcpserver
# The commands the suites run, built once as the tests would build them
# (static, -trimpath) rather than linked again in each package.
TEST_BIN := .cache/test-bin
$(TEST_BIN)/stemctl: $(GO_SOURCES)
	@mkdir -p $(TEST_BIN)
	CGO_ENABLED=0 go build -trimpath -o $@ ./cmd/stemctl
$(TEST_BIN)/stem-mcp $(TEST_BIN)/stem-dial: $(TEST_BIN)/%: bin/%
	@mkdir -p $(TEST_BIN)
	cp $< $@
test-bin: $(TEST_BIN)/stemctl $(TEST_BIN)/stem-mcp $(TEST_BIN)/stem-dial

test: setup build images check-images agent-clis agent-image lint test-bin
	@$(PODMAN_ENV) STEM_MCP_BIN=$(CURDIR)/bin/stem-mcp STEM_TEST_BIN_DIR=$(CURDIR)/$(TEST_BIN) \
		go test -p $(TEST_PARALLEL) -count=1 -timeout 25m $(TEST_FIRST) ./...
	@$(MAKE) --no-print-directory fuzz

# A bounded fuzz run of the decoders of container bytes: the validating
# reader in front of the Neovim RPC decoder, the GDB/MI parser and tmux's
# imsg framing. The budget is a count of inputs (about 5-12 s each here):
# with a duration, Go's fuzzing coordinator can fail a target with
# "context deadline exceeded" when the deadline fires on a loaded machine,
# having found nothing.
FUZZTIME ?= 150000x
fuzz:
	go test -run '^$$' -fuzz '^FuzzNext$$' -fuzztime $(FUZZTIME) ./internal/tmux/imsg/
	go test -run '^$$' -fuzz '^FuzzReader$$' -fuzztime $(FUZZTIME) ./internal/nvim/rpcguard/
	go test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./internal/gdbmi/

# Needs nothing but Go: tests of real programs skip under -short. The race
# detector needs cgo (a C compiler); without one the tests run without it.
# The race runtime sleeps a second as each test binary exits (so late
# reports get out, GORACE's atexit_sleep_ms): a second a package, which
# was half of this target's time. Four packages at a time on two cores:
# many of these tests wait on a deadline they test (a hung peer's timeout,
# a grace period), and a package waiting holds one of -p's slots
# (55 s at the default of two, 42 s at four).
CHECK_PARALLEL ?= 4
check:
	@if [ "$$(go env CGO_ENABLED)" = 1 ]; then race=-race; else race=; echo "no C compiler (cgo is off): running without the race detector"; fi; \
	GORACE=atexit_sleep_ms=0 go test -p $(CHECK_PARALLEL) -short $$race -count=1 -timeout 5m ./...

bench: setup build images agent-image
	@$(PODMAN_ENV) STEM_MCP_BIN=$(CURDIR)/bin/stem-mcp scripts/bench.sh

# go vet twice: with the tags (the real engine) and without (what plain
# go build and editors without .vscode/settings.json see).
lint:
	@out=$$(gofmt -l cmd internal); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	go mod tidy -diff
	go vet ./...
	GOFLAGS=-buildvcs=false go vet ./...

clean:
	rm -rf bin $(TEST_BIN)
