# Hallmark — an ACME certificate authority. `make help` lists the targets.
GO      ?= go
BIN     := bin
DATA    ?= hallmark-data
BINARIES := hallmark hallmark-frontend hallmark-worker

# What every binary reports (`hallmark version`, /healthz, the panel), set
# at link time in cmd/internal/version. Outside a git checkout they are
# empty and the binaries fall back to Go's build information.
VERSION    ?= $(shell git describe --tags --always --dirty 2>/dev/null)
COMMIT     ?= $(shell git rev-parse HEAD 2>/dev/null)
BUILD_DATE ?= $(shell date -u $(if $(SOURCE_DATE_EPOCH),-d @$(SOURCE_DATE_EPOCH)) +%Y-%m-%dT%H:%M:%SZ)
# Each is computed once, not again at every use.
VERSION    := $(VERSION)
COMMIT     := $(COMMIT)
BUILD_DATE := $(BUILD_DATE)
VERSION_PKG := github.com/hallmark-ca/hallmark/cmd/internal/version
LDFLAGS    := -X $(VERSION_PKG).version=$(VERSION) -X $(VERSION_PKG).commit=$(COMMIT) -X $(VERSION_PKG).date=$(BUILD_DATE)

.DEFAULT_GOAL := help

help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-8s %s\n", $$1, $$2}'

build: ## build the three binaries into bin/
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/hallmark-frontend ./cmd/hallmark-frontend
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/hallmark-worker ./cmd/hallmark-worker
	CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/hallmark ./cmd/hallmark

version: ## print the version the binaries are stamped with
	@echo $(VERSION)

run: build ## start a local CA on loopback (SQLite, dev CA created on first run); Ctrl-C stops it
	$(BIN)/hallmark up --data $(DATA)

test: ## run every test (PostgreSQL tests skip loudly without a database, fail in CI)
	$(GO) vet ./...
	@mkdir -p $(BIN) && rm -f $(BIN)/interop-matrix.txt
	HALLMARK_INTEROP_MATRIX=$(CURDIR)/$(BIN)/interop-matrix.txt $(GO) test -count=1 -timeout 30m ./...
	@cat $(BIN)/interop-matrix.txt 2>/dev/null || true # go test hides a passing package's output

# Release artifacts for this machine's architecture (the worker links
# PKCS#11 through cgo, so it is not cross-compiled): a tarball of the
# binaries, the example configuration, the systemd units and the docs, and
# a Debian package built by nfpm, a Go tool pinned in go.mod.
DIST     ?= dist
DEB_ARCH := $(shell $(GO) env GOARCH)
# git describe as a Debian version, which must start with a digit and sort
# after its tag: v1.2.3 -> 1.2.3, v1.2.3-4-gabc1234-dirty ->
# 1.2.3+4.gabc1234.dirty, v1.3.0-rc1 -> 1.3.0~rc1; untagged abc1234 ->
# 0.0~20260102030405.gabc1234 (the commit's time, so later commits sort later).
COMMIT_STAMP := $(shell TZ=UTC git log -1 --format=%cd --date=format-local:%Y%m%d%H%M%S 2>/dev/null)
DEB_VERSION := $(shell printf '%s' '$(or $(VERSION),unknown)' | sed -E -e 's/^v([0-9])/\1/' -e 't' -e 's/^/0.0~$(COMMIT_STAMP).g/' | \
	sed -E -e 's/-([0-9]+)-g([0-9a-f]+)/+\1.g\2/' -e 's/-(rc|beta|alpha)/~\1/' -e 's/-/./g')
RELEASE  := hallmark-$(VERSION)-linux-$(DEB_ARCH)
DIST_MTIME := $(or $(SOURCE_DATE_EPOCH),$(shell git log -1 --format=%ct 2>/dev/null),0)

dist: ## release tarball and Debian package into dist/ (this machine's architecture)
	rm -rf $(DIST)/$(RELEASE) && mkdir -p $(DIST)/$(RELEASE)/docs $(DIST)/$(RELEASE)/deploy
	$(MAKE) --no-print-directory build BIN=$(DIST)/$(RELEASE)/bin VERSION='$(VERSION)' COMMIT='$(COMMIT)' BUILD_DATE='$(BUILD_DATE)'
	cp README.md $(DIST)/$(RELEASE)/ && cp docs/*.md $(DIST)/$(RELEASE)/docs/
	cp -r deploy/systemd deploy/hallmark.toml deploy/hallmark.env $(DIST)/$(RELEASE)/deploy/
	tar -C $(DIST) --sort=name --owner=0 --group=0 --numeric-owner --mtime=@$(DIST_MTIME) -czf $(DIST)/$(RELEASE).tar.gz $(RELEASE)
	BIN=$(DIST)/$(RELEASE)/bin DEB_VERSION='$(DEB_VERSION)' DEB_ARCH=$(DEB_ARCH) \
		$(GO) tool nfpm package --config deploy/nfpm.yaml --packager deb --target $(DIST)/hallmark_$(DEB_VERSION)-1_$(DEB_ARCH).deb
	cd $(DIST) && sha256sum $(RELEASE).tar.gz hallmark_$(DEB_VERSION)-1_$(DEB_ARCH).deb > SHA256SUMS-$(VERSION)
	@echo "make dist: $(DIST)/$(RELEASE).tar.gz $(DIST)/hallmark_$(DEB_VERSION)-1_$(DEB_ARCH).deb"

# A container image of the same binaries, on no base image (nothing is
# pulled); PODMAN may carry podman's global flags.
IMAGE  ?= hallmark:$(VERSION)
PODMAN ?= podman
# The binaries are dist's: with dist's BUILD_DATE, go build finds them current.
image: ## container image hallmark:VERSION of the release binaries (podman, no base image)
	$(MAKE) --no-print-directory build BIN=$(DIST)/$(RELEASE)/bin VERSION='$(VERSION)' COMMIT='$(COMMIT)' BUILD_DATE='$(BUILD_DATE)'
	PODMAN='$(PODMAN)' deploy/container/build $(DIST)/$(RELEASE)/bin $(IMAGE)
	@echo "make image: $(IMAGE)"

# The load benchmark at the issue's targets' conditions (docs/performance.md,
# "The targets"): c=1 polling every 5 ms, c=8, and c=32 with at
# least 1,000 issuances.
# The references every figure is set beside, step-ca and Pebble, are built
# from the module proxy into bin/ the first time. Pebble deadlocks under
# load: --stall ends such a run, --pebble-attempts runs a fresh one, and a
# Pebble that never recovers costs its row, not the bench.
# The issuer's key on a SoftHSM2 token is measured too when the module is
# installed (apt-get install softhsm2); without it those two targets are
# left out, and the bench says so before it starts.
# Then what multi-perspective validation adds: hallmark-postgres and
# hallmark-postgres-persp (BENCH_PERSPECTIVES honest perspective workers
# corroborate every validation) alternated, at c=1 with 5 ms polls and at
# c=32.
# Then Debian's lego and certbot each get BENCH_CLIENT_COUNT certificates,
# one after another, from every CA: the median wall time a user waits.
SOFTHSM_MODULE ?= /usr/lib/softhsm/libsofthsm2.so
comma         := ,
BENCH_PKCS11  := $(if $(wildcard $(SOFTHSM_MODULE)),$(comma)hallmark-sqlite-pkcs11$(comma)hallmark-postgres-pkcs11)
BENCH_TARGETS ?= hallmark-sqlite,hallmark-postgres$(BENCH_PKCS11),step-ca,pebble
BENCH_COUNT   ?= 1000
BENCH_CLIENT_COUNT ?= 10
BENCH_PERSPECTIVES ?= 3
PEBBLE        ?= $(BIN)/pebble
PEBBLE_VERSION := v2.10.3
STEP_CA       ?= $(BIN)/step-ca
STEP_CA_VERSION := v0.30.2
BENCH_SERVERS := --bin $(BIN) --pebble $(PEBBLE) --step-ca $(STEP_CA)
bench: build $(PEBBLE) $(STEP_CA) ## load benchmark of whole issuances (Hallmark on SQLite and PostgreSQL, local key and SoftHSM2, beside step-ca and Pebble; c=1 at 5 ms polls, c=8, c=32), with and without perspectives, lego and certbot against each, then the Go benchmarks (docs/performance.md)
	$(GO) build -o $(BIN)/hallmark-load ./cmd/hallmark-load
	@$(if $(BENCH_PKCS11),,echo "make bench: LEAVING OUT the SoftHSM2 targets: $(SOFTHSM_MODULE) is missing (apt-get install softhsm2, or SOFTHSM_MODULE=<path>)")
	HALLMARK_PKCS11_MODULE=$(SOFTHSM_MODULE) $(BIN)/hallmark-load bench $(BENCH_SERVERS) --targets $(BENCH_TARGETS) --concurrency 1 --poll 5ms --count 300 --timeout 120s --stall 10s
	HALLMARK_PKCS11_MODULE=$(SOFTHSM_MODULE) $(BIN)/hallmark-load bench $(BENCH_SERVERS) --targets $(BENCH_TARGETS) --concurrency 8,32 --count $(BENCH_COUNT) --timeout 90s --stall 5s
	$(BIN)/hallmark-load bench $(BENCH_SERVERS) --targets hallmark-postgres,hallmark-postgres-persp --perspectives $(BENCH_PERSPECTIVES) --concurrency 1 --poll 5ms --count 300 --timeout 300s --stall 10s
	$(BIN)/hallmark-load bench $(BENCH_SERVERS) --targets hallmark-postgres,hallmark-postgres-persp --perspectives $(BENCH_PERSPECTIVES) --concurrency 32 --count $(BENCH_COUNT) --timeout 300s --stall 5s
	$(BIN)/hallmark-load clients $(BENCH_SERVERS) --targets hallmark-sqlite,hallmark-postgres,step-ca,pebble --clients lego,certbot --count $(BENCH_CLIENT_COUNT) --timeout 120s
	$(GO) test -run '^$$' -bench . -benchtime 2s -timeout 20m ./jobs/... ./signer/... ./protocol/... ./store/open/... ./store/sqlstore/...

$(BIN)/pebble:
	@mkdir -p $(BIN)
	GOBIN=$(abspath $(BIN)) $(GO) install github.com/letsencrypt/pebble/v2/cmd/pebble@$(PEBBLE_VERSION)

$(BIN)/step-ca:
	@mkdir -p $(BIN)
	CGO_ENABLED=0 GOBIN=$(abspath $(BIN)) $(GO) install github.com/smallstep/certificates/cmd/step-ca@$(STEP_CA_VERSION)

fuzz: ## run each fuzzer for a minute
	$(GO) test ./protocol/jws -run '^$$' -fuzz '^FuzzParse$$' -fuzztime 60s
	$(GO) test ./protocol/jws -run '^$$' -fuzz '^FuzzMembers$$' -fuzztime 60s
	$(GO) test ./protocol/csr -run '^$$' -fuzz '^FuzzCheck$$' -fuzztime 60s
	$(GO) test ./protocol/goodkey -run '^$$' -fuzz '^FuzzCheck$$' -fuzztime 60s
	$(GO) test ./protocol/policy -run '^$$' -fuzz '^FuzzPolicy$$' -fuzztime 60s
	$(GO) test ./worker/validate -run '^$$' -fuzz '^FuzzParseIssueValue$$' -fuzztime 60s
	$(GO) test ./worker/validate -run '^$$' -fuzz '^FuzzParsePersistRecord$$' -fuzztime 60s
	$(GO) test ./worker/validate -run '^$$' -fuzz '^FuzzALPNExtensions$$' -fuzztime 60s

lint: ## gofmt and go vet
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	$(GO) vet ./...

clean: ## remove bin/, dist/ and the local data directory
	rm -rf $(BIN) $(DIST) $(DATA)

.PHONY: help build version run test dist image bench fuzz lint clean
