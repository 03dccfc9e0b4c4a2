package e2e

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/testkit"
)

// TestIcebergManyPasses is an account's life on the Iceberg sink: a
// sparse form and a dense one with a year of history, then 200
// incremental passes, each after a few new submissions, with edits,
// deletions and back-dated imports every 20 passes picked up by a
// reconcile. The tables are maintained after the passes (compact_every),
// their partition specs follow their density (the dense table finer),
// and at the end both tables equal the service, with few files.
func TestIcebergManyPasses(t *testing.T) {
	passes := 200
	if testing.Short() {
		passes = 40
	}
	start, end := history(365)
	sim := testkit.StartSim(t, formsim.Config{Seed: 3, Forms: 2, Start: start, End: end,
		Shapes: []formsim.FormShape{{Submissions: 250}, {Submissions: 6000}}})
	cfg := testkit.Config{Sync: "  safety_lag: 0s\n  max_rows_per_batch: 400\n", LogLevel: "warn",
		Sink: "sink:\n  type: iceberg\n  iceberg:\n    warehouse: lake\n    compact_every: 2s\n    expire_after: 10s\n    keep_snapshots: 3\n"}
	w := testkit.NewWorkdir(t, sim.BaseURL, cfg)
	mustSyncd(t, w, "once")
	forms := sim.FormIDs()
	rng := rand.New(rand.NewPCG(3, 43))
	for pass := 1; pass <= passes; pass++ {
		form := forms[rng.IntN(len(forms))]
		if _, err := sim.Insert(form, time.Now().Add(-time.Minute)); err != nil {
			t.Fatal(err)
		}
		if pass%20 == 0 {
			for _, f := range forms {
				ids := sim.ExpectedIDs(f)
				for i := 0; i < 5; i++ {
					if err := sim.Edit(f, ids[rng.IntN(len(ids))]); err != nil {
						t.Fatal(err)
					}
				}
				if err := sim.Delete(f, ids[rng.IntN(len(ids))]); err != nil {
					t.Fatal(err)
				}
				if _, err := sim.Insert(f, start.Add(time.Duration(rng.IntN(300))*24*time.Hour)); err != nil {
					t.Fatal(err)
				}
				mustSyncd(t, w, "reconcile", "--form", f, "--from", start.Format(time.RFC3339))
			}
			continue
		}
		mustSyncd(t, w, "once")
	}
	checkIceberg(t, sim, w, start)

	var tables []struct {
		Table        string `json:"table"`
		DataFiles    int64  `json:"data_files"`
		DeleteFiles  int64  `json:"delete_files"`
		Partitioning string `json:"partitioning"`
		Snapshots    int    `json:"snapshots"`
	}
	if err := json.Unmarshal([]byte(mustSyncd(t, w, "tables", "-o", "json").Stdout), &tables); err != nil {
		t.Fatal(err)
	}
	spec := map[string]string{}
	for _, tb := range tables {
		spec[tb.Table] = tb.Partitioning
		t.Logf("%s: %d data files, %d delete files, %d snapshots, partitioned %s", tb.Table, tb.DataFiles, tb.DeleteFiles, tb.Snapshots, tb.Partitioning)
		// Maintained every 2 s of passes: what the last ones added, on top
		// of one file per partition (a year spans two of each).
		if tb.DataFiles > 40 {
			t.Errorf("%s holds %d data files after %d maintained passes", tb.Table, tb.DataFiles, passes)
		}
	}
	sparse, dense := spec[poller.DefaultTable(forms[0])], spec[poller.DefaultTable(forms[1])]
	if !strings.Contains(dense, "month") && !strings.Contains(dense, "day") {
		t.Errorf("the dense table (6,000 a year, 400 a partition wanted) is partitioned %q, want month or day", dense)
	}
	if sparse == dense {
		t.Errorf("the sparse and the dense table are both partitioned %q: the spec does not follow the density", sparse)
	}
}
