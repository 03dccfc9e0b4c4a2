package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/syncd-dev/syncd/internal/app"
	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/testkit/procs"
	"github.com/syncd-dev/syncd/internal/testkit/s3srv"
)

// The shards scenario (issue "Past one machine: sharded"): the first sync
// of many accounts by 1, 2 and 4 processes of `syncd once --shard I/N` at
// once on one state in an S3 bucket (versitygw on loopback), as the
// sharded-backfill Indexed Job runs them; then how long a SIGKILLed replica
// of `syncd run` on shared state leaves its accounts before another takes
// them.

type shardsOptions struct {
	accounts, maxForms int
	procs              string
	maxBatches         int
	cpuBound, takeover bool
}

const bucket = "acme-lake"

// s3Server is versitygw (`make tools`) over a temporary folder.
type s3Server struct {
	srv  *s3srv.Server // for its URL and Env; the process is ours
	stop func()
}

func startS3(ctx context.Context) *s3Server {
	bin := filepath.Join(procs.ToolsDir(), "versitygw")
	if _, err := os.Stat(bin); err != nil {
		fatalf("shards: versitygw is not installed (%v): run `make tools`", err)
	}
	root, err := os.MkdirTemp("", "syncd-bench-s3-")
	if err != nil {
		fatalf("%v", err)
	}
	data, meta := filepath.Join(root, "data"), filepath.Join(root, "meta")
	for _, d := range []string{data, meta} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			fatalf("%v", err)
		}
	}
	addr := freeAddr()
	cmd := exec.Command(bin, "--access", s3srv.AccessKey, "--secret", s3srv.SecretKey, "--region", s3srv.Region, "--port", addr, "posix", "--sidecar", meta, data)
	out := &lockedWriter{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		fatalf("start versitygw: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stop := func() {
		_ = cmd.Process.Kill()
		<-exited
		_ = os.RemoveAll(root)
	}
	s := &s3Server{srv: &s3srv.Server{Endpoint: "http://" + addr}, stop: stop}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if resp, err := http.Get(s.srv.Endpoint + "/"); err == nil {
			resp.Body.Close()
			break
		}
		select {
		case <-exited:
			fatalf("versitygw exited: %s", out.String())
		default:
		}
		if time.Now().After(deadline) {
			stop()
			fatalf("versitygw not answering on %s after 60s: %s", addr, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	c := s3.New(s3.Options{Region: s3srv.Region, BaseEndpoint: aws.String(s.srv.Endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(s3srv.AccessKey, s3srv.SecretKey, "")})
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		stop()
		fatalf("create bucket %s: %v", bucket, err)
	}
	return s
}

type lockedWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.b.Len() < 1<<20 {
		w.b.Write(p)
	}
	return len(p), nil
}

func (w *lockedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// shardForms: 2 to most forms an account.
func shardForms(most int) func(*rand.Rand) int {
	return func(r *rand.Rand) int { return 2 + r.IntN(max(1, most-1)) }
}

func shards(ctx context.Context, bin string, o shardsOptions) {
	s3 := startS3(ctx)
	defer s3.stop()
	var counts []int
	for _, f := range strings.Split(o.procs, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			fatalf("-shards-procs %q: a list of process counts, such as 1,2,4", o.procs)
		}
		counts = append(counts, n)
	}
	variants := []float64{formsim.ServiceRateLimit}
	if o.cpuBound {
		variants = append(variants, 0)
	}
	for _, limit := range variants {
		staticShards(ctx, bin, s3, o, counts, limit)
	}
	if o.takeover {
		takeover(ctx, bin, s3, o)
	}
}

// staticShards runs the first sync of the accounts with each count of
// `syncd once --shard I/N` processes at once, on a fresh simulator, state
// prefix and output each time.
func staticShards(ctx context.Context, bin string, s3 *s3Server, o shardsOptions, counts []int, limit float64) {
	what := "at 5 requests/s per key"
	clientLimit := float64(formsim.ServiceRateLimit)
	if limit == 0 {
		what, clientLimit = "rate limit off (CPU-bound)", 10_000
	}
	type row struct {
		procs                int
		perShard             []int
		wall, cpu            time.Duration
		rss                  int64
		requests, limited    int64
		maxPerSecond, shortN int
		overlaps             int64
		subs, idealWall      int
	}
	var rows []row
	var slowestIdeal, subs, forms int
	for _, n := range counts {
		cfgs, list := customers(o.accounts, 0, 0, shardForms(o.maxForms), limit, 23)
		m := startMulti(cfgs, list)
		dir, err := os.MkdirTemp("", "syncd-bench-shards-")
		if err != nil {
			fatalf("%v", err)
		}
		prefix := fmt.Sprintf("state/limit%g-procs%d", limit, n)
		cfg, env := accountsConfig(dir, m.base, list, clientLimit, maxBatchesLine(o.maxBatches)+"  concurrency: 4\n",
			"  url: "+s3.srv.URL(bucket, prefix)+"\n", "")
		env = append(env, s3.srv.Env()...)
		slowestIdeal, subs, forms = 0, 0, 0
		for _, c := range list {
			slowestIdeal = max(slowestIdeal, c.ideal)
			subs += c.subs
			forms += c.forms
		}
		r := row{procs: n, perShard: make([]int, n)}
		for _, c := range list {
			for i := range n {
				if (app.Shard{Index: i, Count: n}).Owns(c.name) {
					r.perShard[i]++
				}
			}
		}
		results := make([]result, n)
		var wg sync.WaitGroup
		t0 := time.Now()
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i] = runSyncdEnv(ctx, bin, cfg, env, "once", "--shard", fmt.Sprintf("%d/%d", i, n))
			}()
		}
		wg.Wait()
		r.wall = time.Since(t0)
		for _, res := range results {
			r.cpu += res.cpu
			r.rss = max(r.rss, res.maxRSS)
		}
		t := m.totals()
		r.requests, r.limited, r.maxPerSecond, r.overlaps = t.requests, t.limited, t.maxPerSecond, t.overlaps
		for _, c := range list {
			if int(t.perKey[c.key].Admitted) < c.ideal {
				r.shortN++
			}
		}
		m.stop()
		_ = os.RemoveAll(dir)
		rows = append(rows, r)
	}
	fmt.Printf("## Sharded first sync: %d accounts by N processes of `syncd once --shard I/N` at once, %s\n\n", o.accounts, what)
	fmt.Printf("%d accounts of 2-%d forms (%d forms), %d submissions (100-500 a form over 1-5 years); state in an S3 bucket (versitygw on loopback), Parquet on local disk; each process sync.concurrency 4, sync.max_batches %s. The slowest account's own minimum at 5 req/s: %.1f s.\n\n",
		o.accounts, o.maxForms, forms, subs, batchesText(o.maxBatches), float64(slowestIdeal)/formsim.ServiceRateLimit)
	fmt.Println("| processes | accounts per process | wall | speed-up vs the first row | CPU, all processes (user+sys) | CPU-s per 1k submissions | peak RSS (largest process) | requests | most admitted per key in a second | 429s | requests overlapping another process's on one key | accounts not synced |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		perSecond := strconv.Itoa(r.maxPerSecond)
		if limit == 0 {
			perSecond = "(no limit)"
		}
		fmt.Printf("| %d | %s | %.1f s | %.2fx | %.1f s | %.3f | %.0f MB | %d | %s | %d | %d | %d |\n", r.procs, joinInts(r.perShard), r.wall.Seconds(),
			rows[0].wall.Seconds()/r.wall.Seconds(), r.cpu.Seconds(), r.cpu.Seconds()/(float64(subs)/1000),
			float64(r.rss)/(1<<20), r.requests, perSecond, r.limited, r.overlaps, r.shortN)
	}
	fmt.Println()
}

func batchesText(n int) string {
	if n <= 0 {
		return "16 (the default)"
	}
	return strconv.Itoa(n)
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, " / ")
}

// replica is one `syncd run` of a shared state.
type replica struct {
	cmd  *exec.Cmd
	addr string
	out  *lockedWriter
	done chan struct{}
}

var ownedLine = regexp.MustCompile(`owned accounts \((\d+)\): ?(.*)`)

// owned lists the accounts the replica owns, from its /readyz (nil, false:
// no answer).
func (r *replica) owned() ([]string, bool) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + r.addr + "/readyz")
	if err != nil {
		return nil, false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := ownedLine.FindStringSubmatch(string(b))
	if m == nil {
		return nil, false
	}
	var list []string
	for _, a := range strings.Split(m[2], ",") {
		if a = strings.TrimSpace(a); a != "" {
			list = append(list, a)
		}
	}
	return list, true
}

// takeover starts three replicas of `syncd run` on a shared state with
// the default lease settings, lets them share the accounts out, SIGKILLs
// one, and measures from the kill until each of its accounts is owned by
// a survivor (its /readyz) and until the survivor's first request with
// that account's key (the simulator sees a new client on the key).
func takeover(ctx context.Context, bin string, s3 *s3Server, o shardsOptions) {
	const replicas = 3
	cfgs, list := customers(o.accounts, 0, 0, shardForms(2), formsim.ServiceRateLimit, 24)
	m := startMulti(cfgs, list)
	defer m.stop()
	dir, err := os.MkdirTemp("", "syncd-bench-takeover-")
	if err != nil {
		fatalf("%v", err)
	}
	defer os.RemoveAll(dir)
	cfg, env := accountsConfig(dir, m.base, list, formsim.ServiceRateLimit, maxBatchesLine(o.maxBatches),
		"  url: "+s3.srv.URL(bucket, "state/takeover")+"\n  shared: true\n", "server:\n  addr: ${SYNCD_ADDR}\n")
	env = append(env, s3.srv.Env()...)
	start := func() *replica {
		r := &replica{addr: freeAddr(), out: &lockedWriter{}, done: make(chan struct{})}
		r.cmd = exec.CommandContext(ctx, bin, "run", "--config", cfg)
		r.cmd.Env = append(append(os.Environ(), env...), "SYNCD_ADDR="+r.addr)
		r.cmd.Stdout, r.cmd.Stderr = r.out, r.out
		if err := r.cmd.Start(); err != nil {
			fatalf("start syncd run: %v", err)
		}
		go func() { _ = r.cmd.Wait(); close(r.done) }()
		return r
	}
	var live []*replica
	defer func() {
		for _, r := range live {
			_ = r.cmd.Process.Signal(syscall.SIGTERM)
		}
		for _, r := range live {
			select {
			case <-r.done:
			case <-time.After(60 * time.Second):
				_ = r.cmd.Process.Kill()
				<-r.done
			}
		}
	}()
	for range replicas {
		live = append(live, start())
	}
	// Settled: every account owned by one replica, each replica its share,
	// every key used, and the shares unchanged for 15 s (past a heartbeat,
	// 10 s by default).
	began := time.Now()
	var shares [][]string
	var stableSince time.Time
	for {
		if time.Since(began) > 5*time.Minute {
			fatalf("takeover: the replicas did not settle in 5 min: %v\n%s", shareSizes(shares), tail(live[0].out.String()))
		}
		time.Sleep(500 * time.Millisecond)
		now := make([][]string, len(live))
		ok := true
		for i, r := range live {
			l, answered := r.owned()
			ok = ok && answered && len(l) > 0
			now[i] = l
		}
		total := 0
		for _, l := range now {
			total += len(l)
		}
		used := true
		for _, st := range m.totals().perKey {
			used = used && st.Admitted > 0
		}
		if !ok || total != len(list) || !used || !sameShares(now, shares) {
			shares, stableSince = now, time.Time{}
			continue
		}
		if stableSince.IsZero() {
			stableSince = time.Now()
		}
		if time.Since(stableSince) >= 15*time.Second {
			break
		}
	}
	settled := time.Since(began)
	victim := live[0]
	orphans := shares[0]
	keyOf := map[string]string{}
	for _, c := range list {
		keyOf[c.name] = c.key
	}
	clientsBefore := map[string]int{}
	for _, a := range orphans {
		st, _ := m.Stats(keyOf[a])
		clientsBefore[a] = st.Clients
	}
	_ = victim.cmd.Process.Kill()
	killed := time.Now()
	<-victim.done
	live = live[1:]
	claimed, fetched := map[string]time.Duration{}, map[string]time.Duration{}
	for len(claimed) < len(orphans) || len(fetched) < len(orphans) {
		if time.Since(killed) > 3*time.Minute {
			break
		}
		time.Sleep(100 * time.Millisecond)
		for _, r := range live {
			l, _ := r.owned()
			for _, a := range l {
				if _, seen := claimed[a]; !seen && slices.Contains(orphans, a) {
					claimed[a] = time.Since(killed)
				}
			}
		}
		for _, a := range orphans {
			if _, seen := fetched[a]; seen {
				continue
			}
			if st, _ := m.Stats(keyOf[a]); st.Clients > clientsBefore[a] {
				fetched[a] = time.Since(killed)
			}
		}
	}
	t := m.totals()
	fmt.Printf("## Takeover: %d replicas of `syncd run` on shared state (state.lease_ttl 30s, the default: heartbeat 10 s), one SIGKILLed\n\n", replicas)
	fmt.Printf("%d accounts of 2 forms; the replicas settled (every account owned, shares %s, unchanged for 15 s) %.0f s after they started. The killed replica owned %d accounts. Times from the SIGKILL (polling every 100 ms):\n\n",
		len(list), shareSizes(shares), settled.Seconds(), len(orphans))
	fmt.Println("| | accounts | first | median | last |")
	fmt.Println("|---|---|---|---|---|")
	for _, x := range []struct {
		what string
		d    map[string]time.Duration
	}{{"owned by a survivor (its /readyz)", claimed}, {"first request by a survivor (a new client on the key, simulator)", fetched}} {
		ds := slices.Sorted(maps.Values(x.d))
		if len(ds) == 0 {
			fmt.Printf("| %s | 0 of %d | | | |\n", x.what, len(orphans))
			continue
		}
		fmt.Printf("| %s | %d of %d | %.1f s | %.1f s | %.1f s |\n", x.what, len(ds), len(orphans), ds[0].Seconds(), ds[len(ds)/2].Seconds(), ds[len(ds)-1].Seconds())
	}
	fmt.Printf("\nThroughout: requests overlapping another process's on one key: %d; 429s: %d; most admitted per key in a second: %d.\n\n", t.overlaps, t.limited, t.maxPerSecond)
	if len(claimed) < len(orphans) || len(fetched) < len(orphans) {
		fmt.Fprintf(os.Stderr, "bench/e2e: takeover incomplete after 3 min: %d of %d claimed, %d fetched\n%s\n", len(claimed), len(orphans), len(fetched), tail(live[0].out.String()))
	}
}

func sameShares(a, b [][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !slices.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

func shareSizes(s [][]string) string {
	n := make([]int, len(s))
	for i, l := range s {
		n[i] = len(l)
	}
	return joinInts(n)
}
