# Hallmark — an ACME certificate authority. `make help` lists the targets.
GO      ?= go
BIN     := bin
DATA    ?= hallmark-data
BINARIES := hallmark hallmark-frontend hallmark-worker

.DEFAULT_GOAL := help

help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-8s %s\n", $$1, $$2}'

build: ## build the three binaries into bin/
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -o $(BIN)/hallmark-frontend ./cmd/hallmark-frontend
	$(GO) build -o $(BIN)/hallmark-worker ./cmd/hallmark-worker
	CGO_ENABLED=0 $(GO) build -o $(BIN)/hallmark ./cmd/hallmark

run: build ## start a local CA on loopback (SQLite, dev CA created on first run); Ctrl-C stops it
	$(BIN)/hallmark up --data $(DATA)

test: ## run every test (PostgreSQL tests skip loudly without a database, fail in CI)
	$(GO) vet ./...
	@mkdir -p $(BIN) && rm -f $(BIN)/interop-matrix.txt
	HALLMARK_INTEROP_MATRIX=$(CURDIR)/$(BIN)/interop-matrix.txt $(GO) test -count=1 -timeout 30m ./...
	@cat $(BIN)/interop-matrix.txt 2>/dev/null || true # go test hides a passing package's output

# The load benchmark at the issue's targets' conditions (docs/performance.md,
# "The targets"): c=1 polling every 5 ms, c=8, and c=32 with at
# least 1,000 issuances.
# Pebble, the reference every figure is set beside, is built from the module
# proxy into bin/ the first time (the version tests/pebble runs).
# The issuer's key on a SoftHSM2 token is measured too when the module is
# installed (apt-get install softhsm2); without it those two targets are
# left out, and the bench says so before it starts.
SOFTHSM_MODULE ?= /usr/lib/softhsm/libsofthsm2.so
comma         := ,
BENCH_PKCS11  := $(if $(wildcard $(SOFTHSM_MODULE)),$(comma)hallmark-sqlite-pkcs11$(comma)hallmark-postgres-pkcs11)
BENCH_TARGETS ?= hallmark-sqlite,hallmark-postgres$(BENCH_PKCS11),pebble
BENCH_COUNT   ?= 1000
PEBBLE        ?= $(BIN)/pebble
PEBBLE_VERSION := v2.10.3
bench: build $(PEBBLE) ## load benchmark of whole issuances (Hallmark and Pebble, SQLite and PostgreSQL, local key and SoftHSM2, c=1 at 5 ms polls, c=8, c=32; docs/performance.md), then the Go benchmarks
	$(GO) build -o $(BIN)/hallmark-load ./cmd/hallmark-load
	@$(if $(BENCH_PKCS11),,echo "make bench: LEAVING OUT the SoftHSM2 targets: $(SOFTHSM_MODULE) is missing (apt-get install softhsm2, or SOFTHSM_MODULE=<path>)")
	HALLMARK_PKCS11_MODULE=$(SOFTHSM_MODULE) $(BIN)/hallmark-load bench --bin $(BIN) --pebble $(PEBBLE) --targets $(BENCH_TARGETS) --concurrency 1 --poll 5ms --count 300 --timeout 120s
	HALLMARK_PKCS11_MODULE=$(SOFTHSM_MODULE) $(BIN)/hallmark-load bench --bin $(BIN) --pebble $(PEBBLE) --targets $(BENCH_TARGETS) --concurrency 8,32 --count $(BENCH_COUNT) --timeout 90s --stall 5s
	$(GO) test -run '^$$' -bench . -benchtime 2s -timeout 20m ./jobs/... ./signer/... ./protocol/... ./store/open/... ./store/sqlstore/...

$(BIN)/pebble:
	@mkdir -p $(BIN)
	GOBIN=$(abspath $(BIN)) $(GO) install github.com/letsencrypt/pebble/v2/cmd/pebble@$(PEBBLE_VERSION)

fuzz: ## run each fuzzer for a minute
	$(GO) test ./protocol/jws -run '^$$' -fuzz '^FuzzParse$$' -fuzztime 60s
	$(GO) test ./protocol/jws -run '^$$' -fuzz '^FuzzMembers$$' -fuzztime 60s
	$(GO) test ./protocol/csr -run '^$$' -fuzz '^FuzzCheck$$' -fuzztime 60s
	$(GO) test ./protocol/goodkey -run '^$$' -fuzz '^FuzzCheck$$' -fuzztime 60s
	$(GO) test ./protocol/policy -run '^$$' -fuzz '^FuzzPolicy$$' -fuzztime 60s
	$(GO) test ./worker/validate -run '^$$' -fuzz '^FuzzParseIssueValue$$' -fuzztime 60s
	$(GO) test ./worker/validate -run '^$$' -fuzz '^FuzzALPNExtensions$$' -fuzztime 60s

lint: ## gofmt and go vet
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	$(GO) vet ./...

clean: ## remove bin/ and the local data directory
	rm -rf $(BIN) $(DATA)

.PHONY: help build run test bench fuzz lint clean
