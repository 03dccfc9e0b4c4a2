package pgsrv_test

// iceberg-go's SQL catalog (catalog/sql, database/sql through bun) on a
// real PostgreSQL: the catalog tables Spark, Trino and PyIceberg read
// through their JDBC/SQL catalogs.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	_ "github.com/apache/iceberg-go/catalog/sql" // registers catalog type "sql"
	"github.com/apache/iceberg-go/table"

	"github.com/syncd-dev/syncd/internal/testkit/pgsrv"
)

var (
	ns    = table.Identifier{"syncd"}
	ident = table.Identifier{"syncd", "submissions"}
)

// loadCatalog opens a catalog connection of its own (its own database/sql
// pool) named "pg" on dsn.
func loadCatalog(t *testing.T, dsn, warehouse string, extra iceberg.Properties) catalog.Catalog {
	t.Helper()
	props := iceberg.Properties{
		"type":        "sql",
		"uri":         dsn,
		"sql.driver":  pgsrv.Driver,
		"sql.dialect": "postgres",
		"warehouse":   "file://" + warehouse,
	}
	for k, v := range extra {
		props[k] = v
	}
	cat, err := catalog.Load(context.Background(), "pg", props)
	if err != nil {
		t.Fatalf("catalog.Load: %v", err)
	}
	t.Cleanup(func() {
		if c, ok := cat.(catalog.Closer); ok {
			c.Close()
		}
	})
	return cat
}

// schema: a submission's id, form, when it was submitted (timestamptz,
// the partition source) and an answer.
func submissionsSchema() *iceberg.Schema {
	return iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.String, Required: true},
		iceberg.NestedField{ID: 2, Name: "form", Type: iceberg.PrimitiveTypes.String, Required: true},
		iceberg.NestedField{ID: 3, Name: "submitted_at", Type: iceberg.PrimitiveTypes.TimestampTz, Required: true},
		iceberg.NestedField{ID: 4, Name: "answer", Type: iceberg.PrimitiveTypes.String},
	)
}

func createTable(t *testing.T, cat catalog.Catalog) *table.Table {
	t.Helper()
	ctx := context.Background()
	if err := cat.CreateNamespace(ctx, ns, iceberg.Properties{"owner": "syncd"}); err != nil {
		t.Fatalf("CreateNamespace: %v", err)
	}
	spec := iceberg.NewPartitionSpec(iceberg.PartitionField{
		SourceIDs: []int{3}, FieldID: 1000, Name: "submitted_month", Transform: iceberg.MonthTransform{},
	})
	tbl, err := cat.CreateTable(ctx, ident, submissionsSchema(), catalog.WithPartitionSpec(&spec))
	if err != nil {
		t.Fatalf("CreateTable: %v", err)
	}
	return tbl
}

type row struct {
	id, form string
	at       time.Time
	answer   string
}

// batch is rows as Arrow, in the table's Arrow schema: timestamps are
// timestamp[us, tz=UTC].
func batch(t *testing.T, rows []row) arrow.Table {
	t.Helper()
	sc, err := table.SchemaToArrowSchema(submissionsSchema(), nil, false, false)
	if err != nil {
		t.Fatal(err)
	}
	if ts := sc.Field(2).Type.(*arrow.TimestampType); ts.Unit != arrow.Microsecond || ts.TimeZone != "UTC" {
		t.Fatalf("submitted_at is %v, want timestamp[us, tz=UTC]", sc.Field(2).Type)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	for _, r := range rows {
		b.Field(0).(*array.StringBuilder).Append(r.id)
		b.Field(1).(*array.StringBuilder).Append(r.form)
		b.Field(2).(*array.TimestampBuilder).Append(arrow.Timestamp(r.at.UnixMicro()))
		b.Field(3).(*array.StringBuilder).Append(r.answer)
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	return array.NewTableFromRecords(sc, []arrow.RecordBatch{rec})
}

func appendRows(t *testing.T, tbl *table.Table, rows []row, batchID string) (*table.Table, error) {
	t.Helper()
	at := batch(t, rows)
	defer at.Release()
	return tbl.AppendTable(context.Background(), at, int64(len(rows)), iceberg.Properties{"syncd.batch-id": batchID})
}

// scanRows reads the table's current snapshot with iceberg-go's scan.
func scanRows(t *testing.T, tbl *table.Table) []row {
	t.Helper()
	at, err := tbl.Scan().ToArrowTable(context.Background())
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	defer at.Release()
	tr := array.NewTableReader(at, 0)
	defer tr.Release()
	var out []row
	for tr.Next() {
		rec := tr.RecordBatch()
		ids := rec.Column(0).(*array.String)
		forms := rec.Column(1).(*array.String)
		ats := rec.Column(2).(*array.Timestamp)
		answers := rec.Column(3).(*array.String)
		for i := 0; i < int(rec.NumRows()); i++ {
			out = append(out, row{ids.Value(i), forms.Value(i), time.UnixMicro(int64(ats.Value(i))).UTC(), answers.Value(i)})
		}
	}
	slices.SortFunc(out, func(a, b row) int { return strings.Compare(a.id, b.id) })
	return out
}

func batchIDs(tbl *table.Table) []string {
	var ids []string
	for _, s := range tbl.Metadata().Snapshots() {
		if s.Summary != nil {
			ids = append(ids, s.Summary.Properties["syncd.batch-id"])
		}
	}
	return ids
}

func day(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 12, 30, 0, 0, time.UTC) }

// Namespace, a month-partitioned table, two appends with syncd's summary
// property, then a second catalog connection reads it all back; and the
// catalog's tables are the JDBC catalog's.
func TestIcebergSQLCatalog(t *testing.T) {
	begin := time.Now()
	s := pgsrv.Start(t)
	dsn := s.CreateDatabase(t, "iceberg")
	warehouse := t.TempDir()
	ctx := context.Background()

	cat := loadCatalog(t, dsn, warehouse, nil)
	tbl := createTable(t, cat)
	first := []row{
		{"s1", "f1", day(2026, 1, 5), "a"},
		{"s2", "f1", day(2026, 1, 28), "b"},
		{"s3", "f2", day(2026, 2, 1), "c"},
	}
	second := []row{
		{"s4", "f1", day(2026, 2, 14), "d"},
		{"s5", "f2", day(2026, 3, 31), "e"},
	}
	tbl, err := appendRows(t, tbl, first, "batch-1")
	if err != nil {
		t.Fatalf("first append: %v", err)
	}
	if _, err = appendRows(t, tbl, second, "batch-2"); err != nil {
		t.Fatalf("second append: %v", err)
	}

	// A second connection, as another process (or Spark) would read it.
	other := loadCatalog(t, dsn, warehouse, nil)
	got, err := other.LoadTable(ctx, ident)
	if err != nil {
		t.Fatalf("LoadTable through a second catalog: %v", err)
	}
	if rows, want := scanRows(t, got), append(slices.Clone(first), second...); !slices.Equal(rows, want) {
		t.Errorf("rows through the second catalog:\n got %v\nwant %v", rows, want)
	}
	if ids := batchIDs(got); !slices.Equal(ids, []string{"batch-1", "batch-2"}) {
		t.Errorf("snapshot summaries' syncd.batch-id: %q, want batch-1, batch-2", ids)
	}
	cur := got.CurrentSnapshot()
	t.Logf("current snapshot %d: %v", cur.SnapshotID, cur.Summary.Properties)
	if cur.Summary.Operation != table.OpAppend || cur.Summary.Properties["added-records"] != "2" {
		t.Errorf("current snapshot's summary: %s %v", cur.Summary.Operation, cur.Summary.Properties)
	}
	if spec := got.Spec(); spec.NumFields() != 1 || spec.Field(0).Transform.String() != "month" {
		t.Errorf("partition spec: %v", spec)
	}
	// One data file per month touched: 2026-01 and 2026-02 by the first
	// append, 2026-02 and 2026-03 by the second.
	props, err := other.LoadNamespaceProperties(ctx, ns)
	if err != nil || props["owner"] != "syncd" {
		t.Errorf("namespace properties: %v, %v", props, err)
	}

	// The catalog's rows, read with plain SQL: what a JDBC catalog reads.
	db := s.Open(t, "iceberg")
	var catName, tblNS, tblName, loc, prev, typ string
	if err := db.QueryRow(`SELECT catalog_name, table_namespace, table_name, metadata_location, previous_metadata_location, iceberg_type
		FROM iceberg_tables`).Scan(&catName, &tblNS, &tblName, &loc, &prev, &typ); err != nil {
		t.Fatal(err)
	}
	t.Logf("iceberg_tables row: %s | %s | %s | %s | %s | %s", catName, tblNS, tblName, loc, prev, typ)
	if catName != "pg" || tblNS != "syncd" || tblName != "submissions" || typ != "TABLE" ||
		loc != got.MetadataLocation() || !strings.HasPrefix(loc, "file://"+warehouse) || prev == "" {
		t.Errorf("iceberg_tables row does not match the table (metadata %s)", got.MetadataLocation())
	}
	checkJDBCColumns(t, db)
	t.Logf("whole test: %v", time.Since(begin).Round(time.Millisecond))
}

// The columns and keys of the JDBC catalog (Iceberg's JdbcUtil, V1 schema
// with iceberg_type), as iceberg-go created them on PostgreSQL.
func checkJDBCColumns(t *testing.T, db *sql.DB) {
	t.Helper()
	want := map[string][]string{
		"iceberg_tables":               {"catalog_name", "table_namespace", "table_name", "iceberg_type", "metadata_location", "previous_metadata_location"},
		"iceberg_namespace_properties": {"catalog_name", "namespace", "property_key", "property_value"},
	}
	wantPK := map[string][]string{
		"iceberg_tables":               {"catalog_name", "table_namespace", "table_name"},
		"iceberg_namespace_properties": {"catalog_name", "namespace", "property_key"},
	}
	for tbl, cols := range want {
		rows, err := db.Query(`SELECT column_name, data_type, coalesce(character_maximum_length, 0), is_nullable
			FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position`, tbl)
		if err != nil {
			t.Fatal(err)
		}
		var got, desc []string
		for rows.Next() {
			var name, typ, nullable string
			var n int
			if err := rows.Scan(&name, &typ, &n, &nullable); err != nil {
				t.Fatal(err)
			}
			got = append(got, name)
			if n > 0 {
				typ = fmt.Sprintf("%s(%d)", typ, n)
			}
			desc = append(desc, fmt.Sprintf("%s %s nullable=%s", name, typ, nullable))
		}
		rows.Close()
		t.Logf("%s: %s", tbl, strings.Join(desc, ", "))
		if !slices.Equal(got, cols) {
			t.Errorf("%s columns %v, want %v", tbl, got, cols)
		}
		var pk []string
		rows, err = db.Query(`SELECT a.attname FROM pg_index i
			JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
			WHERE i.indrelid = $1::regclass AND i.indisprimary ORDER BY array_position(i.indkey, a.attnum)`, tbl)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var c string
			if err := rows.Scan(&c); err != nil {
				t.Fatal(err)
			}
			pk = append(pk, c)
		}
		rows.Close()
		if !slices.Equal(pk, wantPK[tbl]) {
			t.Errorf("%s primary key %v, want %v", tbl, pk, wantPK[tbl])
		}
	}
}

// Two catalogs (two connection pools, as two syncd processes) load the same
// table and both append. What the loser gets is logged: the report quotes
// it.
func TestIcebergConcurrentWriters(t *testing.T) {
	s := pgsrv.Start(t)
	dsn := s.CreateDatabase(t, "iceberg")
	warehouse := t.TempDir()
	ctx := context.Background()
	catA := loadCatalog(t, dsn, warehouse, nil)
	catB := loadCatalog(t, dsn, warehouse, nil)
	base := createTable(t, catA)
	if _, err := appendRows(t, base, []row{{"s0", "f1", day(2026, 1, 1), "x"}}, "batch-0"); err != nil {
		t.Fatal(err)
	}
	want := []row{{"s0", "f1", day(2026, 1, 1), "x"}}

	// Stale: B loaded the table before A committed, and appends after.
	t.Run("stale", func(t *testing.T) {
		a, err := catA.LoadTable(ctx, ident)
		if err != nil {
			t.Fatal(err)
		}
		b, err := catB.LoadTable(ctx, ident)
		if err != nil {
			t.Fatal(err)
		}
		ra := []row{{"a1", "f1", day(2026, 2, 1), "a"}}
		rb := []row{{"b1", "f1", day(2026, 2, 2), "b"}}
		if _, err := appendRows(t, a, ra, "batch-a"); err != nil {
			t.Fatalf("A's append: %v", err)
		}
		want = append(want, ra...)
		_, err = appendRows(t, b, rb, "batch-b")
		t.Logf("B's stale append: err=%v; errors.Is(ErrCommitFailed)=%v", err, errors.Is(err, table.ErrCommitFailed))
		// iceberg-go v0.7.0: the catalog checks B's requirement (main at
		// the snapshot B loaded) against the table it reads in
		// CommitTable, and fails with a plain error: not ErrCommitFailed,
		// so never retried, whatever commit.retry.num-retries says. The
		// sink has to recognise it. Fails here if that changes.
		if err == nil || errors.Is(err, table.ErrCommitFailed) || !strings.Contains(err.Error(), `requirement failed: branch "main" has changed`) {
			t.Errorf("B's stale append: %v; iceberg-go v0.7.0 fails it with a plain requirement failure", err)
		}
		if err == nil {
			// Refresh-and-replay took B's snapshot onto A's.
			want = append(want, rb...)
		} else {
			// Nothing of B's is in the table; B reloads and appends again.
			b, err = catB.LoadTable(ctx, ident)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := appendRows(t, b, rb, "batch-b-retry"); err != nil {
				t.Fatalf("B's append after reloading: %v", err)
			}
			want = append(want, rb...)
		}
		checkRows(t, catA, want)
	})

	// Racing: both load, then both commit at once, several rounds; tally
	// what happens, and check that what succeeded is all there and what
	// failed is not. iceberg-go retries a commit only on ErrCommitFailed,
	// and only with the table property commit.retry.num-retries (default
	// 0): first without, then with 3.
	t.Run("racing", func(t *testing.T) {
		race(t, catA, catB, 8, &want)
		checkRows(t, catB, want)
	})
	t.Run("racing-retries", func(t *testing.T) {
		tbl, err := catA.LoadTable(ctx, ident)
		if err != nil {
			t.Fatal(err)
		}
		txn := tbl.NewTransaction()
		if err := txn.SetProperties(iceberg.Properties{table.CommitNumRetriesKey: "3", table.CommitMinRetryWaitMsKey: "10"}); err != nil {
			t.Fatal(err)
		}
		if _, err := txn.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		race(t, catA, catB, 8, &want)
		checkRows(t, catB, want)
	})
}

// race runs rounds of two appends started at once through the two
// catalogs, adds the rows of those that succeeded to want, and logs the
// outcomes.
func race(t *testing.T, catA, catB catalog.Catalog, rounds int, want *[]row) map[string]int {
	t.Helper()
	ctx := context.Background()
	outcomes := map[string]int{}
	for round := 0; round < rounds; round++ {
		a, err := catA.LoadTable(ctx, ident)
		if err != nil {
			t.Fatal(err)
		}
		b, err := catB.LoadTable(ctx, ident)
		if err != nil {
			t.Fatal(err)
		}
		tbls := []*table.Table{a, b}
		tag := fmt.Sprintf("%s-%d", t.Name(), round)
		rows := [][]row{
			{{tag + "-a", "f1", day(2026, 4, 1+round), "a"}},
			{{tag + "-b", "f2", day(2026, 5, 1+round), "b"}},
		}
		errs := make([]error, 2)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range tbls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, errs[i] = appendRows(t, tbls[i], rows[i], tag)
			}()
		}
		close(start)
		wg.Wait()
		if errs[0] != nil && errs[1] != nil {
			t.Errorf("round %d: both appends failed: %v; %v", round, errs[0], errs[1])
		}
		for i, err := range errs {
			switch {
			case err == nil:
				outcomes["ok"]++
				*want = append(*want, rows[i]...)
			case errors.Is(err, table.ErrCommitFailed):
				outcomes["ErrCommitFailed: "+idRE.ReplaceAllString(err.Error(), "N")]++
			default:
				outcomes["not ErrCommitFailed: "+idRE.ReplaceAllString(err.Error(), "N")]++
				if !strings.Contains(err.Error(), `requirement failed: branch "main" has changed`) {
					t.Errorf("append lost a race with an unexpected error: %v", err)
				}
			}
		}
	}
	for k, n := range outcomes {
		t.Logf("%2d x %s", n, k)
	}
	return outcomes
}

var idRE = regexp.MustCompile(`[0-9]{6,}`)

func checkRows(t *testing.T, cat catalog.Catalog, want []row) {
	t.Helper()
	tbl, err := cat.LoadTable(context.Background(), ident)
	if err != nil {
		t.Fatal(err)
	}
	want = slices.Clone(want)
	slices.SortFunc(want, func(a, b row) int { return strings.Compare(a.id, b.id) })
	if got := scanRows(t, tbl); !slices.Equal(got, want) {
		t.Errorf("rows:\n got %v\nwant %v", got, want)
	}
}

// The catalog tables as Iceberg's Java JdbcCatalog creates them (its
// JdbcUtil's DDL: V0, and V1 = V0 plus iceberg_type VARCHAR(5)) are used as
// they are: iceberg-go's own CREATE TABLE IF NOT EXISTS does nothing, and
// a table made and appended to through them reads back.
func TestIcebergOnJDBCCreatedTables(t *testing.T) {
	s := pgsrv.Start(t)
	const v0 = `CREATE TABLE iceberg_tables(catalog_name VARCHAR(255) NOT NULL,table_namespace VARCHAR(255) NOT NULL,
		table_name VARCHAR(255) NOT NULL,metadata_location VARCHAR(1000),previous_metadata_location VARCHAR(1000),
		PRIMARY KEY (catalog_name, table_namespace, table_name));
		CREATE TABLE iceberg_namespace_properties(catalog_name VARCHAR(255) NOT NULL,namespace VARCHAR(255) NOT NULL,
		property_key VARCHAR(255),property_value VARCHAR(1000),PRIMARY KEY (catalog_name, namespace, property_key))`
	const v1 = `ALTER TABLE iceberg_tables ADD COLUMN iceberg_type VARCHAR(5)`
	for _, tc := range []struct {
		name  string
		ddl   []string
		extra iceberg.Properties
	}{
		{"V1", []string{v0, v1}, nil},
		// A V0 catalog stays V0 (iceberg-go logs a warning and leaves out
		// iceberg_type) unless jdbc.schema-version=V1 migrates it.
		{"V0", []string{v0}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := "jdbc_" + strings.ToLower(tc.name)
			dsn := s.CreateDatabase(t, db)
			sqldb := s.Open(t, db)
			for _, q := range tc.ddl {
				if _, err := sqldb.Exec(q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			warehouse := t.TempDir()
			cat := loadCatalog(t, dsn, warehouse, tc.extra)
			tbl := createTable(t, cat)
			rows := []row{{"j1", "f1", day(2026, 6, 1), "j"}}
			if _, err := appendRows(t, tbl, rows, "jdbc-1"); err != nil {
				t.Fatalf("append: %v", err)
			}
			checkRows(t, loadCatalog(t, dsn, warehouse, nil), rows)
			var n int
			if err := sqldb.QueryRow(`SELECT count(*) FROM information_schema.columns WHERE table_name = 'iceberg_tables'`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if want := 4 + len(tc.ddl); n != want { // V0: 5 columns, V1: 6
				t.Errorf("iceberg_tables has %d columns after iceberg-go used it, want %d (unchanged)", n, want)
			}
		})
	}
}
