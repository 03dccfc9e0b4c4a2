package parquetsink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/syncd-dev/syncd/internal/arrowpool"
)

func testDay() time.Time { return time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC) }

// encodeFile encodes rec into dir/name and returns the path.
func encodeFile(t *testing.T, dir, name string, rec arrow.Record, opts EncodeOptions) string {
	t.Helper()
	var buf bytes.Buffer
	n, err := Encode(&buf, rec, testBatch(strings.TrimSuffix(name, ".parquet"), testDay()), nil, opts)
	if err != nil {
		t.Fatalf("Encode: %v", err)
	}
	if n != int64(buf.Len()) {
		t.Fatalf("Encode reported %d bytes, wrote %d", n, buf.Len())
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// int64Record is a one-column record 0..n-1, with a low-cardinality string
// column so that dictionary encoding has something to do.
func int64Record(mem memory.Allocator, n int) arrow.Record {
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "x", Type: arrow.PrimitiveTypes.Int64},
		{Name: "colour", Type: arrow.BinaryTypes.String},
	}, nil)
	b := array.NewRecordBuilder(mem, sc)
	defer b.Release()
	colours := []string{"red", "green", "blue"}
	for i := 0; i < n; i++ {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		b.Field(1).(*array.StringBuilder).Append(colours[i%len(colours)])
	}
	return b.NewRecord()
}

func TestEncodeCompressionAndRowGroups(t *testing.T) {
	tests := []struct {
		opts      EncodeOptions
		rows      int
		wantCodec string
		wantRGs   int64
		wantMaxRG int64
	}{
		{EncodeOptions{}, 1000, "ZSTD", 1, 1000}, // defaults
		{EncodeOptions{Compression: CompressionZstd, RowGroupRows: 100}, 250, "ZSTD", 3, 100},
		{EncodeOptions{Compression: CompressionSnappy, RowGroupRows: 100}, 250, "SNAPPY", 3, 100},
		{EncodeOptions{Compression: CompressionNone, RowGroupRows: 100}, 250, "UNCOMPRESSED", 3, 100},
		{EncodeOptions{Compression: CompressionZstd, RowGroupRows: 1}, 3, "ZSTD", 3, 1},
		{EncodeOptions{RowGroupRows: 10}, 0, "", 0, 0}, // no rows: a schema and no row group
		// A file of a few values is stored as it is: compressing it would
		// make it larger (smallFileBytes).
		{EncodeOptions{}, 3, "UNCOMPRESSED", 1, 3},
		{EncodeOptions{Compression: CompressionSnappy}, 60, "UNCOMPRESSED", 1, 60},
		{EncodeOptions{}, 120, "UNCOMPRESSED", 1, 120},
		{EncodeOptions{Compression: CompressionSnappy}, 400, "SNAPPY", 1, 400},
	}
	dir := t.TempDir()
	db := duck(t)
	for i, tc := range tests {
		t.Run(fmt.Sprintf("%s/%d/%d", tc.opts.Compression, tc.opts.RowGroupRows, tc.rows), func(t *testing.T) {
			rec := int64Record(memory.DefaultAllocator, tc.rows)
			defer rec.Release()
			path := sqlString(encodeFile(t, dir, fmt.Sprintf("f%d.parquet", i), rec, tc.opts))

			var count, sum int64
			if err := db.QueryRow("SELECT count(*), coalesce(sum(x), 0) FROM read_parquet("+path+")").Scan(&count, &sum); err != nil {
				t.Fatalf("read back: %v", err)
			}
			if want := int64(tc.rows * (tc.rows - 1) / 2); count != int64(tc.rows) || sum != want {
				t.Errorf("count, sum = %d, %d; want %d, %d", count, sum, tc.rows, want)
			}
			var rgs, maxRG int64
			var codecs string
			if err := db.QueryRow(`SELECT count(DISTINCT row_group_id), coalesce(max(row_group_num_rows), 0), coalesce(string_agg(DISTINCT compression::VARCHAR, ','), '')
				FROM parquet_metadata(`+path+")").Scan(&rgs, &maxRG, &codecs); err != nil {
				t.Fatalf("parquet_metadata: %v", err)
			}
			if rgs != tc.wantRGs || maxRG != tc.wantMaxRG || codecs != tc.wantCodec {
				t.Errorf("row groups %d (largest %d rows), codecs %q; want %d (largest %d), %q", rgs, maxRG, codecs, tc.wantRGs, tc.wantMaxRG, tc.wantCodec)
			}
			if tc.rows == 0 {
				return
			}
			// Dictionary encoding and statistics are on.
			var dictCols, statCols int64
			if err := db.QueryRow(`SELECT count(*) FILTER (WHERE encodings LIKE '%DICTIONARY%'), count(*) FILTER (WHERE stats_min_value IS NOT NULL AND stats_max_value IS NOT NULL)
				FROM parquet_metadata(`+path+")").Scan(&dictCols, &statCols); err != nil {
				t.Fatalf("parquet_metadata: %v", err)
			}
			// A column falls back to plain encoding where a dictionary
			// would not pay (unique integers, a row group of one row);
			// the three colours of a large group keep theirs. A file of
			// fewer than plainFileRows rows has none.
			if want := 2 * tc.wantRGs; (tc.wantMaxRG >= plainFileRows && dictCols == 0) || statCols != want {
				t.Errorf("%d column chunks dictionary-encoded and %d with min/max; want some and %d", dictCols, statCols, want)
			}
			if tc.wantRGs == 1 && tc.wantMaxRG < plainFileRows && dictCols != 0 {
				t.Errorf("a file of %d rows has %d dictionary-encoded column chunks; want none", tc.wantMaxRG, dictCols)
			}
		})
	}
}

// TestEncodeArrowSchemaRoundTrip reads the file back with an Arrow reader:
// the stored schema must give back exactly the types written, time zone and
// nullability included.
func TestEncodeArrowSchemaRoundTrip(t *testing.T) {
	rec := buildRecord(t, memory.DefaultAllocator, "b1", testRows())
	defer rec.Release()
	var buf bytes.Buffer
	if _, err := Encode(&buf, rec, testBatch("b1", testDay()), nil, EncodeOptions{}); err != nil {
		t.Fatal(err)
	}
	r, err := file.NewParquetReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	fr, err := pqarrow.NewFileReader(r, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	got, err := fr.Schema()
	if err != nil {
		t.Fatal(err)
	}
	want := rec.Schema()
	if got.NumFields() != want.NumFields() {
		t.Fatalf("read back %d fields, wrote %d", got.NumFields(), want.NumFields())
	}
	for i, wf := range want.Fields() {
		gf := got.Field(i)
		if gf.Name != wf.Name || gf.Nullable != wf.Nullable || !arrow.TypeEqual(gf.Type, wf.Type) {
			t.Errorf("field %d: read back %v, wrote %v", i, gf, wf)
		}
	}
}

func TestEncodeDeterministic(t *testing.T) {
	// The same batch must encode to the same bytes: a retried commit then
	// produces an identical file, and kv order cannot leak map order.
	rec := buildRecord(t, memory.DefaultAllocator, "b1", testRows())
	defer rec.Release()
	kv := map[string]string{"a": "1", "b": "2", "c": "3", "d": "4", KeyVersion: "v1.2.3"}
	var first, second bytes.Buffer
	if _, err := Encode(&first, rec, testBatch("b1", testDay()), kv, EncodeOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := Encode(&second, rec, testBatch("b1", testDay()), kv, EncodeOptions{}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first.Bytes(), second.Bytes()) {
		t.Error("two encodings of the same batch differ")
	}
}

func TestEncodeRejects(t *testing.T) {
	nullInRequired := func(mem memory.Allocator) arrow.Record {
		rows := testRows()
		rec := buildRecord(t, mem, "b1", rows)
		defer rec.Release()
		// Null the required submission_id of row 1.
		ids := array.NewStringBuilder(mem)
		defer ids.Release()
		ids.AppendValues([]string{"s1", "", "s3"}, []bool{true, false, true})
		col := ids.NewArray()
		defer col.Release()
		cols := append([]arrow.Array{}, rec.Columns()...)
		cols[2] = col
		return array.NewRecord(rec.Schema(), cols, rec.NumRows())
	}
	nullInRequiredChild := func(mem memory.Allocator) arrow.Record {
		// A valid address whose required zip is null.
		sc := arrow.NewSchema([]arrow.Field{{Name: "address", Type: arrow.StructOf(
			arrow.Field{Name: "zip", Type: arrow.BinaryTypes.String, Nullable: false}), Nullable: true}}, nil)
		b := array.NewRecordBuilder(mem, sc)
		defer b.Release()
		sb := b.Field(0).(*array.StructBuilder)
		sb.AppendNull() // a null parent hides its child's null: fine
		sb.Append(true)
		sb.FieldBuilder(0).(*array.StringBuilder).AppendNull()
		return b.NewRecord()
	}
	valid := func(mem memory.Allocator) arrow.Record { return buildRecord(t, mem, "b1", testRows()) }
	tests := []struct {
		name    string
		rec     func(memory.Allocator) arrow.Record
		kv      map[string]string
		opts    EncodeOptions
		wantErr string
	}{
		{"unknown compression", valid, nil, EncodeOptions{Compression: "lz5"}, `"lz5" is not one of zstd, snappy, none`},
		{"negative row groups", valid, nil, EncodeOptions{RowGroupRows: -1}, "row_group_rows"},
		{"reserved key", valid, map[string]string{KeyBatchID: "other"}, EncodeOptions{}, `"syncd.batch_id" is derived from the batch`},
		{"null in required column", nullInRequired, nil, EncodeOptions{}, "column submission_id is required but row 1 is null"},
		{"null in required field", nullInRequiredChild, nil, EncodeOptions{}, "column address.zip is required but row 1 is null"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			rec := tc.rec(mem)
			var buf bytes.Buffer
			_, err := Encode(&buf, rec, testBatch("b1", testDay()), tc.kv, tc.opts)
			rec.Release()
			mem.AssertSize(t, 0)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Encode error = %v; want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// failingWriter accepts limit bytes, then fails like a full disk.
type failingWriter struct{ limit int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if len(p) <= w.limit {
		w.limit -= len(p)
		return len(p), nil
	}
	n := w.limit
	w.limit = 0
	return n, &os.PathError{Op: "write", Path: "/data/x.parquet", Err: syscall.ENOSPC}
}

func TestEncodeWriteErrors(t *testing.T) {
	rec := buildRecord(t, memory.DefaultAllocator, "b1", testRows())
	defer rec.Release()
	var full bytes.Buffer
	if _, err := Encode(&full, rec, testBatch("b1", testDay()), nil, EncodeOptions{}); err != nil {
		t.Fatal(err)
	}
	// Fail at the magic bytes (where pqarrow panics), inside the data, and
	// in the footer (where pqarrow drops the error of the last row group).
	for _, limit := range []int{0, 2, 100, full.Len() / 2, full.Len() - 1} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			n, err := Encode(&failingWriter{limit: limit}, rec, testBatch("b1", testDay()), nil, EncodeOptions{})
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("Encode error = %v; want ENOSPC", err)
			}
			if n != int64(limit) {
				t.Errorf("Encode reported %d bytes; the writer took %d", n, limit)
			}
		})
	}
}

func TestHint(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{&os.PathError{Op: "write", Path: "/x", Err: syscall.ENOSPC}, "no space left on device: free space or point sink.parquet.path elsewhere"},
		{&os.PathError{Op: "open", Path: "/x", Err: syscall.EACCES}, "permission denied: give syncd write access"},
		{&os.PathError{Op: "open", Path: "/x", Err: syscall.EROFS}, "read-only file system: give syncd write access"},
		{&os.PathError{Op: "mkdir", Path: "/x", Err: syscall.ENOTDIR}, "not a directory: a file is in the way"},
		{context.Canceled, "context canceled"},
	}
	for _, tc := range tests {
		got := hint(tc.err)
		if !errors.Is(got, tc.err) || !strings.Contains(got.Error(), tc.want) {
			t.Errorf("hint(%v) = %q; want it to wrap the error and contain %q", tc.err, got, tc.want)
		}
	}
}

// wideRecord has 60 columns of the kinds the schema package emits, with
// realistic repetition: ids unique, choices from a few values.
func wideRecord(mem memory.Allocator, rows int) arrow.Record {
	tsUTC := &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
	pair := arrow.StructOf(
		arrow.Field{Name: "a", Type: arrow.BinaryTypes.String, Nullable: true},
		arrow.Field{Name: "b", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	)
	kinds := []arrow.DataType{
		arrow.BinaryTypes.String, arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int64,
		arrow.PrimitiveTypes.Float64, arrow.FixedWidthTypes.Boolean, tsUTC,
		arrow.FixedWidthTypes.Date32, arrow.ListOf(arrow.BinaryTypes.String), pair,
		arrow.ListOf(pair),
	}
	fields := make([]arrow.Field, 60)
	for i := range fields {
		fields[i] = arrow.Field{Name: fmt.Sprintf("c%02d", i), Type: kinds[i%len(kinds)], Nullable: i >= 2}
	}
	b := array.NewRecordBuilder(mem, arrow.NewSchema(fields, nil))
	defer b.Release()
	choices := []string{"yes", "no", "maybe", "often", "never"}
	base := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	for r := 0; r < rows; r++ {
		for c := range fields {
			fb := b.Field(c)
			if c >= 2 && (r+c)%7 == 0 {
				fb.AppendNull()
				continue
			}
			switch fb := fb.(type) {
			case *array.StringBuilder:
				if c%len(kinds) == 0 {
					fb.Append(fmt.Sprintf("submission-%08d-%02d", r, c))
				} else {
					fb.Append(choices[(r+c)%len(choices)])
				}
			case *array.Int64Builder:
				fb.Append(int64(r * c))
			case *array.Float64Builder:
				fb.Append(float64(r) / float64(c+1))
			case *array.BooleanBuilder:
				fb.Append(r%3 == 0)
			case *array.TimestampBuilder:
				fb.Append(arrow.Timestamp(base + int64(r)*1_234_567))
			case *array.Date32Builder:
				fb.Append(arrow.Date32(19000 + r%365))
			case *array.ListBuilder:
				fb.Append(true)
				for k := 0; k < r%3; k++ {
					switch vb := fb.ValueBuilder().(type) {
					case *array.StringBuilder:
						vb.Append(choices[(r+k)%len(choices)])
					case *array.StructBuilder:
						appendPair(vb, r+k)
					}
				}
			case *array.StructBuilder:
				appendPair(fb, r)
			}
		}
	}
	return b.NewRecord()
}

func appendPair(sb *array.StructBuilder, r int) {
	sb.Append(true)
	sb.FieldBuilder(0).(*array.StringBuilder).Append(fmt.Sprintf("p%d", r%50))
	sb.FieldBuilder(1).(*array.Float64Builder).Append(float64(r) * 0.5)
}

// TestEncodeOnPool: the writer's buffers may come from a pool that reuses
// them (the app's). The pool poisons what is freed, so a buffer the writer
// read after freeing it would change the file: the bytes must be those of
// Go's allocator, file after file on the same pool, and every buffer must
// be given back.
func TestEncodeOnPool(t *testing.T) {
	rec := wideRecord(memory.DefaultAllocator, 10_000)
	defer rec.Release()
	batch := testBatch("pool", testDay())
	for _, c := range []Compression{CompressionZstd, CompressionSnappy, CompressionNone} {
		t.Run(string(c), func(t *testing.T) {
			opts := EncodeOptions{Compression: c, RowGroupRows: 3000}
			var want bytes.Buffer
			if _, err := Encode(&want, rec, batch, nil, opts); err != nil {
				t.Fatalf("Encode on Go's allocator: %v", err)
			}
			pool := memory.NewCheckedAllocator(arrowpool.New(arrowpool.Options{Poison: true}))
			opts.Allocator = pool
			for i := 0; i < 3; i++ {
				var got bytes.Buffer
				if _, err := Encode(&got, rec, batch, nil, opts); err != nil {
					t.Fatalf("Encode %d on the pool: %v", i, err)
				}
				if !bytes.Equal(got.Bytes(), want.Bytes()) {
					t.Fatalf("file %d on the pool (%d bytes) differs from Go's allocator's (%d bytes)", i, got.Len(), want.Len())
				}
			}
			pool.AssertSize(t, 0)
		})
	}
}

// BenchmarkEncode measures the encoder alone, into memory:
//
//	go test ./internal/sink/parquetsink -run '^$' -bench Encode -benchtime 20x
func BenchmarkEncode(b *testing.B) {
	const rows = 10_000
	rec := wideRecord(memory.DefaultAllocator, rows)
	defer rec.Release()
	batch := testBatch("bench", testDay())
	for _, c := range []Compression{CompressionZstd, CompressionSnappy, CompressionNone} {
		b.Run(string(c), func(b *testing.B) {
			var buf bytes.Buffer
			var n int64
			b.ReportAllocs()
			for b.Loop() {
				buf.Reset()
				var err error
				if n, err = Encode(&buf, rec, batch, nil, EncodeOptions{Compression: c}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)*rows/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric(float64(n)/rows, "bytes/row")
		})
	}
}

// TestEncodeDictionaryWherePays: every leaf column, nested ones and
// timestamps included, keeps its dictionary only where the dictionary
// pays, and every value reads back either way.
func TestEncodeDictionaryWherePays(t *testing.T) {
	tsUTC := &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
	file := arrow.StructOf(
		arrow.Field{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		arrow.Field{Name: "kind", Type: arrow.BinaryTypes.String, Nullable: true},
	)
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "distinct_time", Type: tsUTC},
		{Name: "same_time", Type: tsUTC},
		{Name: "distinct_text", Type: arrow.BinaryTypes.String},
		{Name: "choice", Type: arrow.BinaryTypes.String},
		{Name: "files", Type: arrow.ListOf(file), Nullable: true},
	}, nil)
	const rows = 5000
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	base := testDay().UnixMicro()
	kinds := []string{"pdf", "png"}
	for r := 0; r < rows; r++ {
		b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(base + int64(r)*1_234_567))
		b.Field(1).(*array.TimestampBuilder).Append(arrow.Timestamp(base))
		b.Field(2).(*array.StringBuilder).Append(fmt.Sprintf("free text %08d", r))
		b.Field(3).(*array.StringBuilder).Append(kinds[r%2])
		lb := b.Field(4).(*array.ListBuilder)
		lb.Append(true)
		sb := lb.ValueBuilder().(*array.StructBuilder)
		sb.Append(true)
		sb.FieldBuilder(0).(*array.StringBuilder).Append(fmt.Sprintf("upload-%08d.pdf", r))
		sb.FieldBuilder(1).(*array.StringBuilder).Append(kinds[r%2])
	}
	rec := b.NewRecord()
	defer rec.Release()
	path := sqlString(encodeFile(t, t.TempDir(), "dict.parquet", rec, EncodeOptions{}))

	db := duck(t)
	tests := []struct {
		column string // path_in_schema as DuckDB prints it
		dict   bool
	}{
		{"distinct_time", false},
		{"same_time", true},
		{"distinct_text", false},
		{"choice", true},
		{"files, list, element, name", false},
		{"files, list, element, kind", true},
	}
	for _, tc := range tests {
		var encodings string
		if err := db.QueryRow(`SELECT encodings FROM parquet_metadata(`+path+`) WHERE path_in_schema = ?`, tc.column).Scan(&encodings); err != nil {
			t.Fatalf("encodings of %s: %v", tc.column, err)
		}
		if got := strings.Contains(encodings, "DICTIONARY"); got != tc.dict {
			t.Errorf("column %s: encodings %s, dictionary %v; want %v", tc.column, encodings, got, tc.dict)
		}
	}
	var distinctTimes, sameTimes, texts, names, pdfs int64
	if err := db.QueryRow(`SELECT count(DISTINCT distinct_time), count(DISTINCT same_time), count(DISTINCT distinct_text),
		count(DISTINCT files[1].name), count(*) FILTER (WHERE files[1].kind = 'pdf' AND choice = 'pdf') FROM read_parquet(`+path+`)`).
		Scan(&distinctTimes, &sameTimes, &texts, &names, &pdfs); err != nil {
		t.Fatalf("read back: %v", err)
	}
	if distinctTimes != rows || sameTimes != 1 || texts != rows || names != rows || pdfs != rows/2 {
		t.Errorf("read back %d, %d, %d, %d, %d distinct; want %d, 1, %d, %d, %d", distinctTimes, sameTimes, texts, names, pdfs, rows, rows, rows, rows/2)
	}
}

// TestSmallFilesWithoutDictionaries: a file of fewer than plainFileRows
// rows but more than smallFileBytes of data is compressed, and has no
// dictionary page; one just past plainFileRows has its dictionaries back.
func TestSmallFilesWithoutDictionaries(t *testing.T) {
	dir := t.TempDir()
	db := duck(t)
	for _, tc := range []struct {
		rows     int
		wantDict bool
	}{{plainFileRows - 1, false}, {plainFileRows, true}} {
		rec := wideRecord(memory.DefaultAllocator, tc.rows)
		path := sqlString(encodeFile(t, dir, fmt.Sprintf("w%d.parquet", tc.rows), rec, EncodeOptions{}))
		rec.Release()
		var dictCols, chunks int64
		var codecs string
		if err := db.QueryRow(`SELECT count(*) FILTER (WHERE encodings LIKE '%DICTIONARY%'), count(*), string_agg(DISTINCT compression::VARCHAR, ',')
			FROM parquet_metadata(`+path+")").Scan(&dictCols, &chunks, &codecs); err != nil {
			t.Fatalf("parquet_metadata: %v", err)
		}
		if codecs != "ZSTD" || (dictCols > 0) != tc.wantDict {
			t.Errorf("%d rows: codecs %q, %d of %d column chunks with a dictionary; want ZSTD, dictionaries %v", tc.rows, codecs, dictCols, chunks, tc.wantDict)
		}
		var n int64
		if err := db.QueryRow("SELECT count(*) FROM read_parquet(" + path + ")").Scan(&n); err != nil || n != int64(tc.rows) {
			t.Errorf("%d rows: read back %d (%v)", tc.rows, n, err)
		}
	}
}

// BenchmarkEncodeSmallFile measures what a file costs apart from its rows:
// a form with a few hundred submissions over years writes a file of one or
// two rows per day partition, so a backfill of it is mostly this.
//
//	go test ./internal/sink/parquetsink -run '^$' -bench EncodeSmallFile
func BenchmarkEncodeSmallFile(b *testing.B) {
	batch := testBatch("bench", testDay())
	for _, rows := range []int{1, 60} {
		rec := wideRecord(memory.DefaultAllocator, rows)
		b.Run(fmt.Sprintf("rows=%d", rows), func(b *testing.B) {
			var buf bytes.Buffer
			b.ReportAllocs()
			for b.Loop() {
				buf.Reset()
				if _, err := Encode(&buf, rec, batch, nil, EncodeOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
		rec.Release()
	}
}
