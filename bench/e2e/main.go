// Command e2e runs syncd's end-to-end benchmarks: the real syncd binary
// against the Forms API simulator on loopback, measured from outside
// (wall time, CPU time and peak RSS of the syncd process; requests and 429s
// from the simulator's own counters). See bench/RESULTS.md.
//
//	go run ./bench/e2e -syncd bin/syncd -scenario all
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/bqfake"
	"github.com/syncd-dev/syncd/internal/formsim"
)

const apiKey = "sk_bench_E2E_KEY"

// compression and partition are the -compression and -partition flags, for
// every config written; partition "" leaves the line out (syncd's default
// layout, auto).
var compression, partition = "zstd", ""

// sinkKind is the -sink flag: parquet, iceberg (a warehouse in the run's
// folder, the embedded sqlite catalog beside the state), or bigquery
// (loads into bqfake, the BigQuery fake, on loopback; bqEndpoint is its
// URL while it runs).
var sinkKind, bqEndpoint = "parquet", ""

// outDir is where a run in dir writes its files: the Parquet folder or the
// Iceberg warehouse.
func outDir(dir string) string {
	if sinkKind == "iceberg" {
		return filepath.Join(dir, "lake")
	}
	return filepath.Join(dir, "out")
}

// sinkLines is the config's sink section.
func sinkLines(dir string) string {
	if sinkKind == "iceberg" {
		return fmt.Sprintf("sink:\n  type: iceberg\n  iceberg:\n    warehouse: %s\n", outDir(dir))
	}
	if sinkKind == "bigquery" {
		return fmt.Sprintf("sink:\n  type: bigquery\n  bigquery:\n    project: bench\n    dataset: forms\n    endpoint: %s\n    min_backoff: 50ms\n    max_backoff: 1s\n", bqEndpoint)
	}
	return fmt.Sprintf("sink:\n  type: parquet\n  parquet:\n    path: %s\n    compression: %s\n%s", filepath.Join(dir, "out"), compression, partitionLine())
}

// withSink runs fn with the sink of -sink ready: for bigquery, a bqfake
// that lives until fn returns. bqfake wants a testing.TB, which
// testing.Benchmark provides outside `go test`; fn runs once (it takes
// longer than the benchmark time).
func withSink(fn func()) {
	if sinkKind != "bigquery" {
		fn()
		return
	}
	testing.Benchmark(func(b *testing.B) {
		f := bqfake.New(b)
		bqEndpoint = f.URL()
		fn()
		bqEndpoint = ""
	})
}

// partitionLine is the config's partition line under sink.parquet, empty
// when -partition is not given.
func partitionLine() string {
	if partition == "" {
		return ""
	}
	return "    partition: " + partition + "\n"
}

// partitionName names the layout asked of syncd, for the tables' headings.
func partitionName() string {
	if partition == "" {
		return "syncd's default"
	}
	return partition
}

func main() {
	if len(os.Args) == 4 && os.Args[1] == duckChildArg {
		duckChildMain(os.Args[2], os.Args[3])
		return
	}
	var (
		syncdBin     = flag.String("syncd", "bin/syncd", "the syncd binary to measure")
		scenario     = flag.String("scenario", "all", "backfill, ratelimited, incremental, account, accounts, shards, reconcile, cpu, reader or all")
		sizes        = flag.String("sizes", "100000,1000000", "backfill sizes, submissions")
		shape        = flag.String("form", "narrow", "backfill form: narrow (6-10 questions) or wide (every documented type)")
		conc         = flag.Int("concurrency", 2, "backfill windows fetched at once")
		rlSubs       = flag.Int("ratelimited-submissions", 30000, "submissions in the rate-limited backfill")
		incForms     = flag.Int("incremental-forms", 500, "forms in the incremental pass")
		codec        = flag.String("compression", "zstd", "sink.parquet.compression")
		layout       = flag.String("partition", "", "sink.parquet.partition (empty: no partition line, syncd's default)")
		cpuSubs      = flag.Int("cpu-submissions", 200_000, "cpu: submissions of the narrow and the 20-question form")
		cpuWide      = flag.Int("cpu-wide-submissions", 30_000, "cpu: submissions of the wide form")
		cpuRuns      = flag.Int("cpu-runs", 1, "cpu: runs per form, the least CPU kept")
		cpuForms     = flag.String("cpu-forms", "", "cpu: forms to compare, comma-separated (narrow, realistic, wide); empty: all")
		cpuProf      = flag.String("cpu-profile", "", "cpu: a directory for one CPU profile of syncd per form (an extra run each)")
		cpuLook      = flag.String("cpu-lookback", "", "cpu: sync.lookback for syncd (empty: the default, 30 days; 0s: no version index)")
		bfLook       = flag.String("lookback", "", "backfill: sync.lookback for syncd (empty: the default, 30 days; 0s: no version index)")
		bfHeap       = flag.String("backfill-heap", "", "backfill: a file for syncd's heap profile at its largest HeapAlloc (sampled every second; SIZE is added to the name)")
		accN         = flag.Int("accounts", 100, "accounts: simulated customers in one syncd")
		accDense     = flag.Int("accounts-dense", 5, "accounts: customers with one dense form")
		accDenseSubs = flag.Int("accounts-dense-submissions", 20_000, "accounts: submissions of a dense form (over 90 days)")
		accHeap      = flag.String("accounts-heap", "", "accounts: a file for syncd's heap profile near the end of the first sync (taken every 2 s)")
		maxBatches   = flag.Int("max-batches", 0, "accounts, shards: sync.max_batches of syncd (0: syncd's default)")
		shN          = flag.Int("shards-accounts", 200, "shards: simulated customers")
		shForms      = flag.Int("shards-max-forms", 3, "shards: most forms of a customer (2 to this many)")
		shProcs      = flag.String("shards-procs", "1,2,4", "shards: syncd processes to compare")
		shCPU        = flag.Bool("shards-cpu-bound", true, "shards: also run with the rate limit off")
		shTakeover   = flag.Bool("shards-takeover", true, "shards: also measure the takeover of a SIGKILLed replica's accounts")
		rdForms      = flag.Int("reader-forms", 30, "reader: forms of the sparse account")
		rdSubs       = flag.Int("reader-submissions", 300, "reader: submissions per form")
		rdStart      = flag.String("reader-start", "2021-01-01T00:00:00Z", "reader: submission times start here")
		rdEnd        = flag.String("reader-end", "2026-11-01T00:00:00Z", "reader: submission times end here")
		rdRuns       = flag.Int("reader-runs", 3, "reader: runs of each DuckDB query, the fastest kept")
		sinkFlag     = flag.String("sink", "parquet", "backfill, reader, accounts: the sink, parquet, iceberg (a local warehouse, the sqlite catalog) or bigquery (bqfake on loopback; backfill only)")
	)
	flag.Parse()
	compression, partition, sinkKind = *codec, *layout, *sinkFlag
	if sinkKind != "parquet" && sinkKind != "bigquery" && sinkKind != "iceberg" {
		fatalf("-sink %q: parquet, iceberg or bigquery", sinkKind)
	}
	bin, err := filepath.Abs(*syncdBin)
	if err == nil {
		_, err = os.Stat(bin)
	}
	if err != nil {
		fatalf("syncd binary: %v (run make build first)", err)
	}
	ctx := context.Background()
	run := func(name string) bool { return *scenario == "all" || *scenario == name }
	if run("backfill") {
		fmt.Printf("## Backfill, rate limit off (%s form, concurrency %d, %s sink)\n\n", *shape, *conc, sinkKind)
		if *bfLook != "" {
			fmt.Printf("syncd with sync.lookback: %s\n\n", *bfLook)
		}
		fmt.Println("| submissions | rows written | wall | CPU (user+sys) | peak RSS | submissions/s | requests | state file | state bytes/submission |")
		fmt.Println("|---|---|---|---|---|---|---|---|---|")
		for _, s := range strings.Split(*sizes, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil {
				fatalf("-sizes: %v", err)
			}
			var r result
			heap := ""
			if *bfHeap != "" {
				heap = fmt.Sprintf("%s.%d", *bfHeap, n)
			}
			withSink(func() { r = backfill(ctx, bin, n, *shape == "wide", *conc, 0, 0, *bfLook, heap) })
			fmt.Printf("| %d | %d | %.1f s | %.1f s | %.0f MB | %.0f | %d | %.1f MB | %.0f |\n", n, r.rows, r.wall.Seconds(), r.cpu.Seconds(),
				float64(r.maxRSS)/(1<<20), float64(r.rows)/r.wall.Seconds(), r.requests, float64(r.stateBytes)/(1<<20), float64(r.stateBytes)/float64(max(r.rows, 1)))
		}
		fmt.Println()
	}
	if run("cpu") {
		cpuCompare(ctx, bin, *cpuSubs, *cpuWide, max(*cpuRuns, 1), *cpuForms, *cpuProf, *cpuLook)
	}
	if run("ratelimited") {
		fmt.Println("## Backfill under the service's limit (5 requests/s, 200 ms per answer)")
		fmt.Println()
		r := backfill(ctx, bin, *rlSubs, false, 4, 5, 200*time.Millisecond, "", "")
		rps := float64(r.requests) / r.wall.Seconds()
		fmt.Println("| requests | wall | requests/s | of the limit | 429s |")
		fmt.Println("|---|---|---|---|---|")
		fmt.Printf("| %d | %.1f s | %.2f | %.0f%% | %d |\n\n", r.requests, r.wall.Seconds(), rps, 100*rps/5, r.limited)
	}
	if run("account") {
		account(ctx, bin, 50, 2, 200_000)
	}
	if run("accounts") {
		manyAccounts(ctx, bin, *accN, *accDense, *accDenseSubs, *maxBatches, *accHeap)
	}
	if run("shards") {
		shards(ctx, bin, shardsOptions{accounts: *shN, maxForms: *shForms, procs: *shProcs, maxBatches: *maxBatches, cpuBound: *shCPU, takeover: *shTakeover})
	}
	if run("reader") {
		reader(ctx, bin, *rdForms, *rdSubs, *rdStart, *rdEnd, max(*rdRuns, 1))
	}
	if run("reconcile") {
		reconcileCost(ctx, bin, 0, 1, 100_000)
		reconcileCost(ctx, bin, 50, 0, 0)
	}
	if run("incremental") {
		fmt.Printf("## Incremental pass over %d forms with nothing new (rate limit off)\n\n", *incForms)
		first, second := incremental(ctx, bin, *incForms)
		fmt.Println("| pass | requests | requests per form | wall | CPU | peak RSS |")
		fmt.Println("|---|---|---|---|---|---|")
		for i, r := range []result{first, second} {
			fmt.Printf("| %s | %d | %.2f | %.1f s | %.1f s | %.0f MB |\n", []string{"first (everything)", "second (nothing new)"}[i],
				r.requests, float64(r.requests)/float64(*incForms), r.wall.Seconds(), r.cpu.Seconds(), float64(r.maxRSS)/(1<<20))
		}
		fmt.Printf("\nAt the service's 5 requests/s the second pass would take at least %.0f s.\n\n", float64(second.requests)/5)
	}
}

type result struct {
	wall, cpu         time.Duration
	maxRSS            int64 // bytes
	requests, limited int64
	rows              int64
	stateBytes        int64 // of the state file after the run
}

// sim serves a simulator on a loopback port until stop is called.
type sim struct {
	*formsim.Server
	base string
	stop func()
}

func startSim(cfg formsim.Config) *sim {
	cfg.APIKey = apiKey
	s, err := formsim.New(cfg)
	if err != nil {
		fatalf("simulator: %v", err)
	}
	base, closeSrv := serveLoopback(s)
	return &sim{Server: s, base: base, stop: func() {
		closeSrv()
		_ = s.Close()
	}}
}

// serveLoopback serves h on a loopback port: its base URL (with the API's
// path) and how to stop it.
func serveLoopback(h http.Handler) (base string, stop func()) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fatalf("listen: %v", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String() + formsim.BasePath, func() { _ = srv.Close() }
}

// history ends an hour ago so that a pass with no safety lag covers it all.
func history() (time.Time, time.Time) {
	end := time.Now().UTC().Truncate(time.Hour).Add(-time.Hour)
	return end.AddDate(0, 0, -30), end
}

func writeConfig(dir, base string, rateLimit float64, extraSync string) string {
	cfg := fmt.Sprintf(`source:
  base_url: %s
  api_key: ${FORMS_API_KEY}
  rate_limit: %g
  max_attempts: 8
  timeout: 30s
forms: []
sync:
  safety_lag: 0s
%s%sstate:
  path: %s
log:
  level: warn
  format: json
`, base, rateLimit, extraSync, sinkLines(dir), filepath.Join(dir, "state", "syncd.db"))
	path := filepath.Join(dir, "syncd.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		fatalf("write config: %v", err)
	}
	return path
}

// backfill loads one form of n submissions with `syncd backfill`. simLimit
// and latency shape the simulator (0: unlimited, none); lookback, when set,
// is sync.lookback. With heapFile set, syncd's heap is profiled
// (profiledSyncd).
func backfill(ctx context.Context, bin string, n int, wide bool, concurrency int, simLimit float64, latency time.Duration, lookback, heapFile string) result {
	start, end := history()
	s := startSim(formsim.Config{Seed: 1, Forms: 2, Submissions: n, Start: start, End: end, RateLimit: simLimit, RateBurst: int(simLimit)})
	defer s.stop()
	if latency > 0 {
		s.SetFaults(formsim.Faults{Latency: latency})
	}
	form := s.FormIDs()[1]
	if wide {
		form = s.FormIDs()[0]
	}
	dir, err := os.MkdirTemp("", "syncd-bench-")
	if err != nil {
		fatalf("%v", err)
	}
	defer os.RemoveAll(dir)
	clientLimit := 10_000.0
	if simLimit > 0 {
		clientLimit = simLimit
	}
	extra := ""
	if lookback != "" {
		extra = "  lookback: " + lookback + "\n"
	}
	cfg := writeConfig(dir, s.base, clientLimit, extra)
	before := s.Stats()
	r := profiledSyncd(ctx, bin, cfg, []string{"FORMS_API_KEY=" + apiKey}, heapFile, "backfill", "--form", form, "--from", start.Format(time.RFC3339), "--to", end.Format(time.RFC3339),
		"--concurrency", strconv.Itoa(concurrency))
	after := s.Stats()
	r.requests = after.Requests - before.Requests
	r.limited = after.ByStatus[http.StatusTooManyRequests] - before.ByStatus[http.StatusTooManyRequests]
	r.rows = int64(len(s.ExpectedIDs(form)))
	if info, err := os.Stat(filepath.Join(dir, "state", "syncd.db")); err == nil {
		r.stateBytes = info.Size()
	}
	return r
}

// incremental syncs small forms once, then measures a second pass
// with nothing new.
func incremental(ctx context.Context, bin string, forms int) (first, second result) {
	// Two days of history keep the first pass short; the second pass is the
	// figure.
	_, end := history()
	s := startSim(formsim.Config{Seed: 2, Forms: forms, Submissions: 20, Start: end.AddDate(0, 0, -2), End: end})
	defer s.stop()
	dir, err := os.MkdirTemp("", "syncd-bench-")
	if err != nil {
		fatalf("%v", err)
	}
	defer os.RemoveAll(dir)
	cfg := writeConfig(dir, s.base, 10_000, "  concurrency: 8\n")
	measure := func() result {
		before := s.Stats().Requests
		r := runSyncd(ctx, bin, cfg, "once")
		r.requests = s.Stats().Requests - before
		return r
	}
	return measure(), measure()
}

func runSyncd(ctx context.Context, bin, cfg string, args ...string) result {
	return runSyncdEnv(ctx, bin, cfg, []string{"FORMS_API_KEY=" + apiKey}, args...)
}

// runSyncdEnv runs syncd with env added to this process's environment.
func runSyncdEnv(ctx context.Context, bin, cfg string, env []string, args ...string) result {
	cmd := exec.CommandContext(ctx, bin, append(args, "--config", cfg)...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	t0 := time.Now()
	err := cmd.Start()
	var rss *peakRSS
	if err == nil {
		rss = watchRSS(cmd.Process.Pid)
		err = cmd.Wait()
	}
	wall := time.Since(t0)
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		fatalf("run syncd %s: %v", args[0], err)
	}
	if err != nil {
		fatalf("syncd %s exited %d:\n%s%s", args[0], exit.ExitCode(), tail(stdout.String()), tail(stderr.String()))
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	return result{
		wall:   wall,
		cpu:    time.Duration(ru.Utime.Nano() + ru.Stime.Nano()),
		maxRSS: rss.peak(ru.Maxrss * 1024), // kilobytes on Linux
	}
}

func tail(s string) string {
	if len(s) > 4000 {
		return "..." + s[len(s)-4000:]
	}
	return s
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench/e2e: "+format+"\n", args...)
	os.Exit(1)
}
