# The two commands a newcomer needs: `make run` and `make test`.
GO       ?= go
FUZZTIME ?= 30s

.PHONY: run test vet build fuzz bench web clean

## run: the development server (in-memory store, built-in OIDC issuer, demo project)
run:
	$(GO) run ./cmd/ballet-gateway dev

## test: vet, formatting, tidy modules, and every test with the race detector; fuzz targets run their seed corpora (testdata/fuzz)
test: vet
	$(GO) test -race -count=1 -timeout 30m ./...

vet:
	$(GO) vet ./...
	@$(GO) mod tidy -diff >/dev/null || { echo "go.mod/go.sum are not tidy: run 'go mod tidy'"; $(GO) mod tidy -diff; exit 1; }
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi

## build: the binaries into bin/
build:
	$(GO) build -o bin/ ./cmd/...

## fuzz: run every fuzz target for FUZZTIME each (new findings land in testdata/fuzz)
fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for target in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "== $$pkg $$target"; \
	    $(GO) test -run '^$$' -fuzz "^$$target$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

## bench: Go micro-benchmarks (codec, splice, hub fan-out) and a short load run (commit → client over WebSocket; needs Postgres)
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./codec/ ./streams/
	$(GO) test -run '^$$' -bench CommitToClient -benchtime 200x ./gateway/

## web: rebuild the board's embedded assets (web/dist) with npm and esbuild
web:
	$(MAKE) -C web

clean:
	rm -rf bin
