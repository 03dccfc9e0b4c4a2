package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/bqfake"
	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/state"
	"github.com/syncd-dev/syncd/internal/testkit"
)

// bqSink is the sink section that points syncd at the fake: fast retries, so
// that injected faults cost milliseconds.
func bqSink(f *bqfake.Server, project, dataset string) string {
	return fmt.Sprintf(`sink:
  type: bigquery
  bigquery:
    project: %s
    dataset: %s
    location: EU
    endpoint: %s/bigquery/v2/
    max_attempts: 6
    min_backoff: 5ms
    max_backoff: 50ms
`, project, dataset, f.URL())
}

// checkBigQuery asserts that every form of the simulator has its own table
// holding exactly its submissions inside the committed windows, each once,
// and that the committed windows reach at least until covers.
func checkBigQuery(t *testing.T, sim *testkit.Sim, f *bqfake.Server, w *testkit.Workdir, project, dataset string, covers time.Time) {
	t.Helper()
	for _, id := range sim.FormIDs() {
		covered := testkit.Covered(t, w.State, id)
		if len(covered) == 0 || covered[len(covered)-1].End.Before(covers) {
			t.Errorf("form %s: committed windows %v do not reach %s", id, covered, covers)
		}
		want := testkit.ExpectedIn(sim, id, covered)
		table := poller.DefaultTable(id)
		if _, ok := f.Table(project, dataset, table); !ok && len(want) > 0 {
			t.Errorf("form %s: no table %s.%s", id, dataset, table)
			continue
		}
		got := f.IDs(project, dataset, table, "submission_id")
		testkit.CheckExactlyOnce(t, got, want)
		for _, r := range f.Rows(project, dataset, table) {
			if r["form_id"] != id {
				t.Errorf("table %s holds a row of form %v", table, r["form_id"])
				break
			}
		}
	}
}

// bqRun is one syncd process against the fake: it ends by itself, or is
// killed with SIGKILL after delay, or at the killAtJob-th load job the fake
// creates (then after a pause of jobDelay, so that some kills land after
// the insert was answered and before the checkpoint).
type bqRun struct {
	delay     time.Duration // 0: no timed kill
	killAtJob int64         // 0: no kill at a job
	jobDelay  time.Duration
}

// run starts syncd and waits for it; it reports whether SIGKILL ended it.
func (r bqRun) run(t *testing.T, f *bqfake.Server, w *testkit.Workdir, args ...string) (killed bool, res testkit.Result) {
	t.Helper()
	cmd, stdout, stderr, err := testkit.Start(syncdBin, w, args...)
	if err != nil {
		t.Fatalf("start syncd: %v", err)
	}
	kill := func() { _ = cmd.Process.Signal(syscall.SIGKILL) }
	var jobs atomic.Int64
	if r.killAtJob > 0 {
		f.OnJobCreated(func(string, string) {
			if jobs.Add(1) != r.killAtJob {
				return
			}
			if r.jobDelay == 0 {
				kill() // the job exists; its insert is not answered yet
				return
			}
			time.AfterFunc(r.jobDelay, kill)
		})
		defer f.OnJobCreated(nil)
	}
	var timer *time.Timer
	if r.delay > 0 {
		timer = time.AfterFunc(r.delay, kill)
	}
	err = cmd.Wait()
	if timer != nil {
		timer.Stop()
	}
	res = testkit.Result{Stdout: stdout.String(), Stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		res.Code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			killed, res.Killed = true, true
		}
	default:
		t.Fatalf("wait for syncd: %v", err)
	}
	// No wait for requests the dead process had sent: they may land after
	// the next process looked, as at BigQuery, and the open batch's fixed id
	// must keep them from loading twice.
	return killed, res
}

// openLoads counts the open intents of a stopped syncd whose batch has a
// load job at the fake: the process died between a job's insert and the
// checkpoint that follows it.
func openLoads(t *testing.T, f *bqfake.Server, project, statePath string, formIDs []string) int {
	t.Helper()
	ctx := context.Background()
	if _, err := os.Stat(statePath); err != nil {
		return 0 // killed before the state file was made
	}
	st, err := state.OpenBolt(ctx, state.BoltOptions{Path: statePath, ReadOnly: true})
	if err != nil {
		t.Fatalf("open state %s: %v", statePath, err)
	}
	defer st.Close()
	jobs := f.JobIDs(project)
	n := 0
	for _, id := range formIDs {
		fs, err := st.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for batch := range fs.Intents {
			for _, j := range jobs {
				if strings.HasPrefix(j, batch+"_a") {
					n++
					break
				}
			}
		}
	}
	return n
}

// TestBigQueryCrashSafety kills `syncd once` (and, every third round, a
// concurrent `syncd backfill`) with SIGKILL at random instants and at random
// load jobs (as the fake creates the job, or a moment after its insert was
// answered), with faults queued at the fake and jobs that stay running for
// a while in every other round, then reruns it until it finishes: each
// submission must then be in its form's table exactly once, with no gap in
// the committed windows.
func TestBigQueryCrashSafety(t *testing.T) {
	seed := testkit.Seed(t, "SYNCD_CRASH_SEED")
	start, end := history(6)
	sim := testkit.StartSim(t, formsim.Config{Seed: int64(seed % 1000), Forms: 2, Submissions: 700, Start: start, End: end})
	f := bqfake.New(t)
	forms := sim.FormIDs()
	// Job ids are unique per project, forever: every installation (the
	// probe, each round) has its own project, as separate deployments must.
	config := func(project, formsSection, spoolDir string) testkit.Config {
		return testkit.Config{
			Forms:    formsSection,
			Sync:     "  safety_lag: 0s\n  max_rows_per_batch: 150\n  concurrency: 2\n  spool_dir: " + spoolDir + "\n",
			Sink:     bqSink(f, project, "forms"),
			LogLevel: "warn",
		}
	}
	var perRun int64 // load jobs of an uninterrupted run, counted by the probe
	timed, midLoad := 0, 0
	st := testkit.KillLoop{Seed: seed, Stream: 5, Kills: crashKills(),
		// Enough kills, and enough of each kind: at random instants, and
		// with a job inserted but the checkpoint not moved.
		Done: func(kills int) bool { return kills >= crashKills() && midLoad >= 5 && timed >= 5 },
		Round: func(t *testing.T, r int) (func(testkit.Attempt) testkit.Result, func(*testing.T)) {
			project := fmt.Sprintf("crash-%d", r)
			args, formsSection := []string{"once"}, ""
			backfill := r > 0 && r%3 == 0
			if r == 0 {
				project = "probe"
			} else {
				if backfill {
					args = []string{"backfill", "--form", forms[0], "--from", start.Format(time.RFC3339), "--to", end.Format(time.RFC3339), "--concurrency", "3"}
					formsSection = "forms:\n  - id: " + forms[0] + "\n"
				}
				// Faults hit the first loads of the round; in every other
				// round jobs stay running for two polls, so kills find them
				// unfinished.
				f.Inject(bqfake.JobBackendError, bqfake.CutAfterAccept, bqfake.Insert5xx, bqfake.ErrorAfterAccept, bqfake.RateLimited)
				f.SetRunningPolls(2 * (r % 2))
			}
			// Killed loads leave their files in spoolDir; the next start
			// removes them (checked after the round).
			spoolDir := t.TempDir()
			w := testkit.NewWorkdir(t, sim.BaseURL, config(project, formsSection, spoolDir))
			run := func(a testkit.Attempt) testkit.Result {
				var k bqRun
				if a.Full > 0 {
					switch a.Rng.IntN(3) {
					case 0:
						// Half an uninterrupted run: a rerun has less left to do.
						k.delay = a.Delay(0.5)
					case 1:
						k.killAtJob = 1 + a.Rng.Int64N(perRun/2)
					default:
						k.killAtJob = 1 + a.Rng.Int64N(perRun/2)
						k.jobDelay = time.Duration(a.Rng.Int64N(int64(3*time.Millisecond))) + time.Microsecond
					}
				}
				killed, res := k.run(t, f, w, args...)
				if killed {
					if k.delay > 0 {
						timed++
					}
					if openLoads(t, f, project, w.State, forms) > 0 {
						midLoad++
					}
				}
				return res
			}
			check := func(t *testing.T) {
				if left, err := os.ReadDir(spoolDir); err != nil || len(left) != 0 {
					t.Errorf("after the round's last run, the spool folder holds %d entries (%v): killed loads' files were not removed", len(left), err)
				}
				switch {
				case r == 0:
					perRun = int64(f.JobCount("probe"))
					checkBigQuery(t, sim, f, w, "probe", "forms", end)
					if perRun < 4 {
						t.Fatalf("the probe loaded %d jobs: too few to kill between them", perRun)
					}
				case backfill:
					covered := testkit.Covered(t, w.State, forms[0])
					if !covered.Covers(stateInterval(start, end)) {
						t.Errorf("backfill did not cover the range: %v", covered)
					}
					got := f.IDs(project, "forms", poller.DefaultTable(forms[0]), "submission_id")
					testkit.CheckExactlyOnce(t, got, testkit.ExpectedIn(sim, forms[0], covered))
				default:
					checkBigQuery(t, sim, f, w, project, "forms", end)
				}
			}
			return run, check
		},
	}.Run(t)
	f.SetRunningPolls(0)
	t.Logf("%d kills (%d at random instants, %d at load jobs) over %d rounds; %d left a load job inserted and its checkpoint not moved; every table exact after every round",
		st.Kills, timed, st.Kills-timed, st.Rounds, midLoad)
}
