package parquetsink

import (
	"fmt"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// TestMostlyDistinctLeaves: a leaf column, nested or not, is written
// without a dictionary when at least 90% of its first sampled values are
// distinct; a column of repeats, too few values or an unsampled type is
// left to arrow's own check.
func TestMostlyDistinctLeaves(t *testing.T) {
	tsUTC := &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
	file := arrow.StructOf(
		arrow.Field{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		arrow.Field{Name: "kind", Type: arrow.BinaryTypes.String, Nullable: true},
	)
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.BinaryTypes.String},                             // distinct
		{Name: "choice", Type: arrow.BinaryTypes.String},                         // 3 values
		{Name: "time", Type: tsUTC},                                              // distinct
		{Name: "same_time", Type: tsUTC},                                         // one value
		{Name: "half", Type: arrow.PrimitiveTypes.Int64},                         // 50% distinct
		{Name: "most", Type: arrow.PrimitiveTypes.Float64},                       // 95% distinct
		{Name: "day", Type: arrow.FixedWidthTypes.Date32},                        // distinct, 4 bytes
		{Name: "flag", Type: arrow.FixedWidthTypes.Boolean},                      // not sampled
		{Name: "rare", Type: arrow.BinaryTypes.String, Nullable: true},           // distinct, 40 values
		{Name: "files", Type: arrow.ListOf(file), Nullable: true},                // name distinct, kind 2 values
		{Name: "raw", Type: arrow.BinaryTypes.Binary, Nullable: true},            // distinct bytes
		{Name: "nulls_then_ids", Type: arrow.BinaryTypes.String, Nullable: true}, // 100 nulls, then distinct
	}, nil)
	want := []bool{true, false, true, false, false, true, true, false, false, true, false, true, true}

	const rows = 3000
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	for r := 0; r < rows; r++ {
		b.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("sub-%06d", r))
		b.Field(1).(*array.StringBuilder).Append([]string{"yes", "no", "maybe"}[r%3])
		b.Field(2).(*array.TimestampBuilder).Append(arrow.Timestamp(1_700_000_000_000_000 + int64(r)*1_000_000))
		b.Field(3).(*array.TimestampBuilder).Append(arrow.Timestamp(1_700_000_000_000_000))
		b.Field(4).(*array.Int64Builder).Append(int64(r / 2))
		most := float64(r)
		if r%20 == 0 {
			most = 0.5
		}
		b.Field(5).(*array.Float64Builder).Append(most)
		b.Field(6).(*array.Date32Builder).Append(arrow.Date32(r))
		b.Field(7).(*array.BooleanBuilder).Append(r%2 == 0)
		if r < 40 {
			b.Field(8).(*array.StringBuilder).Append(fmt.Sprintf("rare-%d", r))
		} else {
			b.Field(8).(*array.StringBuilder).AppendNull()
		}
		lb := b.Field(9).(*array.ListBuilder)
		lb.Append(true)
		sb := lb.ValueBuilder().(*array.StructBuilder)
		sb.Append(true)
		sb.FieldBuilder(0).(*array.StringBuilder).Append(fmt.Sprintf("upload-%06d.pdf", r))
		sb.FieldBuilder(1).(*array.StringBuilder).Append([]string{"pdf", "png"}[r%2])
		b.Field(10).(*array.BinaryBuilder).Append([]byte(fmt.Sprintf("raw-%d", r)))
		if r < 100 {
			b.Field(11).(*array.StringBuilder).AppendNull()
		} else {
			b.Field(11).(*array.StringBuilder).Append(fmt.Sprintf("late-%d", r))
		}
	}
	rec := b.NewRecord()
	defer rec.Release()

	pq, err := pqarrow.ToParquet(sc, nil, pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	if pq.NumColumns() != len(want) {
		t.Fatalf("the schema has %d leaf columns, the test expects %d", pq.NumColumns(), len(want))
	}
	// One record, and the same rows cut in three: the sample spans records.
	cut := []arrow.Record{rec.NewSlice(0, 1000), rec.NewSlice(1000, 2000), rec.NewSlice(2000, rows)}
	defer func() {
		for _, c := range cut {
			c.Release()
		}
	}()
	for _, tc := range []struct {
		name string
		recs []arrow.Record
	}{
		{"one record", []arrow.Record{rec}},
		{"three records", cut},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := mostlyDistinctLeaves(pq.NumColumns(), tc.recs)
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("column %s: mostly distinct %v, want %v", pq.Column(i).ColumnPath(), got[i], want[i])
				}
			}
		})
	}
	if got := mostlyDistinctLeaves(pq.NumColumns()+1, []arrow.Record{rec}); slices.Contains(got, true) {
		t.Errorf("leaves that do not line up with the columns decided %v; want none", got)
	}
	if got := mostlyDistinctLeaves(pq.NumColumns(), nil); slices.Contains(got, true) {
		t.Errorf("no rows decided %v; want none", got)
	}
}
