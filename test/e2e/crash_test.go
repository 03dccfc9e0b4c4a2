package e2e

import (
	"context"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/state"
	"github.com/syncd-dev/syncd/internal/testkit"
)

// crashKills is how many SIGKILLs each mode of the crash test lands; the
// chaos campaign raises it with SYNCD_CRASH_KILLS.
func crashKills() int {
	if n, err := strconv.Atoi(os.Getenv("SYNCD_CRASH_KILLS")); err == nil && n > 0 {
		return n
	}
	return 22
}

// TestCrashSafety kills syncd with SIGKILL at random instants (starting,
// fetching, writing, renaming, committing state) and reruns it until it
// finishes; the output must then be exactly the expected set. Rounds repeat
// with a fresh output until enough kills have landed.
func TestCrashSafety(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s, err := strconv.ParseUint(os.Getenv("SYNCD_CRASH_SEED"), 10, 64); err == nil {
		seed = s
	}
	t.Logf("seed %d (rerun with SYNCD_CRASH_SEED=%d)", seed, seed)
	for _, mode := range []string{"once", "backfill"} {
		t.Run(mode, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, uint64(len(mode))))
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

			// How long an uninterrupted run takes bounds the kill instants.
			probe := testkit.NewWorkdir(t, sim.BaseURL, cfg)
			began := time.Now()
			if res := testkit.Run(ctx, syncdBin, probe, args...); res.Code != 0 {
				t.Fatalf("uninterrupted %s exited %d: %s", mode, res.Code, tail(res.Stderr))
			}
			full := time.Since(began)
			t.Logf("an uninterrupted %s takes %s", mode, full)

			kills, rounds := 0, 0
			for kills < crashKills() {
				rounds++
				w := testkit.NewWorkdir(t, sim.BaseURL, cfg)
				for attempt := 0; ; attempt++ {
					if attempt > 200 {
						t.Fatalf("round %d never finished", rounds)
					}
					delay := time.Duration(rng.Int64N(int64(full))) + time.Millisecond
					res := testkit.RunKilledAfter(ctx, syncdBin, w, delay, args...)
					if res.Killed {
						kills++
						continue
					}
					if res.Code != 0 {
						t.Fatalf("round %d: %s exited %d after %d kills: %s", rounds, mode, res.Code, kills, tail(res.Stderr))
					}
					break
				}
				if mode == "once" {
					checkOutput(t, sim, w, end)
				} else {
					covered := testkit.Covered(t, w.State, form)
					if !covered.Covers(stateInterval(start, end)) {
						t.Errorf("round %d: backfill did not cover the range: %v", rounds, covered)
					}
					got := testkit.OpenDuck(t).IDCounts(t, w.Out, defaultTable(form))
					testkit.CheckExactlyOnce(t, got, testkit.ExpectedIn(sim, form, covered))
				}
				if t.Failed() {
					t.Fatalf("round %d failed after %d kills in all", rounds, kills)
				}
			}
			t.Logf("%s: %d kills over %d rounds, output exact after every round", mode, kills, rounds)
		})
	}
}

func stateInterval(start, end time.Time) state.Interval {
	return state.Interval{Start: start, End: end}
}

func defaultTable(formID string) string { return poller.DefaultTable(formID) }
