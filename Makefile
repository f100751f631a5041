# idem's developer and CI entry points. CI runs `make test` from a fresh clone (.ci/run).
# Everything installed lands in node_modules/ and .cache/ (both git-ignored); each install
# is skipped when its stamp is newer than what it depends on. Go uses its default caches.

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c

GO      ?= go
PYTHON  ?= python3
NPM     ?= npm

CACHE   := $(CURDIR)/.cache
BIN     := $(CACHE)/bin
STAMPS  := $(CACHE)/stamps
VENV    := $(CACHE)/venv

MOTO_VERSION := 5.2.5
# The SAM CLI and cfn-lint live in a venv of their own: the SAM CLI pins boto3 and
# friends to versions other than moto's.
SAM_CLI_VERSION  := 1.170.0
CFN_LINT_VERSION := 1.58.0
SAM_VENV         := $(CACHE)/sam-venv
SAM_STAMP        := $(SAM_VENV)/.sam-$(SAM_CLI_VERSION)-cfn-lint-$(CFN_LINT_VERSION)
RIE_VERSION  := v0.0.0-20261030222936-bef5c4ba774d
RIE          := $(BIN)/aws-lambda-rie
TESTENV      := $(BIN)/testenv
# The API check (apidiff has no tagged versions: a pseudo-version of golang.org/x/exp) and
# the linter, installed with go install into .cache/bin.
APIDIFF_VERSION  := v0.0.0-20261113113407-e3970619a1a4
APIDIFF          := $(BIN)/apidiff
GOLANGCI_VERSION := v2.15.0
GOLANGCI_LINT    := $(BIN)/golangci-lint
# api-check: the public packages are those of both modules but commands, internal packages
# and these (the example service and the template's tests are not an API).
API_MODULES := . otel
API_EXCLUDE := ^github\.com/idemgo/idem/(examples|test)(/|$$)

# Packages that also run against moto (API fidelity: ReturnValuesOnConditionCheckFailure,
# TTL, transactions). Patterns whose directory does not exist yet are left out.
MOTO_PKGS ?= ./ddbstore/... ./storetest/... ./internal/capacity/...
# Minimum statement coverage of ./core, in percent.
COVER_MIN ?= 90
# sam-check: where sam build writes, and the Go flags it builds with (template.yaml's
# header; the quotes keep "-ldflags=-s -w" one flag). The SAM CLI runs offline: dummy
# credentials, a region for cfn-lint, no telemetry.
SAM_BUILD_DIR := $(CURDIR)/.aws-sam/build
SAM_GOFLAGS   := -tags=lambda.norpc -trimpath '-ldflags=-s -w'
SAM_ENV       := AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_SESSION_TOKEN= \
                 AWS_DEFAULT_REGION=us-east-1 AWS_REGION=us-east-1 SAM_CLI_TELEMETRY=0
# Invocations for the benchmark (passed to cmd/bench as BENCH_N).
BENCH_N ?= 2000
# Where make bench and make bench-peers write their SVG charts (docs/benchmarks.md shows a run's;
# copy them to docs/bench/ to publish another run).
BENCH_SVG ?= $(CACHE)/bench-svg
# bench-peers: events per scenario and mode, and runs of each library. Powertools for AWS
# Lambda (TypeScript) idempotency is installed in PEERS_DIR (its own package.json and lock).
BENCH_PEERS_N    ?= 200
BENCH_PEERS_RUNS ?= 3
PEERS_DIR        := bench/peers/powertools
# An already-running LocalStack, for test-localstack.
LOCALSTACK_ENDPOINT ?= http://127.0.0.1:4566

# existing keeps the package patterns in $(1) whose directory exists (go test fails on a
# pattern like ./ddbstore/... while that directory is not written yet).
existing = $(strip $(foreach p,$(1),$(if $(wildcard $(patsubst %/...,%,$(p))),$(p))))

# test-long: the stores' linearizability and model-based checks (internal/linz) at these sizes
# (docs/development.md): histories per store, calls per client, random clients (empty: each
# test's own), rapid's sequences per store and their mean length.
LINZ_HISTORIES ?= 20
LINZ_OPS       ?= 300
LINZ_CLIENTS   ?=
LINZ_CHECKS    ?= 500
LINZ_STEPS     ?= 60

.PHONY: deps redis-server test test-long sim-putback lint api-check api-record sam-check cover demo bench bench-smoke bench-peers test-localstack clean

# deps: install everything the tests need, each step only when missing or out of date:
# Go modules, dynalite (npm ci), moto (virtualenv), the Lambda runtime interface emulator,
# redis-server, the SAM CLI and cfn-lint (a second virtualenv), apidiff and golangci-lint.
deps: $(STAMPS)/go-mod node_modules/.idem-stamp $(VENV)/.moto-$(MOTO_VERSION) $(BIN)/.rie-$(RIE_VERSION) redis-server $(SAM_STAMP) \
	$(BIN)/.apidiff-$(APIDIFF_VERSION) $(BIN)/.golangci-lint-$(GOLANGCI_VERSION)

$(STAMPS)/go-mod: go.mod go.sum otel/go.mod otel/go.sum
	@echo "deps: downloading the Go modules (go mod download)"
	$(GO) mod download
	cd otel && $(GO) mod download
	@mkdir -p $(@D) && touch $@

# --ignore-scripts: classic-level (under dynalite) ships prebuilt binaries; its install
# script would only try a native build, which npm 11 skips anyway.
node_modules/.idem-stamp: package.json package-lock.json
	@echo "deps: installing dynalite into node_modules with npm ci (a few seconds)"
	$(NPM) ci --ignore-scripts --no-audit --no-fund
	@touch $@

$(VENV)/.moto-$(MOTO_VERSION):
	@echo "deps: installing moto $(MOTO_VERSION) into $(VENV) with pip (about a minute; pip prints nothing until it is done)"
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --disable-pip-version-check --quiet 'moto[server]==$(MOTO_VERSION)'
	@mkdir -p $(@D) && touch $@

$(SAM_STAMP):
	@echo "deps: installing the AWS SAM CLI $(SAM_CLI_VERSION) and cfn-lint $(CFN_LINT_VERSION) into $(SAM_VENV) with pip (about a minute; pip prints nothing until it is done)"
	$(PYTHON) -m venv $(SAM_VENV)
	$(SAM_VENV)/bin/pip install --disable-pip-version-check --quiet \
		'aws-sam-cli==$(SAM_CLI_VERSION)' 'cfn-lint==$(CFN_LINT_VERSION)'
	@rm -f $(SAM_VENV)/.sam-* && touch $@

$(BIN)/.rie-$(RIE_VERSION):
	@echo "deps: building the AWS Lambda runtime interface emulator into $(BIN) with go install (about 15 s the first time)"
	GOBIN=$(BIN) CGO_ENABLED=0 $(GO) install github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie@$(RIE_VERSION)
	@mkdir -p $(@D) && touch $@

$(BIN)/.apidiff-$(APIDIFF_VERSION):
	@echo "installing apidiff $(APIDIFF_VERSION) into $(BIN)"
	GOBIN=$(BIN) $(GO) install golang.org/x/exp/cmd/apidiff@$(APIDIFF_VERSION)
	@mkdir -p $(@D) && rm -f $(BIN)/.apidiff-* && touch $@

# golangci-lint is built from source (a minute or two the first time).
$(BIN)/.golangci-lint-$(GOLANGCI_VERSION):
	@echo "installing golangci-lint $(GOLANGCI_VERSION) into $(BIN) (go install: a minute or two the first time)"
	GOBIN=$(BIN) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_VERSION)
	@mkdir -p $(@D) && rm -f $(BIN)/.golangci-lint-* && touch $@

# redis-server: Debian's package (7.0 on Debian 12), installed only when no redis-server is on
# PATH: with apt-get, as root or else through sudo. Elsewhere, install Redis 7 yourself.
redis-server:
	@if ! command -v redis-server >/dev/null 2>&1; then \
	  if ! command -v apt-get >/dev/null 2>&1; then \
	    echo "redis-server is not installed and there is no apt-get: install Redis 7 yourself" >&2; exit 1; \
	  fi; \
	  echo "deps: installing redis-server with apt-get (Debian's package)"; \
	  sudo=""; if [ "$$(id -u)" != 0 ]; then sudo="sudo"; fi; \
	  $$sudo apt-get update -qq; \
	  $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server; \
	fi

# testenv starts dynalite or moto (with -sqs moto, moto for SQS; with -redis, Redis) on
# 127.0.0.1, runs a command against them, stops them by PID.
# Always rebuilt (the Go build cache makes that cheap).
$(TESTENV): FORCE
	$(GO) build -o $@ ./internal/cmd/testenv

# test: what CI runs. Vet, every package against dynalite, moto's SQS (the end-to-end tests'
# queues and internal/esm) and Redis (with -race), then the
# DynamoDB store's packages against moto, the otel module, core's coverage floor, a smoke run
# of the benchmark, and the checks of the SAM template and its build. The stores'
# linearizability and model-based checks (TestLinearizable, TestModel; internal/linz's
# TestProcesses) run in the first two lines, at the sizes docs/development.md gives.
test: deps $(TESTENV)
	$(GO) vet ./...
	$(MAKE) --no-print-directory lint
	$(MAKE) --no-print-directory api-check
	$(TESTENV) -server dynalite -sqs moto -redis -- $(GO) test -race -count=1 ./...
ifeq ($(call existing,$(MOTO_PKGS)),)
	@echo "moto: none of $(MOTO_PKGS) exists yet; skipped"
else
	$(TESTENV) -server moto -- $(GO) test -race -count=1 $(call existing,$(MOTO_PKGS))
endif
	@mkdir -p $(CACHE)
	$(GO) test -count=1 -run '^(TestSim|TestRegionsTable)$$' -v ./internal/sim >$(CACHE)/sim.out 2>&1; st=$$?; \
		grep -E '^(---|ok|FAIL)|deliveries|violated' $(CACHE)/sim.out; exit $$st
	$(TESTENV) -server moto -- $(GO) test -count=1 -run '^TestSimDynamoAll$$' -v ./internal/sim -sim.n=1000 >$(CACHE)/sim-moto.out 2>&1; st=$$?; \
		grep -E '^(---|ok|FAIL)|deliveries|violated' $(CACHE)/sim-moto.out; exit $$st
	cd otel && $(GO) vet ./... && $(GO) test -race -count=1 ./...
	$(MAKE) --no-print-directory cover
	$(MAKE) --no-print-directory bench-smoke
	$(MAKE) --no-print-directory sam-check

# lint: golangci-lint with .golangci.yml on both modules; fails on any finding.
lint: $(BIN)/.golangci-lint-$(GOLANGCI_VERSION)
	$(GOLANGCI_LINT) run --allow-parallel-runners ./...
	cd otel && $(GOLANGCI_LINT) run --allow-parallel-runners --config ../.golangci.yml ./...

# api-check: the public API of both modules against the last release in CHANGELOG.md (its API
# is recorded in api/vX.Y.Z/); fails on an incompatible change that the changelog's Unreleased
# "Breaking changes" does not name (docs/development.md#api-compatibility).
api-check: $(BIN)/.apidiff-$(APIDIFF_VERSION)
	$(GO) run ./internal/cmd/apicheck -apidiff $(APIDIFF) -exclude '$(API_EXCLUDE)' $(API_MODULES)

# api-record VERSION=vX.Y.Z: record the API of the working tree as release VERSION's, in
# api/VERSION/ (run it at the commit of the release, when its changelog section is written).
api-record: $(BIN)/.apidiff-$(APIDIFF_VERSION)
	@test -n "$(VERSION)" || { echo "api-record: set VERSION=vX.Y.Z" >&2; exit 2; }
	$(GO) run ./internal/cmd/apicheck -apidiff $(APIDIFF) -exclude '$(API_EXCLUDE)' -record $(VERSION) $(API_MODULES)

# test-long: the stores' linearizability and model-based checks at the LINZ_* sizes: memstore,
# Redis, dynalite (and several processes on both), then moto; then the simulation, SIM_N
# deliveries over memstore and SIM_DDB_N over dynalite and over moto. Not part of test.
LINZ_TESTS := ^(TestLinearizable|TestModel|TestProcesses)$$
LINZ_ENV    = IDEM_LINZ_HISTORIES=$(LINZ_HISTORIES) IDEM_LINZ_OPS=$(LINZ_OPS) \
              $(if $(LINZ_CLIENTS),IDEM_LINZ_CLIENTS=$(LINZ_CLIENTS)) RAPID_CHECKS=$(LINZ_CHECKS) RAPID_STEPS=$(LINZ_STEPS)
SIM_N     ?= 1000000
SIM_DDB_N ?= 20000
test-long: deps $(TESTENV)
	$(LINZ_ENV) $(TESTENV) -server dynalite -redis -- \
		$(GO) test -count=1 -timeout 3h -run '$(LINZ_TESTS)' ./memstore ./redisstore ./ddbstore ./internal/linz
	$(LINZ_ENV) $(TESTENV) -server moto -- $(GO) test -count=1 -timeout 3h -run '$(LINZ_TESTS)' ./ddbstore
	$(GO) test -count=1 -timeout 1h -run '^TestSim$$' ./internal/sim -sim.n=$(SIM_N)
	$(TESTENV) -server dynalite -- $(GO) test -count=1 -timeout 1h -run '^TestSimDynamoAll$$' ./internal/sim -sim.n=$(SIM_DDB_N)
	$(TESTENV) -server moto -- $(GO) test -count=1 -timeout 2h -run '^TestSimDynamoAll$$' ./internal/sim -sim.n=$(SIM_DDB_N)

# sim-putback: puts back, one at a time in a copy of the module, four defects of capabilities
# that meet (see internal/sim/testdata/putback.sh), and fails unless the simulation finds each.
# Not part of test.
sim-putback: deps
	sh internal/sim/testdata/putback.sh

# sam-check: fails on any finding. cfn-lint with the informational checks, the SAM CLI's
# own lint, sam build (go build per CodeUri for linux/arm64, as docs/deployment.md
# says), then a test of the built bootstraps (static linux/arm64 ELF, stripped, built
# with the flags above); IDEM_SAM_BUILD_DIR makes that test fail if nothing was built.
sam-check: $(SAM_STAMP)
	$(SAM_VENV)/bin/cfn-lint --include-checks I -- template.yaml
	$(SAM_ENV) $(SAM_VENV)/bin/sam validate --lint --template-file template.yaml
	rm -rf $(SAM_BUILD_DIR)
	$(SAM_ENV) CGO_ENABLED=0 GOFLAGS="$(SAM_GOFLAGS)" \
		$(SAM_VENV)/bin/sam build --template-file template.yaml --build-dir $(SAM_BUILD_DIR)
	$(GO) vet -tags samcheck ./test
	IDEM_SAM_BUILD_DIR=$(SAM_BUILD_DIR) $(GO) test -tags samcheck -count=1 -run '^TestBuiltBootstraps$$' -v ./test
	$(SAM_VENV)/bin/cfn-lint --include-checks I -- examples/durable/template.yaml
	$(SAM_ENV) $(SAM_VENV)/bin/sam validate --lint --template-file examples/durable/template.yaml
	rm -rf $(SAM_BUILD_DIR)-durable
	$(SAM_ENV) CGO_ENABLED=0 GOFLAGS="$(SAM_GOFLAGS)" \
		$(SAM_VENV)/bin/sam build --template-file examples/durable/template.yaml --build-dir $(SAM_BUILD_DIR)-durable
	test -x $(SAM_BUILD_DIR)-durable/DispatcherFunction/bootstrap

# cover: statement coverage of ./core; fails below COVER_MIN percent.
cover:
	@mkdir -p $(CACHE)
	$(GO) test -count=1 -coverprofile=$(CACHE)/core.cover ./core
	@$(GO) tool cover -func=$(CACHE)/core.cover | awk -v min=$(COVER_MIN) \
		'/^total:/ { pct = $$NF; sub(/%/, "", pct); printf "core coverage: %s%% (minimum %s%%)\n", pct, min; \
		  if (pct + 0 < min + 0) { print "core coverage is below the minimum"; bad = 1 } } \
		 END { exit bad }'

# demo: run the demo (it starts its own dynalite and moto through internal/devserver; no AWS
# account). Built, then run, rather than `go run`: go run exits 1 when Ctrl-C stops the
# program, which make would report as an error; the demo itself exits 0.
demo: $(STAMPS)/go-mod node_modules/.idem-stamp $(VENV)/.moto-$(MOTO_VERSION)
	$(GO) build -o $(CACHE)/demo ./cmd/demo
	$(CACHE)/demo

# bench: run the benchmark with BENCH_N invocations; the report in .cache/bench.json and .md,
# the charts in BENCH_SVG.
bench: deps
	BENCH_N=$(BENCH_N) $(GO) run ./cmd/bench -json $(CACHE)/bench.json -md $(CACHE)/bench.md -svg $(BENCH_SVG)

# bench-smoke: the benchmark with a small N, to check that it still works (part of test); it
# fails when a scenario's capacity units are missing or inconsistent (cmd/bench checkCapacity).
bench-smoke: deps
	$(GO) run ./cmd/bench -n 50 -runs 1 -warmup 20 -coldstarts 2 -sqs-reps 2 -race-trials 2 -cap-events 1 -storm 200 \
		-json $(CACHE)/bench-smoke.json -svg $(CACHE)/bench-smoke-svg > $(CACHE)/bench-smoke.txt
	@echo "bench smoke: ok ($$(wc -c < $(CACHE)/bench-smoke.json) bytes of JSON, $$(ls $(CACHE)/bench-smoke-svg | wc -l) charts)"

# bench-peers: idem and Powertools for AWS Lambda (TypeScript) idempotency, side by side on one
# dynalite (docs/benchmarks.md); not part of test. Needs node and npm.
bench-peers: $(STAMPS)/go-mod node_modules/.idem-stamp $(PEERS_DIR)/node_modules/.idem-stamp
	@command -v node >/dev/null || { echo "bench-peers needs node (Node.js 20 or later) on PATH" >&2; exit 1; }
	$(GO) run ./cmd/bench peers -n $(BENCH_PEERS_N) -runs $(BENCH_PEERS_RUNS) \
		-json $(CACHE)/bench-peers.json -md $(CACHE)/bench-peers.md -svg $(BENCH_SVG)

$(PEERS_DIR)/node_modules/.idem-stamp: $(PEERS_DIR)/package.json $(PEERS_DIR)/package-lock.json
	@command -v $(NPM) >/dev/null || { echo "bench-peers needs $(NPM) (Node.js 20 or later) on PATH" >&2; exit 1; }
	$(NPM) ci --prefix $(PEERS_DIR) --ignore-scripts --no-audit --no-fund
	@touch $@

# test-localstack: the DynamoDB store and end-to-end tests against an already-running
# LocalStack at LOCALSTACK_ENDPOINT (DynamoDB and SQS; not available on machines without Docker).
test-localstack: $(BIN)/.rie-$(RIE_VERSION)
	AWS_ENDPOINT_URL_DYNAMODB=$(LOCALSTACK_ENDPOINT) AWS_ENDPOINT_URL_SQS=$(LOCALSTACK_ENDPOINT) AWS_REGION=us-east-1 \
	AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test \
	IDEM_DDB_SERVER=localstack IDEM_RIE=$(RIE) \
	$(GO) test -count=1 $(or $(call existing,./ddbstore/... ./test/...),$(error neither ./ddbstore nor ./test exists))

# clean: remove everything deps installed (but redis-server, a system package), the
# coverage profile and sam build's output.
clean:
	rm -rf $(CACHE) node_modules .aws-sam

FORCE:
