package icebergsink

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/apache/iceberg-go/table/compaction"
	"github.com/google/uuid"
	"go.uber.org/zap"
)

// SummaryMaintenance marks the snapshots maintenance commits (never a
// batch: they carry no syncd.batch-id).
const SummaryMaintenance = "syncd.maintenance"

// SummaryMaintenanceID is a maintenance commit's own id, by which a
// commit whose answer was lost is recognised.
const SummaryMaintenanceID = "syncd.maintenance-id"

// Defaults of MaintainOptions.
const (
	DefaultExpireOlderThan = 7 * 24 * time.Hour
	DefaultKeepSnapshots   = 10
	// MinOrphanAge is the youngest a file may be for orphan cleanup to
	// remove it: a commit in flight writes its files well within it.
	MinOrphanAge = time.Hour
)

// MaintainOptions say what Maintain does.
type MaintainOptions struct {
	// Compact bin-packs small data files into files of about
	// TargetFileSize (Options.TargetFileSize unless set here), and on a
	// table with delete files (the latest table) rewrites its data files
	// with the deletes applied and drops the delete files.
	Compact        bool
	TargetFileSize int64
	// ExpireOlderThan and KeepSnapshots: snapshots older than this are
	// expired, the last KeepSnapshots always kept; the files only expired
	// snapshots referenced are removed. 0: DefaultExpireOlderThan,
	// DefaultKeepSnapshots; a negative ExpireOlderThan skips expiry.
	ExpireOlderThan time.Duration
	KeepSnapshots   int
	// OrphansOlderThan: files under the table's location that no
	// snapshot (nor the metadata) references, older than this, are
	// removed; 0 skips orphan cleanup. Anything below MinOrphanAge is
	// only safe when no commit is in flight (tests).
	OrphansOlderThan time.Duration
	// Now is the clock the ages are measured from; nil: time.Now.
	Now func() time.Time
}

// TableReport is what Maintain did to one table (`syncd compact -o json`).
// Rows are the records the data files hold (before deletes apply: on a
// latest table with delete files RowsBefore counts replaced versions too).
type TableReport struct {
	Table             string        `json:"table"`
	SnapshotID        int64         `json:"snapshot_id"`
	DataFilesBefore   int           `json:"data_files_before"`
	DataFilesAfter    int           `json:"data_files_after"`
	DeleteFilesBefore int           `json:"delete_files_before"`
	DeleteFilesAfter  int           `json:"delete_files_after"`
	RowsBefore        int64         `json:"rows_before"`
	RowsAfter         int64         `json:"rows_after"`
	BytesRewritten    int64         `json:"bytes_rewritten"`
	SnapshotsExpired  int           `json:"snapshots_expired"`
	OrphansRemoved    int           `json:"orphans_removed"`
	Duration          time.Duration `json:"duration_ns"`
}

// groupTargets bounds a compaction group, in target file sizes: a
// group is read and written as a stream (its memory does not grow
// with it), but it is what a lost race throws away.
const groupTargets = 8

// maxCompactPasses bounds the compaction commits of one Maintain.
const maxCompactPasses = 4

// Maintain compacts, expires and cleans a stream's tables: table and
// its latest table (when they exist), in that order.
func (s *Sink) Maintain(ctx context.Context, name string, opts MaintainOptions) ([]TableReport, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.ExpireOlderThan == 0 {
		opts.ExpireOlderThan = DefaultExpireOlderThan
	}
	if opts.KeepSnapshots <= 0 {
		opts.KeepSnapshots = DefaultKeepSnapshots
	}
	if opts.TargetFileSize <= 0 {
		opts.TargetFileSize = s.opts.TargetFileSize
	}
	var out []TableReport
	for _, n := range []string{name, name + LatestSuffix} {
		t, err := s.load(ctx, n)
		if err != nil {
			return out, err
		}
		if t == nil {
			continue
		}
		rep, err := s.maintainTable(ctx, n, t, opts)
		out = append(out, rep)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

func (s *Sink) maintainTable(ctx context.Context, name string, t *table.Table, opts MaintainOptions) (TableReport, error) {
	start := time.Now()
	rep := TableReport{Table: s.opts.Namespace + "." + name}
	rep.DataFilesBefore, rep.DeleteFilesBefore, rep.RowsBefore = fileCounts(t)
	finish := func(t *table.Table, err error) (TableReport, error) {
		if t != nil {
			rep.DataFilesAfter, rep.DeleteFilesAfter, rep.RowsAfter = fileCounts(t)
			if sn := t.CurrentSnapshot(); sn != nil {
				rep.SnapshotID = sn.SnapshotID
			}
		}
		rep.Duration = time.Since(start)
		return rep, err
	}
	// skew turns an age measured from opts.Now into one measured from
	// time.Now, which the library's expiry and orphan scan use.
	skew := time.Since(opts.Now())

	if opts.Compact {
		nt, n, err := s.compact(ctx, name, opts.TargetFileSize)
		rep.BytesRewritten = n
		if err != nil {
			return finish(t, err)
		}
		t = nt
	}
	if opts.ExpireOlderThan > 0 {
		nt, n, err := s.expire(ctx, name, max(opts.ExpireOlderThan+skew, 0), opts.KeepSnapshots)
		rep.SnapshotsExpired = n
		if err != nil {
			return finish(t, err)
		}
		t = nt
	}
	if opts.OrphansOlderThan > 0 {
		res, err := t.DeleteOrphanFiles(ctx, table.WithFilesOlderThan(max(opts.OrphansOlderThan+skew, 0)))
		rep.OrphansRemoved = len(res.DeletedFiles)
		if err != nil {
			return finish(t, fmt.Errorf("remove the orphan files of Iceberg table %s: %w", rep.Table, err))
		}
		if len(res.DeletedFiles) > 0 {
			s.log.Info("removed orphan files", zapString("table", rep.Table), zap.Int("files", len(res.DeletedFiles)))
		}
	}
	return finish(t, nil)
}

// fileCounts is the live data and delete files and records of t's
// current snapshot, from its summary.
func fileCounts(t *table.Table) (data, deletes int, rows int64) {
	sn := t.CurrentSnapshot()
	if sn == nil || sn.Summary == nil {
		return 0, 0, 0
	}
	p := sn.Summary.Properties
	d, _ := strconv.Atoi(p["total-data-files"])
	x, _ := strconv.Atoi(p["total-delete-files"])
	r, _ := strconv.ParseInt(p["total-records"], 10, 64)
	return d, x, r
}

// compact rewrites the small data files of table name, and when it has
// delete files every data file they apply to, each pass one snapshot of
// its own (summary syncd.maintenance=compact, no batch id; the table's
// properties are left as they are). A
// commit that loses a race (a batch landed meanwhile) removes the files
// it wrote, and compaction starts over from the table as it is then:
// the rewrite replaces exactly the files it read, so a batch's rows are
// neither lost nor doubled.
//
// Groups are packed by the size of the files they read, and the files
// they write are smaller (one file's overhead for many, better
// compression), and a pass that moved files of an older partition spec
// into the current one leaves them beside the partition's own: passes
// run until one finds nothing to do (at most maxCompactPasses commits).
func (s *Sink) compact(ctx context.Context, name string, target int64) (*table.Table, int64, error) {
	var total int64
	for pass := 1; ; pass++ {
		t, n, again, err := s.compactOnce(ctx, name, target)
		total += n
		if err != nil || !again || pass == maxCompactPasses {
			return t, total, err
		}
	}
}

func (s *Sink) compactOnce(ctx context.Context, name string, target int64) (*table.Table, int64, bool, error) {
	var (
		out       *table.Table
		rewritten int64
		again     bool
	)
	err := s.retry(ctx, "compact Iceberg table "+s.opts.Namespace+"."+name, func(attempt int) (bool, error) {
		t, err := s.load(ctx, name)
		if err != nil {
			return false, err
		}
		if t == nil {
			return false, asPermanent(fmt.Errorf("Iceberg table %s.%s is gone", s.opts.Namespace, name))
		}
		out = t
		if t.CurrentSnapshot() == nil {
			return true, nil
		}
		groups, dropDeletes, err := planCompaction(ctx, t, target)
		if err != nil {
			return false, err
		}
		if len(groups) == 0 {
			return true, nil
		}
		fs, err := t.FS(ctx)
		if err != nil {
			return false, err
		}
		var written []string
		removeWritten := func() {
			for _, p := range written {
				if err := fs.Remove(p); err != nil && !errors.Is(err, iofs.ErrNotExist) {
					s.log.Warn("could not remove a file of a compaction that did not commit", zapString("file", p), zap.Error(err))
				}
			}
		}
		txn := t.NewTransaction()
		id := uuid.NewString()
		rw := txn.NewRewrite(iceberg.Properties{SummaryMaintenance: "compact", SummaryMaintenanceID: id})
		var n int64
		// One group at a time, streamed from the old files to the new:
		// only the new files' metadata outlives it.
		for _, g := range groups {
			gr, err := executeGroup(ctx, t, g, target)
			for _, df := range gr.NewDataFiles {
				written = append(written, df.FilePath())
			}
			if err != nil {
				removeWritten()
				return false, fmt.Errorf("compact group %s: %w", g.PartitionKey, err)
			}
			if len(gr.OldDataFiles) == 0 && len(gr.NewDataFiles) == 0 {
				continue
			}
			rw.ApplyResult(gr)
			n += gr.BytesAfter
		}
		removed := map[string]bool{}
		for _, df := range dropDeletes {
			if !removed[df.FilePath()] {
				removed[df.FilePath()] = true
				rw.DeleteFile(df)
			}
		}
		if err := rw.Commit(ctx); err != nil {
			removeWritten()
			return false, fmt.Errorf("stage the compaction: %w", err)
		}
		if s.beforeCompactCommit != nil {
			s.beforeCompactCommit(name)
		}
		nt, err := txn.Commit(ctx)
		if err != nil {
			// Did the catalog take it (an answer lost)? The snapshot
			// says, by its id.
			lt, lerr := s.load(ctx, name)
			if lerr == nil && lt != nil && hasSnapshotWith(lt, SummaryMaintenanceID, id) {
				nt, err = lt, nil
			} else {
				if lerr == nil && lostRace(err) {
					// The catalog refused it: the files are ours to
					// remove. (Otherwise they stay for orphan cleanup.)
					removeWritten()
				}
				return false, err
			}
		}
		out, rewritten, again = nt, rewritten+n, true
		s.log.Info("compacted an Iceberg table", zapString("table", s.opts.Namespace+"."+name),
			zap.Int("groups", len(groups)), zap.Int("delete_files_dropped", len(dropDeletes)), zap.Int64("bytes", n))
		return true, nil
	})
	return out, rewritten, again, err
}

// planCompaction groups t's data files for rewriting, each group one
// partition and at most groupTargets × target bytes (or one file, when
// larger), to be written as files of target bytes;
// files of an older partition spec are rewritten into the current one.
//
// Without delete files: the library's bin-packing planner over the
// current spec's files smaller than 3/4 of target, in partitions with
// two or more such; and every file of an older spec. With delete files
// (the latest table's equality deletes): every data file a delete file
// applies to (an equality delete: every older data file its key's bounds
// may hold), and the small ones, so that every delete file is applied
// and can be dropped, returned as drop.
func planCompaction(ctx context.Context, t *table.Table, target int64) (groups []table.CompactionTaskGroup, drop []iceberg.DataFile, err error) {
	tasks, err := t.Scan().PlanFiles(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("plan the compaction of Iceberg table %s: %w", t.Identifier(), err)
	}
	_, deletes, _ := fileCounts(t)
	spec := t.Spec()
	specID := int32(spec.ID())
	var current, old []table.FileScanTask
	for _, tk := range tasks {
		if tk.File.SpecID() == specID {
			current = append(current, tk)
		} else {
			old = append(old, tk)
		}
	}
	groups = packGroups(old, target*groupTargets)
	if deletes > 0 {
		// The files a delete applies to (as the scan reads them), and
		// the small ones; a file no delete applies to reads the same
		// once the delete files are gone.
		small := target * 3 / 4
		current = slices.DeleteFunc(current, func(tk table.FileScanTask) bool {
			return len(tk.EqualityDeleteFiles)+len(tk.DeleteFiles)+len(tk.DeletionVectorFiles) == 0 && tk.File.FileSizeBytes() >= small
		})
		groups = append(groups, packGroups(current, target*groupTargets)...)
		drop, err = liveDeleteFiles(ctx, t)
		return groups, drop, err
	}
	// The planner's target is the group's size; the files it writes are
	// cut at target.
	cfg := compaction.DefaultConfig()
	cfg.TargetFileSizeBytes = target * groupTargets
	cfg.MinFileSizeBytes = target * 3 / 4
	cfg.MaxFileSizeBytes = target * groupTargets
	cfg.MinInputFiles = 2
	cfg.DeleteFileThreshold = 1
	plan, err := cfg.PlanCompaction(current)
	if err != nil {
		return nil, nil, err
	}
	for _, g := range plan.Groups {
		groups = append(groups, table.CompactionTaskGroup{PartitionKey: g.PartitionKey, Tasks: g.Tasks, TotalSizeBytes: g.TotalSizeBytes})
	}
	return groups, nil, nil
}

// packGroups packs every task, in order, into groups of one partition
// of at most limit bytes (a larger file alone).
func packGroups(tasks []table.FileScanTask, limit int64) []table.CompactionTaskGroup {
	var (
		groups []table.CompactionTaskGroup
		open   = map[string]int{} // partition -> index of its open group
	)
	for _, tk := range tasks {
		key := partitionKey(tk.File)
		i, ok := open[key]
		size := tk.File.FileSizeBytes()
		if !ok || groups[i].TotalSizeBytes+size > limit {
			groups = append(groups, table.CompactionTaskGroup{PartitionKey: key})
			i = len(groups) - 1
			open[key] = i
		}
		groups[i].Tasks = append(groups[i].Tasks, tk)
		groups[i].TotalSizeBytes += size
	}
	return groups
}

// executeGroup rewrites one group: the library's executor for a group of
// the current spec; for one of an older spec (its rows may fall in many
// partitions of the current one) a read with deletes applied and a
// partitioned write.
func executeGroup(ctx context.Context, t *table.Table, g table.CompactionTaskGroup, target int64) (table.CompactionGroupResult, error) {
	spec := t.Spec()
	if g.Tasks[0].File.SpecID() == int32(spec.ID()) {
		return table.ExecuteCompactionGroup(ctx, t, g,
			table.WithCompactionTargetFileSize(target), table.WithCompactionScanConcurrency(1))
	}
	res := table.CompactionGroupResult{PartitionKey: g.PartitionKey, BytesBefore: g.TotalSizeBytes}
	sc, recs, err := t.Scan(table.WithMaxConcurrency(1)).ReadTasks(ctx, g.Tasks)
	if err != nil {
		return res, fmt.Errorf("read group %s: %w", g.PartitionKey, err)
	}
	for df, err := range table.WriteRecords(ctx, t, sc, recs, table.WithTargetFileSize(target), table.WithMaxWriteWorkers(1)) {
		if err != nil {
			return res, fmt.Errorf("write group %s: %w", g.PartitionKey, err)
		}
		res.NewDataFiles = append(res.NewDataFiles, df)
		res.BytesAfter += df.FileSizeBytes()
	}
	for _, tk := range g.Tasks {
		res.OldDataFiles = append(res.OldDataFiles, tk.File)
	}
	res.SafePosDeletes = table.CollectSafePositionDeletes(g.Tasks)
	res.SafeDeletionVectors = table.CollectSafeDeletionVectors(g.Tasks)
	return res, nil
}

// partitionKey names a data file's partition, with its spec.
func partitionKey(df iceberg.DataFile) string {
	p := df.Partition()
	var b strings.Builder
	fmt.Fprintf(&b, "%d", df.SpecID())
	for _, id := range slices.Sorted(maps.Keys(p)) {
		fmt.Fprintf(&b, "/%d=%v", id, p[id])
	}
	return b.String()
}

// liveDeleteFiles lists the delete files of t's current snapshot.
func liveDeleteFiles(ctx context.Context, t *table.Table) ([]iceberg.DataFile, error) {
	fs, err := t.FS(ctx)
	if err != nil {
		return nil, err
	}
	mans, err := t.CurrentSnapshot().Manifests(fs)
	if err != nil {
		return nil, fmt.Errorf("read the manifests of Iceberg table %s: %w", t.Identifier(), err)
	}
	var out []iceberg.DataFile
	for _, m := range mans {
		if m.ManifestContent() != iceberg.ManifestContentDeletes {
			continue
		}
		for e, err := range m.Entries(fs, true) {
			if err != nil {
				return nil, fmt.Errorf("read the manifests of Iceberg table %s: %w", t.Identifier(), err)
			}
			out = append(out, e.DataFile())
		}
	}
	return out, nil
}

// hasSnapshotWith reports whether a snapshot of t has summary key k = v.
func hasSnapshotWith(t *table.Table, k, v string) bool {
	for _, sn := range t.Metadata().Snapshots() {
		if sn.Summary != nil && sn.Summary.Properties[k] == v {
			return true
		}
	}
	return false
}

// lostRace reports whether err says the catalog refused a commit: a
// conflict (the REST catalog's 409), or a requirement that failed (the
// SQL catalog checks them itself and says so in a plain error).
func lostRace(err error) bool {
	return errors.Is(err, table.ErrCommitFailed) || strings.Contains(err.Error(), "requirement failed")
}

// expire expires t's snapshots older than age but the last keep, and
// removes the files only they referenced (the library does, after the
// commit; what it fails to remove is left to orphan cleanup).
func (s *Sink) expire(ctx context.Context, name string, age time.Duration, keep int) (*table.Table, int, error) {
	var (
		out     *table.Table
		expired int
	)
	err := s.retry(ctx, "expire the snapshots of Iceberg table "+s.opts.Namespace+"."+name, func(attempt int) (bool, error) {
		t, err := s.load(ctx, name)
		if err != nil {
			return false, err
		}
		if t == nil {
			return false, asPermanent(fmt.Errorf("Iceberg table %s.%s is gone", s.opts.Namespace, name))
		}
		out = t
		before := len(t.Metadata().Snapshots())
		txn := t.NewTransaction()
		if err := txn.ExpireSnapshots(table.WithOlderThan(age), table.WithRetainLast(keep)); err != nil {
			return false, asPermanent(err)
		}
		nt, err := txn.Commit(ctx)
		if nt != nil && err != nil {
			// Committed; removing the files failed (some or all).
			s.log.Warn("expired snapshots; some of their files remain for orphan cleanup",
				zapString("table", s.opts.Namespace+"."+name), zap.Error(err))
			err = nil
		}
		if err != nil {
			return false, err
		}
		out, expired = nt, before-len(nt.Metadata().Snapshots())
		return true, nil
	})
	return out, expired, err
}
