# Inference Stack: operator, release tooling and their tests. `make help` lists the targets.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

# operator-registry's image code needs this tag to avoid a cgo gpgme dependency.
GO_TAGS ?= containers_image_openpgp
export CGO_ENABLED ?= 0
BIN := $(CURDIR)/bin
export KUBEBUILDER_ASSETS ?= $(BIN)/controlplane
# BIN may hold spaces (the checkout's path): recipes quote it.
CONTROLLER_GEN := go tool controller-gen
GOLANGCI_LINT := go tool -modfile=hack/tools/go.mod golangci-lint
TEST_FLAGS ?=
# The flags of every Go command make runs in this module, in GOFLAGS so that
# the builds the tests start themselves (test/testenv's operator binary, built
# with -trimpath) share the packages make deps and the suites compiled: with
# -trimpath everywhere a cold run compiles the operator's dependencies once, not
# twice (a cold build of ./operator/cmd takes about 172 s of CPU here). No
# DWARF from the compiler (stack traces and profiles read the pclntab, not
# DWARF; go test links without DWARF anyway): a cold etcd took 55 s of CPU
# instead of 61. Kept: the go env file's GOFLAGS (an environment GOFLAGS
# replaces it).
MODULE_GOFLAGS := -trimpath -gcflags=all=-dwarf=false
export GOFLAGS := $(strip $(filter-out $(MODULE_GOFLAGS),$(shell go env GOFLAGS)) $(MODULE_GOFLAGS))
# GOGC of the Go toolchain while it compiles what the suites need (the control
# plane, OLM, the node, the linter, the module's packages): at the default 100
# the compiler spends about a fifth of its CPU collecting garbage. A cold build
# of hack/controlplane/etcd took 104 to 117 s of CPU at 400 against 137 and 138
# at 100, its largest process 0.39 to 0.54 GB against 0.30 to 0.47.
BUILD_GOGC ?= 400

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make \033[36m<target>\033[0m\n"} \
		/^[a-zA-Z0-9_-]+:.*?##/ { printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2 } \
		/^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: generate
generate: ## Generate deepcopy code for the API types.
	@if ls operator/api/*/*_types.go >/dev/null 2>&1; then \
		$(CONTROLLER_GEN) object paths=./operator/api/...; fi

.PHONY: manifests
manifests: ## Generate the CRDs and the operator's RBAC from markers.
	@if ls operator/api/*/*_types.go >/dev/null 2>&1; then \
		$(CONTROLLER_GEN) crd paths=./operator/api/... output:crd:dir=operator/config/crd/bases; fi
	@if [ -d operator/internal/controller ]; then \
		$(CONTROLLER_GEN) rbac:roleName=inferencestack-operator paths=./operator/internal/... \
			output:rbac:dir=operator/config/rbac; fi

.PHONY: fmt
fmt: ## Format the Go code.
	gofmt -s -w $$(git ls-files -co --exclude-standard '*.go')

.PHONY: vet
vet: ## Run go vet (the e2e tests included).
	go vet -tags $(GO_TAGS),e2e ./...

.PHONY: linter
linter: ## Build golangci-lint from hack/tools/go.mod into the Go build cache (make lint runs it from there).
	@GOGC=$(BUILD_GOGC) $(GOLANGCI_LINT) version

.PHONY: lint
lint: ## Run golangci-lint (built from hack/tools/go.mod) and check formatting.
	@unformatted=$$(gofmt -s -l $$(git ls-files -co --exclude-standard '*.go')); \
		if [ -n "$$unformatted" ]; then echo "not gofmt'ed (run make fmt):"; echo "$$unformatted"; exit 1; fi
	$(GOLANGCI_LINT) run --allow-parallel-runners --build-tags $(GO_TAGS),e2e ./...

##@ Build

.PHONY: build
build: manager bundlegen ## Build every package, and the operator (bin/manager) and release CLI (bin/bundlegen).
	go build -tags $(GO_TAGS) ./...

.PHONY: deps
deps: ## Compile every package of the module (with the e2e tag too) into the Go build cache at BUILD_GOGC: the suites then compile only their tests (.ci/run does this beside the other builds).
	GOGC=$(BUILD_GOGC) go build -tags $(GO_TAGS) ./...
	GOGC=$(BUILD_GOGC) go build -tags $(GO_TAGS),e2e ./...

.PHONY: manager
manager: ## Build the operator binary into bin/manager.
	go build -tags $(GO_TAGS) -trimpath -o "$(BIN)/manager" ./operator/cmd

.PHONY: demo
demo: controlplane manager ## Run the operator on a local control plane, apply a sample stack, print what it made; Ctrl-C stops.
	go run -tags $(GO_TAGS) ./hack/demo $(DEMO_FLAGS)

.PHONY: controlplane
controlplane: ## Build etcd, kube-apiserver and kube-controller-manager for tests into bin/controlplane (skipped when current).
	@GOGC=$(BUILD_GOGC) hack/controlplane.sh

export OLM_BIN ?= $(BIN)/olm

.PHONY: olm
olm: ## Build OLM v1 (catalogd, operator-controller) and its CRDs for the e2e tests into bin/olm (skipped when current).
	@GOGC=$(BUILD_GOGC) hack/olm.sh

export NODE_BIN ?= $(BIN)/node

.PHONY: node
node: ## Build kubelet, kube-scheduler, kube-proxy and kube-router (NetworkPolicy) for the node tests into bin/node (each skipped when current); install containerd, runc, CNI plugins, iptables, conntrack, ipset and load br_netfilter when missing (as root).
	@GOGC=$(BUILD_GOGC) hack/node.sh

##@ Test

.PHONY: test
test: controlplane olm node ## Run all tests side by side (hack/side-by-side.sh): unit and integration on a real control plane, OLM v1 end-to-end, end-to-end on a real node.
	@hack/side-by-side.sh -nice test-unit test-unit test-e2e test-node

.PHONY: test-unit
test-unit: controlplane ## Run the unit tests and the integration tests on a real kube-apiserver and etcd.
	hack/phase.sh test-unit-integration go test -tags $(GO_TAGS) $(TEST_FLAGS) ./...

E2E_FLAGS ?=

.PHONY: test-e2e
test-e2e: controlplane olm ## Run the OLM v1 end-to-end tests: install and upgrade the release's catalog with real catalogd and operator-controller (needs root or user namespaces for unshare).
	hack/phase.sh test-olm-e2e go test -tags $(GO_TAGS),e2e -count=1 -timeout 15m $(E2E_FLAGS) ./test/olm/e2e/

NODE_FLAGS ?=

.PHONY: test-node
test-node: controlplane olm node ## Run the end-to-end tests on a real node: kubelet, kube-proxy, kube-scheduler, containerd; pods of images from an in-process registry (needs root).
	hack/phase.sh test-node-e2e go test -tags $(GO_TAGS),e2e -count=1 -timeout 20m $(NODE_FLAGS) ./test/node/...

.PHONY: verify
verify: ## Regenerate every generated file and fail, naming them, if any differs from what is committed.
	@hack/verify.sh

##@ Release

.PHONY: release
release: manifests bundle catalog graph matrix validate-bundles ## The main job: regenerate manifests, bundles (with the operand pin) and the catalog, validate them, draw the upgrade graphs (REGENERATE=1 rewrites unpublished releases' stale bundles).

.PHONY: bundlegen
bundlegen: ## Build the release CLI into bin/bundlegen.
	@go build -tags $(GO_TAGS) -o "$(BIN)/bundlegen" ./tools/bundlegen

BUNDLEGEN ?= $(BIN)/bundlegen
# VERSION limits `make bundle` to writing channels/releases/<VERSION>.yaml's bundles; every release is checked.
VERSION ?=
# REGENERATE=1 lets `make bundle` rewrite the bundles of unpublished releases that differ from their inputs.
REGENERATE ?=
# PUBLISH=X.Y.Z makes `make bundle` record release X.Y.Z (its input says published: true) in channels/published.sum.
PUBLISH ?=
# make verify checks every release's bundles against its inputs and fails on any difference.
export VERIFY_TARGETS += bundle-check

.PHONY: bundle
bundle: bundlegen ## Check every release's bundles, write the missing ones (REGENERATE=1: also rewrite stale unpublished ones); never changes a published release.
	"$(BUNDLEGEN)" bundle $(if $(VERSION),--version $(VERSION)) $(if $(REGENERATE),--regenerate) $(if $(PUBLISH),--publish $(PUBLISH))

.PHONY: bundle-check
bundle-check: bundlegen ## Fail unless every release's bundles are exactly what its inputs give (published: as frozen) (part of verify).
	"$(BUNDLEGEN)" bundle --check

# make verify also proves the operator's RBAC covers its components' RBAC and the release's bundles carry it.
export VERIFY_TARGETS += rbac-check

.PHONY: rbac-check
rbac-check: bundlegen ## Fail when role.yaml cannot create the components' RBAC (escalation prevention) or a bundle's permissions are stale; prints the markers to add (part of verify).
	"$(BUNDLEGEN)" rbac check $(if $(VERSION),--version $(VERSION))

.PHONY: validate-bundles
validate-bundles: bundlegen ## Validate every committed bundle under bundle/ (images by tag warn; REQUIRE_DIGESTS=1 makes them errors).
	"$(BUNDLEGEN)" validate bundle bundle/*/* $(if $(REQUIRE_DIGESTS),--require-digests)

.PHONY: pin
pin: bundlegen ## Print the release's operand pin from channels/images.lock (RESOLVE=1 refreshes the lock from the registries).
	"$(BUNDLEGEN)" pin $(if $(VERSION),--version $(VERSION)) $(if $(RESOLVE),--resolve)

# make verify re-renders the catalog and its graphs and fails on any difference.
export VERIFY_TARGETS += catalog graph matrix

.PHONY: catalog
catalog: bundlegen ## Render catalog/<package>/catalog.yaml from channels/<package>.semver.yaml over bundle/ (no registry), then validate it.
	"$(BUNDLEGEN)" catalog
	"$(BUNDLEGEN)" validate catalog catalog

.PHONY: validate-catalog
validate-catalog: bundlegen ## Validate catalog/ (REQUIRE_DIGESTS=1 also fails on bundle and related images not pinned by digest).
	"$(BUNDLEGEN)" validate catalog catalog $(if $(REQUIRE_DIGESTS),--require-digests)

.PHONY: graph
graph: bundlegen ## Draw catalog/<package>/graph.md (Mermaid) and graph.svg from the catalog.
	"$(BUNDLEGEN)" graph

.PHONY: matrix
matrix: bundlegen ## Check the operator/CRD package compatibility matrix and write it to docs/compatibility.md.
	"$(BUNDLEGEN)" matrix > docs/.compatibility.md.tmp
	mv docs/.compatibility.md.tmp docs/compatibility.md

.PHONY: images
images: bundlegen ## Build the catalog image into bin/images/catalog (OCI layout, no Docker); PUSH=<ref> also pushes it (only with every image by digest).
	"$(BUNDLEGEN)" image catalog catalog --output "$(BIN)/images/catalog" $(if $(PUSH),--push $(PUSH))

# The commit the operator image is built from (with -dirty when the work tree differs from it).
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)$(shell git diff --quiet HEAD 2>/dev/null || echo -dirty)

.PHONY: image-operator
image-operator: bundlegen ## Build the operator image from the current commit into bin/images/operator (OCI layout, no Docker; static manager on an offline base) and print its digest; PUSH=<ref> also pushes.
	GOOS=linux go build -tags $(GO_TAGS) -trimpath -buildvcs=false -ldflags "-s -w" -o $(BIN)/images/manager ./operator/cmd
	$(BUNDLEGEN) image operator $(BIN)/images/manager --output $(BIN)/images/operator --tag $(if $(VERSION),v$(VERSION),dev) \
		$(OPERATOR_LABELS) $(if $(PUSH),--push $(PUSH))

# The labels of the operator image; `make sign KIND=operator` rebuilds the image with the same ones.
OPERATOR_LABELS = --label org.opencontainers.image.revision=$(REVISION) $(if $(VERSION),--label org.opencontainers.image.version=$(VERSION))

##@ Signing (a separate, explicit step: make release needs no key and no network)

# KIND=bundle|catalog|operator, INPUT=<bundle dir, catalog dir or bin/images/manager>, IMAGE=<the pushed image>,
# KEY=<private key file> (or the PEM in $BUNDLEGEN_SIGNING_KEY). docs/release.md, "Signed images".
.PHONY: sign
sign: bundlegen ## Attach the SBOM and provenance of a pushed image and sign the three with the release key: KIND= INPUT= IMAGE= [KEY=].
	@if [ -z "$(KIND)" ] || [ -z "$(INPUT)" ] || [ -z "$(IMAGE)" ]; then \
		echo "make sign needs KIND=bundle|catalog|operator INPUT=<dir or binary> IMAGE=<pushed image>, and KEY=<file> or \$$BUNDLEGEN_SIGNING_KEY"; exit 1; fi
	"$(BUNDLEGEN)" sign $(KIND) "$(INPUT)" "$(IMAGE)" $(if $(KEY),--key "$(KEY)") $(if $(filter operator,$(KIND)),$(OPERATOR_LABELS))

# IMAGE=<image>, PUBKEY=<public key file>, and RELEASE=X.Y.Z (its input's sourceCommit) or COMMIT=<the release's commit>.
.PHONY: verify-image
verify-image: bundlegen ## Check an image's signature, its signed SBOM and provenance, and the provenance's commit: IMAGE= PUBKEY= RELEASE= (or COMMIT=).
	"$(BUNDLEGEN)" verify "$(IMAGE)" --key "$(PUBKEY)" $(if $(RELEASE),--release $(RELEASE)) $(if $(COMMIT),--commit $(COMMIT))

##@ Benchmarks

STACK_BENCH_FLAGS ?=

.PHONY: bench
bench: controlplane manager ## Create 200 InferenceStacks on the local control plane; print time to applied, writes per stack and at steady state, operator RSS.
	go run -tags $(GO_TAGS) ./hack/bench/operator -operator "$(BIN)/manager" $(STACK_BENCH_FLAGS)

# The scale curve: each size on a fresh control plane, then one row per size
# and how flat the cost per stack stays.
SCALE_BENCH_FLAGS ?= -kind starter -stacks 200,2000,10000 -idle 60s -cases '' -timeout 90m

.PHONY: bench-scale
bench-scale: controlplane manager ## The scale curve: 200, 2,000 and 10,000 starter stacks (SCALE_BENCH_FLAGS), one row per size and the per-stack figures' ratios.
	go run -tags $(GO_TAGS) ./hack/bench/operator -operator "$(BIN)/manager" $(SCALE_BENCH_FLAGS) $(STACK_BENCH_FLAGS)

BENCH_FLAGS ?=

.PHONY: bench-catalog
bench-catalog: bundlegen ## Render+validate a synthetic 2,000-bundle catalog with bin/bundlegen (as make catalog runs it) and with opm (images from an in-process registry); print times, peak RSS, equality.
	go run -tags $(GO_TAGS) ./hack/bench/catalog -bundlegen "$(BUNDLEGEN)" $(BENCH_FLAGS)
