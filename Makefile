# The two commands a newcomer needs: `make run` and `make test`.
GO       ?= go
FUZZTIME ?= 30s

.PHONY: run test vet build check-docs fuzz bench charts generate web clean

## run: the development server (in-memory store, built-in OIDC issuer, demo project)
# Built first, saying so: the first build of a fresh clone downloads the modules and compiles for a
# minute or two, which go run would spend in silence.
run:
	@echo "building ballet-gateway (the first build downloads modules and takes a minute or two)..."
	@$(GO) build -ldflags "-X main.version=$(VERSION)" -o bin/ballet-gateway ./cmd/ballet-gateway
	bin/ballet-gateway dev

# -timeout is each package's, and only a backstop for a hang (every wait in a test has its own
# deadline): the gateway package's tests have taken over 30 minutes on two cores shared with
# other work.
# The race detector's runtime sleeps a second as a binary exits (GORACE's atexit_sleep_ms), for
# races other threads are still reporting: a second more for each of the 50 test binaries, so it
# is off. A race is still reported as it happens and fails its package (exit status 66).
test: export GORACE := $(strip $(GORACE) atexit_sleep_ms=0)
## test: vet, formatting, tidy modules, and every test with the race detector; fuzz targets run their seed corpora (testdata/fuzz); then the tests of each speed mechanism in the build that switches it off
test: vet
	$(GO) test -race -count=1 -p $(TEST_PACKAGES) -timeout 60m ./gateway/ ./...
	$(GO) test -race -count=1 -tags nopark ./gateway/internal/poller/ ./gateway/internal/wsnet/
	$(GO) test -race -count=1 -tags nofd ./gateway/internal/poller/ ./gateway/internal/wsnet/
	$(GO) test -race -count=1 -tags nodirect ./gateway/internal/wsnet/
	$(GO) test -race -count=1 -tags notimerheap ./gateway/internal/timerheap/
	$(GO) test -race -count=1 -tags nootlp ./internal/tracing/
	$(GO) test -count=1 -run '^TestReplicaShedsTheMostBehind$$' ./gateway/
	$(GO) test -race -count=1 -tags noparallel -run '$(HUB_TESTS)' ./streams/

# The off-switch builds (docs/benchmarks.md) run the tests of what they switch: nopark, nofd and
# nodirect the whole of gateway/internal/wsnet (its transport under an rpc.Conn over real
# sockets, parked or not, served by their descriptor or by net, written directly or not), nopark
# and nofd gateway/internal/poller too, notimerheap gateway/internal/timerheap (the heartbeat
# timers), noparallel the hub's fan-out. They add 30 to 40 s to make test on two shared cores (29 s at a load of 6, 41 s at 12
# to 16, 60 % of it building); the gateway package's tests in each build would add 30 to 40 s more
# a build.
# TestReplicaShedsTheMostBehind runs without the race detector, under which its fan-outs are too
# slow for the bound it measures (it skips itself there); nootlp builds internal/tracing without
# the OTLP exporter.
HUB_TESTS = ^Test(DispatchRunsInOrder|RevocationInsideABatch|OnAccessLost)$$

# Packages tested at once. Most of the suite's time is waiting (on Postgres and its standbys, on
# processes it starts, on Chromium, on timers), not CPU: go test's default, one package a CPU,
# left two cores idle much of a run: `.ci/run` took 598 s on two cores with it, 521 s with four
# packages at once (the gateway package, the longest, then takes 340 s rather than 240 s).
# The gateway package is named first, so that go test starts it first: started in its turn
# (after auth, client and cmd/...), it alone ran for the last minutes of a run. make test in a
# checkout whose build is cached: 430 s with it first; in a fresh clone (everything compiled):
# 502 s, against 517 s in its turn.
TEST_PACKAGES ?= 4

vet:
	$(GO) vet ./...
	@$(GO) mod tidy -diff >/dev/null || { echo "go.mod/go.sum are not tidy: run 'go mod tidy'"; $(GO) mod tidy -diff; exit 1; }
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi

# The version the binaries print (ballet-gateway version): the release tag (vMAJOR.MINOR.PATCH,
# with the commits since it and -dirty for local changes, as git describe gives them); without a
# release tag, a pseudo-version of the commit as Go's module versions spell it
# (v0.0.0-YYYYMMDDHHMMSS-commit); without git, what the Go toolchain records.
VERSION ?= $(shell git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null || \
	TZ=UTC git log -1 --format='v0.0.0-%cd-%h' --date=format-local:%Y%m%d%H%M%S --abbrev=12 2>/dev/null)

## build: the binaries into bin/, stamped with VERSION; TAGS=nootlp leaves the OTLP exporter out
build:
	$(GO) build -tags '$(TAGS)' -ldflags "-X main.version=$(VERSION)" -o bin/ ./cmd/...

## check-docs: the checks of the documents alone (links, anchors, paths, repeats, splices); make test runs them too
check-docs:
	$(GO) test -count=1 -run '^(TestDocuments|TestDocumentChecks|TestAnchors)$$' ./docs/

## fuzz: run every fuzz target for FUZZTIME each (new findings land in testdata/fuzz)
fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for target in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "== $$pkg $$target"; \
	    $(GO) test -run '^$$' -fuzz "^$$target$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

## bench: Go micro-benchmarks (codec, splice, hub fan-out, the rpc writer) and a short load run (commit → client over WebSocket; needs Postgres)
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./codec/ ./streams/ ./rpc/
	$(GO) test -run '^$$' -bench CommitToClient -benchtime 200x ./gateway/

## charts: the SVG charts of docs/benchmarks/ drawn again from the mechanism runs kept there (*-mechanisms.jsonl)
charts:
	$(GO) run ./scripts/benchcharts -o docs/benchmarks/ docs/benchmarks/*-mechanisms.jsonl

## generate: what follows from the sources: protocol.md's MessagePack examples from its JSON ones;
## from package protocol's Go types, docs/asyncapi.yaml's generated places and the browser client's
## wire types and declarations; web/dist (tests fail until it is run)
generate:
	$(GO) test -count=1 -run '^TestProtocolDocExamples$$' ./codec/ -update-docs
	$(MAKE) -C web

## web: the same, through web/Makefile: the browser client's generated files, then web/dist rebuilt
## with npm and esbuild
web:
	$(MAKE) -C web

clean:
	rm -rf bin
