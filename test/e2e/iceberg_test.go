package e2e

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/sink/icebergsink"
	"github.com/syncd-dev/syncd/internal/testkit"
	"github.com/syncd-dev/syncd/internal/testkit/icebird"
	"github.com/syncd-dev/syncd/internal/testkit/icejudge"
)

// icebergConfig is a workdir's config for an Iceberg sink on the embedded
// sqlite catalog, the warehouse in the workdir.
func icebergConfig(sync string) testkit.Config {
	return testkit.Config{Sync: sync, LogLevel: "warn", Sink: "sink:\n  type: iceberg\n  iceberg:\n    warehouse: lake\n"}
}

// sqliteReader reads the tables of the workdir's embedded catalog (the
// warehouse "lake" in the workdir) with icebird, not iceberg-go, which
// wrote them.
func sqliteReader(w *testkit.Workdir) icejudge.Reader {
	wh := filepath.Join(w.Dir, "lake")
	return icejudge.Reader{
		Catalog: icebergsink.CatalogConfig{Type: icebergsink.CatalogSQLite, URI: filepath.Join(filepath.Dir(w.State), "iceberg-catalog.db"), Warehouse: wh},
		Sources: []icebird.Source{icebird.LocalDir("file://"+wh, wh)},
	}
}

// mustSyncd runs syncd to completion in w; a run that fails fails the
// test with its output.
func mustSyncd(t *testing.T, w *testkit.Workdir, args ...string) testkit.Result {
	t.Helper()
	res := testkit.Run(context.Background(), syncdBin, w, args...)
	if res.Code != 0 {
		t.Fatalf("syncd %v exited %d\nstdout:\n%s\nstderr:\n%s", args, res.Code, res.Stdout, tail(res.Stderr))
	}
	return res
}

// checkIceberg asserts that the versions table of every form holds each
// submission of the committed windows exactly once, no version twice, and
// that <table>_latest, read as it is, equals the service's current state
// (icejudge.Check on the workdir's embedded catalog).
func checkIceberg(t *testing.T, sim *testkit.Sim, w *testkit.Workdir, from time.Time) {
	t.Helper()
	icejudge.Check(t, sqliteReader(w), sim, w.State, icejudge.Options{From: from})
}

// TestIcebergCrashSafety kills `syncd once` writing Iceberg tables at
// random instants and reruns it until it finishes: every submission is
// then in its versions table once, and the latest table is the service's
// state, read by an independent reader.
func TestIcebergCrashSafety(t *testing.T) {
	seed := testkit.Seed(t, "SYNCD_CRASH_SEED")
	start, end := history(365)
	sim := testkit.StartSim(t, formsim.Config{Seed: int64(seed % 1000), Forms: 2, Submissions: 1200, Start: start, End: end})
	cfg := icebergConfig("  safety_lag: 0s\n  max_rows_per_batch: 150\n  concurrency: 2\n")
	ctx := context.Background()
	testkit.KillLoop{Seed: seed, Stream: 43, Kills: crashKills(),
		Round: func(t *testing.T, r int) (func(testkit.Attempt) testkit.Result, func(*testing.T)) {
			w := testkit.NewWorkdir(t, sim.BaseURL, cfg)
			run := func(a testkit.Attempt) testkit.Result {
				return testkit.RunKilledAfter(ctx, syncdBin, w, a.Delay(1), "once")
			}
			return run, func(t *testing.T) { checkIceberg(t, sim, w, start) }
		},
	}.Run(t)
}

// TestIcebergEditsAndDeletions: edits, deletions and back-dated imports
// after a first sync reach both tables through incremental passes and a
// reconcile; the latest table follows the service, the versions table
// keeps every version once.
func TestIcebergEditsAndDeletions(t *testing.T) {
	start, end := history(365)
	sim := testkit.StartSim(t, formsim.Config{Seed: 11, Forms: 2, Submissions: 800, Start: start, End: end})
	w := testkit.NewWorkdir(t, sim.BaseURL, icebergConfig("  safety_lag: 0s\n  max_rows_per_batch: 200\n"))
	mustSyncd(t, w, "once")
	checkIceberg(t, sim, w, start)
	for round := 0; round < 3; round++ {
		for _, form := range sim.FormIDs() {
			ids := sim.ExpectedIDs(form)
			for i := round; i < len(ids); i += 37 {
				if err := sim.Edit(form, ids[i]); err != nil {
					t.Fatal(err)
				}
			}
			for i := round + 5; i < len(ids); i += 101 {
				if err := sim.Delete(form, ids[i]); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := sim.Insert(form, start.Add(time.Duration(round+1)*24*time.Hour), end.Add(-time.Hour)); err != nil {
				t.Fatal(err)
			}
		}
		mustSyncd(t, w, "once")
		for _, form := range sim.FormIDs() {
			mustSyncd(t, w, "reconcile", "--form", form, "--from", start.Format(time.RFC3339))
		}
		checkIceberg(t, sim, w, start)
	}
}
