# Yosan — developer entry points. `make help` lists them.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

# Go at /usr/local/go when `go` is not on PATH (fresh Debian machines, CI).
ifeq ($(shell command -v go 2>/dev/null),)
export PATH := $(PATH):/usr/local/go/bin
endif
GO ?= go
TEMPL_VERSION ?= v0.3.1100
TEST_TIMEOUT ?= 20m
TEST_FLAGS ?=

.PHONY: help run build test vet fmt check-templ bench stop-db db-url clean

help: ## list the targets
	@grep -E '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*## "}{printf "  make %-12s %s\n", $$1, $$2}'

run: ## start the gateway (private PostgreSQL unless DATABASE_URL is set), demo org/key, admin token
	@scripts/run.sh

build: ## build bin/yosan
	$(GO) build -o bin/yosan ./cmd/yosan

test: check-templ ## go vet + go test -race against a real PostgreSQL (private cluster unless YOSAN_TEST_DATABASE_URL is set)
	@if [ -n "$${YOSAN_TEST_DATABASE_URL:-}" ]; then url="$$YOSAN_TEST_DATABASE_URL"; \
	else url="$$(scripts/pg.sh url yosan_test)"; fi; \
	export YOSAN_TEST_DATABASE_URL="$$url"; \
	mailpit="$${YOSAN_MAILPIT:-$$(scripts/test-peer.sh mailpit)}"; \
	stripemock="$${YOSAN_STRIPE_MOCK:-$$(scripts/test-peer.sh stripe-mock)}"; \
	chromium="$${YOSAN_CHROMIUM:-$$(scripts/chromium.sh)}"; \
	export YOSAN_MAILPIT="$$mailpit" YOSAN_STRIPE_MOCK="$$stripemock" YOSAN_CHROMIUM="$$chromium"; \
	scripts/pdf-deps.sh; \
	scripts/node-deps.sh; \
	echo "YOSAN_TEST_DATABASE_URL=$$url"; \
	echo "== go vet ./..."; $(GO) vet ./...; \
	echo "== go test -race -count=1 -timeout $(TEST_TIMEOUT) ./..."; \
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) $(TEST_FLAGS) ./...

vet: ## go vet ./...
	$(GO) vet ./...

fmt: ## gofmt -s -w every Go file of the project
	@files="$$(find . -name '*.go' -not -path './.data/*' -not -path './bin/*' -not -path './.git/*')"; \
	[ -z "$$files" ] || gofmt -s -w $$files

# Regenerate templ components (if there are any) and fail if that changed a generated file:
# the committed *_templ.go files must match the .templ sources.
check-templ: ## fail if `templ generate` would change committed *_templ.go files (no-op without .templ files)
	@if [ -z "$$(find . -name '*.templ' -not -path './.data/*' -not -path './.git/*' | head -n1)" ]; then \
		echo "check-templ: no .templ files"; exit 0; fi; \
	snap() { find . -name '*_templ.go' -not -path './.data/*' -not -path './.git/*' -print0 | sort -z | xargs -0r sha256sum; }; \
	before="$$(snap)"; \
	$(GO) run github.com/a-h/templ/cmd/templ@$(TEMPL_VERSION) generate; \
	after="$$(snap)"; \
	changed="$$(git status --porcelain -- '*_templ.go' 2>/dev/null || true)"; \
	if [ "$$before" != "$$after" ]; then \
		echo "check-templ: templ generate changed generated files; run it and commit the result:" >&2; \
		diff <(echo "$$before") <(echo "$$after") >&2 || true; exit 1; fi; \
	if [ -n "$${CI:-}" ] && [ -n "$$changed" ]; then \
		echo "check-templ: generated files differ from the commit:" >&2; echo "$$changed" >&2; exit 1; fi; \
	echo "check-templ: generated files are up to date"

bench: ## gateway vs direct-to-mock load test (constant rate and closed loop), then a zero-overspend check
	@scripts/bench.sh

db-url: ## print the DATABASE_URL of the private cluster (database yosan)
	@scripts/pg.sh url yosan

stop-db: ## stop the private PostgreSQL cluster
	@scripts/pg.sh stop

clean: ## stop the private cluster and remove build outputs and .data/ (database, tokens)
	-@scripts/pg.sh stop
	rm -rf bin .data coverage.out coverage.html *.coverprofile
	@h="$$(printf '%s' "$$(pwd -P)" | sha256sum | cut -c1-12)"; \
	if [ -d "/tmp/yosan-pg-$$h" ]; then echo "removing /tmp/yosan-pg-$$h"; rm -rf "/tmp/yosan-pg-$$h" "/tmp/yosan-pg-$$h.lock"; fi
