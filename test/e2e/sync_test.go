package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/testkit"
)

// history is a fixed stretch of submission times, so that runs are
// repeatable and the live sync's end (now) is past all of it.
func history(days int) (time.Time, time.Time) {
	end := time.Now().UTC().Truncate(time.Hour).Add(-time.Hour)
	return end.AddDate(0, 0, -days), end
}

// checkOutput asserts that every form's table holds exactly the simulator's
// submissions inside the committed windows, each once, and that the
// committed windows reach at least until covers.
func checkOutput(t *testing.T, sim *testkit.Sim, w *testkit.Workdir, covers time.Time) {
	t.Helper()
	duck := testkit.OpenDuck(t)
	for _, id := range sim.FormIDs() {
		covered := testkit.Covered(t, w.State, id)
		if len(covered) == 0 || covered[len(covered)-1].End.Before(covers) {
			t.Errorf("form %s: committed windows %v do not reach %s", id, covered, covers)
		}
		got := duck.IDCounts(t, w.Out, poller.DefaultTable(id))
		testkit.CheckExactlyOnce(t, got, testkit.ExpectedIn(sim, id, covered))
	}
}

func TestOnceWithFaultsExactlyOnce(t *testing.T) {
	for _, inclusive := range []bool{false, true} {
		t.Run(fmt.Sprintf("inclusive=%v", inclusive), func(t *testing.T) {
			start, end := history(20)
			sim := testkit.StartSim(t, formsim.Config{Seed: 7, Forms: 3, Submissions: 2500, Start: start, End: end, InclusiveDates: inclusive,
				RateLimit: 60, RateBurst: 5}) // below the client's 200/s: 429s happen and are retried
			sim.SetFaults(faultsOn())
			// Small chunks: most windows spool to disk, and values that do
			// not fit add __v_json columns part-way through a window.
			spoolDir := t.TempDir()
			w := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{Sync: "  safety_lag: 0s\n  max_rows_per_batch: 400\n  concurrency: 3\n  chunk_rows: 37\n  spool_dir: " + spoolDir + "\n"})
			ctx := context.Background()
			passStart := time.Now()
			res := testkit.Run(ctx, syncdBin, w, "once")
			if res.Code != 0 {
				t.Fatalf("syncd once exited %d\nstdout:\n%s\nstderr:\n%s", res.Code, res.Stdout, tail(res.Stderr))
			}
			st := sim.Stats()
			if st.RateLimited == 0 {
				t.Errorf("the simulator never answered 429: the test proves nothing about rate limiting")
			}
			if st.InjectedErrors == 0 {
				t.Errorf("no fault was injected: the test proves nothing (stats %+v)", st)
			}
			checkOutput(t, sim, w, passStart.Add(-time.Second))
			if left, _ := os.ReadDir(spoolDir); len(left) != 0 {
				t.Errorf("%d spool folders left behind", len(left))
			}
			if sim.Stats().Injected[formsim.FaultBadValue] == 0 {
				t.Error("no value misfit its column: the spool's widening went untested")
			}
			if strings.Contains(res.Stdout+res.Stderr, testkit.APIKey) {
				t.Error("the API key appears in syncd's output")
			}
		})
	}
}

func TestSecondPassWritesNothingAndIsCheap(t *testing.T) {
	start, end := history(5)
	sim := testkit.StartSim(t, formsim.Config{Seed: 3, Forms: 3, Submissions: 600, Start: start, End: end})
	w := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{})
	ctx := context.Background()
	if res := testkit.Run(ctx, syncdBin, w, "once"); res.Code != 0 {
		t.Fatalf("first pass exited %d: %s %s", res.Code, res.Stdout, tail(res.Stderr))
	}
	files := testkit.ParquetFiles(t, w.Out)
	if len(files) == 0 {
		t.Fatal("the first pass wrote no file")
	}
	before := sim.Stats().Requests
	res := testkit.Run(ctx, syncdBin, w, "once")
	if res.Code != 0 {
		t.Fatalf("second pass exited %d: %s %s", res.Code, res.Stdout, tail(res.Stderr))
	}
	requests := sim.Stats().Requests - before
	forms := int64(len(sim.FormIDs()))
	// One count per form, plus one to list the account's forms.
	if requests > forms+1 {
		t.Errorf("second pass with nothing new made %d requests for %d forms, want at most %d", requests, forms, forms+1)
	}
	if after := testkit.ParquetFiles(t, w.Out); len(after) != len(files) {
		t.Errorf("second pass wrote %d new files", len(after)-len(files))
	}
	checkOutput(t, sim, w, end)
}

func TestBackfillAndLiveSyncOverlap(t *testing.T) {
	for _, order := range []string{"backfill-first", "live-first"} {
		t.Run(order, func(t *testing.T) {
			start, end := history(10)
			sim := testkit.StartSim(t, formsim.Config{Seed: 11, Forms: 1, Submissions: 1500, Start: start, End: end})
			form := sim.FormIDs()[0]
			w := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{Sync: "  safety_lag: 0s\n  max_rows_per_batch: 300\n"})
			ctx := context.Background()
			backfill := func() {
				// An overlapping middle stretch, not aligned to days.
				from := start.Add(50 * time.Hour).Format(time.RFC3339)
				to := end.Add(-70 * time.Hour).Format(time.RFC3339)
				if res := testkit.Run(ctx, syncdBin, w, "backfill", "--form", form, "--from", from, "--to", to, "--concurrency", "4"); res.Code != 0 {
					t.Fatalf("backfill exited %d: %s %s", res.Code, res.Stdout, tail(res.Stderr))
				}
			}
			live := func() {
				if res := testkit.Run(ctx, syncdBin, w, "once"); res.Code != 0 {
					t.Fatalf("once exited %d: %s %s", res.Code, res.Stdout, tail(res.Stderr))
				}
			}
			if order == "backfill-first" {
				backfill()
				live()
			} else {
				live()
				backfill()
			}
			checkOutput(t, sim, w, end)
			if got, want := len(testkit.OpenDuck(t).IDCounts(t, w.Out, poller.DefaultTable(form))), len(sim.ExpectedIDs(form)); got != want {
				t.Errorf("output holds %d distinct submissions, the simulator %d", got, want)
			}
		})
	}
}

func TestUserErrorsAreOneClearSentence(t *testing.T) {
	start, end := history(2)
	sim := testkit.StartSim(t, formsim.Config{Seed: 5, Forms: 1, Submissions: 50, Start: start, End: end})
	ctx := context.Background()

	t.Run("wrong key", func(t *testing.T) {
		w := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{})
		w2 := *w
		res := runWithKey(ctx, &w2, "sk_wrong_key_123", "once")
		if res.Code != 1 || !strings.Contains(res.Stderr, "rejected the API key") || strings.Contains(res.Stderr+res.Stdout, "sk_wrong_key_123") {
			t.Errorf("exit %d, stderr %q", res.Code, tail(res.Stderr))
		}
	})
	t.Run("unknown form", func(t *testing.T) {
		// A configured form the account does not have fails its own pass
		// (exit 1); one named on the command line is a usage error (exit 2).
		w := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{Forms: "forms:\n  - id: doesNotExist42\n"})
		res := testkit.Run(ctx, syncdBin, w, "once")
		if res.Code != 1 || !strings.Contains(res.Stdout, "FAIL doesNotExist42: form doesNotExist42 does not exist in the account") {
			t.Errorf("exit %d, stdout %q, stderr %q", res.Code, res.Stdout, tail(res.Stderr))
		}
		res = testkit.Run(ctx, syncdBin, w, "once", "--form", "doesNotExist42")
		if res.Code != 2 || !strings.Contains(res.Stderr, "doesNotExist42") || !strings.Contains(res.Stderr, "does not exist") {
			t.Errorf("--form of an unknown form: exit %d, stderr %q", res.Code, res.Stderr)
		}
	})
	t.Run("missing config key", func(t *testing.T) {
		w := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{})
		res := runWithKey(ctx, w, "", "once")
		if res.Code != 2 || !strings.Contains(res.Stderr, "FORMS_API_KEY") {
			t.Errorf("exit %d, stderr %q", res.Code, res.Stderr)
		}
	})
	t.Run("locked state", func(t *testing.T) {
		slow := testkit.StartSim(t, formsim.Config{Seed: 5, Forms: 1, Submissions: 50, Start: start, End: end})
		slow.SetFaults(formsim.Faults{Latency: 3 * time.Second})
		w := testkit.NewWorkdir(t, slow.BaseURL, testkit.Config{})
		holder := make(chan testkit.Result, 1)
		go func() { holder <- testkit.Run(ctx, syncdBin, w, "once") }()
		// The holder writes its pid into the lock file once it holds the lock.
		if !eventually(10*time.Second, func() bool {
			b, _ := os.ReadFile(w.State + ".lock")
			return strings.Contains(string(b), "pid")
		}) {
			t.Fatal("the first syncd never took the state lock")
		}
		res := testkit.Run(ctx, syncdBin, w, "once")
		if res.Code != 3 || !strings.Contains(res.Stderr, w.State) || !strings.Contains(res.Stderr, "pid") {
			t.Errorf("exit %d, stderr %q", res.Code, res.Stderr)
		}
		<-holder
	})
}

func runWithKey(ctx context.Context, w *testkit.Workdir, key string, args ...string) testkit.Result {
	return testkit.RunEnv(ctx, syncdBin, w, []string{"FORMS_API_KEY=" + key}, args...)
}

func tail(s string) string {
	if len(s) > 3000 {
		return "…" + s[len(s)-3000:]
	}
	return s
}

// faultsOn is the fault mix of the end-to-end runs: a share of 5xx answers
// and submissions arriving while windows are paged.
func faultsOn() formsim.Faults {
	return formsim.Faults{ServerErrorRate: 0.05, RateLimitBurstEvery: 40, TruncateRate: 0.02, MalformedRate: 0.02,
		BadValueRate: 0.002, EditsPerPage: 1, ArrivalsPerPage: 1}
}

// TestHungAPIFailsFast: an API that accepts connections and never answers
// fails the pass after four attempts of source.timeout each (about a minute
// with the defaults), not after every retry a 5xx would get, and the first
// retry is logged at once.
func TestHungAPIFailsFast(t *testing.T) {
	var hits atomic.Int64
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		<-r.Context().Done()
	}))
	t.Cleanup(hang.Close)
	w := testkit.NewWorkdir(t, hang.URL+"/v1/api", testkit.Config{Forms: "forms:\n  - id: f1\n", LogLevel: "info"})
	cfg := strings.Replace(string(mustRead(t, w.Config)), "timeout: 10s", "timeout: 1s", 1)
	if err := os.WriteFile(w.Config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	res := testkit.Run(context.Background(), syncdBin, w, "once")
	if res.Code == 0 {
		t.Fatalf("a pass against an API that never answers succeeded:\n%s", res.Stdout)
	}
	if n := hits.Load(); n != 4 {
		t.Errorf("the API was asked %d times, want 4 (four timeouts, then the pass fails)", n)
	}
	if !strings.Contains(res.Stderr, "waiting before retrying") || !strings.Contains(res.Stderr, "no answer within 1s") {
		t.Errorf("the first retry is not logged, naming the timeout:\n%s", tail(res.Stderr))
	}
}
