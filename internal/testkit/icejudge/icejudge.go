// Package icejudge judges the Iceberg tables syncd wrote against the
// Forms simulator: the tables are found through the catalog syncd
// committed them to (sqlite, PostgreSQL or REST) and read by icebird, a
// reader that shares no code with iceberg-go, from the warehouse (a local
// folder or a bucket). The e2e tests and the chaos campaign share it.
package icejudge

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/sink/icebergsink"
	"github.com/syncd-dev/syncd/internal/testkit"
	"github.com/syncd-dev/syncd/internal/testkit/icebird"
)

// Reader reads the tables of one namespace of a catalog.
type Reader struct {
	// Catalog is the catalog as syncd opened it, with its secrets (a
	// PostgreSQL DSN may carry the password here: this process is not
	// syncd).
	Catalog icebergsink.CatalogConfig
	// Namespace is the tables' namespace; default syncd.
	Namespace string
	// Sources serve the warehouse's files to icebird.
	Sources []icebird.Source
}

// Rows is every row of table as icebird reads its current snapshot; nil
// when the table does not exist.
func (r Reader) Rows(t testing.TB, table string) []map[string]any {
	t.Helper()
	if tb := r.Table(t, table); tb != nil {
		return tb.Rows
	}
	return nil
}

// Table is table's current snapshot as icebird reads it (rows, data and
// delete files); nil when the table does not exist.
func (r Reader) Table(t testing.TB, table string) *icebird.Table {
	t.Helper()
	ctx := context.Background()
	cat, err := icebergsink.OpenCatalog(ctx, r.Catalog)
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	ns := r.Namespace
	if ns == "" {
		ns = "syncd"
	}
	tbl, err := cat.LoadTable(ctx, []string{ns, table})
	if err != nil {
		return nil
	}
	return icebird.Read(t, tbl.MetadataLocation(), r.Sources...)
}

// local reports whether every file is on a local disk (DuckDB reads
// those here).
func local(files []icebird.File) bool {
	for _, f := range files {
		if _, err := icebird.LocalPath(f.Path); err != nil {
			return false
		}
	}
	return true
}

// Verdict is what a judge counted over the forms it checked.
type Verdict struct {
	Submissions int // live submissions the versions tables must hold
	Versions    int // rows of the versions tables checked
	Latest      int // rows of the latest tables checked
	Duplicates  int // versions (id, last_updated_at, tombstone) held more than once, and latest rows twice
	Missing     int // submissions of the committed windows absent (or only as a tombstone) from the versions table
	Unexpected  int // submissions live in the versions table that the service does not list in the windows
	// MissingVersions are live submissions whose current version (as the
	// service lists it) is not in the versions table: counted only when
	// the caller says the last run re-read all history (a reconcile from
	// the start).
	MissingVersions int
	LatestDiff      int // submissions whose row in <table>_latest differs from the service (absent, other version, or one the service no longer lists)
}

// Add sums verdicts.
func (v *Verdict) Add(o Verdict) {
	v.Submissions += o.Submissions
	v.Versions += o.Versions
	v.Latest += o.Latest
	v.Duplicates += o.Duplicates
	v.Missing += o.Missing
	v.Unexpected += o.Unexpected
	v.MissingVersions += o.MissingVersions
	v.LatestDiff += o.LatestDiff
}

// Bad is how many faults the verdict found.
func (v Verdict) Bad() int {
	return v.Duplicates + v.Missing + v.Unexpected + v.MissingVersions + v.LatestDiff
}

// Options of a check.
type Options struct {
	// From is the start of the simulator's history: the latest table must
	// hold every submission the service lists from it on.
	From time.Time
	// CurrentVersions also asserts that each live submission's current
	// version is in the versions table (valid once a reconcile from From
	// re-read every submission, or when nothing was edited).
	CurrentVersions bool
}

// Check judges every form of sim: the versions table (poller.DefaultTable)
// holds each version once, each submission of the committed windows (from
// the state file at statePath, which no process may hold) live exactly
// once, and <table>_latest, read as it is, equals the service's current
// state. It reports each fault with t.Errorf (a few named per kind) and
// returns the counts.
func Check(t testing.TB, r Reader, sim *testkit.Sim, statePath string, o Options) Verdict {
	t.Helper()
	var all Verdict
	for _, id := range sim.FormIDs() {
		all.Add(checkForm(t, r, sim, statePath, id, o))
	}
	return all
}

func checkForm(t testing.TB, r Reader, sim *testkit.Sim, statePath, form string, o Options) Verdict {
	t.Helper()
	var v Verdict
	named := map[string]int{}
	note := func(kind, format string, args ...any) {
		if named[kind]++; named[kind] <= 3 {
			t.Errorf("form %s: "+format, append([]any{form}, args...)...)
		}
	}
	table := poller.DefaultTable(form)
	var rows []map[string]any
	tb := r.Table(t, table)
	if tb != nil {
		rows = tb.Rows
	}
	v.Versions = len(rows)
	versions := map[string]int{}
	held := map[string]map[int64]bool{} // live versions by submission
	// Each submission's newest version: a deleted one's is its tombstone,
	// and its older versions stay as history.
	newest := map[string]time.Time{}
	gone := map[string]bool{}
	for _, row := range rows {
		sid, _ := row["submission_id"].(string)
		at, _ := row["last_updated_at"].(time.Time)
		del, _ := row["_deleted"].(bool)
		k := fmt.Sprintf("%s@%d del=%v", sid, at.UnixMicro(), del)
		if versions[k]++; versions[k] == 2 {
			v.Duplicates++
			note("dup", "version %s is in %s more than once", k, table)
		}
		if !del {
			if held[sid] == nil {
				held[sid] = map[int64]bool{}
			}
			held[sid][at.UnixMicro()] = true
		}
		if old, ok := newest[sid]; !ok || at.After(old) || at.Equal(old) && del {
			newest[sid], gone[sid] = at, del
		}
	}

	if tb != nil {
		if len(tb.DeleteFiles) > 0 {
			note("deletes", "%s has %d delete files: a versions table only ever appends", table, len(tb.DeleteFiles))
		}
		// DuckDB's read_parquet over the current snapshot's data files
		// (local warehouses) must see exactly the versions icebird reads.
		if local(tb.DataFiles) {
			if duck := icebird.DuckVersions(t, tb.DataFiles, "submission_id", "last_updated_at", "_deleted"); !maps.Equal(duck, versions) {
				note("duckdb", "DuckDB's read_parquet over the data files of %s reads %d versions, icebird %d: they disagree", table, len(duck), len(versions))
			}
		}
	}

	covered := testkit.Covered(t, statePath, form)
	want := testkit.ExpectedIn(sim, form, covered)
	v.Submissions = len(want)
	wantSet := make(map[string]bool, len(want))
	for _, sid := range want {
		wantSet[sid] = true
		if _, ok := newest[sid]; !ok || gone[sid] {
			v.Missing++
			note("missing", "submission %s of the committed windows is not live in %s (tombstone: %v)", sid, table, gone[sid])
		}
	}
	for sid := range newest {
		if !gone[sid] && !wantSet[sid] {
			v.Unexpected++
			note("unexpected", "submission %s is live in %s but the service does not list it in the committed windows", sid, table)
		}
	}

	service := testkit.ServiceVersions(t, sim, form, o.From)
	if o.CurrentVersions {
		for sid, us := range service {
			if wantSet[sid] && !held[sid][us] {
				v.MissingVersions++
				note("version", "submission %s: its current version %d is not in %s", sid, us, table)
			}
		}
	}

	latest := map[string]int64{}
	lrows := r.Rows(t, table+icebergsink.LatestSuffix)
	v.Latest = len(lrows)
	for _, row := range lrows {
		sid, _ := row["submission_id"].(string)
		at, _ := row["last_updated_at"].(time.Time)
		if _, dup := latest[sid]; dup {
			v.Duplicates++
			note("latestdup", "%s%s holds %s twice", table, icebergsink.LatestSuffix, sid)
		}
		latest[sid] = at.UnixMicro()
	}
	for sid, us := range service {
		if g, ok := latest[sid]; !ok {
			v.LatestDiff++
			note("latest", "submission %s (last updated %d) is not in %s%s", sid, us, table, icebergsink.LatestSuffix)
		} else if g != us {
			v.LatestDiff++
			note("latest", "submission %s: %s%s has version %d, the service %d", sid, table, icebergsink.LatestSuffix, g, us)
		}
	}
	for sid := range latest {
		if _, ok := service[sid]; !ok {
			v.LatestDiff++
			note("latest", "%s%s holds %s, which the service no longer lists", table, icebergsink.LatestSuffix, sid)
		}
	}
	return v
}
