package icebergsink_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/syncd-dev/syncd/internal/sink"
	"github.com/syncd-dev/syncd/internal/sink/icebergsink"
	"github.com/syncd-dev/syncd/internal/sink/sinktest"
	"github.com/syncd-dev/syncd/internal/testkit/icebird"
)

// maintSink is a sink on a sqlite catalog and a local warehouse with a
// small target file size, and a partition target that partitions the
// versions table by day after its first batches (so that its first
// files are of an older spec).
type maintSink struct {
	*icebergsink.Sink
	wh string // the warehouse folder
	// subs is every submission committed, by batch, for the model.
	mu   sync.Mutex
	subs map[string][]sinktest.Sub
	logs *observer.ObservedLogs
}

// retries counts the commits tried again, by what they were.
func (s *maintSink) retries() map[string]int {
	out := map[string]int{}
	for _, e := range s.logs.FilterMessage("Iceberg commit failed, trying again").All() {
		what := e.ContextMap()["what"].(string)
		out[strings.Fields(what)[0]]++
	}
	return out
}

func newMaintSink(t *testing.T, target int64) *maintSink {
	t.Helper()
	dir := t.TempDir()
	wh := filepath.Join(dir, "warehouse")
	cat, err := icebergsink.OpenCatalog(context.Background(), icebergsink.CatalogConfig{
		Type: icebergsink.CatalogSQLite, URI: filepath.Join(dir, "catalog.db"), Warehouse: wh,
	})
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.InfoLevel)
	s, err := icebergsink.New(icebergsink.Options{
		Catalog: cat, CloseCatalog: true, Namespace: "acme",
		TargetFileSize: target, PartitionTarget: 20, MaxAttempts: 20,
		Logger: zap.New(core),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &maintSink{Sink: s, wh: wh, subs: map[string][]sinktest.Sub{}, logs: logs}
}

const maintTable = "orders"

func batchID(i int) string { return fmt.Sprintf("b%03d", i) }
func key(i, j int) string  { return fmt.Sprintf("k%03d-%03d", i, j) }

// subsOf are the rows of batch i: perBatch new submissions over a few
// hours of day i/4, an edit of the previous batch's first record, a
// deletion of a record two batches back every fourth batch, and an
// edit of a record ten batches back (an older partition).
func subsOf(i, perBatch int) []sinktest.Sub {
	base := sinktest.Day.Add(time.Duration(i) * 6 * time.Hour)
	var out []sinktest.Sub
	for j := range perBatch {
		tm := base.Add(time.Duration(j) * time.Minute)
		out = append(out, sinktest.Sub{Key: key(i, j), Time: tm, Version: tm.Add(time.Second)})
	}
	edit := base.Add(5 * time.Hour)
	if i >= 1 {
		prev := sinktest.Day.Add(time.Duration(i-1) * 6 * time.Hour)
		out = append(out, sinktest.Sub{Key: key(i-1, 0), Time: prev, Version: edit})
	}
	if i >= 2 && i%4 == 3 && perBatch > 1 {
		old := sinktest.Day.Add(time.Duration(i-2)*6*time.Hour + time.Minute)
		out = append(out, sinktest.Sub{Key: key(i-2, 1), Time: old, Version: edit, Deleted: true})
	}
	if i >= 10 && perBatch > 2 {
		old := sinktest.Day.Add(time.Duration(i-10)*6*time.Hour + 2*time.Minute)
		out = append(out, sinktest.Sub{Key: key(i-10, 2), Time: old, Version: edit.Add(time.Second)})
	}
	return out
}

func (s *maintSink) batch(i int) sink.Batch {
	base := sinktest.Day.Add(time.Duration(i) * 6 * time.Hour)
	return sinktest.Batch(maintTable, batchID(i), base, base.Add(6*time.Hour))
}

func (s *maintSink) commit(t testing.TB, i, perBatch int) error {
	subs := subsOf(i, perBatch)
	rec := sinktest.Record(batchID(i), false, subs...)
	defer rec.Release()
	if _, err := s.Commit(context.Background(), s.batch(i), sink.Whole(rec)); err != nil {
		return fmt.Errorf("commit batch %d: %w", i, err)
	}
	s.mu.Lock()
	s.subs[batchID(i)] = subs
	s.mu.Unlock()
	return nil
}

// wantVersions is every row committed, as versionLine spells them.
func (s *maintSink) wantVersions() []string {
	var out []string
	for id, subs := range s.subs {
		for _, sb := range subs {
			out = append(out, fmt.Sprintf("%s|%d|%v|%s", sb.Key, sb.Version.UnixMicro(), sb.Deleted, id))
		}
	}
	slices.Sort(out)
	return out
}

// wantLatest is each live record's newest version.
func (s *maintSink) wantLatest() []string {
	type v struct {
		ver     int64
		deleted bool
	}
	best := map[string]v{}
	for _, subs := range s.subs {
		for _, sb := range subs {
			if o, ok := best[sb.Key]; !ok || sb.Version.UnixMicro() > o.ver {
				best[sb.Key] = v{sb.Version.UnixMicro(), sb.Deleted}
			}
		}
	}
	var out []string
	for k, b := range best {
		if !b.deleted {
			out = append(out, fmt.Sprintf("%s|%d", k, b.ver))
		}
	}
	slices.Sort(out)
	return out
}

// read reads a table back with icebird.
func (s *maintSink) read(t *testing.T, name string) (*icebird.Table, *table.Table) {
	t.Helper()
	tbl, err := s.Catalog().LoadTable(context.Background(), s.Ident(name))
	if err != nil {
		t.Fatal(err)
	}
	return icebird.Read(t, tbl.MetadataLocation(), icebird.LocalDir("file://"+s.wh, s.wh)), tbl
}

func versionLines(tb *icebird.Table) []string {
	var out []string
	for _, r := range tb.Rows {
		ver, _ := r[sinktest.VersionColumn].(time.Time)
		del, _ := r["_deleted"].(bool)
		out = append(out, fmt.Sprintf("%s|%d|%v|%s", r[sinktest.KeyColumn], ver.UnixMicro(), del, r["_batch_id"]))
	}
	slices.Sort(out)
	return out
}

func latestLines(tb *icebird.Table) []string {
	var out []string
	for _, r := range tb.Rows {
		ver, _ := r[sinktest.VersionColumn].(time.Time)
		out = append(out, fmt.Sprintf("%s|%d", r[sinktest.KeyColumn], ver.UnixMicro()))
	}
	slices.Sort(out)
	return out
}

func sameLines(t *testing.T, what string, got, want []string) {
	t.Helper()
	if slices.Equal(got, want) {
		return
	}
	dup := map[string]int{}
	for _, g := range got {
		dup[g]++
	}
	var extra, missing []string
	w := map[string]int{}
	for _, x := range want {
		w[x]++
	}
	for k, n := range dup {
		if n > w[k] {
			extra = append(extra, k)
		}
	}
	for k, n := range w {
		if n > dup[k] {
			missing = append(missing, k)
		}
	}
	t.Fatalf("%s: %d rows, want %d; extra or doubled %v; missing %v", what, len(got), len(want), first(extra), first(missing))
}

func first(s []string) []string {
	slices.Sort(s)
	return s[:min(len(s), 5)]
}

// checkWarehouse checks that every Parquet and Avro file of the
// warehouse is referenced by a snapshot the tables keep, and that every
// file a kept snapshot references is there.
func (s *maintSink) checkWarehouse(t *testing.T, suffixes ...string) {
	t.Helper()
	ctx := context.Background()
	referenced := map[string]bool{}
	for _, name := range []string{maintTable, maintTable + icebergsink.LatestSuffix} {
		tbl, err := s.Catalog().LoadTable(ctx, s.Ident(name))
		if err != nil {
			t.Fatal(err)
		}
		fsys, err := tbl.FS(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, sn := range tbl.Metadata().Snapshots() {
			referenced[sn.ManifestList] = true
			mans, err := sn.Manifests(fsys)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range mans {
				referenced[m.FilePath()] = true
				for e, err := range m.Entries(fsys, true) {
					if err != nil {
						t.Fatal(err)
					}
					referenced[e.DataFile().FilePath()] = true
				}
			}
		}
	}
	onDisk := map[string]bool{}
	err := filepath.WalkDir(s.wh, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if slices.ContainsFunc(suffixes, func(x string) bool { return strings.HasSuffix(p, x) }) {
			onDisk["file://"+filepath.ToSlash(p)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var stray, gone []string
	for p := range onDisk {
		if !referenced[p] {
			stray = append(stray, p)
		}
	}
	for p := range referenced {
		if !onDisk[p] && slices.ContainsFunc(suffixes, func(x string) bool { return strings.HasSuffix(p, x) }) {
			gone = append(gone, p)
		}
	}
	if len(stray) > 0 || len(gone) > 0 {
		t.Fatalf("warehouse: %d files no kept snapshot references (e.g. %v); %d referenced files missing (e.g. %v)",
			len(stray), first(stray), len(gone), first(gone))
	}
	t.Logf("warehouse: %d files, all referenced by kept snapshots", len(onDisk))
}

func maintOpts() icebergsink.MaintainOptions {
	return icebergsink.MaintainOptions{
		Compact:         true,
		ExpireOlderThan: time.Nanosecond, // every snapshot but the last KeepSnapshots
		KeepSnapshots:   3,
		// Nothing is in flight in these tests: every stray file is an
		// orphan (a real run keeps the default of an hour or more).
		OrphansOlderThan: time.Nanosecond,
	}
}

func TestMaintain(t *testing.T) {
	for _, tc := range []struct {
		name     string
		target   int64
		perBatch int
	}{
		{"one file a partition", 1 << 20, 8},
		{"several files a partition", 4 << 10, 120},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s := newMaintSink(t, tc.target)
			const batches = 40
			start := time.Now()
			for i := range batches {
				if err := s.commit(t, i, tc.perBatch); err != nil {
					t.Fatal(err)
				}
			}
			t.Logf("%d batches committed in %v", batches, time.Since(start))

			vBefore, vt := s.read(t, maintTable)
			lBefore, lt := s.read(t, maintTable+icebergsink.LatestSuffix)
			sameLines(t, "versions table before", versionLines(vBefore), s.wantVersions())
			sameLines(t, "latest table before", latestLines(lBefore), s.wantLatest())
			if len(lBefore.DeleteFiles) == 0 {
				t.Fatal("the latest table has no delete files before maintenance: the test tests nothing")
			}
			t.Logf("before: versions %d data files; latest %d data files, %d delete files",
				len(vBefore.DataFiles), len(lBefore.DataFiles), len(lBefore.DeleteFiles))
			propsBefore := map[string]iceberg.Properties{maintTable: vt.Properties(), maintTable + icebergsink.LatestSuffix: lt.Properties()}

			start = time.Now()
			reps, err := s.Maintain(ctx, maintTable, maintOpts())
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("Maintain took %v: %+v", time.Since(start), reps)
			if len(reps) != 2 {
				t.Fatalf("%d reports, want 2", len(reps))
			}
			for _, r := range reps {
				if r.SnapshotsExpired == 0 || r.BytesRewritten == 0 || r.DataFilesAfter >= r.DataFilesBefore {
					t.Errorf("report %+v: want snapshots expired, bytes rewritten, fewer data files", r)
				}
			}

			vAfter, vt2 := s.read(t, maintTable)
			lAfter, lt2 := s.read(t, maintTable+icebergsink.LatestSuffix)
			sameLines(t, "versions table after", versionLines(vAfter), versionLines(vBefore))
			sameLines(t, "latest table after", latestLines(lAfter), latestLines(lBefore))
			if len(lAfter.DeleteFiles) != 0 {
				t.Errorf("latest table: %d delete files after compaction, want 0", len(lAfter.DeleteFiles))
			}
			if len(vAfter.DeleteFiles) != 0 {
				t.Errorf("versions table: %d delete files", len(vAfter.DeleteFiles))
			}
			checkFilesPerPartition(t, "versions", vAfter, tc.target)
			checkFilesPerPartition(t, "latest", lAfter, tc.target)

			// The compaction is a snapshot of its own, the properties kept.
			for name, tbl := range map[string]*table.Table{maintTable: vt2, maintTable + icebergsink.LatestSuffix: lt2} {
				sum := tbl.CurrentSnapshot().Summary.Properties
				if sum[icebergsink.SummaryMaintenance] != "compact" || sum[icebergsink.SummaryBatchID] != "" {
					t.Errorf("%s: current snapshot's summary %v: want %s=compact and no batch id", name, sum, icebergsink.SummaryMaintenance)
				}
				if n := len(tbl.Metadata().Snapshots()); n != 3 {
					t.Errorf("%s: %d snapshots kept, want 3", name, n)
				}
				for _, k := range []string{icebergsink.PropRecentBatches, icebergsink.PropFollows, icebergsink.PropTimeFirst, icebergsink.PropTimeLast} {
					if tbl.Properties()[k] != propsBefore[name][k] {
						t.Errorf("%s: property %s = %q after maintenance, was %q", name, k, tbl.Properties()[k], propsBefore[name][k])
					}
				}
			}

			// Batches whose snapshots are expired are still known: the
			// last 32 by the recent-batches property (both tables), every
			// one by its rows.
			for i := batches - 32; i < batches; i++ {
				b := s.batch(i)
				if !icebergsink.Holds(vt2, b.ID) || !icebergsink.Holds(lt2, b.ID) {
					t.Errorf("batch %s: Holds false after its snapshot expired", b.ID)
				}
				ok, err := s.Committed(ctx, b)
				if err != nil || !ok {
					t.Errorf("Committed(%s) = %v, %v after maintenance", b.ID, ok, err)
				}
			}
			held, err := s.HeldBatches(ctx, maintTable)
			if err != nil {
				t.Fatal(err)
			}
			if want := slices.Sorted(maps.Keys(s.subs)); !slices.Equal(held, want) {
				t.Errorf("HeldBatches = %v, want %v", held, want)
			}

			s.checkWarehouse(t, ".parquet", ".avro")

			// A second run finds nothing to do.
			reps2, err := s.Maintain(ctx, maintTable, maintOpts())
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range reps2 {
				if r.SnapshotID != reps[i].SnapshotID || r.BytesRewritten != 0 || r.SnapshotsExpired != 0 || r.OrphansRemoved != 0 {
					t.Errorf("second Maintain of %s did something: %+v (first: %+v)", r.Table, r, reps[i])
				}
			}

			// Batches after maintenance apply as before.
			for i := batches; i < batches+3; i++ {
				if err := s.commit(t, i, tc.perBatch); err != nil {
					t.Fatal(err)
				}
			}
			v3, _ := s.read(t, maintTable)
			l3, _ := s.read(t, maintTable+icebergsink.LatestSuffix)
			sameLines(t, "versions table, batches after maintenance", versionLines(v3), s.wantVersions())
			sameLines(t, "latest table, batches after maintenance", latestLines(l3), s.wantLatest())

			// And a maintenance after them folds their deletes in too.
			if _, err := s.Maintain(ctx, maintTable, maintOpts()); err != nil {
				t.Fatal(err)
			}
			v4, _ := s.read(t, maintTable)
			l4, _ := s.read(t, maintTable+icebergsink.LatestSuffix)
			sameLines(t, "versions table, maintained again", versionLines(v4), s.wantVersions())
			sameLines(t, "latest table, maintained again", latestLines(l4), s.wantLatest())
			if len(l4.DeleteFiles) != 0 {
				t.Errorf("latest table: %d delete files after the second compaction", len(l4.DeleteFiles))
			}
			checkFilesPerPartition(t, "versions", v4, tc.target)
			checkFilesPerPartition(t, "latest", l4, tc.target)
			s.checkWarehouse(t, ".parquet", ".avro")
		})
	}
}

// checkFilesPerPartition checks each partition's data files against
// ceil(rows / rows a target-sized file holds) + 1, rows per byte taken
// from the partition's files.
func checkFilesPerPartition(t *testing.T, what string, tb *icebird.Table, target int64) {
	t.Helper()
	type part struct {
		files       int
		rows, bytes int64
	}
	parts := map[string]*part{}
	for _, f := range tb.DataFiles {
		k := fmt.Sprint(f.Partition)
		p := parts[k]
		if p == nil {
			p = &part{}
			parts[k] = p
		}
		p.files++
		p.rows += f.RecordCount
		p.bytes += f.SizeBytes
	}
	multi := 0
	for k, p := range parts {
		rowsPerFile := max(1, target*p.rows/p.bytes)
		bound := int((p.rows+rowsPerFile-1)/rowsPerFile) + 1
		if p.files > bound {
			t.Errorf("%s partition %s: %d data files of %d rows (%d bytes), want at most %d", what, k, p.files, p.rows, p.bytes, bound)
		}
		if p.files > 1 {
			multi++
		}
	}
	t.Logf("%s: %d data files in %d partitions (%d with more than one)", what, len(tb.DataFiles), len(parts), multi)
}

// TestMaintainConflicts commits batches while a compaction is between
// its plan and its commit: the compaction loses the race, plans again,
// and no row is lost or doubled.
func TestMaintainConflicts(t *testing.T) {
	ctx := context.Background()

	t.Run("a batch between plan and commit", func(t *testing.T) {
		s := newMaintSink(t, 1<<20)
		for i := range 12 {
			if err := s.commit(t, i, 5); err != nil {
				t.Fatal(err)
			}
		}
		next, calls := 12, map[string]int{}
		s.SetBeforeCompactCommit(func(name string) {
			calls[name]++
			if calls[name] == 1 {
				// The batch commits to both tables: each table's first
				// compaction attempt loses.
				if err := s.commit(t, next, 5); err != nil {
					t.Error(err)
				}
				next++
			}
		})
		defer s.SetBeforeCompactCommit(nil)
		opts := maintOpts()
		opts.OrphansOlderThan = 0
		if _, err := s.Maintain(ctx, maintTable, opts); err != nil {
			t.Fatal(err)
		}
		// The compaction removed the data files of its lost tries itself
		// (the library leaves its manifests of a failed commit: orphan
		// cleanup takes them).
		s.checkWarehouse(t, ".parquet")
		if _, err := s.Maintain(ctx, maintTable, maintOpts()); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{maintTable, maintTable + icebergsink.LatestSuffix} {
			if calls[name] < 2 {
				t.Errorf("%s: compaction committed %d times, want a lost race and a second plan", name, calls[name])
			}
		}
		if r := s.retries(); r["compact"] < 2 {
			t.Errorf("compactions tried again %d times, want 2 (one a table)", r["compact"])
		}
		v, _ := s.read(t, maintTable)
		l, _ := s.read(t, maintTable+icebergsink.LatestSuffix)
		sameLines(t, "versions table", versionLines(v), s.wantVersions())
		sameLines(t, "latest table", latestLines(l), s.wantLatest())
		if len(l.DeleteFiles) != 0 {
			t.Errorf("latest table: %d delete files after compaction", len(l.DeleteFiles))
		}
		s.checkWarehouse(t, ".parquet", ".avro")
	})

	t.Run("commits and maintenance at once", func(t *testing.T) {
		s := newMaintSink(t, 1<<20)
		for i := range 8 {
			if err := s.commit(t, i, 5); err != nil {
				t.Fatal(err)
			}
		}
		for round := range 3 {
			var wg sync.WaitGroup
			errs := make(chan error, 2)
			wg.Add(2)
			go func() {
				defer wg.Done()
				for i := 8 + round*6; i < 8+(round+1)*6; i++ {
					if err := s.commit(t, i, 5); err != nil {
						errs <- err
						return
					}
				}
			}()
			go func() {
				defer wg.Done()
				opts := maintOpts()
				opts.OrphansOlderThan = 0 // commits are in flight
				if _, err := s.Maintain(ctx, maintTable, opts); err != nil {
					errs <- fmt.Errorf("Maintain: %w", err)
				}
			}()
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			v, _ := s.read(t, maintTable)
			l, _ := s.read(t, maintTable+icebergsink.LatestSuffix)
			sameLines(t, fmt.Sprintf("round %d: versions table", round), versionLines(v), s.wantVersions())
			sameLines(t, fmt.Sprintf("round %d: latest table", round), latestLines(l), s.wantLatest())
		}
		t.Logf("tried again: %v", s.retries())
		// Quiet now: one more run folds the last deletes and clears what
		// the lost races left.
		if _, err := s.Maintain(ctx, maintTable, maintOpts()); err != nil {
			t.Fatal(err)
		}
		l, _ := s.read(t, maintTable+icebergsink.LatestSuffix)
		sameLines(t, "latest table", latestLines(l), s.wantLatest())
		if len(l.DeleteFiles) != 0 {
			t.Errorf("latest table: %d delete files after a quiet compaction", len(l.DeleteFiles))
		}
		s.checkWarehouse(t, ".parquet", ".avro")
	})
}

// TestMaintainOptions runs each step alone on a small table.
func TestMaintainOptions(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name        string
		opts        icebergsink.MaintainOptions
		compacted   bool
		snapshotsAt int // batch snapshots a table keeps after
	}{
		{"defaults do nothing yet", icebergsink.MaintainOptions{}, false, 6},
		{"compact only", icebergsink.MaintainOptions{Compact: true}, true, 6},
		{"expire only", icebergsink.MaintainOptions{ExpireOlderThan: time.Nanosecond, KeepSnapshots: 2}, false, 2},
		{"expiry measured from Now", icebergsink.MaintainOptions{ExpireOlderThan: time.Hour, KeepSnapshots: 2,
			Now: func() time.Time { return time.Now().Add(2 * time.Hour) }}, false, 2},
		{"a young snapshot is kept", icebergsink.MaintainOptions{ExpireOlderThan: time.Hour, KeepSnapshots: 2}, false, 6},
		{"no expiry", icebergsink.MaintainOptions{Compact: true, ExpireOlderThan: -1, KeepSnapshots: 1}, true, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newMaintSink(t, 1<<20)
			for i := range 6 {
				if err := s.commit(t, i, 4); err != nil {
					t.Fatal(err)
				}
			}
			reps, err := s.Maintain(ctx, maintTable, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if len(reps) != 2 {
				t.Fatalf("%d reports", len(reps))
			}
			for _, r := range reps {
				tbl, err := s.Catalog().LoadTable(ctx, s.Ident(strings.TrimPrefix(r.Table, "acme.")))
				if err != nil {
					t.Fatal(err)
				}
				if got := tbl.CurrentSnapshot().Summary.Properties[icebergsink.SummaryMaintenance] == "compact"; got != tc.compacted {
					t.Errorf("%s: compacted %v, want %v", r.Table, got, tc.compacted)
				}
				// A compaction commits one snapshot, or two when it moved
				// files of an older partition spec first.
				batches, compactions := 0, 0
				for _, sn := range tbl.Metadata().Snapshots() {
					switch p := sn.Summary.Properties; {
					case p[icebergsink.SummaryBatchID] != "":
						batches++
					case p[icebergsink.SummaryMaintenance] == "compact":
						compactions++
					default:
						t.Errorf("%s: snapshot %d is neither a batch nor a compaction: %v", r.Table, sn.SnapshotID, p)
					}
				}
				if batches != tc.snapshotsAt || (compactions > 0) != tc.compacted || compactions > 2 {
					t.Errorf("%s: %d batch snapshots and %d compactions, want %d and compacted %v (report %+v)", r.Table, batches, compactions, tc.snapshotsAt, tc.compacted, r)
				}
				if r.SnapshotID != tbl.CurrentSnapshot().SnapshotID {
					t.Errorf("%s: report's snapshot %d, current %d", r.Table, r.SnapshotID, tbl.CurrentSnapshot().SnapshotID)
				}
			}
			b, _ := json.Marshal(reps[0])
			for _, k := range []string{`"table":`, `"snapshot_id":`, `"data_files_before":`, `"delete_files_after":`, `"rows_after":`, `"bytes_rewritten":`, `"snapshots_expired":`, `"orphans_removed":`, `"duration_ns":`} {
				if !strings.Contains(string(b), k) {
					t.Errorf("report JSON %s lacks %s", b, k)
				}
			}
		})
	}
	t.Run("no such table", func(t *testing.T) {
		s := newMaintSink(t, 1<<20)
		reps, err := s.Maintain(ctx, "nothing", icebergsink.MaintainOptions{Compact: true})
		if err != nil || len(reps) != 0 {
			t.Fatalf("Maintain of no table: %v, %v", reps, err)
		}
	})
}
