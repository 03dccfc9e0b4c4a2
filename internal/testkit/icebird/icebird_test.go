package icebird_test

import (
	"context"
	"encoding/json"
	"iter"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	_ "github.com/apache/iceberg-go/catalog/sql" // registers the "sql" catalog
	"github.com/apache/iceberg-go/table"
	_ "modernc.org/sqlite" // the "sqlite" database/sql driver

	"github.com/syncd-dev/syncd/internal/testkit/icebird"
)

// The tables' schema: a key, and one column of each type the sink writes.
var schema = iceberg.NewSchemaWithIdentifiers(0, []int{1},
	iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: true},
	iceberg.NestedField{ID: 2, Name: "name", Type: iceberg.PrimitiveTypes.String},
	iceberg.NestedField{ID: 3, Name: "active", Type: iceberg.PrimitiveTypes.Bool},
	iceberg.NestedField{ID: 4, Name: "at", Type: iceberg.PrimitiveTypes.TimestampTz},
)

// row is one row of schema; nil pointers are nulls.
type row struct {
	id     int64
	name   *string
	active *bool
	at     *time.Time
}

func str(s string) *string { return &s }
func boolean(b bool) *bool { return &b }

// ts parses an RFC 3339 time; microseconds survive Iceberg, and icebird
// (read.mjs) reads them.
func ts(s string) *time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return &t
}

// want is rows as icebird.Table.Rows has them.
func want(rows ...row) []map[string]any {
	var out []map[string]any
	for _, r := range rows {
		m := map[string]any{"id": r.id, "name": nil, "active": nil, "at": nil}
		if r.name != nil {
			m["name"] = *r.name
		}
		if r.active != nil {
			m["active"] = *r.active
		}
		if r.at != nil {
			m["at"] = r.at.UTC()
		}
		out = append(out, m)
	}
	return out
}

// record builds an Arrow record of rows with the table's Arrow schema:
// timestamps as timestamp[us, tz=UTC], as iceberg-go wants for timestamptz.
func record(t *testing.T, sc *arrow.Schema, rows ...row) arrow.RecordBatch {
	t.Helper()
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	for _, r := range rows {
		for i, f := range sc.Fields() {
			fb := b.Field(i)
			switch f.Name {
			case "id":
				fb.(*array.Int64Builder).Append(r.id)
			case "name":
				if r.name == nil {
					fb.AppendNull()
				} else {
					fb.(*array.StringBuilder).Append(*r.name)
				}
			case "active":
				if r.active == nil {
					fb.AppendNull()
				} else {
					fb.(*array.BooleanBuilder).Append(*r.active)
				}
			case "at":
				if r.at == nil {
					fb.AppendNull()
				} else {
					fb.(*array.TimestampBuilder).Append(arrow.Timestamp(r.at.UnixMicro()))
				}
			default:
				t.Fatalf("no value for column %s", f.Name)
			}
		}
	}
	return b.NewRecordBatch()
}

// warehouse is a local warehouse with a SQL catalog on sqlite; props
// override the catalog's (a bucket warehouse, its IO's settings).
type warehouse struct {
	dir string
	cat catalog.Catalog
}

func newWarehouse(t *testing.T, props iceberg.Properties) *warehouse {
	t.Helper()
	dir := t.TempDir()
	p := iceberg.Properties{
		"type":        "sql",
		"uri":         "file:" + filepath.Join(dir, "catalog.db"),
		"sql.driver":  "sqlite",
		"sql.dialect": "sqlite",
		"warehouse":   "file://" + filepath.Join(dir, "wh"),
	}
	for k, v := range props {
		p[k] = v
	}
	cat, err := catalog.Load(context.Background(), "test", p)
	if err != nil {
		t.Fatalf("load catalog: %v", err)
	}
	if err := cat.CreateNamespace(context.Background(), table.Identifier{"forms"}, nil); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	return &warehouse{dir: filepath.Join(dir, "wh"), cat: cat}
}

// source serves the local warehouse to icebird.
func (w *warehouse) source() icebird.Source { return icebird.LocalDir("file://"+w.dir, w.dir) }

func (w *warehouse) create(t *testing.T, name string, spec *iceberg.PartitionSpec, props iceberg.Properties) *table.Table {
	t.Helper()
	opts := []catalog.CreateTableOpt{catalog.WithProperties(props)}
	if spec != nil {
		opts = append(opts, catalog.WithPartitionSpec(spec))
	}
	tbl, err := w.cat.CreateTable(context.Background(), table.Identifier{"forms", name}, schema, opts...)
	if err != nil {
		t.Fatalf("create table %s: %v", name, err)
	}
	return tbl
}

func arrowSchema(t *testing.T, tbl *table.Table) *arrow.Schema {
	t.Helper()
	sc, err := table.SchemaToArrowSchema(tbl.Schema(), nil, false, false)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

func appendRows(t *testing.T, tbl *table.Table, rows ...row) *table.Table {
	t.Helper()
	sc := arrowSchema(t, tbl)
	rec := record(t, sc, rows...)
	defer rec.Release()
	rdr, err := array.NewRecordReader(sc, []arrow.RecordBatch{rec})
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	tbl, err = tbl.Append(context.Background(), rdr, nil)
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	return tbl
}

func batches(recs ...arrow.RecordBatch) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		for _, r := range recs {
			if !yield(r, nil) {
				return
			}
		}
	}
}

// upsert commits, in one snapshot (a RowDelta), equality deletes of the
// rows' ids and the rows themselves: the new versions of those rows.
func upsert(t *testing.T, tbl *table.Table, deleteIDs []int64, rows ...row) *table.Table {
	t.Helper()
	ctx := context.Background()
	tx := tbl.NewTransaction()
	keySc := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	kb := array.NewInt64Builder(memory.DefaultAllocator)
	kb.AppendValues(deleteIDs, nil)
	keys := kb.NewArray()
	kb.Release()
	dels, err := tx.WriteEqualityDeletes(ctx, []int{1}, batches(array.NewRecordBatch(keySc, []arrow.Array{keys}, int64(len(deleteIDs)))))
	if err != nil {
		t.Fatalf("write equality deletes: %v", err)
	}
	sc := arrowSchema(t, tbl)
	var data []iceberg.DataFile
	for df, err := range table.WriteRecords(ctx, tbl, sc, batches(record(t, sc, rows...))) {
		if err != nil {
			t.Fatalf("write records: %v", err)
		}
		data = append(data, df)
	}
	if err := tx.NewRowDelta(nil).AddDeletes(dels...).AddRows(data...).Commit(ctx); err != nil {
		t.Fatalf("row delta: %v", err)
	}
	tbl, err = tx.Commit(ctx)
	if err != nil {
		t.Fatalf("commit: %v", err)
	}
	return tbl
}

func monthly(t *testing.T) *iceberg.PartitionSpec {
	t.Helper()
	spec, err := iceberg.NewPartitionSpecOpts(iceberg.AddPartitionFieldBySourceID(4, "at_month", iceberg.MonthTransform{}, schema, nil))
	if err != nil {
		t.Fatal(err)
	}
	return &spec
}

var (
	jan1 = row{1, str("ada"), boolean(true), ts("2026-01-15T10:00:00.123456Z")}
	jan2 = row{2, nil, boolean(false), ts("2026-01-31T23:59:59.999999Z")}
	feb3 = row{3, str("grace"), nil, ts("2026-02-01T00:00:00.000001Z")}
	nul4 = row{4, str("née ünïcode"), boolean(true), nil}
	feb5 = row{5, str(""), boolean(false), ts("2026-02-28T12:34:56Z")}
	old6 = row{6, str("linus"), boolean(true), ts("1969-12-31T23:59:59.999999Z")} // before the epoch
)

func TestReadsWhatIcebergGoWrote(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name  string
		write func(t *testing.T, w *warehouse) *table.Table
		rows  []map[string]any
		// files icebird lists for the current snapshot
		data, posDeletes, eqDeletes int
	}{{
		name: "two appends, partitioned by month",
		write: func(t *testing.T, w *warehouse) *table.Table {
			tbl := w.create(t, "monthly", monthly(t), nil)
			tbl = appendRows(t, tbl, jan1, feb3, nul4, jan2) // three partitions: 2026-01, 2026-02, null
			return appendRows(t, tbl, feb5)
		},
		rows: want(jan1, jan2, feb3, nul4, feb5),
		data: 4,
	}, {
		name: "two appends, unpartitioned",
		write: func(t *testing.T, w *warehouse) *table.Table {
			tbl := w.create(t, "plain", nil, nil)
			tbl = appendRows(t, tbl, jan1, jan2, old6)
			return appendRows(t, tbl, feb3, nul4)
		},
		rows: want(jan1, jan2, feb3, nul4, old6),
		data: 2,
	}, {
		name: "equality deletes and new versions in one row delta",
		write: func(t *testing.T, w *warehouse) *table.Table {
			tbl := w.create(t, "upserted", nil, nil)
			tbl = appendRows(t, tbl, jan1, jan2, feb3, nul4)
			// 2 goes, 3 gets a new version, 5 is new.
			return upsert(t, tbl, []int64{2, 3}, row{3, str("grace hopper"), boolean(true), feb3.at}, feb5)
		},
		rows:      want(jan1, row{3, str("grace hopper"), boolean(true), feb3.at}, nul4, feb5),
		data:      2,
		eqDeletes: 1,
	}, {
		name: "merge-on-read delete: position deletes",
		write: func(t *testing.T, w *warehouse) *table.Table {
			tbl := w.create(t, "mor", nil, iceberg.Properties{table.WriteDeleteModeKey: table.WriteModeMergeOnRead})
			tbl = appendRows(t, tbl, jan1, jan2, feb3, nul4)
			tbl, err := tbl.Delete(ctx, iceberg.EqualTo(iceberg.Reference("id"), int64(2)), nil)
			if err != nil {
				t.Fatalf("delete: %v", err)
			}
			return tbl
		},
		rows:       want(jan1, feb3, nul4),
		data:       1,
		posDeletes: 1,
	}, {
		name: "copy-on-write delete",
		write: func(t *testing.T, w *warehouse) *table.Table {
			tbl := w.create(t, "cow", nil, nil)
			tbl = appendRows(t, tbl, jan1, jan2)
			tbl = appendRows(t, tbl, feb3, nul4)
			tbl, err := tbl.Delete(ctx, iceberg.EqualTo(iceberg.Reference("id"), int64(3)), nil)
			if err != nil {
				t.Fatalf("delete: %v", err)
			}
			return tbl
		},
		rows: want(jan1, jan2, nul4),
		data: 2, // the first append's file, and the second's rewritten without 3
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newWarehouse(t, nil)
			tbl := c.write(t, w)
			got := icebird.Read(t, tbl.MetadataLocation(), w.source()).SortBy("id")
			checkTable(t, got, tbl, c.rows, c.data, c.posDeletes, c.eqDeletes)
		})
	}
}

// checkTable compares what icebird read with the rows and file counts
// expected, and the table iceberg-go committed.
func checkTable(t *testing.T, got *icebird.Table, tbl *table.Table, rows []map[string]any, data, posDeletes, eqDeletes int) {
	t.Helper()
	if !reflect.DeepEqual(got.Rows, rows) {
		t.Errorf("rows:\n got %v\nwant %v", got.Rows, rows)
	}
	if got.SnapshotID != tbl.CurrentSnapshot().SnapshotID {
		t.Errorf("snapshot %d, iceberg-go committed %d", got.SnapshotID, tbl.CurrentSnapshot().SnapshotID)
	}
	var names []string
	for _, f := range got.Schema {
		names = append(names, f.Name+" "+f.Type)
	}
	if w := []string{"id long", "name string", "active boolean", "at timestamptz"}; !reflect.DeepEqual(names, w) {
		t.Errorf("schema %v, want %v", names, w)
	}
	var pos, eq int
	for _, f := range got.DeleteFiles {
		switch f.Content {
		case icebird.PositionDeletes:
			pos++
		case icebird.EqualityDeletes:
			eq++
			if !reflect.DeepEqual(f.EqualityIDs, []int{1}) {
				t.Errorf("equality delete file %s: equality ids %v, want [1]", f.Path, f.EqualityIDs)
			}
		}
	}
	if len(got.DataFiles) != data || pos != posDeletes || eq != eqDeletes {
		t.Errorf("files: %d data, %d position deletes, %d equality deletes; want %d, %d, %d\n%+v\n%+v",
			len(got.DataFiles), pos, eq, data, posDeletes, eqDeletes, got.DataFiles, got.DeleteFiles)
	}
	// DuckDB reads the files icebird lists: as many rows as the manifests say.
	for _, files := range [][]icebird.File{got.DataFiles, got.DeleteFiles} {
		var records int64
		for _, f := range files {
			records += f.RecordCount
		}
		if n := icebird.DuckCount(t, files); n != records {
			t.Errorf("duckdb counts %d rows in %d files, the manifests %d", n, len(files), records)
		}
	}
}

// TestEqualityDeletesIgnorePartitions pins a known difference of icebird
// 0.3.1 from the spec: an equality delete filed in one partition applies
// only to that partition's data files, but icebird applies it to every
// older data file. Tests of partitioned tables with equality deletes must
// not rely on icebird where a key may live in two partitions (syncd's
// tables avoid that: ../shared/notes/iceberg-go-v0.7.md, pitfall 7).
func TestEqualityDeletesIgnorePartitions(t *testing.T) {
	ctx := context.Background()
	w := newWarehouse(t, nil)
	tbl := w.create(t, "monthly", monthly(t), nil)
	tbl = appendRows(t, tbl, jan1, row{2, str("february"), nil, feb3.at})
	// Delete id 2 in January, where it is not: nothing should go.
	tx := tbl.NewTransaction()
	dels, err := tx.WriteEqualityDeletes(ctx, []int{1}, batches(record(t, arrowSchema(t, tbl), row{2, nil, nil, jan2.at})))
	if err != nil {
		t.Fatalf("write equality deletes: %v", err)
	}
	if err := tx.NewRowDelta(nil).AddDeletes(dels...).Commit(ctx); err != nil {
		t.Fatalf("row delta: %v", err)
	}
	if tbl, err = tx.Commit(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	scanned, err := tbl.Scan().ToArrowTable(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer scanned.Release()
	got := icebird.Read(t, tbl.MetadataLocation(), w.source())
	if scanned.NumRows() != 2 || !reflect.DeepEqual(got.Rows, want(jan1)) {
		t.Errorf("iceberg-go reads %d rows (the spec: 2), icebird %v (0.3.1: only id 1); if icebird now follows the spec, update this test and the package comment", scanned.NumRows(), got.Rows)
	}
	if len(got.DeleteFiles) != 1 || got.DeleteFiles[0].Partition["at_month"] != json.Number("672") {
		t.Errorf("delete files %+v: want one, in partition at_month=672 (2026-01)", got.DeleteFiles)
	}
}

// TestLoadNamesAnUnservedLocation: a location no source serves is an
// error naming it, not an empty table.
func TestLoadNamesAnUnservedLocation(t *testing.T) {
	w := newWarehouse(t, nil)
	tbl := appendRows(t, w.create(t, "plain", nil, nil), jan1)
	_, err := icebird.Load(context.Background(), tbl.MetadataLocation(), icebird.LocalDir("file:///elsewhere", t.TempDir()))
	if err == nil || !strings.Contains(err.Error(), "no source serves "+tbl.MetadataLocation()) {
		t.Errorf("err = %v, want one naming %s", err, tbl.MetadataLocation())
	}
}
