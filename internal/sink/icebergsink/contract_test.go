package icebergsink_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/table"

	"github.com/syncd-dev/syncd/internal/sink"
	"github.com/syncd-dev/syncd/internal/sink/icebergsink"
	"github.com/syncd-dev/syncd/internal/sink/sinktest"
)

type testSink struct {
	*icebergsink.Sink
}

func newSQLite(t *testing.T) *testSink {
	dir := t.TempDir()
	cat, err := icebergsink.OpenCatalog(context.Background(), icebergsink.CatalogConfig{
		Type: icebergsink.CatalogSQLite, URI: filepath.Join(dir, "catalog.db"), Warehouse: filepath.Join(dir, "warehouse"),
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := icebergsink.New(icebergsink.Options{Catalog: cat, CloseCatalog: true, Namespace: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &testSink{s}
}

func TestSinkContractDev(t *testing.T) {
	sinktest.Run(t, func(t *testing.T) sink.Sink { return newSQLite(t) })
}

func (s *testSink) rows(t *testing.T, name string) []map[string]any {
	t.Helper()
	ctx := context.Background()
	tbl, err := s.Catalog().LoadTable(ctx, s.Ident(name))
	if err != nil {
		return nil
	}
	tab, err := tbl.Scan().ToArrowTable(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tab.Release()
	var out []map[string]any
	tr := array.NewTableReader(tab, 1024)
	defer tr.Release()
	for tr.Next() {
		rec := tr.Record()
		for i := 0; i < int(rec.NumRows()); i++ {
			m := map[string]any{}
			for c, f := range rec.Schema().Fields() {
				col := rec.Column(c)
				if col.IsNull(i) {
					continue
				}
				switch a := col.(type) {
				case *array.String:
					m[f.Name] = a.Value(i)
				case *array.Boolean:
					m[f.Name] = a.Value(i)
				case *array.Timestamp:
					m[f.Name] = a.Value(i).ToTime(a.DataType().(*arrow.TimestampType).Unit)
				}
			}
			out = append(out, m)
		}
	}
	_ = table.Identifier{}
	return out
}

func (s *testSink) ReadRows(t *testing.T, name string) []sinktest.Row {
	var out []sinktest.Row
	for _, m := range s.rows(t, name) {
		r := sinktest.Row{}
		r.Key, _ = m[sinktest.KeyColumn].(string)
		if v, ok := m[sinktest.VersionColumn].(time.Time); ok {
			r.Version = v.UnixMicro()
		}
		r.Deleted, _ = m["_deleted"].(bool)
		r.BatchID, _ = m["_batch_id"].(string)
		r.Extra, _ = m[sinktest.ExtraColumn].(string)
		out = append(out, r)
	}
	return out
}

func (s *testSink) Latest(t *testing.T, name string) map[string]int64 {
	out := map[string]int64{}
	for _, m := range s.rows(t, name+icebergsink.LatestSuffix) {
		k, _ := m[sinktest.KeyColumn].(string)
		v, _ := m[sinktest.VersionColumn].(time.Time)
		out[k] = v.UnixMicro()
	}
	return out
}
