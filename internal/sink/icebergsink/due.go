package icebergsink

import (
	"context"
	"time"

	"github.com/apache/iceberg-go/table"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/sink"
)

var _ sink.Maintainer = (*Sink)(nil)

// smallFilesDue is how many data files a table gains since its last
// maintenance before maintenance is due at once (a backfill's batches),
// whatever the interval.
const smallFilesDue = 64

// MaintainIfDue maintains a stream's tables (Maintain with the sink's
// options) when it is due: its last maintenance (or its first snapshot)
// is older than Options.MaintainEvery and the tables have files to fold
// (delete files, or more data files than partitions), or smallFilesDue
// data files came since. It reads only the tables' metadata to decide.
func (s *Sink) MaintainIfDue(ctx context.Context, name string) (bool, error) {
	if s.opts.MaintainEvery < 0 {
		return false, nil
	}
	due := false
	for _, n := range []string{name, name + LatestSuffix} {
		t, err := s.load(ctx, n)
		if err != nil {
			return false, err
		}
		if t != nil && s.due(t) {
			due = true
		}
	}
	if !due {
		return false, nil
	}
	reports, err := s.Maintain(ctx, name, s.MaintainOptions())
	for _, r := range reports {
		s.log.Info("Iceberg table maintained", zap.String("table", r.Table), zap.Int("data_files_before", r.DataFilesBefore),
			zap.Int("data_files_after", r.DataFilesAfter), zap.Int("delete_files_before", r.DeleteFilesBefore),
			zap.Int("delete_files_after", r.DeleteFilesAfter), zap.Int("snapshots_expired", r.SnapshotsExpired),
			zap.Int("orphans_removed", r.OrphansRemoved), zap.Duration("took", r.Duration))
	}
	return true, err
}

// MaintainOptions are the maintenance the sink's options ask for. Orphan
// cleanup takes every unreferenced file, whatever its age: maintenance runs
// under the stream's lock (the engine's, or the state's for `syncd
// compact`), so no commit of the stream's tables is in flight, and the
// files of the snapshots it expired are among them (iceberg-go v0.7.0's
// expiry leaves the files a rewrite replaced, which a kept snapshot's
// manifests still list as deleted), and so are the files a first
// compaction pass wrote that the second one replaced, a moment old.
func (s *Sink) MaintainOptions() MaintainOptions {
	return MaintainOptions{Compact: true, ExpireOlderThan: s.opts.ExpireAfter, KeepSnapshots: s.opts.KeepSnapshots, OrphansOlderThan: lockedOrphanAge}
}

// lockedOrphanAge is the orphan age of maintenance under the stream's
// lock: any (0 would skip the cleanup). A file whose store's clock is
// ahead of syncd's waits for the next maintenance.
const lockedOrphanAge = time.Nanosecond

func (s *Sink) due(t *table.Table) bool {
	snaps := t.Metadata().Snapshots()
	if len(snaps) == 0 {
		return false
	}
	every := s.opts.MaintainEvery
	if every == 0 {
		every = time.Hour
	}
	// The last maintenance, else the table's first snapshot.
	since := snaps[0].TimestampMs
	added := 0
	for _, sn := range snaps {
		if sn.Summary == nil {
			continue
		}
		if sn.Summary.Properties[SummaryMaintenance] != "" {
			since, added = sn.TimestampMs, 0
			continue
		}
		if sn.Summary.Properties[SummaryBatchID] != "" {
			added++
		}
	}
	if added >= smallFilesDue {
		return true
	}
	if time.Since(time.UnixMilli(since)) < every {
		return false
	}
	data, deletes, _ := fileCounts(t)
	return deletes > 0 || data > 1 && added > 1
}
