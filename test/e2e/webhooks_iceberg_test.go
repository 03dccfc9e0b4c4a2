package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"

	"github.com/syncd-dev/syncd/internal/sink/icebergsink"
	"github.com/syncd-dev/syncd/internal/testkit"
)

// icebergCommittedAt is committedAt for an Iceberg table of the warehouse
// lake (namespace syncd, the sqlite catalog beside state), read while syncd
// runs: each key's time is the timestamp of the snapshot that added the
// live data file holding it (the snapshot's timestamp-ms, which the writer
// sets just before it commits to the catalog). A table not created yet,
// or a catalog busy with a commit, reads as empty: the caller polls again.
func icebergCommittedAt(t *testing.T, duck *testkit.Duck, lake, state, table, key string) map[string]time.Time {
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
	mans, err := sn.Manifests(fs)
	if err != nil {
		t.Fatalf("manifests of %s: %v", table, err)
	}
	added := map[string]time.Time{} // local path -> its snapshot's time
	for _, m := range mans {
		if m.ManifestContent() != iceberg.ManifestContentData {
			continue
		}
		for e, err := range m.Entries(fs, true) {
			if err != nil {
				t.Fatalf("manifest of %s: %v", table, err)
			}
			at := time.UnixMilli(sn.TimestampMs)
			if s := tbl.Metadata().SnapshotByID(e.SnapshotID()); s != nil {
				at = time.UnixMilli(s.TimestampMs)
			}
			added[strings.TrimPrefix(e.DataFile().FilePath(), "file://")] = at
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
		t.Fatalf("read table %s: %v", table, err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, file string
		if err := rows.Scan(&id, &file); err != nil {
			t.Fatal(err)
		}
		m := added[file]
		if prev, ok := res[id]; !ok || m.Before(prev) {
			res[id] = m
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return res
}
