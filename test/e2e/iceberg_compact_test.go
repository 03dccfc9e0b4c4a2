package e2e

import (
	"encoding/json"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/sink/icebergsink"
	"github.com/syncd-dev/syncd/internal/testkit"
	"github.com/syncd-dev/syncd/internal/testkit/icebird"
)

// TestIcebergCompact: after many small passes with edits and deletions,
// `syncd compact` leaves each table with at most one data file per
// partition (they are far below the target size), no delete file in the
// latest tables, the same rows, and no file of an expired snapshot.
func TestIcebergCompact(t *testing.T) {
	start, end := history(365)
	sim := testkit.StartSim(t, formsim.Config{Seed: 5, Forms: 2, Submissions: 500, Start: start, End: end})
	cfg := testkit.Config{Sync: "  safety_lag: 0s\n  max_rows_per_batch: 100\n", LogLevel: "warn",
		Sink: "sink:\n  type: iceberg\n  iceberg:\n    warehouse: lake\n    expire_after: 1s\n    keep_snapshots: 1\n    compact_every: 1000h\n"}
	w := testkit.NewWorkdir(t, sim.BaseURL, cfg)
	mustSyncd(t, w, "once")
	for round := 0; round < 4; round++ {
		for _, form := range sim.FormIDs() {
			ids := sim.ExpectedIDs(form)
			for i := round; i < len(ids); i += 23 {
				if err := sim.Edit(form, ids[i]); err != nil {
					t.Fatal(err)
				}
			}
			if err := sim.Delete(form, ids[len(ids)/2+round]); err != nil {
				t.Fatal(err)
			}
			if _, err := sim.Insert(form, end.Add(-time.Hour)); err != nil {
				t.Fatal(err)
			}
			mustSyncd(t, w, "reconcile", "--form", form, "--from", start.Format(time.RFC3339))
		}
	}
	checkIceberg(t, sim, w, start)
	before := map[string]int{}
	for _, form := range sim.FormIDs() {
		tb := icebergTable(t, w, poller.DefaultTable(form)+icebergsink.LatestSuffix)
		if len(tb.DeleteFiles) == 0 {
			t.Fatalf("form %s: the latest table has no delete files before compact: the test proves nothing", form)
		}
		before[form] = len(icebergTable(t, w, poller.DefaultTable(form)).DataFiles)
	}

	time.Sleep(1100 * time.Millisecond) // past expire_after
	res := mustSyncd(t, w, "compact", "-o", "json")
	var reports []map[string]any
	if err := json.Unmarshal([]byte(res.Stdout), &reports); err != nil {
		t.Fatalf("syncd compact -o json: %v\n%s", err, res.Stdout)
	}
	if want := 2 * len(sim.FormIDs()); len(reports) != want {
		t.Fatalf("syncd compact reported %d tables, want %d: %s", len(reports), want, res.Stdout)
	}
	checkIceberg(t, sim, w, start)
	// A second run a moment later finds nothing to compact, and expires
	// the first run's intermediate snapshots (younger than expire_after
	// then): every file left on disk is then the current snapshot's.
	time.Sleep(1100 * time.Millisecond)
	mustSyncd(t, w, "compact")
	checkIceberg(t, sim, w, start)
	for _, form := range sim.FormIDs() {
		for _, name := range []string{poller.DefaultTable(form), poller.DefaultTable(form) + icebergsink.LatestSuffix} {
			tb := icebergTable(t, w, name)
			if len(tb.DeleteFiles) != 0 {
				t.Errorf("%s: %d delete files after compact", name, len(tb.DeleteFiles))
			}
			perPartition := map[string]int{}
			for _, f := range tb.DataFiles {
				key, _ := json.Marshal(f.Partition)
				perPartition[string(key)]++
			}
			for p, n := range perPartition {
				// Far below the target size: ceil(rows/target) is 1.
				if n > 2 {
					t.Errorf("%s: partition %s has %d data files after compact", name, p, n)
				}
			}
			// Every data or delete file on disk is one the current snapshot
			// references (the only one kept): the expired snapshots' files
			// are gone.
			live := map[string]bool{}
			for _, f := range append(tb.DataFiles, tb.DeleteFiles...) {
				p, err := icebird.LocalPath(f.Path)
				if err != nil {
					t.Fatal(err)
				}
				live[p] = true
			}
			dir := filepath.Join(w.Dir, "lake", "syncd.db", name, "data")
			filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() && strings.HasSuffix(p, ".parquet") && !live[p] {
					t.Errorf("%s: %s is on disk but in no kept snapshot", name, p)
				}
				return nil
			})
		}
		t.Logf("form %s: %d data files before compact", form, before[form])
	}
}

// icebergTable reads a table of the workdir's embedded catalog with
// icebird; the test fails when it does not exist.
func icebergTable(t *testing.T, w *testkit.Workdir, table string) *icebird.Table {
	t.Helper()
	tb := sqliteReader(w).Table(t, table)
	if tb == nil {
		t.Fatalf("no Iceberg table %s", table)
	}
	return tb
}

// TestIcebergMaintainedAfterPasses: with compact_every set, a pass that
// ends well maintains its stream's tables when due, with no `syncd
// compact`: the latest tables' delete files are folded in.
func TestIcebergMaintainedAfterPasses(t *testing.T) {
	start, end := history(365)
	sim := testkit.StartSim(t, formsim.Config{Seed: 9, Forms: 1, Submissions: 300, Start: start, End: end})
	cfg := testkit.Config{Sync: "  safety_lag: 0s\n  max_rows_per_batch: 100\n", LogLevel: "warn",
		Sink: "sink:\n  type: iceberg\n  iceberg:\n    warehouse: lake\n    compact_every: 1s\n"}
	w := testkit.NewWorkdir(t, sim.BaseURL, cfg)
	mustSyncd(t, w, "once")
	form := sim.FormIDs()[0]
	ids := sim.ExpectedIDs(form)
	for i := 0; i < len(ids); i += 17 {
		if err := sim.Edit(form, ids[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := sim.Delete(form, ids[3]); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // the tables are due
	mustSyncd(t, w, "reconcile", "--form", form, "--from", start.Format(time.RFC3339))
	checkIceberg(t, sim, w, start)
	latest := icebergTable(t, w, poller.DefaultTable(form)+icebergsink.LatestSuffix)
	if len(latest.DeleteFiles) != 0 {
		t.Fatalf("the latest table has %d delete files after a pass that was due for maintenance", len(latest.DeleteFiles))
	}
	if len(latest.DataFiles) > 2 {
		t.Errorf("the latest table has %d data files after maintenance", len(latest.DataFiles))
	}
}
