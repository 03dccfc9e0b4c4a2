package poller

import (
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/syncd-dev/syncd/internal/table"
)

// fixedTable is a table.Schema that never changes, for feeding Rows.Chunk.
type fixedTable struct{ s *arrow.Schema }

func (f fixedTable) ArrowSchema() *arrow.Schema            { return f.s }
func (f fixedTable) Fingerprint() string                   { return f.s.String() }
func (f fixedTable) Marshal() ([]byte, error)              { return []byte(f.s.String()), nil }
func (f fixedTable) Merge(other table.Schema) table.Schema { return f }

// TestChunksFollowPartitions feeds Rows as a source reading in time order
// does (Opens, append, Row, Chunk) and checks which partitions each chunk
// holds: a partition change after a run of at least a quarter chunk cuts
// it, so that the commit reads each chunk once, whole; a sparse window (a
// row a day) stays in as few chunks as its size needs.
func TestChunksFollowPartitions(t *testing.T) {
	day := func(t time.Time) string { return t.UTC().Format("2006-01-02") }
	start := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		rows      int
		every     time.Duration
		chunkRows int
		// wantSingle: every chunk holds one partition; else wantChunks
		// chunks (the rows' count over chunkRows, rounded up).
		wantSingle bool
		wantChunks int
	}{
		{"dense days", 1000, 5 * time.Minute, 100, true, 0},          // 288 rows a day
		{"days of a quarter chunk", 400, 6 * time.Hour, 16, true, 0}, // 4 rows a day
		{"a row a day", 30, 24 * time.Hour, 100, false, 1},
		{"a row a day, two chunks", 150, 24 * time.Hour, 100, false, 2},
	}
	schema := arrow.NewSchema([]arrow.Field{{Name: "t", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}}}, nil)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			rows := newRows(fixedTable{schema}, table.Lineage{}, "t", mem, tc.chunkRows, t.TempDir(), day)
			b := array.NewTimestampBuilder(mem, schema.Field(0).Type.(*arrow.TimestampType))
			cut := func() {
				rec := array.NewRecordBatch(schema, []arrow.Array{b.NewArray()}, -1)
				defer rec.Release()
				defer rec.Column(0).Release()
				if err := rows.Chunk(rec, fixedTable{schema}, table.Stats{}); err != nil {
					t.Fatal(err)
				}
			}
			for i := 0; i < tc.rows; i++ {
				ts := start.Add(time.Duration(i) * tc.every)
				if rows.Opens(ts) {
					cut()
				}
				b.Append(arrow.Timestamp(ts.UnixMicro()))
				if rows.Row(ts, 10) {
					cut()
				}
			}
			cut()
			b.Release()
			var total int64
			for i, keys := range rows.chunkKeys {
				if tc.wantSingle && len(keys) != 1 {
					t.Errorf("chunk %d holds partitions %v, want one", i, keys)
				}
			}
			for _, n := range rows.partRows {
				total += n
			}
			if total != int64(tc.rows) {
				t.Errorf("%d rows noted in partitions, want %d", total, tc.rows)
			}
			if !tc.wantSingle && len(rows.chunkKeys) != tc.wantChunks {
				t.Errorf("%d chunks, want %d", len(rows.chunkKeys), tc.wantChunks)
			}
			if rows.spool != nil {
				if err := rows.spool.Close(); err != nil {
					t.Fatal(err)
				}
			}
			if rows.first != nil {
				rows.first.Release()
			}
			mem.AssertSize(t, 0)
		})
	}
}
