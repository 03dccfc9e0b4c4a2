package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/syncd-dev/syncd/internal/formsim"
)

// The accounts scenario (issue "Many accounts in one syncd"): the first
// sync of many simulated customers in one syncd process, each its own key
// under the service's 5 requests/s, against the ideal: the slowest
// account's own minimum of requests at 5 requests/s, since an account's
// requests are its wait whatever the others do.

// customer is one simulated account.
type customer struct {
	name, key, env string // env: the variable that holds the key
	forms, subs    int
	dense          bool
	ideal          int // fewest requests of its first sync: pages and metadata of each form, and the listing
}

// customers builds n accounts shaped like real ones: nforms(r) forms each,
// most forms a few hundred submissions (100-500) spread over 1 to 5 years,
// and in dense of them (spread over the list) one form of denseSubs over
// 90 days. limit is each key's rate limit in the simulator (0: none).
// The same seed gives the same accounts, keys and submissions.
func customers(n, dense, denseSubs int, nforms func(*rand.Rand) int, limit float64, seed uint64) ([]formsim.Config, []customer) {
	_, end := history()
	r := rand.New(rand.NewPCG(seed, 22))
	cfgs := make([]formsim.Config, n)
	list := make([]customer, n)
	every := n + 1
	if dense > 0 {
		every = max(1, n/dense)
	}
	for i := range cfgs {
		c := customer{name: fmt.Sprintf("acct-%03d", i), env: fmt.Sprintf("KEY_ACCT_%03d", i), key: fmt.Sprintf("sk_bench_%03d_%016x", i, r.Uint64())}
		c.forms = max(2, nforms(r))
		c.dense = i%every == every/2 && i/every < dense
		shapes := make([]formsim.FormShape, c.forms)
		for f := range shapes {
			// Form 0 asks every documented question type; the others
			// 6-20 everyday questions.
			shapes[f] = formsim.FormShape{Submissions: 100 + r.IntN(401), Start: end.AddDate(-1-r.IntN(5), 0, 0), Questions: 6 + r.IntN(15)}
		}
		if c.dense {
			shapes[1] = formsim.FormShape{Submissions: denseSubs, Start: end.AddDate(0, 0, -90), Questions: 20}
		}
		cfgs[i] = formsim.Config{APIKey: c.key, Seed: int64(seed)*10_000 + int64(i), Forms: c.forms, Shapes: shapes, End: end,
			RateLimit: limit}
		list[i] = c
	}
	return cfgs, list
}

// customerForms is the usual spread of forms per account: most 2-10, one
// in ten 11-30.
func customerForms(r *rand.Rand) int {
	if r.IntN(10) == 0 {
		return 11 + r.IntN(20)
	}
	return 2 + r.IntN(9)
}

// multiSim serves many workspaces (formsim.Multi) on a loopback port.
type multiSim struct {
	*formsim.Multi
	base string
	stop func()
}

// startMulti serves the accounts and fills in each one's submissions and
// ideal from the simulator.
func startMulti(cfgs []formsim.Config, list []customer) *multiSim {
	m, err := formsim.NewMulti(cfgs...)
	if err != nil {
		fatalf("many-account simulator: %v", err)
	}
	base, closeSrv := serveLoopback(m)
	for i := range list {
		ws := m.Workspace(list[i].key)
		list[i].subs, list[i].ideal = 0, 1 // the listing of the account's forms
		for _, id := range ws.FormIDs() {
			n := len(ws.ExpectedIDs(id))
			list[i].subs += n
			list[i].ideal += ideal(n)
		}
	}
	return &multiSim{Multi: m, base: base, stop: func() {
		closeSrv()
		_ = m.Close()
	}}
}

// keyTotals add up the simulator's counters of every key.
type keyTotals struct {
	requests, admitted, limited, overlaps int64
	maxPerSecond                          int // the most any key admitted in a sliding second
	maxInFlight                           int
	perKey                                map[string]formsim.KeyStats
}

func (m *multiSim) totals() keyTotals {
	t := keyTotals{perKey: m.AllStats()}
	for _, st := range t.perKey {
		t.requests += st.Requests
		t.admitted += st.Admitted
		t.limited += st.RateLimited
		t.overlaps += st.Overlaps
		t.maxPerSecond = max(t.maxPerSecond, st.MaxPerSecond)
		t.maxInFlight = max(t.maxInFlight, st.MaxInFlight)
	}
	return t
}

// accountsConfig writes a config of the accounts in list (keys from the
// environment: env), with the client's limit per key, extraSync under
// sync:, state (the lines under state:) and extra top-level sections.
func accountsConfig(dir, base string, list []customer, clientLimit float64, extraSync, state, extra string) (path string, env []string) {
	var b strings.Builder
	fmt.Fprintf(&b, `source:
  base_url: %s
  rate_limit: %g
  max_attempts: 8
  timeout: 30s
sync:
  safety_lag: 0s
%s%sstate:
%slog:
  level: warn
  format: json
%saccounts:
`, base, clientLimit, extraSync, sinkLines(dir), state, extra)
	for _, c := range list {
		fmt.Fprintf(&b, "  - name: %s\n    api_key: ${%s}\n", c.name, c.env)
		env = append(env, c.env+"="+c.key)
	}
	path = filepath.Join(dir, "syncd.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		fatalf("write config: %v", err)
	}
	return path, env
}

func maxBatchesLine(n int) string {
	if n <= 0 {
		return ""
	}
	return fmt.Sprintf("  max_batches: %d\n", n)
}

// manyAccounts syncs n customers for the first time in one `syncd once`
// under the service's limit, then runs a pass with nothing new.
//
// With heapFile set, syncd serves --pprof and the first sync's heap is
// profiled every 2 s into heapFile (the last profile before it exits: what
// the finished accounts still hold).
func manyAccounts(ctx context.Context, bin string, n, dense, denseSubs, maxBatches int, heapFile string) {
	cfgs, list := customers(n, dense, denseSubs, customerForms, formsim.ServiceRateLimit, 22)
	m := startMulti(cfgs, list)
	defer m.stop()
	dir, err := os.MkdirTemp("", "syncd-bench-accounts-")
	if err != nil {
		fatalf("%v", err)
	}
	defer os.RemoveAll(dir)
	cfg, env := accountsConfig(dir, m.base, list, formsim.ServiceRateLimit, maxBatchesLine(maxBatches),
		"  path: "+filepath.Join(dir, "state", "syncd.db")+"\n", "")

	forms, subs, idealSum, denseN := 0, 0, 0, 0
	slowest := list[0]
	for _, c := range list {
		forms += c.forms
		subs += c.subs
		idealSum += c.ideal
		if c.dense {
			denseN++
		}
		if c.ideal > slowest.ideal {
			slowest = c
		}
	}
	first := profiledSyncd(ctx, bin, cfg, env, heapFile, "once")
	t1 := m.totals()
	files := countFiles(outDir(dir))
	// Every account made at least its own minimum of requests: none was
	// left out (syncd's exit 0 says each pass succeeded).
	short, worst := 0, 0.0
	var ratios []float64
	for _, c := range list {
		st := t1.perKey[c.key]
		if int(st.Admitted) < c.ideal {
			short++
		}
		r := float64(st.Admitted) / float64(c.ideal)
		ratios = append(ratios, r)
		worst = max(worst, r)
	}
	slices.Sort(ratios)
	second := runSyncdEnv(ctx, bin, cfg, env, "once")
	t2 := m.totals()

	limitWall := time.Duration(slowest.ideal) * time.Second / formsim.ServiceRateLimit
	mb := "syncd's default (16)"
	if maxBatches > 0 {
		mb = fmt.Sprint(maxBatches)
	}
	layout := "sink.parquet.partition: " + partitionName()
	if sinkKind != "parquet" {
		layout = sinkKind + " sink"
	}
	fmt.Printf("## Many accounts in one syncd: first sync of %d accounts at 5 requests/s per key (sync.max_batches: %s, %s)\n\n", n, mb, layout)
	fmt.Printf("%d accounts, %d forms (%d-%d per account), %d submissions; %d accounts hold one dense form of %d submissions over 90 days, every other form 100-500 over 1-5 years. Simulator and client: 5 requests/s per key.\n\n",
		n, forms, minForms(list), maxForms(list), subs, denseN, denseSubs)
	fmt.Println("| pass | requests | ideal (sum of accounts' minimums) | slowest account's minimum | its wait at 5 req/s (the ideal wall) | wall | wall / ideal | CPU (user+sys) | CPU-s per 1k submissions | CPU-ms per file | peak RSS | files |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|")
	fmt.Printf("| first sync | %d | %d | %d (%s: %d forms, %d submissions) | %.1f s | %.1f s | **%.2f** | %.1f s | %.3f | %.1f | %.0f MB | %d |\n",
		t1.requests, idealSum, slowest.ideal, slowest.name, slowest.forms, slowest.subs, limitWall.Seconds(), first.wall.Seconds(),
		first.wall.Seconds()/limitWall.Seconds(), first.cpu.Seconds(), first.cpu.Seconds()/(float64(subs)/1000),
		1000*first.cpu.Seconds()/float64(max(files, 1)), float64(first.maxRSS)/(1<<20), files)
	quiet := time.Duration(maxForms(list)+1) * time.Second / formsim.ServiceRateLimit
	fmt.Printf("| nothing new | %d | %d (a request per form and the listing) | %d | %.1f s | %.1f s | %.2f | %.1f s | | | %.0f MB | %d |\n\n",
		t2.requests-t1.requests, forms+n, maxForms(list)+1, quiet.Seconds(), second.wall.Seconds(), second.wall.Seconds()/quiet.Seconds(),
		second.cpu.Seconds(), float64(second.maxRSS)/(1<<20), countFiles(outDir(dir))-files)
	fmt.Printf("Per account, first sync: requests / own minimum median %.3f, worst %.3f; accounts with fewer requests than their minimum (not synced): %d.\n",
		ratios[len(ratios)/2], worst, short)
	fmt.Printf("Rate limit, both passes, by the simulator's clock: the most requests any key had admitted in a sliding second: **%d** (limit 5, burst 5); 429s: %d; most requests of one key in flight at once: %d.\n\n",
		t2.maxPerSecond, t2.limited, t2.maxInFlight)
}

func minForms(list []customer) int {
	n := list[0].forms
	for _, c := range list {
		n = min(n, c.forms)
	}
	return n
}

func maxForms(list []customer) int {
	n := 0
	for _, c := range list {
		n = max(n, c.forms)
	}
	return n
}

// profiledSyncd is runSyncdEnv; with heapFile set, syncd serves --pprof,
// its heap is sampled every second into heapFile (the profile at the
// largest HeapAlloc) and its CPU profiled for its first 40 s into
// heapFile.cpu.pprof.
func profiledSyncd(ctx context.Context, bin, cfg string, env []string, heapFile string, args ...string) result {
	if heapFile == "" {
		return runSyncdEnv(ctx, bin, cfg, env, args...)
	}
	addr := freeAddr()
	done := make(chan struct{})
	heapDone := make(chan struct{})
	var peak uint64
	go func() { defer close(heapDone); peak = sampleHeap(ctx, addr, done, heapFile) }()
	cpuDone := make(chan struct{})
	go func() { defer close(cpuDone); cpuProfile(ctx, addr, heapFile+".cpu.pprof", 40) }()
	r := runSyncdEnv(ctx, bin, cfg, env, append(args, "--pprof", addr)...)
	close(done)
	<-heapDone
	<-cpuDone
	fmt.Printf("CPU profile of syncd's first 40 s: %s.cpu.pprof\n\n", heapFile)
	fmt.Printf("Heap (sampled every second): at most %.0f MB allocated (HeapAlloc); its profile: %s\n\n", float64(peak)/(1<<20), heapFile)
	return r
}

// heapProfile is syncd's /debug/pprof/heap with query, nil if it did not
// answer.
func heapProfile(ctx context.Context, addr, query string) []byte {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/debug/pprof/heap"+query, nil)
	if err != nil {
		return nil
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return nil
	}
	return body
}

// sampleHeap polls syncd's heap every second until done and saves into
// file the profile of the sample with the most heap allocated (HeapAlloc,
// Go's own count), which it returns.
func sampleHeap(ctx context.Context, addr string, done <-chan struct{}, file string) (peak uint64) {
	get := func(query string) []byte { return heapProfile(ctx, addr, query) }
	for {
		select {
		case <-done:
			return peak
		case <-time.After(time.Second):
		}
		m := heapAlloc.FindSubmatch(get("?debug=1"))
		if m == nil {
			continue
		}
		n, _ := strconv.ParseUint(string(m[1]), 10, 64)
		if n <= peak {
			continue
		}
		if body := get(""); body != nil {
			peak = n
			_ = os.WriteFile(file, body, 0o644)
		}
	}
}

var heapAlloc = regexp.MustCompile(`# HeapAlloc = (\d+)`)

// cpuProfile saves syncd's CPU profile of seconds s, taken as soon as its
// --pprof listener at addr answers, into file; nothing if it never does.
func cpuProfile(ctx context.Context, addr, file string, s int) {
	for i := 0; i < 100; i++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/debug/pprof/profile?seconds="+strconv.Itoa(s), nil)
		if err != nil {
			return
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err == nil && resp.StatusCode == http.StatusOK {
			_ = os.WriteFile(file, b, 0o644)
		}
		return
	}
}
