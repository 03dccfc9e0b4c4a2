// Package parquetsink writes batches as Parquet files under a local folder,
// one file per batch, Hive-partitioned by the submissions' UTC date. Its
// encoder is exported so that other sinks (BigQuery loads) write the same
// bytes.
package parquetsink

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"slices"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/util"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/syncd-dev/syncd/internal/sink"
)

// Compression names the codec of every column chunk.
type Compression string

// The codecs syncd offers; they match the values of sink.parquet.compression.
const (
	CompressionZstd   Compression = "zstd"
	CompressionSnappy Compression = "snappy"
	CompressionNone   Compression = "none"
)

// DefaultRowGroupRows bounds a row group when EncodeOptions leaves it unset:
// large enough for good compression, small enough that readers can skip and
// parallelise.
const DefaultRowGroupRows = 65536

// Footer key-value metadata written into every file. The batch keys let a
// reader (and Committed) tie a file to its batch without trusting its name.
const (
	KeyVersion           = "syncd.version"
	KeyFormID            = "syncd.form_id"
	KeyBatchID           = "syncd.batch_id"
	KeyWindowStart       = "syncd.window_start"
	KeyWindowEnd         = "syncd.window_end"
	KeySchemaFingerprint = "syncd.schema_fingerprint"
	KeyAttempt           = "syncd.attempt"
)

// Footer keys of the batch as a whole. They are written into one file of
// a batch, the file of its first partition (Batch.Parts[0]), which a commit
// writes first: any attempt that left a file also left that one, unless a
// later attempt replaced it. Every file repeating them made a batch's
// footers grow with the square of its partitions, and a 1-row file of a
// wide form mostly footer (issue 40).
//
// KeyPartsZst lists every partition of the batch (Batch.Parts), so that
// inventory can tell whether the batch is whole; KeySchemaZst is the
// pinned table schema (Batch.Schema), so that a state can be rebuilt from
// the output. Both are JSON, zstd-compressed, then base64 (std encoding):
// a Parquet footer value is a string, and DuckDB shows it as one.
// KeyPartCount, in the batch's other files, is the number of partitions:
// it marks them as files of a batch whose list is elsewhere, so that
// inventory never takes one of them for a file of an older version (which
// listed nothing) and judges it by that version's rule.
//
// KeyParts and KeySchema are the keys of older versions, which wrote both
// uncompressed into every file; they are still read.
const (
	KeyPartsZst  = "syncd.parts.zst"
	KeySchemaZst = "syncd.schema.zst"
	KeyPartCount = "syncd.part_count"
	KeyParts     = "syncd.parts"
	KeySchema    = "syncd.schema"
)

// TimeLayout formats the window bounds in the footer: RFC 3339, UTC,
// microseconds, like every timestamp syncd writes.
const TimeLayout = "2006-01-02T15:04:05.000000Z07:00"

// EncodeOptions tunes the Parquet output. The zero value is valid: zstd and
// DefaultRowGroupRows.
type EncodeOptions struct {
	Compression  Compression // "" means zstd
	RowGroupRows int         // 0 means DefaultRowGroupRows
	// Allocator is the memory of the writer's Arrow and Parquet buffers
	// (nil: Go's). The writer allocated a fifth of a backfill's bytes; a
	// pool that reuses them (arrowpool) spares the collector that work.
	Allocator memory.Allocator
}

func (o EncodeOptions) codec() (compress.Compression, error) {
	switch o.Compression {
	case "", CompressionZstd:
		return compress.Codecs.Zstd, nil
	case CompressionSnappy:
		return compress.Codecs.Snappy, nil
	case CompressionNone:
		return compress.Codecs.Uncompressed, nil
	}
	return 0, fmt.Errorf("parquet compression %q is not one of zstd, snappy, none: fix sink.parquet.compression", o.Compression)
}

func (o EncodeOptions) rowGroupRows() (int64, error) {
	switch {
	case o.RowGroupRows == 0:
		return DefaultRowGroupRows, nil
	case o.RowGroupRows < 0:
		return 0, fmt.Errorf("parquet row group size %d is negative: set sink.parquet.row_group_rows to at least 1", o.RowGroupRows)
	}
	return int64(o.RowGroupRows), nil
}

// Validate reports whether the options can be used, so that a bad
// configuration fails at start-up rather than at the first commit.
func (o EncodeOptions) Validate() error {
	if _, err := o.codec(); err != nil {
		return err
	}
	_, err := o.rowGroupRows()
	return err
}

// reserved reports whether k is derived from the batch; a caller may not
// set it, or a file could claim to be a batch it is not.
func reserved(k string) bool {
	switch k {
	case KeyFormID, KeyBatchID, KeyWindowStart, KeyWindowEnd, KeySchemaFingerprint, KeyAttempt,
		KeyPartsZst, KeySchemaZst, KeyPartCount, KeyParts, KeySchema:
		return true
	}
	return false
}

// Encode writes rec as one Parquet file to w, the whole of batch b, and
// returns the number of bytes written. Row groups hold at most
// opts.RowGroupRows rows; every column has statistics (in files of a few
// rows, see smallFileStats) and is dictionary-encoded unless its values are
// mostly distinct (dictionaryProps). Arrow readers get the exact types
// back from the Parquet schema (timestamps stay µs UTC).
//
// The footer carries the batch (KeyFormID, KeyBatchID, KeyWindowStart,
// KeyWindowEnd, KeySchemaFingerprint, KeyAttempt), its partitions and its
// pinned schema (KeyPartsZst, KeySchemaZst, when b has them), KeyVersion,
// and kv. kv may set KeyVersion; when it does not, the main module's build
// version is used. kv may not set the batch keys.
//
// Encode does not close w. A non-nil error means the bytes written so far
// are not a valid file.
func Encode(w io.Writer, rec arrow.Record, b sink.Batch, kv map[string]string, opts EncodeOptions) (n int64, err error) {
	if rec == nil {
		return 0, errors.New("encode batch " + b.ID + ": no record")
	}
	return EncodeRecords(w, sink.Records{Schema: rec.Schema(), Rows: rec.NumRows(), Each: func(fn func(arrow.Record) error) error {
		return fn(rec)
	}}, b, kv, opts)
}

// EncodeRecords is Encode of a batch replayed in chunks: chunks are gathered
// into row groups of up to opts.RowGroupRows rows and rowGroupBytes of Arrow
// data, so memory holds one row group's chunks, never the whole batch.
func EncodeRecords(w io.Writer, recs sink.Records, b sink.Batch, kv map[string]string, opts EncodeOptions) (int64, error) {
	return encodeRecords(w, recs, b, true, kv, opts)
}

// EncodePart is EncodeRecords of the file of one partition, part, of a
// batch written as one file per partition (b.Parts). Only the file of the
// first partition carries the batch's partitions and pinned schema; the
// others carry their number (KeyPartCount).
func EncodePart(w io.Writer, recs sink.Records, b sink.Batch, part string, kv map[string]string, opts EncodeOptions) (int64, error) {
	return encodeRecords(w, recs, b, len(b.Parts) == 0 || part == b.Parts[0], kv, opts)
}

// rowGroupBytes bounds the Arrow data gathered for one row group: rows of a
// wide form take kilobytes each. A dense wide backfill of 1M rows peaked at
// 155 MB with 8 MiB, 137-150 MB with 4 MiB and 140-142 MB with 3 MiB, at the
// same CPU and file size (bench/RESULTS.md, 2026-11-26): the bound is 150.
const rowGroupBytes = 3 << 20

// A file of fewer rows than plainFileRows is written without dictionaries,
// and one of less Arrow data than smallFileBytes without compression
// either. Dictionaries pay from a few hundred rows: files of 100 rows came
// out the same size without them, of 320 rows 5-6% larger, of 1,000 6-12%
// (bench/RESULTS.md, 2026-11-26).
const (
	plainFileRows  = 128
	smallFileBytes = 4 << 10
	tinyFileRows   = 8
)

// encodeRecords is EncodeRecords; first tells whether the file carries the
// batch's partitions and schema.
func encodeRecords(w io.Writer, recs sink.Records, b sink.Batch, first bool, kv map[string]string, opts EncodeOptions) (n int64, err error) {
	if recs.Schema == nil || recs.Each == nil {
		return 0, errors.New("encode batch " + b.ID + ": no records")
	}
	codec, err := opts.codec()
	if err != nil {
		return 0, err
	}
	rgRows, err := opts.rowGroupRows()
	if err != nil {
		return 0, err
	}
	for k := range kv {
		if reserved(k) {
			return 0, fmt.Errorf("encode batch %s: metadata key %q is derived from the batch and cannot be set by the caller", b.ID, k)
		}
	}

	meta, err := footer(b, first, kv)
	if err != nil {
		return 0, fmt.Errorf("encode batch %s: %w", b.ID, err)
	}
	cw := &countingWriter{w: w}
	// pqarrow panics on some write failures (the magic bytes) and drops
	// others (closing a row group); the counting writer keeps the first
	// error, and recover turns a panic into an error.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("encode batch %s: parquet writer failed: %v", b.ID, r)
		}
		if cw.err != nil {
			err = fmt.Errorf("encode batch %s: %w", b.ID, cw.err)
		}
		n = cw.n
	}()

	// The writer is opened at the first row group, whose rows tell which
	// columns are worth a dictionary (dictionaryProps).
	var fw *pqarrow.FileWriter
	open := func(first []arrow.Record, only bool, rows, size int64) error {
		props := []parquet.WriterProperty{
			parquet.WithCompression(codec),
			parquet.WithDictionaryDefault(true),
			parquet.WithStats(true),
			parquet.WithMaxRowGroupLength(rgRows),
		}
		// A sparse form's backfill writes many files of a few rows (a row
		// or two a day, a few a month), and spent most of its CPU setting
		// up their dictionaries and compressors: a dictionary of a few
		// values is an extra page that the compressor makes redundant, and
		// compressing a page of a few values makes it larger.
		plain := only && rows < plainFileRows
		if plain {
			props = append(props, parquet.WithDictionaryDefault(false))
			props = append(props, smallFileStats(recs.Schema)...)
		}
		// Arrow buffers come in 64-byte multiples with a floor per
		// column, so a wide form's single row measures a few KB: a file
		// of a handful of rows is small whatever its buffers say.
		if only && (size < smallFileBytes || rows <= tinyFileRows) {
			props = append(props, parquet.WithCompression(compress.Codecs.Uncompressed))
		}
		// No ARROW:schema: pqarrow reads back the same types from the
		// Parquet schema alone (timestamps µs UTC, lists, structs, dates;
		// TestAllTypesReadBack), DuckDB and BigQuery never read it, and
		// with the columns' descriptions it was 30 KB of a wide form's
		// 1-row file. What it alone carried, the fields' metadata, no
		// reader of the files uses (a state rebuilt from the output takes
		// the pinned schema, KeySchemaZst).
		var arrowProps []pqarrow.WriterOption
		if opts.Allocator != nil {
			props = append(props, parquet.WithAllocator(opts.Allocator))
			arrowProps = append(arrowProps, pqarrow.WithAllocator(opts.Allocator))
		}
		if !plain {
			props = append(props, dictionaryProps(recs.Schema, first)...)
		}
		w, err := pqarrow.NewFileWriter(recs.Schema, cw,
			parquet.NewWriterProperties(props...),
			pqarrow.NewArrowWriterProperties(arrowProps...))
		if err != nil {
			return fmt.Errorf("map the arrow schema to parquet: %w", err)
		}
		for _, k := range meta.keys {
			if err := w.AppendKeyValueMetadata(k, meta.m[k]); err != nil {
				return fmt.Errorf("footer metadata %q: %w", k, err)
			}
		}
		fw = w
		return nil
	}
	// Chunks are gathered (without copying) into a row group of at most
	// rgRows rows and rowGroupBytes of Arrow data, then written column by
	// column, so that one column writer (and one compressor) is alive at a
	// time; a record larger than rgRows is cut into several groups.
	var (
		rows       int64
		group      []arrow.Record
		groupRows  int64
		groupBytes int64
	)
	release := func() {
		for _, r := range group {
			r.Release()
		}
		group, groupRows, groupBytes = group[:0], 0, 0
	}
	defer release()
	flush := func() error {
		if groupRows == 0 {
			return nil
		}
		if fw == nil {
			// A group below both bounds is the file's only one.
			if err := open(group, groupRows < rgRows && groupBytes < rowGroupBytes, groupRows, groupBytes); err != nil {
				return err
			}
		}
		tbl := array.NewTableFromRecords(recs.Schema, group)
		defer tbl.Release()
		if err := fw.WriteTable(tbl, rgRows); err != nil {
			return fmt.Errorf("write rows %d..%d: %w", rows-groupRows, rows, err)
		}
		release()
		return nil
	}
	err = recs.Each(func(rec arrow.Record) error {
		if !rec.Schema().Equal(recs.Schema) {
			return fmt.Errorf("rows %d.. do not have the batch's schema", rows)
		}
		if err := checkRequired(rec); err != nil {
			return err
		}
		// An empty chunk writes nothing: a zero-row batch gets no row group
		// at all (pqarrow would write an empty one).
		if rec.NumRows() == 0 {
			return nil
		}
		rec.Retain()
		group = append(group, rec)
		rows += rec.NumRows()
		groupRows += rec.NumRows()
		groupBytes += util.TotalRecordSize(rec)
		if groupRows >= rgRows || groupBytes >= rowGroupBytes {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return 0, fmt.Errorf("encode batch %s: %w", b.ID, err)
	}
	if rows != recs.Rows {
		return 0, fmt.Errorf("encode batch %s: %d rows replayed, %d expected", b.ID, rows, recs.Rows)
	}
	if fw == nil { // no rows: a file of the schema and the footer alone
		if err := open(nil, true, 0, 0); err != nil {
			return 0, fmt.Errorf("encode batch %s: %w", b.ID, err)
		}
	}
	if err := fw.Close(); err != nil {
		return 0, fmt.Errorf("encode batch %s: write the footer: %w", b.ID, err)
	}
	return cw.n, nil
}

type orderedKV struct {
	keys []string
	m    map[string]string
}

// footer merges the batch keys, the version and kv, in sorted key order so
// that the same batch always encodes to the same bytes. first: the file
// carries the batch's partitions and schema (see KeyPartsZst).
func footer(b sink.Batch, first bool, kv map[string]string) (orderedKV, error) {
	m := make(map[string]string, len(kv)+8)
	for k, v := range kv {
		m[k] = v
	}
	if m[KeyVersion] == "" {
		m[KeyVersion] = buildVersion()
	}
	m[KeyFormID] = b.Stream
	m[KeyBatchID] = b.ID
	m[KeyWindowStart] = formatTime(b.WindowStart)
	m[KeyWindowEnd] = formatTime(b.WindowEnd)
	m[KeySchemaFingerprint] = b.SchemaFingerprint
	if b.Attempt != "" {
		m[KeyAttempt] = b.Attempt
	}
	switch {
	case first && len(b.Parts) > 0:
		// Partition keys are dates, months or "": they always marshal.
		parts, _ := json.Marshal(b.Parts)
		v, err := pack(parts)
		if err != nil {
			return orderedKV{}, fmt.Errorf("footer: the batch's partitions: %w", err)
		}
		m[KeyPartsZst] = v
	case len(b.Parts) > 0:
		m[KeyPartCount] = strconv.Itoa(len(b.Parts))
	}
	if first && b.Schema != nil {
		v, err := pack(b.Schema)
		if err != nil {
			return orderedKV{}, fmt.Errorf("footer: the pinned schema: %w", err)
		}
		m[KeySchemaZst] = v
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return orderedKV{keys: keys, m: m}, nil
}

// pack is a footer value of b: zstd (arrow's codec, which is this
// package's shared encoder), then base64.
func pack(b []byte) (string, error) {
	c, err := compress.GetCodec(compress.Codecs.Zstd)
	if err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(c.Encode(nil, b)), nil
}

// unpack reverses pack.
func unpack(s string) ([]byte, error) {
	z, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, err
	}
	c, err := compress.GetCodec(compress.Codecs.Zstd)
	if err != nil {
		return nil, err
	}
	return compress.Decode(c, nil, z)
}

// smallFileStats trims the statistics of a file of a few rows, whose
// footer and page headers are most of its bytes (a wide form's 1-row file
// spent 14 of its 29 KB on them, issue 40). Statistics are kept where a
// reader prunes by them: every column outside a list, with min/max of at
// most smallStatsBytes (times, numbers, ids, short answers). Min/max of
// list elements prune nothing (DuckDB filters a list by its whole value),
// and a long text's are not worth four copies (page header and footer,
// min and max) in a file of a few rows.
func smallFileStats(s *arrow.Schema) []parquet.WriterProperty {
	props := []parquet.WriterProperty{parquet.WithMaxStatsSize(smallStatsBytes)}
	for _, f := range s.Fields() {
		props = appendListLeaves(props, parquet.ColumnPath{f.Name}, f.Type, false)
	}
	return props
}

// smallStatsBytes bounds a min or max kept in a file of a few rows: a
// UUID, an e-mail address or a batch id fits.
const smallStatsBytes = 64

// appendListLeaves adds a property turning statistics off for each leaf
// column under path (of type t) that lies inside a list, with pqarrow's
// names for a list's levels (<name>.list.element).
func appendListLeaves(props []parquet.WriterProperty, path parquet.ColumnPath, t arrow.DataType, inList bool) []parquet.WriterProperty {
	switch t := t.(type) {
	case *arrow.StructType:
		for _, c := range t.Fields() {
			props = appendListLeaves(props, append(slices.Clip(path), c.Name), c.Type, inList)
		}
	case *arrow.MapType:
		// Not a type the schema mappers emit; its leaves (named otherwise)
		// keep their statistics.
	case arrow.ListLikeType:
		props = appendListLeaves(props, append(slices.Clip(path), "list", "element"), t.Elem(), true)
	default:
		if inList {
			props = append(props, parquet.WithStatsPath(path, false))
		}
	}
	return props
}

func formatTime(t time.Time) string {
	return t.UTC().Truncate(time.Microsecond).Format(TimeLayout)
}

// buildVersion is the main module's version as the Go tool stamped it, or
// "devel" when there is none (tests, go run).
func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}

// checkRequired refuses nulls in non-nullable columns. pqarrow would
// otherwise write a REQUIRED column whose values are whatever sits behind
// the null slots, silently.
func checkRequired(rec arrow.Record) error {
	for i, f := range rec.Schema().Fields() {
		if err := checkArray(f.Name, f.Nullable, rec.Column(i), nil); err != nil {
			return err
		}
	}
	return nil
}

// checkArray checks arr, whose slots are allowed to be null only where
// parent (same length, nil for a top-level column) is null.
func checkArray(path string, nullable bool, arr arrow.Array, parent arrow.Array) error {
	if !nullable && arr.NullN() > 0 {
		for i := 0; i < arr.Len(); i++ {
			if arr.IsNull(i) && (parent == nil || parent.IsValid(i)) {
				return fmt.Errorf("column %s is required but row %d is null", path, i)
			}
		}
	}
	switch a := arr.(type) {
	case *array.Struct:
		st := a.DataType().(*arrow.StructType)
		for j, cf := range st.Fields() {
			if err := checkArray(path+"."+cf.Name, cf.Nullable, a.Field(j), a); err != nil {
				return err
			}
		}
	case *array.List:
		// Elements are written OPTIONAL whatever the Arrow type says, so
		// only what lies inside them (struct fields) needs checking.
		if err := checkArray(path+"[]", true, a.ListValues(), nil); err != nil {
			return err
		}
	}
	return nil
}

// countingWriter counts bytes and keeps the first error, which pqarrow does
// not always pass on.
type countingWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countingWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	c.err = err
	return n, err
}
