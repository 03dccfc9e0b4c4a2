package chaos

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/testkit"
)

// TestChaosReconcile kills `syncd reconcile` with SIGKILL at random
// instants, under the simulator's 5xx, truncated and malformed answers,
// after edits, deletions and late imports inside the lookback, and reruns
// it until it finishes: every version must then be in the output once (no
// id has a last_updated_at, or a tombstone, twice), and the latest view
// must equal what the service lists. SYNCD_CHAOS_RECONCILE_KILLS sizes it
// (make chaos raises it; make test runs a few kills).
func TestChaosReconcile(t *testing.T) {
	p := loadParams()
	kills := envInt("SYNCD_CHAOS_RECONCILE_KILLS", 4)
	t.Logf("seed %d (rerun with SYNCD_CHAOS_SEED=%d SYNCD_CHAOS_RECONCILE_KILLS=%d)", p.Seed, p.Seed, kills)
	ctx := context.Background()
	st := testkit.KillLoop{Seed: p.Seed, Stream: 0xc0, Kills: kills,
		Round: func(t *testing.T, r int) (func(testkit.Attempt) testkit.Result, func(*testing.T)) {
			now := time.Now().UTC()
			start, end := now.AddDate(0, 0, -50), now.Add(-time.Hour)
			sim := testkit.StartSim(t, formsim.Config{Seed: int64(p.Seed%100000) + int64(r), Forms: 1, Submissions: 1200, Start: start, End: end})
			form := sim.FormIDs()[0]
			w := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{
				Sync: "  safety_lag: 0s\n  max_rows_per_batch: 100\n  lookback: 30d\n  reconcile_every: 24h\n", LogLevel: "warn",
			})
			if res := testkit.Run(ctx, syncdBin, w, "once"); res.Code != 0 {
				t.Fatalf("round %d: once exited %d: %s", r, res.Code, res.Stderr)
			}
			// Changes a reconcile must find: 30 edits, 15 deletions, 15
			// late imports inside the lookback.
			lookback := now.AddDate(0, 0, -30)
			rng := rand.New(rand.NewPCG(p.Seed, uint64(r)))
			ids := sim.ExpectedIDsBetween(form, lookback.Add(time.Hour), end)
			rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
			time.Sleep(5 * time.Millisecond)
			for _, id := range ids[:30] {
				if err := sim.Edit(form, id); err != nil {
					t.Fatal(err)
				}
			}
			for _, id := range ids[30:45] {
				if err := sim.Delete(form, id); err != nil {
					t.Fatal(err)
				}
			}
			for i := 0; i < 15; i++ {
				if _, err := sim.Insert(form, lookback.Add(time.Duration(rng.Int64N(int64(29*24*time.Hour))))); err != nil {
					t.Fatal(err)
				}
			}
			sim.SetFaults(formsim.Faults{ServerErrorRate: 0.03, TruncateRate: 0.02, MalformedRate: 0.02})
			run := func(a testkit.Attempt) testkit.Result {
				return testkit.RunKilledAfter(ctx, syncdBin, w, a.Delay(1), "reconcile", "--form", form)
			}
			check := func(t *testing.T) {
				sim.SetFaults(formsim.Faults{})
				checkVersions(t, sim, w, form, lookback)
			}
			return run, check
		},
	}.Run(t)
	t.Logf("reconcile: %d kills over %d rounds, every version once and the latest view exact after each", st.Kills, st.Rounds)
}

// checkVersions compares the output with what the service lists now.
func checkVersions(t *testing.T, sim *testkit.Sim, w *testkit.Workdir, form string, lookback time.Time) {
	t.Helper()
	duck, table := testkit.OpenDuck(t), poller.DefaultTable(form)
	if n := duck.DuplicateVersions(t, w.Out, table); n != 0 {
		t.Errorf("%d versions are in the output more than once", n)
	}
	testkit.CheckLatestView(t, duck.LatestView(t, w.Out, table, lookback), testkit.ServiceVersions(t, sim, form, lookback))
}
