package e2e

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/testkit"
)

// scrape returns the value of the first sample whose line starts with
// prefix (metric name and labels), or -1 when absent.
func scrape(t *testing.T, addr, prefix string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, prefix) {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			return v
		}
	}
	return -1
}

func status(addr, path string) int {
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		return 0
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// eventually polls cond every 50 ms until it holds or d passes.
func eventually(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return cond()
}

// rejectKeyWhile answers 401, as the API does for a revoked key, while
// rejecting is set.
func rejectKeyWhile(rejecting *atomic.Bool) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if rejecting.Load() {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				w.Write([]byte(`{"message":"Invalid API key"}`))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

func TestDaemonMetricsAndReadiness(t *testing.T) {
	start, end := history(3)
	var keyRejected atomic.Bool
	sim := testkit.StartSimWrapped(t, formsim.Config{Seed: 31, Forms: 2, Submissions: 300, Start: start, End: end},
		rejectKeyWhile(&keyRejected))
	addr := testkit.FreeAddr(t)
	w := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{
		Sync:  "  safety_lag: 0s\n  schedule: \"@every 1s\"\n  jitter: 0s\n",
		Extra: "server:\n  addr: " + addr + "\n  unready_after: 1s\n", // 0s is refused: it must be positive
	})
	cmd, _, stderr, err := testkit.Start(syncdBin, w, "run")
	if err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	form := sim.FormIDs()[0]
	rows := `syncd_rows_written_total{account="default",source="forms",stream="` + form + `"}`
	if !eventually(20*time.Second, func() bool { return scrape(t, addr, rows) > 0 }) {
		t.Fatalf("rows counter never moved\n%s", tail(stderr.String()))
	}
	if v := scrape(t, addr, `syncd_last_success_timestamp_seconds{account="default",source="forms",stream="`+form+`"}`); v < float64(start.Unix()) {
		t.Errorf("last success gauge = %v", v)
	}
	if v := scrape(t, addr, `syncd_requests_total{account="default",endpoint=`); v <= 0 {
		t.Errorf("request counter = %v", v)
	}
	if status(addr, "/healthz") != 200 || status(addr, "/readyz") != 200 {
		t.Errorf("healthz %d readyz %d while all is well", status(addr, "/healthz"), status(addr, "/readyz"))
	}

	keyRejected.Store(true)
	if !eventually(15*time.Second, func() bool { return status(addr, "/readyz") == http.StatusServiceUnavailable }) {
		t.Errorf("/readyz stayed ready while the API rejected the key")
	}
	if status(addr, "/healthz") != 200 {
		t.Errorf("/healthz failed while only the API is down")
	}
	keyRejected.Store(false)
	if !eventually(15*time.Second, func() bool { return status(addr, "/readyz") == 200 }) {
		t.Errorf("/readyz did not recover once the key was accepted again")
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("syncd run did not exit 0 on SIGTERM: %v\n%s", err, tail(stderr.String()))
	}
	if strings.Contains(stderr.String(), testkit.APIKey) {
		t.Error("the API key appears in the daemon's logs")
	}
}

// TestSIGTERMMidBatch stops a daemon while it pages through slow windows:
// it must exit cleanly, and a restart must leave no duplicate and no gap.
func TestSIGTERMMidBatch(t *testing.T) {
	start, end := history(6)
	sim := testkit.StartSim(t, formsim.Config{Seed: 41, Forms: 1, Submissions: 3000, Start: start, End: end})
	sim.SetFaults(formsim.Faults{Latency: 20 * time.Millisecond})
	addr := testkit.FreeAddr(t)
	w := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{
		Sync:  "  safety_lag: 0s\n  max_rows_per_batch: 600\n  shutdown_grace: 3s\n  jitter: 0s\n",
		Extra: "server:\n  addr: " + addr + "\n",
	})
	cmd, stdout, stderr, err := testkit.Start(syncdBin, w, "run")
	if err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	form := sim.FormIDs()[0]
	// Wait for the first batch, so the signal lands mid-pass.
	if !eventually(30*time.Second, func() bool { return sim.Stats().PagesServed > 5 }) {
		t.Fatal("the daemon never got going")
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, tail(stderr.String()))
		}
	case <-time.After(20 * time.Second):
		t.Fatal("syncd run did not stop within 20s of SIGTERM")
	}
	if !strings.Contains(stdout.String(), "syncd stopped") {
		t.Errorf("no clean stop reported: %s", stdout.String())
	}
	sim.SetFaults(formsim.Faults{})
	if res := testkit.Run(context.Background(), syncdBin, w, "once"); res.Code != 0 {
		t.Fatalf("restart: exit %d %s", res.Code, tail(res.Stderr))
	}
	covered := testkit.Covered(t, w.State, form)
	got := testkit.OpenDuck(t).IDCounts(t, w.Out, poller.DefaultTable(form))
	testkit.CheckExactlyOnce(t, got, testkit.ExpectedIn(sim, form, covered))
	if len(got) != len(sim.ExpectedIDs(form)) {
		t.Errorf("after restart the output holds %d of %d submissions", len(got), len(sim.ExpectedIDs(form)))
	}
}

// TestSecretsRedacted runs a failing and a succeeding pass with debug logs
// and finds the API key in no log line, error or summary.
func TestSecretsRedacted(t *testing.T) {
	start, end := history(2)
	var reject atomic.Bool
	reject.Store(true)
	sim := testkit.StartSimWrapped(t, formsim.Config{Seed: 51, Forms: 1, Submissions: 100, Start: start, End: end},
		rejectKeyWhile(&reject))
	w := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{LogLevel: "debug"})
	summary := filepath.Join(w.Dir, "summary.json")
	var all strings.Builder
	failing := testkit.Run(context.Background(), syncdBin, w, "once", "--summary", summary)
	if failing.Code == 0 {
		t.Errorf("the failing pass exited 0")
	}
	all.WriteString(failing.Stdout + failing.Stderr)
	reject.Store(false)
	ok := testkit.Run(context.Background(), syncdBin, w, "once", "--summary", summary)
	if ok.Code != 0 {
		t.Errorf("the succeeding pass exited %d: %s", ok.Code, tail(ok.Stderr))
	}
	all.WriteString(ok.Stdout + ok.Stderr)
	b, err := os.ReadFile(summary)
	if err != nil {
		t.Fatal(err)
	}
	all.Write(b)
	if !strings.Contains(all.String(), `"level":"debug"`) {
		t.Errorf("no debug line was logged: the test would prove nothing")
	}
	if strings.Contains(all.String(), testkit.APIKey) {
		t.Errorf("the API key appears in output")
	}
}
