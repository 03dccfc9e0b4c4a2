package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/state"
	"github.com/syncd-dev/syncd/internal/testkit"
)

// crashKills is how many SIGKILLs each mode of the crash test lands; the
// chaos campaign raises it with SYNCD_CRASH_KILLS.
func crashKills() int { return testkit.CrashKills(22) }

// TestCrashSafety kills syncd with SIGKILL at random instants (starting,
// fetching, writing, renaming, committing state) and reruns it until it
// finishes; the output must then be exactly the expected set. Rounds repeat
// with a fresh output until enough kills have landed.
func TestCrashSafety(t *testing.T) {
	seed := testkit.Seed(t, "SYNCD_CRASH_SEED")
	for _, mode := range []string{"once", "backfill"} {
		t.Run(mode, func(t *testing.T) {
			start, end := history(12)
			sim := testkit.StartSim(t, formsim.Config{Seed: int64(seed % 1000), Forms: 2, Submissions: 2000, Start: start, End: end})
			form := sim.FormIDs()[0]
			args := []string{"once"}
			formsSection := ""
			if mode == "backfill" {
				args = []string{"backfill", "--form", form, "--from", start.Format(time.RFC3339), "--to", end.Format(time.RFC3339), "--concurrency", "4"}
				formsSection = "forms:\n  - id: " + form + "\n"
			}
			cfg := testkit.Config{Forms: formsSection, Sync: "  safety_lag: 0s\n  max_rows_per_batch: 120\n  concurrency: 2\n", LogLevel: "warn"}
			ctx := context.Background()
			testkit.KillLoop{Seed: seed, Stream: uint64(len(mode)), Kills: crashKills(),
				Round: func(t *testing.T, r int) (func(testkit.Attempt) testkit.Result, func(*testing.T)) {
					w := testkit.NewWorkdir(t, sim.BaseURL, cfg)
					run := func(a testkit.Attempt) testkit.Result {
						return testkit.RunKilledAfter(ctx, syncdBin, w, a.Delay(1), args...)
					}
					check := func(t *testing.T) {
						if mode == "once" {
							checkOutput(t, sim, w, end)
							return
						}
						covered := testkit.Covered(t, w.State, form)
						if !covered.Covers(stateInterval(start, end)) {
							t.Errorf("backfill did not cover the range: %v", covered)
						}
						got := testkit.OpenDuck(t).IDCounts(t, w.Out, defaultTable(form))
						testkit.CheckExactlyOnce(t, got, testkit.ExpectedIn(sim, form, covered))
					}
					return run, check
				},
			}.Run(t)
		})
	}
}

func stateInterval(start, end time.Time) state.Interval {
	return state.Interval{Start: start, End: end}
}

func defaultTable(formID string) string { return poller.DefaultTable(formID) }
