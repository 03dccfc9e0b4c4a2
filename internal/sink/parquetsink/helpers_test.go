package parquetsink

import (
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	_ "github.com/marcboeker/go-duckdb" // the independent reader; tests only

	"github.com/syncd-dev/syncd/internal/sink"
)

// duck opens an in-memory DuckDB. One connection, so that settings stick.
func duck(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatalf("open duckdb: %v", err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}

// sqlString quotes s as a SQL string literal.
func sqlString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// glob is the pattern a warehouse user would point DuckDB at.
func glob(root, table string) string { return sqlString(root + "/" + table + "/**/*.parquet") }

func queryInt(t testing.TB, db *sql.DB, q string) int64 {
	t.Helper()
	var n int64
	if err := db.QueryRow(q).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

func testBatch(id string, day time.Time) sink.Batch {
	return sink.Batch{
		ID:                id,
		Stream:            "form-1",
		Table:             "answers",
		WindowStart:       day.Add(2 * time.Hour),
		WindowEnd:         day.Add(3*time.Hour + 500*time.Microsecond),
		SchemaFingerprint: "fp-" + id,
	}
}

// allTypesSchema holds every type the schema package emits, required and
// nullable, flat and nested.
func allTypesSchema() *arrow.Schema {
	tsUTC := &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
	geoT := arrow.StructOf(
		arrow.Field{Name: "lat", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		arrow.Field{Name: "lng", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	)
	addressT := arrow.StructOf(
		arrow.Field{Name: "street", Type: arrow.BinaryTypes.String, Nullable: true},
		arrow.Field{Name: "zip", Type: arrow.BinaryTypes.String, Nullable: false},
		arrow.Field{Name: "geo", Type: geoT, Nullable: true},
	)
	itemT := arrow.StructOf(
		arrow.Field{Name: "sku", Type: arrow.BinaryTypes.String, Nullable: false},
		arrow.Field{Name: "qty", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	)
	return arrow.NewSchema([]arrow.Field{
		{Name: "_batch_id", Type: arrow.BinaryTypes.String, Nullable: false},
		{Name: "_synced_at", Type: tsUTC, Nullable: false},
		{Name: "submission_id", Type: arrow.BinaryTypes.String, Nullable: false},
		{Name: "submitted_at", Type: tsUTC, Nullable: true},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "age", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "score", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "agree", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "birthday", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
		{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
		{Name: "address", Type: addressT, Nullable: true},
		{Name: "items", Type: arrow.ListOf(itemT), Nullable: true},
	}, nil)
}

// row is one submission of allTypesSchema; nil pointers are nulls.
type row struct {
	id        string
	submitted *time.Time
	name      *string
	age       *int64
	score     *float64
	agree     *bool
	birthday  *time.Time
	tags      []string // nil is null, empty is []
	address   *address
	items     []item // nil is null
}

type address struct {
	street *string
	zip    string
	geo    *[2]float64
}

type item struct {
	sku string
	qty *int64
}

func ptr[T any](v T) *T { return &v }

// syncedAt is the lineage time of every test row.
func syncedAt() time.Time { return time.Date(2024, 5, 1, 4, 0, 0, 123456000, time.UTC) }

// testRows covers values, nulls at every level, and empty lists.
func testRows() []row {
	return []row{
		{
			id: "s1", submitted: ptr(time.Date(2024, 5, 1, 2, 30, 15, 654321000, time.UTC)),
			name: ptr("Ada"), age: ptr(int64(36)), score: ptr(9.5), agree: ptr(true),
			birthday: ptr(time.Date(1988, 12, 10, 0, 0, 0, 0, time.UTC)),
			tags:     []string{"a", "b"},
			address:  &address{street: ptr("1 Main St"), zip: "12345", geo: &[2]float64{51.5, -0.12}},
			items:    []item{{sku: "x", qty: ptr(int64(2))}, {sku: "y"}},
		},
		{id: "s2"}, // every nullable column null
		{
			id: "s3", submitted: ptr(time.Date(2024, 5, 1, 2, 59, 59, 999999000, time.UTC)),
			name: ptr("Ünïcødé, \"quoted\""), age: ptr(int64(-1)), score: ptr(-0.25), agree: ptr(false),
			birthday: ptr(time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)),
			tags:     []string{},
			address:  &address{zip: "0"},
			items:    []item{},
		},
	}
}

// buildRecord turns rows into a record of allTypesSchema.
func buildRecord(t testing.TB, mem memory.Allocator, batchID string, rows []row) arrow.Record {
	t.Helper()
	b := array.NewRecordBuilder(mem, allTypesSchema())
	defer b.Release()
	str := func(i int) *array.StringBuilder { return b.Field(i).(*array.StringBuilder) }
	tsb := func(i int) *array.TimestampBuilder { return b.Field(i).(*array.TimestampBuilder) }
	for _, r := range rows {
		str(0).Append(batchID)
		tsb(1).Append(arrow.Timestamp(syncedAt().UnixMicro()))
		str(2).Append(r.id)
		if r.submitted != nil {
			tsb(3).Append(arrow.Timestamp(r.submitted.UnixMicro()))
		} else {
			tsb(3).AppendNull()
		}
		appendOpt(str(4), r.name)
		appendOpt(b.Field(5).(*array.Int64Builder), r.age)
		appendOpt(b.Field(6).(*array.Float64Builder), r.score)
		appendOpt(b.Field(7).(*array.BooleanBuilder), r.agree)
		if r.birthday != nil {
			b.Field(8).(*array.Date32Builder).Append(arrow.Date32FromTime(*r.birthday))
		} else {
			b.Field(8).AppendNull()
		}
		tags := b.Field(9).(*array.ListBuilder)
		if r.tags == nil {
			tags.AppendNull()
		} else {
			tags.Append(true)
			for _, s := range r.tags {
				tags.ValueBuilder().(*array.StringBuilder).Append(s)
			}
		}
		ab := b.Field(10).(*array.StructBuilder)
		if r.address == nil {
			ab.AppendNull()
		} else {
			ab.Append(true)
			appendOpt(ab.FieldBuilder(0).(*array.StringBuilder), r.address.street)
			ab.FieldBuilder(1).(*array.StringBuilder).Append(r.address.zip)
			gb := ab.FieldBuilder(2).(*array.StructBuilder)
			if r.address.geo == nil {
				gb.AppendNull()
			} else {
				gb.Append(true)
				gb.FieldBuilder(0).(*array.Float64Builder).Append(r.address.geo[0])
				gb.FieldBuilder(1).(*array.Float64Builder).Append(r.address.geo[1])
			}
		}
		lb := b.Field(11).(*array.ListBuilder)
		if r.items == nil {
			lb.AppendNull()
		} else {
			lb.Append(true)
			ib := lb.ValueBuilder().(*array.StructBuilder)
			for _, it := range r.items {
				ib.Append(true)
				ib.FieldBuilder(0).(*array.StringBuilder).Append(it.sku)
				appendOpt(ib.FieldBuilder(1).(*array.Int64Builder), it.qty)
			}
		}
	}
	return b.NewRecord()
}

type appender[T any] interface {
	Append(T)
	AppendNull()
}

func appendOpt[T any](b appender[T], v *T) {
	if v == nil {
		b.AppendNull()
		return
	}
	b.Append(*v)
}
