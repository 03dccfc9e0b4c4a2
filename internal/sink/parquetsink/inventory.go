package parquetsink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/syncd-dev/syncd/internal/sink"
	tablepkg "github.com/syncd-dev/syncd/internal/table"
)

// ReadFile is a committed file opened for random reads, as the Parquet
// reader needs them (its footer sits at the end).
type ReadFile interface {
	parquet.ReaderAtSeeker
	io.Closer
}

// Lister is the read side of where a Parquet sink keeps its files, keys
// '/'-separated relative to the sink's root: what Inventory and
// VersionReader need.
type Lister interface {
	// List calls fn with the key of every committed file under prefix, at
	// any depth, in no particular order. Temporary files and hidden names
	// (a leading '.' on any element) are never listed; a prefix with no
	// files lists nothing.
	List(ctx context.Context, prefix string, fn func(key string) error) error
	// Open opens the committed file key.
	Open(ctx context.Context, key string) (ReadFile, error)
}

// heldFile is one batch file of a table, by its key: its partition is the
// part after '=' of its folder ("" in the table's own folder).
type heldFile struct {
	key, id, part string
}

// parseHeld recognises a batch file's key under table/: <id>.parquet or
// <prefix>_<date|month>=<part>/<id>.parquet. Anything else is not a batch
// file of the table.
func parseHeld(table, key string) (heldFile, bool) {
	rel, ok := strings.CutPrefix(key, table+"/")
	if !ok {
		return heldFile{}, false
	}
	dir, name := path.Split(rel)
	id, ok := strings.CutSuffix(name, ".parquet")
	if !ok || id == "" || name[0] == '.' || name[0] == '_' {
		return heldFile{}, false
	}
	dir = strings.TrimSuffix(dir, "/")
	if dir == "" {
		return heldFile{key: key, id: id}, true
	}
	if strings.Contains(dir, "/") || dir[0] == '.' || dir[0] == '_' {
		return heldFile{}, false
	}
	_, part, ok := strings.Cut(dir, "=")
	if !ok || part == "" {
		return heldFile{}, false
	}
	return heldFile{key: key, id: id, part: part}, true
}

// listHeld lists a table's batch files, grouped by batch id.
func listHeld(ctx context.Context, st Lister, table string) (map[string][]heldFile, error) {
	if err := safeName("table name", table); err != nil {
		return nil, err
	}
	byID := map[string][]heldFile{}
	err := st.List(ctx, table+"/", func(key string) error {
		if f, ok := parseHeld(table, key); ok {
			byID[f.id] = append(byID[f.id], f)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list the files of table %s: %w", table, err)
	}
	return byID, nil
}

// heldBatchIDs lists the ids of the batches table has files of, from the
// files' names alone (sink.Inventory).
func heldBatchIDs(ctx context.Context, st Lister, table string) ([]string, error) {
	byID, err := listHeld(ctx, st, table)
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(byID))
	for id := range byID {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids, nil
}

// fileFooter is what one batch file's footer says of its batch.
type fileFooter struct {
	heldFile
	stream, attempt        string
	windowStart, windowEnd time.Time
	// allParts is the batch's partitions, as the file lists them (nil: it
	// lists none: a file of a version before syncd.parts, or one of the
	// batch's files other than its first partition's). partCount is the
	// number of partitions such another file records (0: none).
	allParts  []string
	partCount int
	schema    []byte
	rows      int64
}

// readFooter reads the footer of f. ok is false for a file that is not a
// file of its batch (unreadable, or its footer names another batch).
func readFooter(ctx context.Context, st Lister, f heldFile) (ff fileFooter, ok bool, err error) {
	r, err := st.Open(ctx, f.key)
	if err != nil {
		return ff, false, fmt.Errorf("open %s: %w", f.key, err)
	}
	defer r.Close()
	pf, err := file.NewParquetReader(r)
	if err != nil {
		// A torn or foreign file is not the batch's; Committed treats it
		// the same way, and a commit of the batch replaces it.
		return ff, false, nil
	}
	defer pf.Close()
	md := pf.MetaData()
	kv := md.KeyValueMetadata()
	get := func(k string) string {
		if v := kv.FindValue(k); v != nil {
			return *v
		}
		return ""
	}
	if get(KeyBatchID) != f.id {
		return ff, false, nil
	}
	ff = fileFooter{heldFile: f, stream: get(KeyFormID), attempt: get(KeyAttempt), rows: md.NumRows}
	if ff.windowStart, err = time.Parse(TimeLayout, get(KeyWindowStart)); err != nil {
		return ff, false, nil
	}
	if ff.windowEnd, err = time.Parse(TimeLayout, get(KeyWindowEnd)); err != nil {
		return ff, false, nil
	}
	// A value that does not decode makes the file unreadable as the
	// batch's, as a torn file is.
	parts, ok := packedValue(kv, KeyPartsZst, KeyParts)
	if !ok {
		return ff, false, nil
	}
	if parts != nil {
		if err := json.Unmarshal(parts, &ff.allParts); err != nil {
			return ff, false, nil
		}
		if ff.allParts == nil {
			ff.allParts = []string{}
		}
	}
	if v := kv.FindValue(KeyPartCount); v != nil {
		if ff.partCount, err = strconv.Atoi(*v); err != nil || ff.partCount < 1 {
			return ff, false, nil
		}
	}
	if ff.schema, ok = packedValue(kv, KeySchemaZst, KeySchema); !ok {
		return ff, false, nil
	}
	return ff, true, nil
}

// packedValue is the value of key packed (see pack) or, in files of older
// versions, of key plain; nil when there is neither. ok is false when the
// packed value does not decode.
func packedValue(kv metadata.KeyValueMetadata, packed, plain string) (v []byte, ok bool) {
	if p := kv.FindValue(packed); p != nil {
		b, err := unpack(*p)
		if err != nil {
			return nil, false
		}
		return b, true
	}
	if p := kv.FindValue(plain); p != nil {
		return []byte(*p), true
	}
	return nil, true
}

// describe reads the footers of table's batch files and tells, per
// batch, what its files say of it (sink.Inventory), sorted by id, and the
// files whose rows make each complete batch.
func describe(ctx context.Context, st Lister, table string) ([]sink.Held, map[string][]fileFooter, error) {
	byID, err := listHeld(ctx, st, table)
	if err != nil {
		return nil, nil, err
	}
	ids := make([]string, 0, len(byID))
	for id := range byID {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	out := make([]sink.Held, 0, len(ids))
	files := map[string][]fileFooter{}
	for _, id := range ids {
		var footers []fileFooter
		parts := []string{}
		for _, f := range byID[id] {
			if err := ctx.Err(); err != nil {
				return nil, nil, fmt.Errorf("describe the batches of table %s: %w", table, err)
			}
			ff, ok, err := readFooter(ctx, st, f)
			if err != nil {
				return nil, nil, fmt.Errorf("describe batch %s of table %s: %w", id, table, err)
			}
			parts = append(parts, f.part)
			if ok {
				footers = append(footers, ff)
			}
		}
		slices.Sort(parts)
		h, whole := judge(id, footers)
		h.Parts = slices.Compact(parts)
		out = append(out, h)
		if h.Complete {
			files[id] = whole
		}
	}
	return out, files, nil
}

// judge tells what a batch's readable files say of it: the attempt that
// wrote it whole if there is one, else the attempt with the most files. It
// returns the files of the reported attempt.
func judge(id string, footers []fileFooter) (sink.Held, []fileFooter) {
	h := sink.Held{ID: id}
	if len(footers) == 0 {
		return h, nil
	}
	byAttempt := map[string][]fileFooter{}
	for _, f := range footers {
		byAttempt[f.attempt] = append(byAttempt[f.attempt], f)
	}
	attempts := make([]string, 0, len(byAttempt))
	for a := range byAttempt {
		attempts = append(attempts, a)
	}
	sort.Strings(attempts)
	best, bestWhole := "", false
	for _, a := range attempts {
		whole := wholeAttempt(byAttempt[a]) != nil
		switch {
		case whole && !bestWhole, whole == bestWhole && len(byAttempt[a]) > len(byAttempt[best]):
			best, bestWhole = a, whole
		}
	}
	fs := byAttempt[best]
	first := fs[0]
	h.Stream, h.Attempt = first.stream, best
	h.WindowStart, h.WindowEnd = first.windowStart, first.windowEnd
	for _, f := range fs {
		if f.schema != nil {
			h.Schema = f.schema
			break
		}
	}
	if all := wholeAttempt(fs); all != nil {
		h.AllParts, h.Complete = all, true
	} else {
		h.AllParts = listedParts(fs, footers)
	}
	var rows int64
	var whole []fileFooter
	for _, f := range fs {
		if !h.Complete || slices.Contains(h.AllParts, f.part) {
			rows += f.rows
			whole = append(whole, f)
		}
	}
	h.Rows = rows
	return h, whole
}

// listedParts is what the files of an incomplete batch say its
// partitions are: the list in the files of the reported attempt, fs; when
// none of them has it (its first partition's file is missing, or another
// attempt's replaced it), every partition any other attempt's files list,
// since a batch found incomplete is fetched again and its open intent had
// better name too many partitions than too few; nil when no file lists
// any.
func listedParts(fs, all []fileFooter) []string {
	for _, f := range fs {
		if f.allParts != nil {
			return f.allParts
		}
	}
	var union []string
	for _, f := range all {
		union = append(union, f.allParts...)
	}
	if union == nil {
		return nil
	}
	slices.Sort(union)
	return slices.Compact(union)
}

// wholeAttempt returns the partitions of a batch that files fs, all of one
// attempt, make whole; nil when they do not.
//
// The file of the batch's first partition lists them (KeyPartsZst) and
// every other file records their number (KeyPartCount): the batch is whole
// when the list is there and a file of the attempt is in each partition it
// names, and every other file agrees on the number. A batch whose list is
// missing is never taken as whole: nothing names its partitions.
//
// Files of versions that wrote syncd.parts list every partition in every
// file: they are judged the same way, and must agree.
//
// A file older than syncd.parts does not say which partitions its batch
// has: such a batch is taken as whole only when it is one file whose
// window lies in that file's partition, which is what every batch of
// those versions was (windows were cut at partitions). A batch of them
// that spans partitions is reported incomplete: no file of it can tell
// whether another is missing.
func wholeAttempt(fs []fileFooter) []string {
	have := map[string]bool{}
	var all []string
	for _, f := range fs {
		have[f.part] = true
		if f.allParts == nil {
			continue
		}
		if all != nil && !slices.Equal(f.allParts, all) {
			return nil // files of one attempt that disagree: not trusted
		}
		all = f.allParts
	}
	if all == nil {
		f := fs[0]
		end := f.windowEnd.Add(-time.Microsecond)
		// Those versions had one layout per sink, not per table: the
		// file's own partition name tells which.
		layout := partLayout(f.part)
		if len(fs) != 1 || f.partCount != 0 || layout.PartitionOf(f.windowStart) != f.part || layout.PartitionOf(end) != f.part {
			return nil
		}
		return []string{f.part}
	}
	if len(all) == 0 {
		return nil
	}
	for _, f := range fs {
		// A file that neither lists the partitions nor counts as many is
		// of another writing of the batch: not trusted.
		if f.allParts == nil && f.partCount != len(all) {
			return nil
		}
	}
	for _, p := range all {
		if !have[p] {
			return nil
		}
	}
	return all
}

// readHeldVersions reads the key, version, time and _deleted columns of
// the files of table's complete batches (sink.VersionReader), one record
// batch at a time.
func readHeldVersions(ctx context.Context, st Lister, t sink.TableColumns, fn func(sink.RowVersion) error) error {
	_, files, err := describe(ctx, st, t.Table)
	if err != nil {
		return err
	}
	ids := make([]string, 0, len(files))
	for id := range files {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		for _, f := range files[id] {
			if err := readVersions(ctx, st, f, t, fn); err != nil {
				return fmt.Errorf("read the versions of batch %s in %s: %w", id, f.key, err)
			}
		}
	}
	return nil
}

// readVersions reads the identity columns of one file: only those column
// chunks are fetched.
func readVersions(ctx context.Context, st Lister, f fileFooter, t sink.TableColumns, fn func(sink.RowVersion) error) error {
	r, err := st.Open(ctx, f.key)
	if err != nil {
		return err
	}
	defer r.Close()
	pf, err := file.NewParquetReader(r)
	if err != nil {
		return err
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 64 << 10}, memory.DefaultAllocator)
	if err != nil {
		return err
	}
	names := []string{t.Key, t.Version, t.Time, tablepkg.ColDeleted}
	var leaves []int
	for i, n := range names {
		if n == "" {
			continue
		}
		idx := pf.MetaData().Schema.ColumnIndexByName(n)
		switch {
		case idx >= 0:
			leaves = append(leaves, idx)
		case i == 0:
			return fmt.Errorf("the file has no key column %s", n)
		}
	}
	rr, err := fr.GetRecordReader(ctx, leaves, nil)
	if err != nil {
		return err
	}
	defer rr.Release()
	for rr.Next() {
		rec := rr.Record()
		col := func(name string) arrow.Array {
			if name == "" {
				return nil
			}
			if idx := rec.Schema().FieldIndices(name); len(idx) == 1 {
				return rec.Column(idx[0])
			}
			return nil
		}
		key, ver, tm, del := col(t.Key), col(t.Version), col(t.Time), col(tablepkg.ColDeleted)
		for i := 0; i < int(rec.NumRows()); i++ {
			rv := sink.RowVersion{BatchID: f.id, Key: valueString(key, i), Version: timeAt(ver, i), Time: timeAt(tm, i)}
			if b, ok := del.(*array.Boolean); ok && b.IsValid(i) {
				rv.Deleted = b.Value(i)
			}
			if err := fn(rv); err != nil {
				return err
			}
		}
	}
	if err := rr.Err(); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

func valueString(a arrow.Array, i int) string {
	switch a := a.(type) {
	case nil:
		return ""
	case *array.String:
		return a.Value(i)
	case *array.LargeString:
		return a.Value(i)
	default:
		return a.ValueStr(i)
	}
}

// timeAt is a timestamp column's value at i; zero when null or absent.
func timeAt(a arrow.Array, i int) time.Time {
	ts, ok := a.(*array.Timestamp)
	if !ok || ts.IsNull(i) {
		return time.Time{}
	}
	return ts.Value(i).ToTime(ts.DataType().(*arrow.TimestampType).Unit).UTC()
}
