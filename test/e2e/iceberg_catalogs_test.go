package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/icebergrest"
	"github.com/syncd-dev/syncd/internal/testkit"
	"github.com/syncd-dev/syncd/internal/testkit/icejudge"
)

// TestIcebergCatalogsCrashSafety is TestIcebergCrashSafety on the other
// catalogs and on a bucket warehouse: `syncd once` killed with SIGKILL at
// random instants (in the first 70% of an uninterrupted run, so that a
// round lands several kills) and rerun until it finishes, a fresh installation (a new
// PostgreSQL database, REST catalog fake or bucket prefix) each round;
// then every submission is live once in its versions table, no version is
// there twice, and <table>_latest is the service's state, read by icebird
// through the catalog syncd committed to.
//
//   - iceberg-postgres: the JDBC catalog's tables on PostgreSQL, the
//     password in PGPASSWORD, a local warehouse;
//   - iceberg-rest: the REST catalog fake, which also fails a commit of
//     each round: a 409 conflict, a commit whose answer is a 503, a
//     commit whose connection is cut (the last two committed): syncd must
//     retry or recognise its batch, never write it twice;
//   - iceberg-sqlite-s3: the embedded catalog, the warehouse in versitygw.
func TestIcebergCatalogsCrashSafety(t *testing.T) {
	seed := testkit.Seed(t, "SYNCD_CRASH_SEED")
	start, end := history(365)
	sim := testkit.StartSim(t, formsim.Config{Seed: int64(seed % 1000), Forms: 2, Submissions: 600, Start: start, End: end})
	ctx := context.Background()
	faults := []icebergrest.Fault{icebergrest.Conflict, icebergrest.UnavailableAfterCommit, icebergrest.CutAfterCommit}
	for i, lane := range []struct{ name, catalog, warehouse string }{
		{"iceberg-postgres", icejudge.Postgres, icejudge.Local},
		{"iceberg-rest", icejudge.REST, icejudge.Local},
		{"iceberg-sqlite-s3", icejudge.SQLite, icejudge.S3},
	} {
		t.Run(lane.name, func(t *testing.T) {
			l := icejudge.StartLane(t, lane.catalog, lane.warehouse)
			fired := map[icebergrest.Fault]int{}
			kills := testkit.CrashKills(10)
			testkit.KillLoop{Seed: seed, Stream: 0x1ce + uint64(i), Kills: kills,
				// A round injects one fault: the REST lane runs until every
				// kind has had its round, however few rounds its kills took.
				Done: func(n int) bool {
					return n >= kills && (lane.catalog != icejudge.REST || len(fired) == len(faults))
				},
				Round: func(t *testing.T, r int) (func(testkit.Attempt) testkit.Result, func(*testing.T)) {
					in := l.Install(t)
					var fault icebergrest.Fault
					if in.REST != nil && r > 0 {
						fault = faults[(r-1)%len(faults)]
						in.REST.InjectCommitFaults(nil, fault)
					}
					w := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{LogLevel: "warn", Sink: in.Sink,
						Sync: "  safety_lag: 0s\n  max_rows_per_batch: 120\n  concurrency: 2\n"})
					run := func(a testkit.Attempt) testkit.Result {
						return testkit.RunEnvKilledAfter(ctx, syncdBin, w, in.Env, a.Delay(0.7), "once")
					}
					check := func(t *testing.T) {
						if fault != 0 {
							if n := in.REST.PendingFaults(); n > 0 {
								t.Errorf("the injected %s did not fire", fault)
							}
							fired[fault]++
						}
						icejudge.Check(t, in.Reader, sim, w.State, icejudge.Options{From: start, CurrentVersions: true})
					}
					return run, check
				},
			}.Run(t)
			if lane.catalog == icejudge.REST {
				var b strings.Builder
				for _, f := range faults {
					fmt.Fprintf(&b, " %s×%d", f, fired[f])
				}
				t.Logf("REST commit faults survived:%s", b.String())
				if len(fired) < len(faults) {
					t.Errorf("not every fault was injected: %v (more kills, more rounds)", fired)
				}
			}
		})
	}
}
