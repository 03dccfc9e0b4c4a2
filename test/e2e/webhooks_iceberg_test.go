package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go"

	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/sink/icebergsink"
	"github.com/syncd-dev/syncd/internal/testkit"
)

// icebergCommittedAt is committedAt for an Iceberg table of the warehouse
// lake (namespace syncd, the sqlite catalog beside state), read while syncd
// runs: each key's time is the timestamp of the snapshot that added the
// live data file holding it (the snapshot's timestamp-ms, which the writer
// sets just before it commits to the catalog). A table not created yet,
// or a catalog busy with a commit, reads as empty: the caller polls again.
//
// dated caches, across polls, the files each snapshot added (by local path)
// and the snapshots already read: a snapshot's manifests never change.
func icebergCommittedAt(t *testing.T, duck *testkit.Duck, lake, state, table, key string, dated *icebergDated) map[string]time.Time {
	t.Helper()
	res := map[string]time.Time{}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cat, err := icebergsink.OpenCatalog(ctx, icebergsink.CatalogConfig{Type: icebergsink.CatalogSQLite,
		URI: filepath.Join(filepath.Dir(state), "iceberg-catalog.db"), Warehouse: lake})
	if err != nil {
		t.Logf("open the Iceberg catalog: %v (polled again)", err)
		return res
	}
	defer cat.Close()
	tbl, err := cat.LoadTable(ctx, []string{"syncd", table})
	if err != nil {
		return res
	}
	sn := tbl.CurrentSnapshot()
	if sn == nil {
		return res
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The table merges manifests (an entry carried into a merged manifest
	// is EXISTING), so a file's snapshot is the one whose own manifests
	// (added_snapshot_id) hold it as ADDED; only the current snapshot's
	// live data files are read.
	live := map[string]bool{}
	mans, err := sn.Manifests(fs)
	if err != nil {
		t.Fatalf("manifests of %s: %v", table, err)
	}
	for _, m := range mans {
		if m.ManifestContent() != iceberg.ManifestContentData {
			continue
		}
		for e, err := range m.Entries(fs, true) {
			if err != nil {
				t.Errorf("manifest of %s: %v", table, err)
				return res
			}
			live[e.DataFile().FilePath()] = true
		}
	}
	for _, s := range tbl.Metadata().Snapshots() {
		if dated.read[s.SnapshotID] {
			continue
		}
		dated.read[s.SnapshotID] = true
		ms, err := s.Manifests(fs)
		if err != nil {
			continue // an expired snapshot's manifest list
		}
		at := time.UnixMilli(s.TimestampMs)
		for _, m := range ms {
			if m.ManifestContent() != iceberg.ManifestContentData || m.SnapshotID() != s.SnapshotID {
				continue
			}
			for e, err := range m.Entries(fs, true) {
				if err != nil {
					break
				}
				if e.Status() != iceberg.EntryStatusADDED {
					continue
				}
				local := strings.TrimPrefix(e.DataFile().FilePath(), "file://")
				if prev, ok := dated.added[local]; !ok || at.Before(prev) {
					dated.added[local] = at
				}
			}
		}
	}
	added := map[string]time.Time{} // the live files: local path -> the time of the snapshot that added it
	for p := range live {
		local := strings.TrimPrefix(p, "file://")
		if at, ok := dated.added[local]; ok {
			added[local] = at
		}
	}
	if len(added) == 0 {
		return res
	}
	var files []string
	for p := range added {
		files = append(files, "'"+strings.ReplaceAll(p, "'", "''")+"'")
	}
	rows, err := duck.DB.Query(fmt.Sprintf("SELECT %s, filename FROM read_parquet([%s], union_by_name = true, filename = true)", key, strings.Join(files, ", ")))
	if err != nil {
		t.Errorf("read table %s: %v", table, err)
		return res
	}
	defer rows.Close()
	for rows.Next() {
		var id, file string
		if err := rows.Scan(&id, &file); err != nil {
			t.Error(err)
			return res
		}
		m := added[file]
		if prev, ok := res[id]; !ok || m.Before(prev) {
			res[id] = m
		}
	}
	if err := rows.Err(); err != nil {
		t.Error(err)
	}
	return res
}

// icebergSeen keeps, for each table, the commit time of each key the first
// time a poll saw it: syncd compacts a table while it runs (after
// smallFilesDue batches), and a compacted file is added by the
// compaction's snapshot, so the tables are polled while the events are
// created (watch), not only at the end.
type icebergSeen struct {
	mu    sync.Mutex
	seen  map[string]map[string]time.Time // table -> key -> commit time
	dated map[string]*icebergDated        // table -> its snapshots' files
}

// icebergDated is what a table's snapshots added, as read so far.
type icebergDated struct {
	read  map[int64]bool       // snapshots read
	added map[string]time.Time // local path -> the time of the snapshot that added it
}

// poll reads table once (icebergCommittedAt) and merges what it saw.
func (s *icebergSeen) poll(t *testing.T, duck *testkit.Duck, lake, state, table, key string) map[string]time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen == nil {
		s.seen, s.dated = map[string]map[string]time.Time{}, map[string]*icebergDated{}
	}
	if s.dated[table] == nil {
		s.dated[table] = &icebergDated{read: map[int64]bool{}, added: map[string]time.Time{}}
	}
	got := icebergCommittedAt(t, duck, lake, state, table, key, s.dated[table])
	m := s.seen[table]
	if m == nil {
		m = map[string]time.Time{}
		s.seen[table] = m
	}
	for id, at := range got {
		if prev, ok := m[id]; !ok || at.Before(prev) {
			m[id] = at
		}
	}
	out := make(map[string]time.Time, len(m))
	for id, at := range m {
		out[id] = at
	}
	return out
}

// watch polls the form's table and the bookings table every 500 ms until
// stop is closed; done is closed when it returns.
func (h *hookEnv) watch(t *testing.T, stop <-chan struct{}) (done <-chan struct{}) {
	d := make(chan struct{})
	duck := testkit.OpenDuck(t)
	table := poller.DefaultTable(h.forms.FormIDs()[0])
	go func() {
		defer close(d)
		for {
			h.iceSeen.poll(t, duck, h.lake, h.w.State, table, "submission_id")
			h.iceSeen.poll(t, duck, h.lake, h.w.State, "bookings", "uid")
			select {
			case <-stop:
				return
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	return d
}
