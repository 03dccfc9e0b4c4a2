package chaos

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/state"
	"github.com/syncd-dev/syncd/internal/testkit"
	"github.com/syncd-dev/syncd/internal/testkit/lakes"
)

// TestChaosBuckets is the campaign's kill rounds with the output in an S3
// bucket (versitygw) and an Azure container (Azurite): every simulator
// fault on, syncd killed with SIGKILL at random instants and rerun until it
// finishes, and after every round the simulator's journal judges the
// objects: 0 duplicates, 0 missing, nothing unexpected.
// SYNCD_CHAOS_BUCKET_KILLS and SYNCD_CHAOS_BUCKET_SUBMISSIONS size it
// (make chaos raises them; make test runs a few kills).
func TestChaosBuckets(t *testing.T) {
	p := loadParams()
	kills := envInt("SYNCD_CHAOS_BUCKET_KILLS", 4)
	p.Submissions = envInt("SYNCD_CHAOS_BUCKET_SUBMISSIONS", 200)
	t.Logf("seed %d (rerun with SYNCD_CHAOS_SEED=%d SYNCD_CHAOS_BUCKET_KILLS=%d SYNCD_CHAOS_BUCKET_SUBMISSIONS=%d SYNCD_CHAOS_FORMS=%d)", p.Seed, p.Seed, kills, p.Submissions, p.Forms)
	for i, scheme := range []string{"s3", "azblob"} {
		t.Run(scheme, func(t *testing.T) {
			var total verdict
			st := testkit.KillLoop{Seed: p.Seed, Stream: uint64(0xb0 + i), Kills: kills,
				Round: func(t *testing.T, r int) (func(testkit.Attempt) testkit.Result, func(*testing.T)) {
					end := time.Now().UTC().Truncate(time.Hour).Add(-time.Hour)
					start := end.AddDate(0, 0, -6)
					sim := testkit.StartSim(t, formsim.Config{Seed: int64(p.Seed%100000) + int64(r), Forms: p.Forms, Submissions: p.Submissions,
						Start: start, End: end, InclusiveDates: r%3 == 0})
					sim.EnableJournal()
					sim.SetFaults(allFaults())
					l := lakes.Start(t, scheme)
					w := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{
						Sync:     "  safety_lag: 0s\n  max_rows_per_batch: 120\n  concurrency: 2\n",
						Sink:     "sink:\n  type: parquet\n  parquet:\n    path: " + l.URL("lake/forms") + "\n",
						LogLevel: "warn",
					})
					run := func(a testkit.Attempt) testkit.Result {
						sim.NextEpoch()
						ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
						defer cancel()
						return testkit.RunKilledAfter(ctx, syncdBin, w, a.Delay(0.5), "once")
					}
					check := func(t *testing.T) {
						dir := t.TempDir()
						l.Download(t, "lake/forms", dir)
						duck := testkit.OpenDuck(t)
						var v verdict
						for _, id := range sim.FormIDs() {
							covered := testkit.Covered(t, w.State, id)
							if want := (state.Interval{Start: start, End: end}); !covered.Covers(want) {
								t.Errorf("form %s: committed windows %v do not cover %v", id, covered, want)
							}
							j, _ := sim.Journal(id)
							fv := judge(j, covered, duck.IDCounts(t, dir, poller.DefaultTable(id)))
							v.add(fv)
							v.Examples = append(v.Examples, fv.Examples...)
						}
						if !v.ok() {
							t.Logf("objects in the bucket, to tell which batches overlap: %v", l.Keys(t, "lake/forms"))
							t.Fatalf("%s round %d is not exactly once: %+v\n  %s", scheme, r, v, strings.Join(v.Examples, "\n  "))
						}
						total.add(v)
					}
					return run, check
				},
			}.Run(t)
			t.Logf("%s: %d kills over %d rounds: expected %d found %d dup %d missing %d unexpected %d either-way %d",
				scheme, st.Kills, st.Rounds, total.Expected, total.Found, total.Duplicated, total.Missing, total.Unexpected, total.Ambiguous)
		})
	}
}
