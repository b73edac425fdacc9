# provider-clusterops. `make help` lists the targets.

SHELL := /usr/bin/env bash -o pipefail
VERSION ?= v0.0.0-$(shell git rev-parse --short HEAD 2>/dev/null || echo dev)
export CACHE_DIR ?= $(CURDIR)/.cache
LDFLAGS := -s -w -X github.com/clusterops/provider-clusterops/internal/version.Version=$(VERSION)
# make bench builds the provider, like its test binary, without -trimpath and with the control
# plane's compiler flags, so the three builds share every package they compile (cluster/local/bench.sh).
GO_BUILD_FLAGS ?= -trimpath
ENVTEST_DIR = $(shell cluster/local/build-tools.sh envtest-dir)
# Integration tests start API servers; two packages at a time suit a 2-core machine.
GO_TEST_FLAGS ?= -count=1 -p 2 -timeout 20m

.PHONY: help
help: ## List the targets.
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F ':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

.PHONY: tools
tools: ## Build and cache the control plane from source (kube-apiserver, controller-manager, scheduler, etcd, kwok, crossplane).
	cluster/local/build-tools.sh

.PHONY: generate
generate: ## Generate deepcopy and managed methods and the CRDs in package/crds.
	cd apis && go generate -tags generate .

.PHONY: check-diff
check-diff: generate ## Fail when generated files are stale.
	@git diff --exit-code -- apis package/crds || { echo "generated files are stale: run make generate and commit the result"; exit 1; }
	@test -z "$$(git status --porcelain -- apis package/crds)" || { git status --porcelain -- apis package/crds; echo "generated files are not committed"; exit 1; }

.PHONY: build
build: build-provider ## Build the provider and function binaries into bin/.
	CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS)' -o bin/function ./cmd/function

.PHONY: build-provider
build-provider: ## Build the provider binary into bin/ (all make bench needs).
	CGO_ENABLED=0 go build $(GO_BUILD_FLAGS) -ldflags '$(LDFLAGS)' -o bin/provider ./cmd/provider

.PHONY: vet
vet: lint ## Check formatting and run the linter (its govet is go vet's, with the e2e and bench tags).
	@test -z "$$(gofmt -l apis cmd internal hack test)" || { gofmt -l apis cmd internal hack test; echo "gofmt needed"; exit 1; }

.PHONY: lint
lint: ## Run golangci-lint (.golangci.yml), the version cluster/local/versions.env pins, built from source.
	cluster/local/build-tools.sh golangci-lint
	$$(cluster/local/build-tools.sh golangci-lint-dir)/golangci-lint run --timeout 15m ./...

.PHONY: test
test: ## Run every test tier: unit + integration (envtest), a short fuzz run, e2e on the local control plane, then make demo (the README's first command).
	cluster/local/build-tools.sh controlplane golangci-lint
	$(MAKE) vet
	# Crossplane and its CLI are first needed by the package checks (hack/xpkg) and e2e. They build
	# at the lowest priority while the tiers before those run, which mostly wait on API servers.
	# The process tier is the longest and mostly waits on restarts and leases: listed first, it
	# starts first and the other packages run beside it.
	nice -n 19 cluster/local/build-tools.sh crossplane crank & tools=$$!; \
	  KUBEBUILDER_ASSETS=$(ENVTEST_DIR) go test $(GO_TEST_FLAGS) ./test/reliability/process \
	    $$(go list ./... | grep -v -e /hack/xpkg -e /test/reliability/process) && $(MAKE) fuzz-ci; \
	  rc=$$?; wait $$tools || rc=1; exit $$rc
	go test $(GO_TEST_FLAGS) ./hack/xpkg
	# Prometheus and promtool build at the lowest priority while the e2e tiers run, which mostly
	# wait on the control plane and Crossplane core, and the monitoring module's tests run once
	# promtool is there; e2e.sh waits for the build before its last package, TestAlertsFireOnARealPrometheus's.
	nice -n 19 $(SHELL) -c 'cluster/local/build-tools.sh prometheus && $(MAKE) test-monitoring' & mon=$$!; \
	  $(MAKE) e2e; rc=$$?; wait $$mon || rc=1; exit $$rc
	# make demo, with its output checked (cluster/local/demo_test.go).
	DEMO=1 go test -count=1 -v -run '^TestDemoShowsEveryKindActing$$' ./cluster/local

.PHONY: monitoring
monitoring: ## Generate examples/monitoring (alerts, PodMonitor, Grafana dashboard) and the e2e tier's rules from hack/monitoring.
	cd hack/monitoring && go run .

.PHONY: test-monitoring
test-monitoring: ## Test the alerts with promtool, the dashboard's queries with Prometheus' parser, and that the generated files are current.
	cluster/local/build-tools.sh prometheus
	cd hack/monitoring && go test -count=1 ./...

.PHONY: test-unit
test-unit: ## Run the unit and integration tests (envtest): the edit-test loop, without make test's reliability tier.
	cluster/local/build-tools.sh controlplane crank
	KUBEBUILDER_ASSETS=$(ENVTEST_DIR) go test $(GO_TEST_FLAGS) $$(go list ./... | grep -v /test/reliability)

.PHONY: e2e
e2e: ## Run the e2e tests on a local control plane (started and stopped unless one is up), Crossplane core included.
	cluster/local/build-tools.sh controlplane crossplane
	cluster/local/e2e.sh

.PHONY: bench
bench: ## Run the benchmarks on the local control plane and write docs/performance.md.
	cluster/local/bench.sh

.PHONY: bench-fleet
bench-fleet: ## Run the fleet benchmarks (every kind, 100 to 10,000 at once) and add them to docs/performance.md.
	cluster/local/bench-fleet.sh

.PHONY: bench-faults
bench-faults: ## Run the fleet-wide fault scenarios at full size (docs/faults.md).
	cluster/local/bench-faults.sh

.PHONY: soak
soak: ## Run 10,000 managed resources under steady churn for an hour (docs/faults.md).
	cluster/local/soak.sh

.PHONY: bench-sharded
bench-sharded: ## Run the sharded tier: 10,000 CopyRules and ConfigRollouts shared by 1, 2 and 4 replicas (docs/performance.md).
	FLEET_KINDS= FLEET_SHARDED="copyrule configrollout" cluster/local/bench-fleet.sh

.PHONY: bench-ab
bench-ab: ## A/B the flow-control flags on fleets of 10,000 (docs/fleet/ab.md).
	cluster/local/bench-ab.sh

.PHONY: bench-cost
bench-cost: ## A/B what HEAD costs the fleet against COST_BASE, a commit (docs/fleet/cost.md).
	cluster/local/bench-cost.sh

.PHONY: fuzz
fuzz: ## Fuzz every pure function that takes user input (hack/fuzz.sh lists them), 20s each.
	hack/fuzz.sh 20s

.PHONY: fuzz-ci
fuzz-ci: ## Fuzz every target for 2s (part of make test); failing inputs land in testdata/fuzz, to commit.
	hack/fuzz.sh 2s

.PHONY: explore
EXPLORE_TIMEOUT ?= 2h
explore: ## Run the explorer (test/explore): random operation sequences with faults, checked against the kinds' invariants. SEED, SEQUENCES and STEPS select a long run, REPLAY=<file> replays one, RESULTS=<file> receives a summary.
	cluster/local/build-tools.sh controlplane
	KUBEBUILDER_ASSETS=$(ENVTEST_DIR) \
	  $(if $(SEED),EXPLORE_SEED=$(SEED)) $(if $(SEQUENCES),EXPLORE_SEQUENCES=$(SEQUENCES)) $(if $(STEPS),EXPLORE_STEPS=$(STEPS)) \
	  $(if $(REPLAY),EXPLORE_REPLAY=$(abspath $(REPLAY))) $(if $(RESULTS),EXPLORE_RESULTS=$(abspath $(RESULTS))) \
	  EXPLORE_COMMIT=$$(git describe --always --dirty --abbrev=7) \
	  go test -count=1 -timeout $(EXPLORE_TIMEOUT) -v -run '^TestExplore$$' ./test/explore

.PHONY: cluster-up
cluster-up: ## Start the local control plane (etcd, apiserver, controller-manager, scheduler, kwok).
	cluster/local/cluster-up.sh

.PHONY: cluster-down
cluster-down: ## Stop the local control plane.
	cluster/local/cluster-down.sh

.PHONY: run
run: ## Install the CRDs into $$KUBECONFIG's cluster and run the provider against it.
	kubectl apply --server-side -f package/crds
	go run -ldflags '$(LDFLAGS)' ./cmd/provider --debug --metrics-bind-address=0 --health-probe-bind-address=0

.PHONY: demo
demo: ## Start a local control plane, run the provider, apply examples/ and show what happens.
	cluster/local/demo.sh

.PHONY: xpkg
XPKG_PLATFORMS := linux_amd64 linux_arm64
xpkg: ## Build the Crossplane packages into _output/xpkg without Docker: provider and function for linux/amd64 and linux/arm64, and the platform configuration.
	for p in $(XPKG_PLATFORMS); do \
	  for c in provider function; do \
	    CGO_ENABLED=0 GOOS=$${p%_*} GOARCH=$${p#*_} go build -trimpath -ldflags '$(LDFLAGS)' -o bin/$$p/$$c ./cmd/$$c || exit 1; \
	  done; \
	done
	go run ./hack/xpkg --kind=provider --package-root=package --examples-root=examples $(foreach p,$(XPKG_PLATFORMS),--binary=bin/$(p)/provider) --version=$(VERSION)
	go run ./hack/xpkg --kind=function --package-root=package-function --examples-root=examples/platform $(foreach p,$(XPKG_PLATFORMS),--binary=bin/$(p)/function) --version=$(VERSION)
	go run ./hack/xpkg --kind=configuration --package-root=package-configuration --examples-root=examples/platform --version=$(VERSION)

.PHONY: reviewable
reviewable: generate vet ## Generate, tidy and vet: run before sending a change.
	go mod tidy
	cd hack/tools && go mod tidy
	cd hack/monitoring && go mod tidy

.PHONY: clean
clean: ## Remove build output (keeps the cached control plane).
	rm -rf bin _output
