# allot — make help lists the targets.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

GO        ?= go
BIN       := bin
ALLOT     := $(BIN)/allot
PKGS      := ./...
SHARED    ?= ../shared
CONTROLLER_GEN_VERSION ?= v0.21.0
STATICCHECK_VERSION    ?= v0.8.2
DEADCODE_VERSION       ?= v0.40.0

# The tests read the full traces from $(SHARED) when it is there, else the slices
# in testdata/ (ALLOT_SHARED=none: as on a bare clone).
export ALLOT_SHARED ?= $(abspath $(SHARED))

# The CLI and the manager are one static binary (no cgo): it cross-builds for
# any platform and needs no C library at run time; the module's tests build the
# same way (plain go test ./... works too, with cgo). The GPU health agent alone
# needs cgo (go-nvml loads libnvidia-ml at run time); it is its own module,
# cmd/allot-agent, built and tested with its own targets below.
export CGO_ENABLED ?= 0
AGENT     := $(BIN)/allot-agent
AGENT_DIR := cmd/allot-agent
# go-nvml's cgo bindings call NVML functions NVIDIA deprecated: keep the C
# compiler's other warnings, not those (about a hundred lines on a fresh build).
AGENT_CGO_CFLAGS := -O2 -g -Wno-deprecated-declarations

# What allot version prints (cmd/allot/version.go).
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
COMMIT    := $(shell git rev-parse HEAD 2>/dev/null)
DATE      := $(shell git log -1 --format=%cI 2>/dev/null)
TF_TESTED := $(shell terraform version 2>/dev/null | sed -n '1s/^Terraform v//p')
LDFLAGS   := -X main.version=$(VERSION) -X main.commit=$(COMMIT) -X main.date=$(DATE)$(if $(TF_TESTED), -X main.terraformTested=$(TF_TESTED))

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build bin/allot (static, CGO_ENABLED=0).
	CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o $(ALLOT) ./cmd/allot

.PHONY: build-agent
build-agent: ## Build bin/allot-agent, the NVML GPU health agent (cgo).
	cd $(AGENT_DIR) && CGO_ENABLED=1 CGO_CFLAGS="$(AGENT_CGO_CFLAGS)" $(GO) build -ldflags "-X main.version=$(VERSION)" -o $(abspath $(AGENT)) .

.PHONY: demo
demo: build controlplane terraform ## The main job: allot's manager and scheduler on an embedded control plane, a workload, a quota change through Git.
	PATH="$(abspath $(BIN)):$$PATH" $(GO) run ./cmd/allot-demo --allot $(abspath $(ALLOT))

.PHONY: demo-slurm
demo-slurm: build ## Slurm: a real Slurm cluster (Debian's packages), a job pending on its team's GPU limit, a quota change through Git, the job running.
	$(GO) run ./cmd/allot-demo --slurm --allot $(abspath $(ALLOT))

.PHONY: demo-fleet
demo-fleet: build controlplane ## The fleet: a hub and two worker clusters, each with allot manager; a Job routed to the cheaper, then moved when it is lost.
	PATH="$(abspath $(BIN)):$$PATH" $(GO) run ./cmd/allot-demo --fleet --allot $(abspath $(ALLOT))

# Terraform: the one on PATH, else v1.5.7 (the last MPL release) built from the
# module proxy into bin/ (about 3 minutes).
.PHONY: terraform
terraform: ## Make sure terraform is on PATH or in bin/.
	@command -v terraform >/dev/null 2>&1 || test -x $(BIN)/terraform || { \
	  echo "terraform not on PATH: building v1.5.7 (MPL) from the module proxy into $(BIN)/"; \
	  GOBIN=$(abspath $(BIN)) $(GO) install github.com/hashicorp/terraform@v1.5.7; }

# The test control plane: kube-apiserver and etcd built from the Go module proxy
# (config/controlplane), rebuilt only when its pinned versions change.
KUBE_VERSION  := $(shell sed -n 's/^\tk8s.io\/kubernetes \(v[^ ]*\)$$/\1/p' config/controlplane/go.mod)
CONTROLPLANE  := $(BIN)/.controlplane-$(KUBE_VERSION)-versioned
# The API server reports its version (Kueue refuses to start against one that says
# v0.0.0-master): stamp it as a release build does.
KUBE_MINOR    := $(word 2,$(subst ., ,$(KUBE_VERSION)))
KUBE_LDFLAGS  := -X k8s.io/component-base/version.gitVersion=$(KUBE_VERSION) \
  -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(KUBE_MINOR) \
  -X k8s.io/component-base/version.gitTreeState=clean \
  -X k8s.io/client-go/pkg/version.gitVersion=$(KUBE_VERSION) \
  -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$(KUBE_MINOR)
export KUBEBUILDER_ASSETS ?= $(abspath $(BIN))

.PHONY: controlplane
controlplane: $(CONTROLPLANE) ## Build kube-apiserver and etcd into bin/ (cached; ~5 min the first time).

$(CONTROLPLANE): config/controlplane/go.mod config/controlplane/go.sum
	@echo "building the control plane $(KUBE_VERSION) from the module proxy into $(BIN)/ (once; ~5-10 min on 2 cores, cached after)"
	@echo "  1/2 etcd (~1-2 min)"
	@cd config/controlplane && $(GO) build -o ../../$(BIN)/etcd ./etcd
	@echo "  2/2 kube-apiserver (~3-6 min)"
	@cd config/controlplane && $(GO) build -ldflags "$(KUBE_LDFLAGS)" -o ../../$(BIN)/kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
	@echo "  control plane ready: $(BIN)/etcd, $(BIN)/kube-apiserver"
	rm -f $(BIN)/.controlplane-* && touch $@

# What the side-by-side benchmarks run beside allot, never the tests: kube-scheduler
# (the binding it is measured against, and Kueue's placement) and
# kube-controller-manager (its Job controller makes the pods), from the same
# pinned k8s.io/kubernetes as the control plane.
BENCHPLANE := $(BIN)/.benchplane-$(KUBE_VERSION)

.PHONY: benchplane
benchplane: $(BENCHPLANE) ## Build kube-scheduler and kube-controller-manager into bin/ for the side-by-side benchmarks (cached; ~5 min).

$(BENCHPLANE): config/controlplane/go.mod config/controlplane/go.sum
	@echo "building kube-scheduler and kube-controller-manager $(KUBE_VERSION) into $(BIN)/ (once; ~5 min)"
	@cd config/controlplane && $(GO) build -ldflags "$(KUBE_LDFLAGS)" -o ../../$(BIN)/kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler
	@cd config/controlplane && $(GO) build -ldflags "$(KUBE_LDFLAGS)" -o ../../$(BIN)/kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager
	rm -f $(BIN)/.benchplane-* && touch $@

# Kueue, for the Kueue backend's tests: the controller built from the module proxy
# (config/kueue pins the release), rebuilt only when that pin changes.
KUEUE_VERSION := $(shell sed -n 's/^require sigs.k8s.io\/kueue \(v[^ ]*\)$$/\1/p' config/kueue/go.mod)
KUEUE         := $(BIN)/.kueue-$(KUEUE_VERSION)

.PHONY: kueue
kueue: $(KUEUE) ## Build the Kueue controller and copy its CRDs into bin/ (cached; a few minutes the first time).

$(KUEUE): config/kueue/go.mod config/kueue/go.sum
	@echo "building Kueue $(KUEUE_VERSION) from the module proxy into $(BIN)/ (once; ~3-5 min, cached after)"
	cd config/kueue && $(GO) build -o ../../$(BIN)/kueue sigs.k8s.io/kueue/cmd/kueue
	rm -rf $(BIN)/kueue-crds && mkdir -p $(BIN)/kueue-crds
	cp "$$(cd config/kueue && $(GO) list -m -f '{{.Dir}}' sigs.k8s.io/kueue)"/config/components/crd/bases/*.yaml $(BIN)/kueue-crds/
	chmod u+w $(BIN)/kueue-crds/*.yaml
	rm -f $(BIN)/.kueue-* && touch $@

# The image references make image tags and make release writes into the
# manifests: allot's, and the agent's beside it (IMAGE-agent).
IMAGE ?= ghcr.io/allot-dev/allot

.PHONY: image
image: build build-agent terraform ## bin/allot-image.tar and bin/allot-agent-image.tar, on an empty base (no git), non-root, no Docker needed (hack/image).
	$(GO) run ./hack/image -allot $(ALLOT) -tag $(IMAGE):$(VERSION) -o $(BIN)/allot-image.tar
	$(GO) run ./hack/image -agent $(AGENT) -tag $(IMAGE)-agent:$(VERSION) -o $(BIN)/allot-agent-image.tar

# The platforms make release builds the CLI for (static: CGO_ENABLED=0). The
# images are for this machine's architecture (terraform and the agent's C
# library are taken from it): run make image on each to publish several.
PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64
RELEASE   := $(BIN)/release
# Archive times: the commit's, so the same commit gives the same archives.
EPOCH     := $(shell git log -1 --format=%ct 2>/dev/null || echo 0)

.PHONY: release
release: image ## bin/release/: the CLI for every platform (tar.gz), the images, install.yaml and checksums.txt, named as goreleaser names them.
	rm -rf $(RELEASE) && mkdir -p $(RELEASE)
	@set -e; for p in $(PLATFORMS); do \
	  os=$${p%/*}; arch=$${p#*/}; name=allot_$(VERSION:v%=%)_$${os}_$${arch}; d=$(RELEASE)/$$name; \
	  echo "  $$name.tar.gz"; mkdir -p $$d; \
	  CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $$d/allot ./cmd/allot; \
	  cp README.md $$d/; \
	  tar -C $(RELEASE) --sort=name --mtime=@$(EPOCH) --owner=0 --group=0 --numeric-owner -czf $$d.tar.gz $$name; \
	  rm -rf $$d; \
	done
	$(GO) run ./hack/manifests -image $(IMAGE):$(VERSION) -o $(RELEASE)/install.yaml config/default
	cp $(BIN)/allot-image.tar $(BIN)/allot-agent-image.tar $(RELEASE)/
	cd $(RELEASE) && sha256sum *.tar.gz *.tar install.yaml > checksums.txt
	@echo "wrote $(RELEASE)/ for $(IMAGE):$(VERSION) and $(IMAGE)-agent:$(VERSION): push the image tarballs there (crane push, skopeo copy docker-archive:...)"

.PHONY: fmt
fmt: ## Format the Go code.
	gofmt -w $$(git ls-files '*.go')

.PHONY: vet
vet: ## Run go vet (the module and the agent's).
	$(GO) vet $(PKGS)
	cd $(AGENT_DIR) && CGO_ENABLED=1 CGO_CFLAGS="$(AGENT_CGO_CFLAGS)" $(GO) vet ./...
	cd charts && $(GO) vet ./...

.PHONY: lint
lint: vet ## Check formatting, vet, staticcheck, dead code and the architecture rules (pure cores stay pure).
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) $(PKGS)
	cd $(AGENT_DIR) && CGO_ENABLED=1 CGO_CFLAGS="$(AGENT_CGO_CFLAGS)" $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...
	@out=$$($(GO) run golang.org/x/tools/cmd/deadcode@$(DEADCODE_VERSION) -test $(PKGS)); if [ -n "$$out" ]; then echo "unreachable code:"; echo "$$out"; exit 1; fi
	$(GO) test ./ci/ -run 'TestArchitecture|TestLayers' -count=1

.PHONY: generate
generate: ## Regenerate deepcopy, CRD YAML (api/) and the manager's RBAC (kubebuilder:rbac markers).
	$(GO) run sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION) object paths=./api/... crd:allowDangerousTypes=false paths=./api/... output:crd:dir=config/crd
	$(GO) run sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION) rbac:roleName=allot-manager paths=./controllers/... paths=./scheduler/runner/... output:rbac:dir=config/rbac
	cd charts && $(GO) generate ./...

.PHONY: test
test: build controlplane kueue terraform ## Build the control plane if needed, run every test (the module, then cmd/allot-agent's and charts/'s), then the contract check (when ../shared/contract is there).
	PATH="$(abspath $(BIN)):$$PATH" $(GO) test -count=1 -timeout 30m $(PKGS)
	cd $(AGENT_DIR) && CGO_ENABLED=1 CGO_CFLAGS="$(AGENT_CGO_CFLAGS)" $(GO) test -count=1 -timeout 15m ./...
	cd charts && $(GO) test -count=1 -timeout 15m ./...
	@if [ -f $(SHARED)/contract/check.py ]; then echo "python3 $(SHARED)/contract/check.py $(ALLOT)"; python3 $(SHARED)/contract/check.py $(ALLOT); \
	else echo "$(SHARED)/contract is not beside this clone: contract check skipped (.ci/run runs it)"; fi

.PHONY: contract
contract: build ## The contract check alone (needs ../shared/contract).
	python3 $(SHARED)/contract/check.py $(ALLOT)

.PHONY: test-update
GOLDEN_PKGS := $(shell grep -rl --include='*_test.go' '^var update = flag.Bool' . | xargs -n1 dirname | sort -u)

test-update: ## Rewrite golden files from the current output (the packages with an -update flag).
	$(GO) test $(GOLDEN_PKGS) -count=1 -update

.PHONY: test-fuzz
test-fuzz: ## Fuzz the parsers, the planner and the simulator for a while (FUZZTIME, default 30s each).
	$(GO) test ./schema/ -run '^$$' -fuzz FuzzLoad -fuzztime $${FUZZTIME:-30s}
	$(GO) test ./scheduler/workload/ -run '^$$' -fuzz FuzzRead -fuzztime $${FUZZTIME:-30s}
	$(GO) test ./planner/ -run '^$$' -fuzz FuzzPlan -fuzztime $${FUZZTIME:-30s}
	$(GO) test ./scheduler/sim/ -run '^$$' -fuzz FuzzSim -fuzztime $${FUZZTIME:-30s}
	$(GO) test ./controllers/hub/ -run '^$$' -fuzz FuzzWorkerConfig -fuzztime $${FUZZTIME:-30s}
	$(GO) test ./planner/slurm/ -run '^$$' -fuzz FuzzParseSlurm -fuzztime $${FUZZTIME:-30s}

.PHONY: bench
bench: build controlplane kueue benchplane ## Run the benchmarks, then time the CLI on a generated 500-team repository.
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)
	@d=$$(mktemp -d) && trap 'rm -rf "$$d"' EXIT && \
	$(GO) test ./cmd/allot/ -run TestGeneratedFleetIsValid -count=1 -write-fleet "$$d" >/dev/null && \
	t=$$(command -v /usr/bin/time || true) && f="%e s wall, %M KB peak RSS" && \
	$${t:+$$t -f "validate --base, 500 teams/50 pools/10 clusters: $$f"} $(ALLOT) validate "$$d/head" --base "$$d/base" >/dev/null && \
	$${t:+$$t -f "plan --base -o markdown, same repository: $$f"} $(ALLOT) plan "$$d/head" --base "$$d/base" -o markdown >/dev/null

.PHONY: bench-scheduler
bench-scheduler: ## Starving replays (BenchmarkSimStarving), this tree against BASE (default 02ee642): least user CPU of RUNS runs each.
	scheduler/bench/sidebyside.sh $(BASE) $(RUNS)

.PHONY: bench-kueue
bench-kueue: controlplane kueue benchplane ## allot against Kueue with kube-scheduler: the same Jobs, nodes and Job controller, the median of 3 runs each (~15 min).
	$(GO) test ./controllers/kueue -run '^$$' -bench Throughput -benchtime 3x -timeout 90m

.PHONY: verify
verify: generate fmt ## Regenerate and format, then fail if anything changed.
	@git diff --exit-code || { echo "generated or formatted files are out of date: run make generate fmt and commit"; exit 1; }
