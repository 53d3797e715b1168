# pacegate build and test entry points. `make test` is what CI runs.
GO ?= go
RMQ = bash scripts/rocketmq/rmq.sh
REDIS = bash scripts/redis/redis.sh

.PHONY: test vet unit rocketmq-test cluster-test build fmt fuzz deploy-check faults

# vet, the race-enabled suite, then the RocketMQ suite on a real broker and
# the cluster suite on a real Redis.
test: vet unit rocketmq-test cluster-test

vet:
	$(GO) vet ./...

unit:
	$(GO) test -race -count=1 -timeout 30m ./...

# Starts RocketMQ 5.5 (namesrv, broker, proxy) from Maven Central jars,
# runs the backend's suite and the gateway's end-to-end RocketMQ tests
# against it, and stops it again. Without -race: the RocketMQ Go client
# v5.1.4 has a data race of its own in LitePushConsumer.Start.
# The RocketMQ suite runs twice: on one broker group (every test, restarts
# included), then with a second broker group behind the same name server
# (the tests whose claims change with two groups: spread, order, one call per
# LiteTopic, replicas, the cold-start burst).
TWO_GROUPS_RUN = TestLiteTopicsSpread|TestTwoReplicas|TestOneInFlightPerLiteTopic|TestColdStartBurst|TestSuspendPacing|TestQueueOnBroker
TWO_GROUPS_E2E = TestRocketMQTwoReplicas|TestRocketMQColdStartBurst|TestRocketMQResponsesMatchEmbedded

rocketmq-test:
	$(RMQ) fetch start init
	set -a; eval "$$($(RMQ) env)"; set +a; \
	  $(GO) test -count=1 -timeout 20m ./consume/rocketmq/ && \
	  $(GO) test -count=1 -timeout 20m -run RocketMQ ./gateway/e2e/ && \
	  $(RMQ) start-b init && \
	  { set -a; eval "$$($(RMQ) env)"; set +a; } && \
	  $(GO) test -count=1 -timeout 20m -run '$(TWO_GROUPS_RUN)' ./consume/rocketmq/ && \
	  $(GO) test -count=1 -timeout 20m -run '$(TWO_GROUPS_E2E)' ./gateway/e2e/; \
	  rc=$$?; $(RMQ) stop; exit $$rc

# Starts Redis (Debian's redis-server, installed by `fetch` when missing)
# on 127.0.0.1, runs the shared store's suite (policy/cluster: the Lua
# scripts' step tables, leases, fallback) and the gateway's three-replica
# end-to-end suite against it, and stops it again. Without the variable
# these tests skip, so `go test ./...` alone still passes.
cluster-test:
	$(REDIS) fetch start
	set -a; eval "$$($(REDIS) env)"; set +a; \
	  $(GO) test -race -count=1 -timeout 10m ./policy/cluster/ && \
	  $(GO) test -count=1 -timeout 10m -run Cluster ./gateway/e2e/; \
	  rc=$$?; $(REDIS) stop; exit $$rc

# The deploy kit (deploy/): promtool, helm and the Kubernetes schemas
# against the rules, dashboard, compose file and chart. Builds its tools
# once into .cache/deploy-tools (about 6 min cold).
deploy-check:
	bash scripts/deploy-check.sh

# The fault suite's long version (gateway/faults): every scenario under a
# larger load (thousands of slowloris connections, a million random API
# keys to the gateway process), about three minutes on 2 cores; rewrites
# RELIABILITY.md.
faults:
	PACEGATE_FAULTS_LONG=1 PACEGATE_FAULTS_REPORT=$(CURDIR)/RELIABILITY.md \
	  $(GO) test -count=1 -timeout 10m -run 'TestFaultSuite' -v ./gateway/faults/

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o bin/pacegate .

fmt:
	gofmt -w $$(git ls-files '*.go')

# FUZZTIME of every fuzz target in the module (CI: 50000x each, from
# .ci/run). Targets are discovered, not listed: each package with a
# `func Fuzz` in a _test.go file is asked for its targets with
# `go test -list`, so a new target joins without an edit here. Seeds live
# in testdata/fuzz/<Target>/ beside each target and run in `make test`
# too; an input that fails is written there by the fuzzer: commit it with
# the fix. -parallel 1: the machine is shared. The budget is a count of
# executions, not a duration: Go 1.26's fuzz coordinator can report a
# bare "context deadline exceeded" failure when a duration ends while a
# worker is mid-call (go.dev/issue/75804, fixed in Go 1.27), and a count
# sets no deadline to race. -timeout bounds a target that hangs.
FUZZTIME ?= 200000x
FUZZFLAGS ?= -parallel 1
fuzz:
	@set -e; \
	for dir in $$(git ls-files '*_test.go' | xargs grep -l '^func Fuzz' | xargs -n1 dirname | sort -u | sed 's,^,./,'); do \
	  for target in $$($(GO) test -list '^Fuzz' $$dir | grep '^Fuzz'); do \
	    echo "== fuzz $$dir $$target for $(FUZZTIME)"; \
	    $(GO) test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) -timeout 10m $(FUZZFLAGS) $$dir; \
	  done; \
	done

# Benchmarks (bench/README.md). `make bench` is the quick mode (about 10 min on
# 2 cores); it rewrites bench/results/quick.json, the SVG plots beside it
# and BENCHMARKS.md. nginx (apt-get install nginx-light) adds the nginx
# limit_req column to the throttling scenario, and Debian's redis-server
# (bash scripts/redis/redis.sh fetch) the replicas one, which starts a Redis
# of its own; PACEGATE_ROCKETMQ_ENDPOINT (bash scripts/rocketmq/rmq.sh fetch
# start init) enables the RocketMQ ones.
.PHONY: bench bench-full bench-report

bench:
	$(GO) run ./bench -quick

bench-full:
	$(GO) run ./bench -full

# Regenerate BENCHMARKS.md from the committed quick results only.
bench-report:
	$(GO) run ./bench -report bench/results/quick.json
