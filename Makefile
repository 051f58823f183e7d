# Talon build, test and demo targets. `make help` lists them.
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo none)
# The commit's time, not the build's: the same commit builds the same bytes.
DATE    ?= $(shell TZ=UTC0 git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ 2>/dev/null || echo unknown)
BUILDINFO := github.com/talonhq/talon/internal/buildinfo
LDFLAGS := -s -w -X $(BUILDINFO).Version=$(VERSION) -X $(BUILDINFO).Commit=$(COMMIT) -X $(BUILDINFO).Date=$(DATE)
# disable_grpc_modules leaves out what cloud.google.com/go/storage links only
# for its gRPC transport's Direct Connectivity (xDS, envoyproxy's
# go-control-plane, RLS): gs:// reads over the JSON API. talon is 14 MB
# smaller stripped. goreleaser.yaml sets the same tag; deptest checks both.
BUILDTAGS := disable_grpc_modules
# Integration tests start real etcd and kube-apiserver processes; the slowest
# package (the Kubernetes contract suite) needs more than go test's default.
TEST_TIMEOUT ?= 30m
# LAZY_TESTBINS=1 (what .ci/run sets) starts the tests once etcd and
# kube-apiserver are built and leaves the paths of the other test servers
# and of the previous release unset: a test that needs one runs its build
# script, which waits for the build .ci/run started beside the tests (every
# script holds a lock per binary) or builds it. Integration tests mostly
# wait, so those builds use the cores the tests leave idle.
LAZY_TESTBINS ?=
LAZY = $(if $(LAZY_TESTBINS),true ||)
# go test runs packages in the order it is given them: the longest (4 to
# 13 minutes each) go first so that none of them starts last and runs
# alone. ./... adds the rest; a package named twice runs once.
# TEST_P is go test's -p: how many builds and test binaries run at once
# (go's default is the number of cores). The integration packages mostly
# wait on timers and servers: at -p 2 two of them held both slots for
# minutes while links waited and the cores were two thirds idle. At 4, with
# the test servers building beside the tests (.ci/run), the load reached
# 14 and a 3-member etcd's writes stalled for seconds (TestCrashLoopProcesses
# failed once); 3 is the compromise.
TEST_P ?= 3
TEST_FIRST ?= ./internal/integration/faults ./internal/integration/ops ./deploy ./internal/state/kube ./internal/integration/upgrade ./internal/integration/security ./internal/state/etcd ./internal/integration/datapath
TESTFLAGS ?=

.PHONY: help build demo test test-short test-alerts testbins previous lint generate completions man bench bench-report bench-scale bench-shaped bench-fleet faults soak upgrade clean image manifests release-snapshot release-check cosign goreleaser release-snapshot-test

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-17s %s\n", $$1, $$2}'

build: ## build bin/talon and bin/talonctl with version, commit and date stamped in
	CGO_ENABLED=0 $(GO) build -trimpath -tags '$(BUILDTAGS)' -ldflags '$(LDFLAGS)' -o bin/talon ./cmd/talon
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/talonctl ./cmd/talonctl

demo: build ## run a local cluster (3 coordinators active-active + 3 workers, memory backend, an admin token and a talonctl context of its own) until Ctrl-C
	./bin/talon dev --demo-load --coordinators 3

testbins: ## build or install (once, cached outside the repo) the etcd, kube-apiserver, helm, S3, GCS and Azure emulators and Jaeger used by integration tests
	@bash internal/testenv/build-servers.sh >/dev/null
	@bash internal/testenv/build-helm.sh >/dev/null
	@bash internal/testenv/build-s3.sh >/dev/null
	@bash internal/testenv/build-jaeger.sh >/dev/null
	@bash internal/testenv/build-gcs.sh >/dev/null
	@bash internal/testenv/install-azurite.sh >/dev/null

previous: ## build (once, cached beside the test servers) the previous release's talon that the mixed-version suite runs beside HEAD; print its path
	@bash internal/testenv/build-previous.sh

test: ## run every test, integration tests included (real etcd, kube-apiserver, S3, GCS and Azure emulators, Jaeger, headless Chromium, promtool, prometheus, tmux)
	@bash .ci/ensure-chromium.sh
	@openssl=$$(bash .ci/ensure-tool.sh openssl openssl TALON_OPENSSL) && \
	  promtool=$$(bash .ci/ensure-tool.sh promtool prometheus TALON_PROMTOOL) && \
	  prometheus=$$(bash .ci/ensure-tool.sh prometheus prometheus TALON_PROMETHEUS) && \
	  tmux=$$(bash .ci/ensure-tool.sh tmux tmux TALON_TMUX) && \
	  dir=$$(bash internal/testenv/build-servers.sh) && \
	  helm=$$($(LAZY) bash internal/testenv/build-helm.sh) && \
	  s3=$$($(LAZY) bash internal/testenv/build-s3.sh) && \
	  jaeger=$$($(LAZY) bash internal/testenv/build-jaeger.sh) && \
	  gcs=$$($(LAZY) bash internal/testenv/build-gcs.sh) && \
	  azurite=$$($(LAZY) bash internal/testenv/install-azurite.sh) && \
	  echo "test servers: $$dir, helm: $${helm:-on demand}, s3: $${s3:-on demand}, jaeger: $${jaeger:-on demand}, gcs: $${gcs:-on demand}, azurite: $${azurite:-on demand}" && \
	  cosign=$${TALON_COSIGN:-$$(test -x bin/cosign && echo $(CURDIR)/bin/cosign || true)} && \
	  TALON_ETCD_BIN=$$dir/etcd TALON_KUBE_APISERVER_BIN=$$dir/kube-apiserver TALON_HELM_BIN=$$helm TALON_S3_BIN=$$s3 TALON_JAEGER_BIN=$$jaeger TALON_GCS_BIN=$$gcs TALON_AZURITE_BIN=$$azurite TALON_OPENSSL=$$openssl TALON_PROMTOOL=$$promtool TALON_PROMETHEUS=$$prometheus TALON_TMUX=$$tmux TALON_COSIGN=$$cosign \
	  previous=$$($(LAZY) bash internal/testenv/build-previous.sh) && echo "previous release: $${previous:-on demand}" && \
	  TALON_PREVIOUS_BIN=$$previous \
	  $(GO) test -race -count=1 -p $(TEST_P) -timeout $(TEST_TIMEOUT) $(TESTFLAGS) $(TEST_FIRST) ./...

test-alerts: ## the alert rules alone: promtool check and unit tests (one cluster and several), aggregation by cluster, every metric named is exported
	@promtool=$$(bash .ci/ensure-tool.sh promtool prometheus TALON_PROMTOOL) && \
	  TALON_PROMTOOL=$$promtool $(GO) test -count=1 -run 'TestAlertRules|TestExportedMetrics|TestReferencedNames' ./deploy

test-short: ## run unit tests only (skips tests that start servers)
	$(GO) test -short -count=1 ./...

# staticcheck is built from its module (pinned) by go run and cached in the
# Go build cache like any dependency.
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
# The copy detector, pinned and built from its module like staticcheck; the
# threshold is the smallest the code meets (cobra's command boilerplate of
# two config verbs is 100-119 tokens alike).
DUPL ?= github.com/mibk/dupl@v1.0.0
DUPL_TOKENS ?= 120

# vet and staticcheck compile the packages they check with -race, as make
# test does, so that a cold make test after make lint (.ci/run) only links:
# the compiled packages are shared through the build cache. staticcheck
# itself is built without it (-race=false wins over GOFLAGS); the go list
# it runs inherits GOFLAGS.
lint: ## gofmt, go mod tidy, go vet, staticcheck, the size gate (complexity and file length) and the copy detector
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@$(GO) mod tidy -diff || { echo "go.mod/go.sum are not tidy: run go mod tidy"; exit 1; }
	$(GO) vet -race ./...
	@echo "staticcheck ($(STATICCHECK))"
	@GOFLAGS=-race $(GO) run -race=false $(STATICCHECK) ./...
	@echo "size gate (internal/tools/lintgate: complexity over 20, or over 15 outside its baseline; production files over 600 lines; types over 40 methods)"
	@$(GO) run ./internal/tools/lintgate
	@echo "copies ($(DUPL), threshold $(DUPL_TOKENS) tokens, production code)"
	@out=$$(GOFLAGS= $(GO) run $(DUPL) -t $(DUPL_TOKENS) $$(git ls-files '*.go' | grep -v '_test\.go$$' | grep -Ev '^internal/(integration|testenv|testsupport|state/statetest)/|/testdata/')) || exit 1; \
	  echo "$$out" | tail -1 | grep -q 'Found total 0 clone groups' || { echo "$$out"; echo "copied code: factor it out (dupl)"; exit 1; }

generate: ## regenerate the code spelled from the node record's and the node event's structs (internal/tools/recordgen: encoder, scanner, /api/v1 mirrors and conversions, the OpenAPI schemas file); a test fails when it is stale
	$(GO) generate ./internal/cluster/ ./internal/apiv1/ ./internal/admin/

completions: ## regenerate shell completions in completions/
	rm -f completions/*
	$(GO) run ./internal/tools/gendocs -completions completions

man: ## regenerate man pages in man/
	rm -f man/*
	$(GO) run ./internal/tools/gendocs -man man

bench-report: ## measure the performance table (docs/performance.md) in one run (raw ceilings beside Talon, each ratio the median of BENCH_PAIRS interleaved pairs, default 3) and print it; BENCH_SECONDS per phase (default 10), BENCH_MIX renew|write|both, FLEET_SIZES and FLEET_SECONDS as bench-fleet
	@bash .ci/ensure-chromium.sh >/dev/null
	@mkdir -p bin && dir=$$(bash internal/testenv/build-servers.sh) && \
	  TALON_ETCD_BIN=$$dir/etcd TALON_KUBE_APISERVER_BIN=$$dir/kube-apiserver TALON_BENCH_REPORT=1 TALON_BENCH_SCALE=1 TALON_BENCH_SECONDS=$${BENCH_SECONDS:-10} \
	  TALON_BENCH_PAIRS=$${BENCH_PAIRS:-3} TALON_BENCH_MIX=$${BENCH_MIX:-renew} \
	  TALON_BENCH_FLEET=$${FLEET_SIZES:-1000,5000,20000} TALON_BENCH_FLEET_SECONDS=$${FLEET_SECONDS:-60} TALON_BENCH_FLEET_PROFILE=0 \
	  TALON_BENCH_REPORT_FILE=$(CURDIR)/bin/bench-report.md \
	  $(GO) test -count=1 -run '^TestBenchReport$$' -timeout 120m ./internal/bench/integration && cat bin/bench-report.md

# The image: linux/amd64 and linux/arm64 binaries packed by internal/tools/image
# into a multi-arch OCI image layout (no container daemon needed): non-root
# user 65532, entrypoint /ko-app/talon (as ko's release image), OCI labels. Push or load it with any OCI tool,
# e.g. `skopeo copy oci:dist/image:$(VERSION) docker://REGISTRY/talon:$(VERSION)`.
IMAGE_PLATFORMS ?= linux/amd64 linux/arm64
image: ## build the container image as an OCI layout in dist/image
	@rm -rf dist/image-bin
	@set -e; for p in $(IMAGE_PLATFORMS); do \
	  os=$${p%/*}; arch=$${p#*/}; \
	  echo "building talon for $$p"; \
	  CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -tags '$(BUILDTAGS)' -ldflags '$(LDFLAGS)' -o dist/image-bin/$${os}_$$arch/talon ./cmd/talon; \
	done
	SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct 2>/dev/null || echo 0) $(GO) run ./internal/tools/image -out dist/image \
	  -version $(VERSION) -revision $$(git rev-parse HEAD 2>/dev/null || echo unknown) \
	  $(foreach p,$(IMAGE_PLATFORMS),$(p)=dist/image-bin/$(subst /,_,$(p))/talon)
	@echo "image: dist/image (OCI layout, tag $(VERSION))"

manifests: ## regenerate deploy/kubernetes from the Helm chart's default values
	@helm=$$(bash internal/testenv/build-helm.sh) && \
	  TALON_HELM_BIN=$$helm $(GO) test -count=1 -run '^TestPlainManifestsUpToDate$$' ./deploy -update

# goreleaser is built from its module (pinned) like staticcheck. SKIP=ko leaves
# out the image, which needs its base image from a registry. A snapshot is
# not signed (cosign needs COSIGN_PRIVATE_KEY and the Rekor transparency
# log) unless SIGN=1.
GORELEASER ?= github.com/goreleaser/goreleaser/v2@v2.17.0
SKIP ?=
SIGN ?=
comma := ,
SNAPSHOT_SKIP = $(if $(SIGN),$(SKIP),$(if $(SKIP),$(SKIP)$(comma)sign,sign))
# cosign is built from its module (pinned; several hundred modules, about 7
# minutes on 2 cores) into bin/; make test's TestReleaseSigning then signs
# and verifies with it (TALON_COSIGN), and checks only the configuration
# without it.
COSIGN ?= github.com/sigstore/cosign/v2/cmd/cosign@v2.6.5
cosign: ## build cosign from its pinned module into bin/cosign (for the release signing test)
	GOFLAGS= GOBIN=$(CURDIR)/bin $(GO) install $(COSIGN)

# goreleaser built from its pinned module into bin/ (several hundred
# modules, minutes on 2 cores); the deploy package's TestReleaseSnapshot
# then runs `goreleaser release --snapshot` with it (TALON_GORELEASER, or
# bin/goreleaser) and checks the talonctl-only deb, rpm, Homebrew cask and
# Scoop manifest; it skips without it.
goreleaser: ## build goreleaser from its pinned module into bin/goreleaser (for the release snapshot test)
	GOFLAGS= GOBIN=$(CURDIR)/bin $(GO) install $(GORELEASER)

release-snapshot-test: goreleaser ## goreleaser release --snapshot in a test: the talonctl-only packages, cask and Scoop manifest
	TALON_GORELEASER=$(CURDIR)/bin/goreleaser $(GO) test -count=1 -run '^TestReleaseSnapshot$$' -timeout 30m ./deploy

# Before tagging a release: goreleaser's own check of goreleaser.yaml, a
# snapshot build of every archive and package (no image, not signed), and
# the mixed-version suite against the previous release.
release-check: ## goreleaser check, a snapshot build (archives and packages) and make upgrade
	GOFLAGS= $(GO) run $(GORELEASER) check
	$(MAKE) release-snapshot SKIP=ko
	$(MAKE) upgrade

release-snapshot: ## goreleaser release --snapshot: archives, packages and (unless SKIP=ko) the image, into dist/; SIGN=1 signs with cosign
	GOFLAGS= $(GO) run $(GORELEASER) release --snapshot --clean $(if $(SNAPSHOT_SKIP),--skip=$(SNAPSHOT_SKIP))

# The HA fault, agreement and fault-schedule tests on their own: real
# processes with mutual TLS on a 3-member etcd and a kube-apiserver, with
# the full schedule (TALON_FAULTS=full: ten rolling restarts per backend, a
# 20 s SIGSTOP, a 15 s quorum loss; store pauses of 1, 2, 4, 8 s and 2 x
# lease-ttl, and 2 and 4 s at the default timing). `make test` runs them
# too, with the short schedule. This prints their figures (one line per
# fault, a table per blip test) and the fault-schedule table that
# docs/performance.md shows (bin/faults-table.md).
FAULTS_RUN ?= ^(TestLiveness|TestStoreFaultsEtcd$$|TestStoreOutageKube$$|TestCrashLoop|TestTimingMismatch$$|TestFaultSchedule|TestBlipCost)
faults: ## run the HA fault tests and the full fault schedule (3-member etcd, kube-apiserver); print their figures and table
	@mkdir -p bin && rm -f bin/faults-table.md && dir=$$(bash internal/testenv/build-servers.sh) && \
	  TALON_ETCD_BIN=$$dir/etcd TALON_KUBE_APISERVER_BIN=$$dir/kube-apiserver TALON_FAULTS=full TALON_FAULT_TABLE=$(CURDIR)/bin/faults-table.md \
	  $(GO) test -count=1 -v -run '$(FAULTS_RUN)' -timeout 45m ./internal/integration/faults > bin/faults.log 2>&1; rc=$$?; \
	  grep -E 'liveness_test.go|blip_test.go|^ +\| |^(--- |ok|FAIL)' bin/faults.log | grep -v 'offset ' ; \
	  echo; echo "| backend | schedule | fault | client operations | failed by code | max latency | heartbeats lost | 200s short of live workers | wrong answers | worker records lost |"; \
	  echo "|---|---|---|---|---|---|---|---|---|---|"; cat bin/faults-table.md 2>/dev/null; \
	  echo "full log: bin/faults.log"; exit $$rc

# The mixed-version suite: the previous release (internal/testenv/previous-release,
# or the newest tag) beside HEAD on a 3-member etcd with mutual TLS and on a
# kube-apiserver: a coordinator of each build with HEAD workers, HEAD
# coordinators with previous workers, and a rolling upgrade previous -> HEAD
# (coordinators first), a rollback, and an upgrade workers first, with
# lookups and heartbeats throughout; a minute per mixed window
# (TALON_UPGRADE=full). It prints one row of figures per phase and the table
# (bin/upgrade-table.md). `make test` runs it with 15 s windows.
upgrade: ## run the mixed-version suite (previous release beside HEAD, etcd and Kubernetes) and print its table
	@mkdir -p bin && rm -f bin/upgrade-table.md && dir=$$(bash internal/testenv/build-servers.sh) && \
	  previous=$$(bash internal/testenv/build-previous.sh) && \
	  TALON_ETCD_BIN=$$dir/etcd TALON_KUBE_APISERVER_BIN=$$dir/kube-apiserver TALON_PREVIOUS_BIN=$$previous TALON_UPGRADE=full \
	  TALON_UPGRADE_TABLE=$(CURDIR)/bin/upgrade-table.md \
	  $(GO) test -count=1 -v -timeout 45m ./internal/integration/upgrade > bin/upgrade.log 2>&1; rc=$$?; \
	  grep -E 'upgrade row|^(--- |ok|FAIL)' bin/upgrade.log; \
	  echo; echo "| backend | phase | lookups | failed by code | max latency | late marks of live workers | answers short of live workers | disagreements at a shared revision | unreadable records |"; \
	  echo "|---|---|---|---|---|---|---|---|---|"; cat bin/upgrade-table.md 2>/dev/null; \
	  echo "full log: bin/upgrade.log"; exit $$rc

# The soak: a compressed day (timing 50 times faster than the defaults) on
# a stock etcd with a 16 MiB quota and on a kube-apiserver, side by side, two
# coordinators and 10 workers each, with store pauses and coordinator
# restarts; one row of figures a minute (ready share, fewest eligible
# against live workers, the store's database size, store bytes per
# heartbeat, RSS, goroutines and open files). SOAK_DURATION (default 25m)
# sets its length; `make test` runs it for 90 s.
SOAK_DURATION ?= 25m
soak: ## run the soak (SOAK_DURATION, default 25m) on etcd and Kubernetes and print its figures over time
	@mkdir -p bin && dir=$$(bash internal/testenv/build-servers.sh) && \
	  TALON_ETCD_BIN=$$dir/etcd TALON_KUBE_APISERVER_BIN=$$dir/kube-apiserver TALON_SOAK=$(SOAK_DURATION) \
	  $(GO) test -count=1 -v -run '^TestSoak$$' -timeout 3h ./internal/integration/ops > bin/soak.log 2>&1; rc=$$?; \
	  grep -E 'soak_test.go|^(--- |ok|FAIL)' bin/soak.log; echo "full log: bin/soak.log"; exit $$rc

# The scale rows of bench-report alone: a coordinator process on etcd with
# 50,000 simulated workers (RSS, snapshots, lookups, talonctl nodes list),
# talonctl top's model at 20,000 nodes, the web UI at 10,000 nodes in
# headless Chromium, a Kubernetes Lease LIST at 10,000. SCALE=etcd,top,ui,kube
# picks some.
bench-scale: ## measure the scale rows of bench-report alone (50,000 workers on etcd, top at 20,000, the UI at 10,000 in Chromium); SCALE picks some; HEAP_PROFILE=FILE keeps the 50,000-worker coordinator's heap profile
	@bash .ci/ensure-chromium.sh >/dev/null
	@mkdir -p bin && dir=$$(bash internal/testenv/build-servers.sh) && \
	  TALON_ETCD_BIN=$$dir/etcd TALON_KUBE_APISERVER_BIN=$$dir/kube-apiserver TALON_BENCH_SCALE=$${SCALE:-1} TALON_BENCH_HEAP_PROFILE=$(HEAP_PROFILE) \
	  TALON_BENCH_REPORT_FILE=$(CURDIR)/bin/bench-scale.md \
	  $(GO) test -count=1 -run '^TestBenchScale$$' -timeout 30m ./internal/bench/integration && cat bin/bench-scale.md

# The shaped-store rows of bench-report alone: S3 (versitygw) behind a proxy
# with a cloud store's latency and bandwidth per connection, read directly
# and through talon worker processes. SHAPE_LATENCY (30ms), SHAPE_MBPS (MB/s
# per connection, 100) and SHAPE_CONNS (256) set the shape.
bench-shaped: ## measure the shaped-store rows of bench-report alone (cold and second reads through a worker vs direct, talon get over 3 workers vs 1, S3 behind a 30 ms, 100 MB/s proxy); BENCH_PAIRS, SHAPE_LATENCY, SHAPE_MBPS, SHAPE_CONNS
	@mkdir -p bin && TALON_BENCH_REPORT=1 TALON_BENCH_PAIRS=$${BENCH_PAIRS:-3} \
	  TALON_BENCH_SHAPE_LATENCY=$(SHAPE_LATENCY) TALON_BENCH_SHAPE_MBPS=$(SHAPE_MBPS) TALON_BENCH_SHAPE_CONNS=$(SHAPE_CONNS) \
	  TALON_BENCH_REPORT_FILE=$(CURDIR)/bin/bench-shaped.md \
	  $(GO) test -count=1 -v -run '^TestBenchReportShaped$$' -timeout 20m ./internal/bench/integration > bin/bench-shaped.log 2>&1; rc=$$?; \
	  grep -E 'benchreport_shaped_test.go|^(--- |ok|FAIL)' bin/bench-shaped.log; echo "full log: bin/bench-shaped.log"; \
	  [ $$rc -eq 0 ] && cat bin/bench-shaped.md; exit $$rc

# The fleet rows of bench-report alone (issue 51): two coordinator
# processes on etcd and on Kubernetes, and simulated workers in processes
# of their own (talon bench fleet) heartbeating every 5 s, open loop, with
# lookups beside them. FLEET_SIZES (1000,5000,20000), FLEET_SECONDS per
# row after the registrations (60), FLEET_BACKENDS (etcd,kubernetes) and
# FLEET_PROFILE, the etcd row whose coordinators are CPU-profiled (5000;
# 0 for none; the profile's top goes to bin/bench-fleet-profile.txt).
bench-fleet: ## measure the fleet rows of bench-report alone (workers out of process every 5 s against two coordinator processes on etcd and Kubernetes; accepted/s, CPU per 1,000 heartbeats, RSS per worker, lookup p99, a coordinator profile); FLEET_SIZES, FLEET_SECONDS, FLEET_BACKENDS, FLEET_PROFILE
	@mkdir -p bin && dir=$$(bash internal/testenv/build-servers.sh) && \
	  TALON_ETCD_BIN=$$dir/etcd TALON_KUBE_APISERVER_BIN=$$dir/kube-apiserver TALON_BENCH_FLEET=$${FLEET_SIZES:-1000,5000,20000} \
	  TALON_BENCH_FLEET_SECONDS=$${FLEET_SECONDS:-60} TALON_BENCH_FLEET_BACKENDS=$${FLEET_BACKENDS:-etcd,kubernetes} TALON_BENCH_FLEET_PROFILE=$${FLEET_PROFILE:-5000} \
	  TALON_BENCH_FLEET_PROFILE_FILE=$(CURDIR)/bin/bench-fleet-profile.txt TALON_BENCH_REPORT_FILE=$(CURDIR)/bin/bench-fleet.md \
	  $(GO) test -count=1 -v -run '^TestBenchFleet$$' -timeout 120m ./internal/bench/integration > bin/bench-fleet.log 2>&1; rc=$$?; \
	  grep -E '^(--- |ok|FAIL)' bin/bench-fleet.log; echo "full log (every fleet's table and failures): bin/bench-fleet.log"; \
	  [ $$rc -eq 0 ] && cat bin/bench-fleet.md; exit $$rc

bench: ## run the Go benchmarks (figures in docs/performance.md)
	@dir=$$(bash internal/testenv/build-servers.sh) && \
	  TALON_ETCD_BIN=$$dir/etcd TALON_KUBE_APISERVER_BIN=$$dir/kube-apiserver \
	  $(GO) test -run '^$$' -bench . -benchmem -timeout 60m ./...

clean: ## remove build output
	rm -rf bin dist
