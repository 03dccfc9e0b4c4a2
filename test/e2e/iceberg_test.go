package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/sink/icebergsink"
	"github.com/syncd-dev/syncd/internal/testkit"
	"github.com/syncd-dev/syncd/internal/testkit/icebird"
)

// icebergConfig is a workdir's config for an Iceberg sink on the embedded
// sqlite catalog, the warehouse in the workdir.
func icebergConfig(sync string) testkit.Config {
	return testkit.Config{Sync: sync, LogLevel: "warn", Sink: "sink:\n  type: iceberg\n  iceberg:\n    warehouse: lake\n"}
}

// icebergRows reads a table of the workdir's warehouse with icebird (not
// iceberg-go, which wrote it); nil when the table does not exist.
func icebergRows(t *testing.T, w *testkit.Workdir, table string) []map[string]any {
	t.Helper()
	ctx := context.Background()
	wh := filepath.Join(w.Dir, "lake")
	cat, err := icebergsink.OpenCatalog(ctx, icebergsink.CatalogConfig{Type: icebergsink.CatalogSQLite, URI: filepath.Join(filepath.Dir(w.State), "iceberg-catalog.db"), Warehouse: wh})
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	tbl, err := cat.LoadTable(ctx, []string{"syncd", table})
	if err != nil {
		return nil
	}
	return icebird.Read(t, tbl.MetadataLocation(), icebird.LocalDir("file://"+wh, wh)).Rows
}

// checkIceberg asserts that the versions table of every form holds each
// submission of the committed windows exactly once, no version twice, and
// that <table>_latest, read as it is, equals the service's current state.
func checkIceberg(t *testing.T, sim *testkit.Sim, w *testkit.Workdir, from time.Time) {
	t.Helper()
	for _, id := range sim.FormIDs() {
		table := poller.DefaultTable(id)
		rows := icebergRows(t, w, table)
		versions := map[string]int{}
		// Each submission's newest version: a deleted one's is its
		// tombstone, and its older versions stay as history.
		newest := map[string]time.Time{}
		gone := map[string]bool{}
		for _, r := range rows {
			sid, _ := r["submission_id"].(string)
			v, _ := r["last_updated_at"].(time.Time)
			del, _ := r["_deleted"].(bool)
			versions[fmt.Sprintf("%s@%d del=%v", sid, v.UnixMicro(), del)]++
			if old, ok := newest[sid]; !ok || v.After(old) || v.Equal(old) && del {
				newest[sid], gone[sid] = v, del
			}
		}
		for v, n := range versions {
			if n > 1 {
				t.Errorf("form %s: version %s is in %s %d times", id, v, table, n)
			}
		}
		covered := testkit.Covered(t, w.State, id)
		distinct := map[string]int{}
		for sid := range newest {
			if !gone[sid] {
				distinct[sid] = 1
			}
		}
		testkit.CheckExactlyOnce(t, distinct, testkit.ExpectedIn(sim, id, covered))

		latest := map[string]int64{}
		for _, r := range icebergRows(t, w, table+icebergsink.LatestSuffix) {
			sid, _ := r["submission_id"].(string)
			v, _ := r["last_updated_at"].(time.Time)
			if _, dup := latest[sid]; dup {
				t.Errorf("form %s: %s%s holds %s twice", id, table, icebergsink.LatestSuffix, sid)
			}
			latest[sid] = v.UnixMicro()
		}
		testkit.CheckLatestView(t, latest, testkit.ServiceVersions(t, sim, id, from))
	}
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
	ctx := context.Background()
	mustRun := func(args ...string) {
		t.Helper()
		if res := testkit.Run(ctx, syncdBin, w, args...); res.Code != 0 {
			t.Fatalf("syncd %v exited %d\nstdout:\n%s\nstderr:\n%s", args, res.Code, res.Stdout, tail(res.Stderr))
		}
	}
	mustRun("once")
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
		mustRun("once")
		for _, form := range sim.FormIDs() {
			mustRun("reconcile", "--form", form, "--from", start.Format(time.RFC3339))
		}
		checkIceberg(t, sim, w, start)
	}
}
