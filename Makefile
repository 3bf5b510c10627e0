# hookline — make targets. `make run` runs the pipeline, `make test` runs the
# tests; both start a local Apache Kafka (no Docker) when KAFKA_BROKERS is unset.

GO        ?= go
BIN       := bin
# Every top-level folder with a main.go is a service binary.
SERVICES  := $(patsubst %/main.go,%,$(wildcard */main.go))
KAFKA     := compose/kafka.sh
TEST_TIMEOUT ?= 20m

# Use the broker the caller names, or the local one `make kafka-up` starts.
ifeq ($(strip $(KAFKA_BROKERS)),)
  KAFKA_DEP := kafka-up
  # The benchmarks measure the CPU of the broker they started (it shares the cores);
  # exported, as KAFKA_BROKERS is, for `make bench`'s own make of every target.
  export BROKER_PID := -broker-pid-file $(or $(HOOKLINE_KAFKA_DIR),$(CURDIR)/.kafka)/kafka.pid
  export KAFKA_BROKERS := 127.0.0.1:$(or $(KAFKA_PORT),9092)
else
  KAFKA_DEP :=
endif

.PHONY: all build run observe test test-e2e test-unit bench bench-ingest bench-processor bench-state bench-events bench-retrier bench-e2e bench-cost bench-idle bench-adaptive bench-compare bench-diff lint fuzz kafka-up kafka-down kafka-status kafka-cluster-up kafka-cluster-down kafka-cluster-status kafka-secure-up kafka-secure-down kafka-secure-status topics clean

all: build

build:
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/ $(addprefix ./,$(SERVICES)) ./compose/sink

## run: the services, the local sink and dlq serve in the foreground; with KAFKA_BROKERS
## unset, compose/run.sh starts the local broker unless it is running, and stops it at
## Ctrl-C only if it started it (the last line says which).
run: build
	HOOKLINE_RUN_KAFKA=$(if $(KAFKA_DEP),local,) compose/run.sh

## observe: Prometheus and Alertmanager (Debian's prometheus and prometheus-alertmanager packages,
## no Docker) in the foreground, scraping what `make run` runs, evaluating compose/prometheus/alerts.yml
## and notifying the receivers set in the environment (HOOKLINE_ALERT_*; docs/operating.md, Monitoring);
## and Jaeger, the tracing backend (compose/jaeger/install.sh builds it once; OTLP on 127.0.0.1:4318,
## query API on 127.0.0.1:16686, no UI; docs/operating.md, Tracing). Prints the URLs; Ctrl-C stops them all.
observe:
	compose/observe.sh

## test: every test, against a real broker: the packages first, then the
## whole-system scenarios in three stages (alone, beside each other, quiet).
## Test topics and groups that killed runs left are swept before and after
## (pkg/testkit/kafkatest/sweep); the end lists the slowest packages and tests
## (pkg/testkit/testreport), writes every one's time to bin/test-times and the closing line
## to bin/test-summary.
GO_TEST   := HOOKLINE_BIN_DIR=$(CURDIR)/$(BIN) $(GO) test -json -count=1 -timeout $(TEST_TIMEOUT)
# go test starts the packages' tests in the order it is given them, two at a time on
# two cores: the slowest (bin/test-times of a run) go first, so that none of them is
# left running alone at the end. A folder no longer there is left out.
TEST_FIRST := processor pkg/testkit/kafkatest retrier dlq processor/internal/consume \
	schemas/schemathesis ingest pkg/bench/e2e
# The scenarios run in three stages (pkg/testkit/e2e/stages_test.go): those whose claims
# are latencies one at a time; then those whose claims are counts and bounds a kill sets,
# three at a time, slowest first; then the two quiet ones beside each other. The stages
# need a parallel slot for each scenario of the last two (17 today).
E2E_FLAGS := -parallel 32
test: build $(KAFKA_DEP)
	$(GO) run ./pkg/testkit/kafkatest/sweep
	$(GO) build -o $(BIN)/testreport ./pkg/testkit/testreport
	$(BIN)/testreport -summary $(BIN)/test-summary -times $(BIN)/test-times \
		"$(GO_TEST) $$($(GO) list $(addprefix ./,$(wildcard $(TEST_FIRST))) ./... | grep -v '/pkg/testkit/e2e$$' | tr '\n' ' ')" \
		"$(GO_TEST) -v $(E2E_FLAGS) ./pkg/testkit/e2e/"
	-$(GO) run ./pkg/testkit/kafkatest/sweep # housekeeping: an error is printed, the tests' verdict stands

## test-e2e: the whole-system scenarios (pkg/testkit/e2e), each ending with the ledger's line.
test-e2e: build $(KAFKA_DEP)
	$(GO) build -o $(BIN)/testreport ./pkg/testkit/testreport
	$(BIN)/testreport -times $(BIN)/test-times "$(GO_TEST) -v $(E2E_FLAGS) ./pkg/testkit/e2e/"

## test-unit: the tests that need no broker (integration tests skip).
test-unit:
	KAFKA_BROKERS= $(GO) test -count=1 -short ./...

## bench: every benchmark target, their figures in one report file, BENCH_REPORT (default
## bin/bench-<UTC time>.json): the machine's description and every figure and ratio the programs
## print (docs/performance.md, "The benchmark report"). The programs live in pkg/bench/; BENCH_FLAGS
## goes to one bench-* program (a shorter run: `make bench-retrier BENCH_FLAGS='-n 10000 -idle 10s'`;
## -h lists them). A bench-* target alone writes to the file HOOKLINE_BENCH_REPORT names, if set.
ifndef BENCH_REPORT
  BENCH_REPORT := $(BIN)/bench-$(shell date -u +%Y%m%dT%H%M%SZ).json
endif
BENCH_TARGETS := bench-ingest bench-processor bench-state bench-retrier bench-e2e bench-cost bench-idle bench-adaptive
bench: $(KAFKA_DEP)
	$(GO) run ./pkg/bench/report/cmd/bench-report start $(BENCH_REPORT)
	HOOKLINE_BENCH_REPORT=$(abspath $(BENCH_REPORT)) $(MAKE) $(BENCH_TARGETS)
	$(GO) run ./pkg/bench/report/cmd/bench-report end $(BENCH_REPORT)

## bench-diff: each figure of two bench reports, old, new and new/old, marking those that moved
## more than THRESHOLD (default 0.1, 10 %): make bench-diff A=old.json B=new.json
bench-diff:
	@test -n "$(A)" -a -n "$(B)" || { echo "bench-diff: A=<old report> B=<new report> are required" >&2; exit 2; }
	$(GO) run ./pkg/bench/report/cmd/bench-report compare -threshold $(or $(THRESHOLD),0.1) $(A) $(B)

## bench-readme: the README's "Measured figures" table from one report of a full `make bench`
## (REPORT=bin/bench-<time>.json): the file is kept as docs/bench-report.json and the table rewritten.
bench-readme:
	@test -n "$(REPORT)" || { echo "bench-readme: REPORT=<report of a full make bench> is required" >&2; exit 2; }
	[ "$(REPORT)" -ef docs/bench-report.json ] || cp $(REPORT) docs/bench-report.json
	$(GO) run ./pkg/bench/report/cmd/bench-report readme docs/bench-report.json README.md

## bench-ingest: ingest against a minimal gin + franz-go handler (acks=all) and a bare gin handler, rounds alternated
## in one run, the targets taking turns of 2 s in a round (BENCH_FLAGS='-c 256 -d 10s -rounds 3 -slice 2s' are its
## defaults); with the local broker, its CPU per request too; -corpus github: GitHub's example payloads
## without schema and with GitHub's schema (on_invalid: dlq, then reject), alternated (-rounds 5 by default).
bench-ingest: build $(KAFKA_DEP)
	$(GO) build -o $(BIN)/loadgen ./pkg/bench/ingest
	HOOKLINE_BIN_DIR=$(CURDIR)/$(BIN) $(BIN)/loadgen $(BROKER_PID) $(BENCH_FLAGS)

## bench-processor: processor throughput and CPU against ProducerPerformance, duplicates, a slow destination, restore.
## Then the fan-out comparison (issues 22, 36): one topic route against three, alternated, each phase a backlog produced
## with the processor stopped; BENCH_FLAGS='-routes-n 300000 -routes-rounds 3' are its defaults, -routes-n 0 leaves it out.
## Then the backfill (issue 24): a topic route added to the one-route provider, `dlq backfill` of its events, against
## first-seen events to one topic route; then ordering (issue 24): one topic route unordered / ordered over 10,000
## entities, alternated (-ord-n 50000 -ord-rounds 2). Before the fan-out, the schema
## comparison (issue 32): GitHub's example payloads without schema / with GitHub's schema per event type, alternated
## (-schema-n 10000 -schema-rounds 2; -schema-n 0 leaves it out).
bench-processor: build $(KAFKA_DEP)
	$(GO) build -o $(BIN)/bench-processor ./pkg/bench/processor
	HOOKLINE_BIN_DIR=$(CURDIR)/$(BIN) $(BIN)/bench-processor $(BENCH_FLAGS)
	$(GO) test -run '^$$' -bench BenchmarkRestore -benchtime 2x ./processor/internal/restore/

## bench-state: a state store of 10M keys reopened and read at random: RSS before and after HOOKLINE_STATE_MEMORY, under GOMEMLIMIT (no broker).
STATE_KEYS ?= 10000000
STATE_GOMEMLIMIT ?= 200MiB
bench-state:
	HOOKLINE_RSS=1 HOOKLINE_RSS_KEYS=$(STATE_KEYS) HOOKLINE_RSS_GOMEMLIMIT=$(STATE_GOMEMLIMIT) \
		$(GO) test -count=1 -run '^TestRSS$$' -v -timeout 90m ./processor/internal/state/

## bench-events: the events list (GET /events) in indexes of 1M and 10M deliveries, in one run: p50/p99 and positions read
## per query kind, size on disk, RSS and Go heap (no broker; not in `make bench`). The indexes are built once (StreamWriter:
## for 10M, 5 min of CPU, 3.4 GB on disk, up to 13 GB of memory) and kept in EVENTS_DIR for the next run; EVENTS_KEYS,
## EVENTS_BUILD=apply (through Apply, as the feeder writes: much slower).
EVENTS_KEYS ?= 1000000,10000000
EVENTS_DIR ?= $(or $(TMPDIR),/tmp)/hookline-events-bench
EVENTS_BUILD ?= bulk
bench-events:
	HOOKLINE_TRACE_BENCH_KEYS=$(EVENTS_KEYS) HOOKLINE_TRACE_BENCH_DIR=$(EVENTS_DIR) HOOKLINE_TRACE_BENCH_BUILD=$(EVENTS_BUILD) \
		$(GO) test -run '^$$' -bench BenchmarkEventsList -benchtime 500x -count 3 -v -timeout 3h ./dlq/internal/trace/

## bench-retrier: retrier idle with 100k parked (CPU, RSS) and 100k due at once (moved/s vs ProducerPerformance).
bench-retrier: build $(KAFKA_DEP)
	$(GO) build -o $(BIN)/retrier-bench ./pkg/bench/retrier
	HOOKLINE_BIN_DIR=$(CURDIR)/$(BIN) $(BIN)/retrier-bench $(BENCH_FLAGS)

## bench-e2e: POST to `done` outcome through ingest, processor and retrier: events/s and 202-to-outcome latency against ProducerPerformance;
## the open loop at half load alternated with an ordered provider interleaved with its twin without ordering (the same rate in all), -half-rounds 3 rounds after -half-warm 5s at that rate (issue 36);
## then isolation (a slow destination beside a fast one) and ordering (issue 24: one entity failing beside 1,000 others).
## Each phase's CPU per event by program (the local broker's too) and how busy the whole machine was.
## BENCH_FLAGS=-tracing runs only the tracing comparison instead (issue 35): off, on at 1 %, on at 100 %, alternated (-tracing-rounds, -tracing-rate).
bench-e2e: build $(KAFKA_DEP)
	$(GO) build -o $(BIN)/bench-e2e ./pkg/bench/e2e
	HOOKLINE_BIN_DIR=$(CURDIR)/$(BIN) $(BIN)/bench-e2e $(BROKER_PID) $(BENCH_FLAGS)

## bench-cost: CPU per event of ingest, processor, retrier and dlq serve at 10, 100 and 1,000 events/s and saturated,
## and each one idle (bench-e2e -cost, 3 rounds, about 10 minutes; COST_FLAGS: e.g. '-cost-rounds 1').
bench-cost: build $(KAFKA_DEP)
	$(GO) build -o $(BIN)/bench-e2e ./pkg/bench/e2e
	HOOKLINE_BIN_DIR=$(CURDIR)/$(BIN) $(BIN)/bench-e2e -cost $(BROKER_PID) $(COST_FLAGS)

## bench-idle: ingest, processor, retrier and dlq serve with no traffic: each one's CPU (% of a core) over
## 3 rounds of 30 s (BENCH_FLAGS='-d 30s -rounds 3 -settle 10s'), and its RSS.
bench-idle: build $(KAFKA_DEP)
	$(GO) build -o $(BIN)/bench-idle ./pkg/bench/idle
	HOOKLINE_BIN_DIR=$(CURDIR)/$(BIN) $(BIN)/bench-idle $(BENCH_FLAGS)

## bench-adaptive: adaptive delivery (issue 34) against a receiver of hidden capacity C = 32, then 8, then 64:
## goodput against what C allows and the 429 share, adaptive beside fixed limits of 64 and 8 (-runs N, -phase D).
bench-adaptive: build $(KAFKA_DEP)
	$(GO) build -o $(BIN)/bench-adaptive ./pkg/bench/adaptive
	HOOKLINE_BIN_DIR=$(CURDIR)/$(BIN) $(BIN)/bench-adaptive $(BENCH_FLAGS)

## bench-compare: bench-processor and bench-e2e of OLD=<rev> (built in a temporary worktree) and of this tree,
## alternated in one run on one broker, ROUNDS=3 rounds; ratios new/old pair by pair (pkg/bench/compare.sh:
## PROC_FLAGS, E2E_FLAGS, SKIP_PROC, SKIP_E2E, OUT).
bench-compare: $(KAFKA_DEP)
	@test -n "$(OLD)" || { echo "bench-compare: OLD=<rev> is required" >&2; exit 2; }
	OLD=$(OLD) ROUNDS=$(or $(ROUNDS),3) pkg/bench/compare.sh

lint:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

## fuzz: run each fuzz target for FUZZTIME (default 60s).
FUZZTIME ?= 60s
fuzz:
	$(GO) test -run='^$$' -fuzz=FuzzVerify -fuzztime=$(FUZZTIME) ./pkg/providers/
	$(GO) test -run='^$$' -fuzz=FuzzEvents -fuzztime=$(FUZZTIME) ./pkg/providers/

kafka-up:
	$(KAFKA) up

kafka-down:
	$(KAFKA) down

kafka-status:
	$(KAFKA) status

## kafka-cluster-up: a local three-broker cluster (127.0.0.1:19092-19094, replication factor 3, min.insync.replicas 2).
kafka-cluster-up:
	$(KAFKA) cluster-up

kafka-cluster-down:
	$(KAFKA) cluster-down

kafka-cluster-status:
	$(KAFKA) cluster-status

## kafka-secure-up: a second local broker, 127.0.0.1:9095 (KAFKA_SECURE_PORT, default KAFKA_PORT+3;
## its controller KAFKA_SECURE_CONTROLLER_PORT, KAFKA_PORT+4), SASL_SSL with
## SCRAM-SHA-512, a local CA, one user per service and only their ACLs; .kafka-secure/<service>.env.
## Tests that need it start it themselves (kafkatest.Secure).
kafka-secure-up:
	$(KAFKA) secure-up

kafka-secure-down:
	$(KAFKA) secure-down

kafka-secure-status:
	$(KAFKA) secure-status

## topics: create missing topics and check existing ones, as every service does at start.
topics: build $(KAFKA_DEP)
	HOOKLINE_PROVIDERS=$${HOOKLINE_PROVIDERS:-compose/providers.dev.yaml} $(BIN)/ingest -ensure-topics

clean:
	rm -rf $(BIN)
