# syncd: the two commands a new user needs are `make demo` and `make test`.
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
BIN     := bin

# Every build, test and benchmark leaves out cloud.google.com/go/storage's
# gRPC transport (its documented opt-out: the tag drops grpc/xds and
# Envoy's protos): syncd reaches gs:// over HTTP (gocloud's gcsblob) and
# never dials gRPC to Cloud Storage, and the modules cost every syncd
# process 19 MB of binary and about 6 MB of resident memory
# (bench/RESULTS.md, 2026-12-06). The Dockerfile builds with it too; a
# plain `go build ./cmd/syncd` works without it, only larger.
export GOFLAGS += -tags=disable_grpc_modules

.PHONY: all build demo sims test vet fmt clean chaos bench bench-webhooks tools pgo

all: build

# go build optimizes syncd with the CPU profile cmd/syncd/default.pgo
# (profile-guided optimization: 2-3% less CPU, bench/RESULTS.md); make
# pgo refreshes it.
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/syncd ./cmd/syncd
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/formsim ./cmd/formsim
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/schedsim ./cmd/schedsim

# Builds its own binaries into bin/demo (as make test builds: -pgo=off;
# it prints the packages it compiles: a first build takes about 6 minutes
# on 2 idle cores, README),
# starts the Forms and scheduling API simulators on loopback, signs in,
# syncs into ./out, adds a few submissions and syncs again to show an
# incremental pass, prints some rows with `syncd rows`, then syncs the
# same simulators into Iceberg tables under ./lake (configs/demo-iceberg.yaml:
# its own state, the embedded sqlite catalog) and prints their totals.
demo:
	GO='$(GO)' ./scripts/demo.sh

# The simulators as make demo starts them (same ports, key and seeds),
# until Ctrl-C; they write state/demo.env for the shell that runs syncd.
sims:
	GO='$(GO)' ./scripts/demo.sh --serve

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo 'gofmt: files above need formatting'; exit 1; }

# The servers the tests start, pinned, installed into bin/tools (nothing
# outside the work tree): versitygw, an S3 server that enforces conditional
# writes, built with go install (about a minute the first time), and
# Azurite, Azure's storage emulator, with npm. GCS is fake-gcs-server run
# in the test process (a Go module). icebird, a JavaScript reader of
# Iceberg tables, is installed with npm too: internal/testkit/icebird reads
# the tables iceberg-go writes with it, a reader independent of the writer.
# One exception outside the work tree:
# PostgreSQL's server, Debian's package, for the Iceberg SQL catalog's
# tests (internal/testkit/pgsrv starts throwaway clusters from it); apt-get
# installs it as root, and a non-root run without it fails naming the
# command. A second run installs nothing and prints nothing.
TOOLS             := $(abspath $(BIN)/tools)
VERSITYGW_VERSION := v1.8.0
AZURITE_VERSION   := 3.37.0
ICEBIRD_VERSION   := 0.3.1
tools: $(TOOLS)/.versitygw-$(VERSITYGW_VERSION) $(TOOLS)/.azurite-$(AZURITE_VERSION) $(TOOLS)/.icebird-$(ICEBIRD_VERSION) postgresql-server

$(TOOLS)/.versitygw-$(VERSITYGW_VERSION):
	@mkdir -p $(TOOLS)
	GOBIN=$(TOOLS) $(GO) install github.com/versity/versitygw/cmd/versitygw@$(VERSITYGW_VERSION)
	@touch $@

$(TOOLS)/.azurite-$(AZURITE_VERSION):
	@mkdir -p $(TOOLS)
	@command -v npm >/dev/null 2>&1 || { echo 'npm is missing: install Node.js 20 or later (apt-get install -y nodejs npm), then rerun make tools'; exit 1; }
	npm install --prefix $(TOOLS) --no-audit --no-fund --loglevel=error azurite@$(AZURITE_VERSION)
	@touch $@

# Debian 12's postgresql is PostgreSQL 15 (/usr/lib/postgresql/15/bin);
# pgsrv takes the newest /usr/lib/postgresql/N/bin, or a postgres on PATH
# (as on a developer's machine elsewhere), or $$SYNCD_PG_BINDIR.
PG_LIBDIR  ?= /usr/lib/postgresql
PG_INSTALL := apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql
.PHONY: postgresql-server
postgresql-server:
	@if [ -n "$$SYNCD_PG_BINDIR" ] || ls $(PG_LIBDIR)/*/bin/postgres >/dev/null 2>&1 || command -v postgres >/dev/null 2>&1; then exit 0; fi; \
	if [ "$$(id -u)" != 0 ]; then echo 'the PostgreSQL server is missing: as root run `$(PG_INSTALL)`, then rerun make tools'; exit 1; fi; \
	command -v apt-get >/dev/null 2>&1 || { echo 'the PostgreSQL server is missing and there is no apt-get: install PostgreSQL 15 or later (initdb, postgres) and set SYNCD_PG_BINDIR to their folder'; exit 1; }; \
	echo '$(PG_INSTALL)'; $(PG_INSTALL)

$(TOOLS)/.icebird-$(ICEBIRD_VERSION):
	@mkdir -p $(TOOLS)
	@command -v npm >/dev/null 2>&1 || { echo 'npm is missing: install Node.js 20 or later (apt-get install -y nodejs npm), then rerun make tools'; exit 1; }
	npm install --prefix $(TOOLS) --no-audit --no-fund --loglevel=error icebird@$(ICEBIRD_VERSION)
	@touch $@

# The core packages, whose goroutines share state (the engine, the state
# store, sinks, spool, oauth, the sources' streams and the forms mapper,
# and the contract suites over them), run under the race detector; every
# other package (the end-to-end suites among them) runs without it.
RACE_PKGS := ./internal/poller/... ./internal/state/... ./internal/sink/... ./internal/spool/... ./internal/oauth/... \
	./internal/table/... ./internal/source/forms ./internal/source/forms/schema/... ./internal/source/scheduling/... ./internal/source/sourcetest/...
RACE_RE   := /internal/(poller|state|sink|spool|oauth|table|source/forms/schema|source/scheduling|source/sourcetest)(/|$$)|/internal/source/forms$$

# The whole suite: unit, end-to-end against the simulator and the bucket
# servers, crash and fault tests; the core packages with -race.
# Every syncd the tests run overwrites Arrow buffers as it frees them, so
# that a buffer read after it was freed shows as wrong output
# (internal/arrowpool); benchmarks run without it.
test chaos: export SYNCD_POISON_FREED_BUFFERS = 1

# make test builds without the profile: compiling every package again with
# it takes about 2 minutes on 2 cores, and it changes only what the compiler
# inlines. make chaos and make bench run the build that ships.
test: export GOFLAGS += -pgo=off

test: vet tools
	$(GO) test -count=1 -timeout 30m $$($(GO) list ./... | grep -Ev '$(RACE_RE)')
	$(GO) test -race -count=1 -timeout 20m $(RACE_PKGS)

# The reliability campaign (about 30-40 minutes on 2 cores; figures below):
# rounds in which syncd is killed with SIGKILL at random instants (CHAOS_KILLS
# across once, backfill and reconcile) under every simulator fault, with
# edits, deletions and back-dated imports between runs, `syncd reconcile
# --from` before all history, before sync.lookback or inside it, disk full
# and read-only output and damaged state files; after every phase DuckDB
# reads the output and the judge checks each submission and each version
# once, none missing, tombstones only of deleted submissions, and the latest
# view equal to the service (README, Reliability campaign). The same rounds
# with the output in s3:// (versitygw; CHAOS_BUCKET_KILLS) and azblob://
# (Azurite; CHAOS_AZBLOB_KILLS, at least 1,000 with 0 duplicates: the open
# azblob finding of issue 21), with fewer submissions a round and the kills
# in the first CHAOS_BUCKET_KILL_PCT% of a run, where they land most often.
# Then the decoder, mapper, timestamp and config fuzz targets for
# CHAOS_FUZZTIME each.
# (TestChaosReconcile is folded into the rounds.) A rerun with the printed
# seed: make chaos SYNCD_CHAOS_SEED=N. `make test` runs a small version.
# Measured on 2 cores shared with other work (load average about 15):
#   campaign, 3 forms x 1500: 106 kills in 12 rounds in 270 s, 22 s a round,
#     2.5 s a kill, about 9 kills a round (4 in passes, 5 in reconciles):
#     300 kills, about 34 rounds, about 13 min;
#   azblob, 2 forms x 150, kills in the first 30%: 158 kills in 17 rounds in
#     85 s, 5 s a round, 0.54 s a kill: 1,000 kills, about 110 rounds, 9 min
#     (measured whole on a quieter machine, load about 2: 1,008 kills in 127
#     rounds in 4 min 29 s, 255 in once and 753 in reconciles, seed 1000);
#   s3, 2 forms x 1500: 40 kills, 4 or 5 rounds, about 2 min;
#   fuzzing about 4 min: make chaos takes about 30 min.
CHAOS_KILLS       ?= 300
CHAOS_SUBMISSIONS ?= 1500
CHAOS_FORMS       ?= 3
# A count of runs, not a duration: go1.26's fuzz coordinator can fail a
# duration budget at its end with "context deadline exceeded" and no
# failing input on a loaded machine (golang/go#75804, fixed in go1.27).
CHAOS_FUZZTIME    ?= 30000x
CHAOS_BUCKET_KILLS ?= 40
CHAOS_BUCKET_SUBMISSIONS ?= 1500
CHAOS_AZBLOB_KILLS ?= 1000
CHAOS_AZBLOB_SUBMISSIONS ?= 150
CHAOS_BUCKET_KILL_PCT ?= 30
CHAOS_SHARDS_SECONDS ?= 180
# The Iceberg sink's campaign (TestChaosIceberg): SIGKILLs across the
# catalogs (sqlite, postgres, rest) and warehouses (local, s3, gs), with
# edits, deletions and back-dated imports between runs and reconciles,
# both tables read by icebird after every round.
CHAOS_ICEBERG_KILLS ?= 1000
CHAOS_ICEBERG_SUBMISSIONS ?= 150
chaos: tools
	SYNCD_CHAOS_KILLS=$(CHAOS_KILLS) SYNCD_CHAOS_SUBMISSIONS=$(CHAOS_SUBMISSIONS) SYNCD_CHAOS_FORMS=$(CHAOS_FORMS) SYNCD_CHAOS_SINK_EVERY=3 \
		SYNCD_CHAOS_BUCKET_KILLS=$(CHAOS_BUCKET_KILLS) SYNCD_CHAOS_BUCKET_SUBMISSIONS=$(CHAOS_BUCKET_SUBMISSIONS) \
		SYNCD_CHAOS_AZBLOB_KILLS=$(CHAOS_AZBLOB_KILLS) SYNCD_CHAOS_AZBLOB_SUBMISSIONS=$(CHAOS_AZBLOB_SUBMISSIONS) \
		SYNCD_CHAOS_BUCKET_KILL_PCT=$(CHAOS_BUCKET_KILL_PCT) \
		$(GO) test -count=1 -v -timeout 150m -run '^(TestChaosCampaign|TestChaosBuckets)$$' ./test/chaos
	SYNCD_CHAOS_ICEBERG_KILLS=$(CHAOS_ICEBERG_KILLS) SYNCD_CHAOS_ICEBERG_SUBMISSIONS=$(CHAOS_ICEBERG_SUBMISSIONS) \
		$(GO) test -count=1 -v -timeout 120m -run '^TestChaosIceberg$$' ./test/chaos
	SYNCD_SHARDS_SECONDS=$(CHAOS_SHARDS_SECONDS) $(GO) test -count=1 -v -timeout 30m -run '^TestShardedDaemons$$' ./test/e2e
	SYNCD_WEBHOOK_SECONDS=$(CHAOS_SHARDS_SECONDS) $(GO) test -count=1 -v -timeout 30m -run '^(TestWebhooksKilled|TestWebhooksFaultsAndForgeries)$$' ./test/e2e
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeSubmissionPage$$' -fuzztime $(CHAOS_FUZZTIME) ./internal/source/forms/api
	$(GO) test -run '^$$' -fuzz '^FuzzScanPage$$' -fuzztime $(CHAOS_FUZZTIME) ./internal/source/forms/api
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeWebhook$$' -fuzztime $(CHAOS_FUZZTIME) ./internal/source/forms/api
	$(GO) test -run '^$$' -fuzz '^FuzzPlainEnd$$' -fuzztime $(CHAOS_FUZZTIME) ./internal/jsontext
	$(GO) test -run '^$$' -fuzz '^FuzzAppend$$' -fuzztime $(CHAOS_FUZZTIME) ./internal/source/forms/schema
	$(GO) test -run '^$$' -fuzz '^FuzzNumberRules$$' -fuzztime $(CHAOS_FUZZTIME) ./internal/source/forms/schema
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(CHAOS_FUZZTIME) ./internal/config
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(CHAOS_FUZZTIME) ./internal/rfc3339

# Refreshes cmd/syncd/default.pgo from CPU profiles of syncd converting the
# three forms of the cpu benchmark (bench/e2e -scenario cpu), PGO_RUNS
# times each, merged. About 2 minutes. A profile of older code still
# serves: the compiler matches it by function and skips what moved.
PGO_RUNS ?= 3
pgo: build
	rm -rf $(BIN)/pgo
	for i in $$(seq $(PGO_RUNS)); do \
		$(GO) run ./bench/e2e -syncd $(BIN)/syncd -scenario cpu -cpu-runs 1 -cpu-profile $(BIN)/pgo/$$i || exit 1; \
	done
	$(GO) tool pprof -proto $$(ls $(BIN)/pgo/*/*.pprof | grep -v '\.heap\.pprof$$') > cmd/syncd/default.pgo.tmp
	mv cmd/syncd/default.pgo.tmp cmd/syncd/default.pgo

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf $(BIN) out lake state

# Benchmarks, about 17 minutes on 2 cores: JSON pages to Parquet against
# DuckDB, the simulator's serving speed, then end to end against the
# simulator: CPU-seconds of syncd backfill against DuckDB's conversion of
# the same pages per form (narrow, 20 questions, wide; the ratio DuckDB /
# syncd, goal >= 1.0), backfill RSS, the rate limit, an incremental pass;
# then many accounts (about 25 minutes more, loaded): the first sync of 100
# accounts in one syncd at 5 req/s per key, of 200 accounts by 1, 2 and 4
# `once --shard I/N` processes on S3 state (versitygw), and the takeover of
# a SIGKILLed `run` replica's accounts.
# The figures and what limits them: bench/RESULTS.md.
BENCH_CPU_SUBMISSIONS      ?= 200000
BENCH_CPU_WIDE_SUBMISSIONS ?= 30000
bench: build $(TOOLS)/.versitygw-$(VERSITYGW_VERSION)
	$(GO) test -run '^$$' -bench . -benchtime 5x -cpu 1 ./bench
	$(GO) test -run '^$$' -bench ServePages -benchtime 2000x ./internal/formsim
	$(GO) test -run '^$$' -bench AccountMemory -benchtime 1x ./internal/formsim
	$(GO) run ./bench/e2e -syncd $(BIN)/syncd -scenario cpu -cpu-submissions $(BENCH_CPU_SUBMISSIONS) -cpu-wide-submissions $(BENCH_CPU_WIDE_SUBMISSIONS)
	$(GO) run ./bench/e2e -syncd $(BIN)/syncd -scenario backfill -form narrow -sizes 100000,1000000
	$(GO) run ./bench/e2e -syncd $(BIN)/syncd -scenario backfill -form wide -sizes 100000,1000000
	$(GO) run ./bench/e2e -syncd $(BIN)/syncd -scenario ratelimited
	$(GO) run ./bench/e2e -syncd $(BIN)/syncd -scenario incremental
	$(GO) run ./bench/e2e -syncd $(BIN)/syncd -scenario account
	$(GO) run ./bench/e2e -syncd $(BIN)/syncd -scenario reconcile
	$(GO) run ./bench/e2e -syncd $(BIN)/syncd -scenario accounts
	$(GO) run ./bench/e2e -syncd $(BIN)/syncd -scenario shards
	$(MAKE) bench-webhooks

# Webhook latency (creation -> committed row, p50/p99) and request cost,
# through the real binary on a 1-hour cron; figures appended to
# bench/webhooks.txt (bench/RESULTS.md quotes them). WEBHOOK_SINK=iceberg
# measures the Iceberg sink (a local warehouse, the sqlite catalog).
WEBHOOK_SECONDS ?= 180
WEBHOOK_SINK ?= parquet
bench-webhooks:
	SYNCD_WEBHOOK_SECONDS=$(WEBHOOK_SECONDS) SYNCD_WEBHOOK_SINK=$(WEBHOOK_SINK) SYNCD_WEBHOOK_RESULTS=$(CURDIR)/bench/webhooks.txt \
		$(GO) test -count=1 -v -timeout 20m -run '^TestWebhooksLatency$$' ./test/e2e
