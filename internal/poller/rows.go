package poller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/forms"
	"github.com/syncd-dev/syncd/internal/schema"
	"github.com/syncd-dev/syncd/internal/sink"
	"github.com/syncd-dev/syncd/internal/spool"
)

// batchRows gathers the rows of one window with bounded memory: once the
// builder holds chunkRows rows, or about chunkBytes of answers, its rows are
// cut into a record and spooled to local disk. A window of any size then
// holds one chunk in memory while it is fetched and while it is committed;
// a window that fits one chunk never touches the disk.
type batchRows struct {
	bld       *schema.Builder
	mem       memory.Allocator
	chunkRows int
	spoolDir  string
	size      int // estimated bytes of the rows in the builder

	first arrow.Record // the only chunk so far, kept in memory
	spool *spool.Spool // every chunk, once there are two

	// partOf names a row's partition (nil: one part). Each chunk's
	// partitions are kept, so that a part replays only its chunks.
	partOf    func(time.Time) string
	cur       map[string]bool   // partitions of the rows in the builder
	chunkKeys []map[string]bool // per chunk, in order
	partRows  map[string]int64  // rows per partition

	table *schema.Table // after the last chunk; nil for rows that came as records
	stats schema.Stats  // of every chunk
	// arrowSchema is the schema every chunk is committed with: the table's
	// after the last chunk, or that of the records added.
	arrowSchema *arrow.Schema
}

// newBatchRows gathers rows built from base, or, with base nil, rows that
// come as records already built (a stream whose table schema is fixed: see
// AddRecord).
func newBatchRows(base *schema.Table, mem memory.Allocator, chunkRows int, spoolDir string, partOf func(time.Time) string) *batchRows {
	r := &batchRows{mem: mem, chunkRows: chunkRows, spoolDir: spoolDir, table: base,
		partOf: partOf, cur: map[string]bool{}, partRows: map[string]int64{}}
	if base != nil {
		r.bld = schema.NewBuilder(base, mem)
		r.arrowSchema = base.ArrowSchema()
	}
	return r
}

// AddRecord adds a chunk of rows already built, whose time is in column
// timeCol: it is kept in memory while it is the only one, else spooled,
// exactly as the chunks the builder cuts.
func (r *batchRows) AddRecord(rec arrow.Record, timeCol string) error {
	if r.bld != nil {
		return errors.New("a batch built row by row cannot take whole records")
	}
	if rec.NumRows() == 0 {
		return nil
	}
	if r.arrowSchema != nil && !r.arrowSchema.Equal(rec.Schema()) {
		return fmt.Errorf("a record of the batch has the schema %s, another %s: a fixed table's records share one", rec.Schema(), r.arrowSchema)
	}
	r.arrowSchema = rec.Schema()
	if r.partOf != nil {
		idx := rec.Schema().FieldIndices(timeCol)
		if len(idx) != 1 {
			return fmt.Errorf("the record has no single %s column", timeCol)
		}
		ts, ok := rec.Column(idx[0]).(*array.Timestamp)
		if !ok {
			return fmt.Errorf("column %s is %s, not a timestamp", timeCol, rec.Column(idx[0]).DataType())
		}
		unit := ts.DataType().(*arrow.TimestampType).Unit
		for i := 0; i < ts.Len(); i++ {
			key := r.partOf(ts.Value(i).ToTime(unit))
			r.cur[key] = true
			r.partRows[key]++
		}
	}
	r.chunkKeys = append(r.chunkKeys, r.cur)
	r.cur = map[string]bool{}
	if r.first == nil && r.spool == nil {
		rec.Retain()
		r.first = rec
		return nil
	}
	if err := r.toSpool(); err != nil {
		return err
	}
	return r.spool.Add(rec)
}

// Append adds one submission, cutting a chunk when the builder is full.
func (r *batchRows) Append(sub *forms.Submission, lin schema.Lineage) error {
	if err := r.bld.Append(sub, lin); err != nil {
		return err
	}
	if r.partOf != nil {
		key := r.partOf(sub.SubmissionTime)
		r.cur[key] = true
		r.partRows[key]++
	}
	r.size += estimatedSize(sub)
	if r.bld.Len() >= r.chunkRows || r.size >= chunkBytes {
		return r.spill()
	}
	return nil
}

// AppendTombstone adds the row that says submission id (of submission time
// t) was deleted, as seen at seen.
func (r *batchRows) AppendTombstone(id string, t, seen time.Time, lin schema.Lineage) error {
	if err := r.bld.AppendTombstone(id, t, seen, lin); err != nil {
		return err
	}
	if r.partOf != nil {
		key := r.partOf(t)
		r.cur[key] = true
		r.partRows[key]++
	}
	r.size += 256
	if r.bld.Len() >= r.chunkRows || r.size >= chunkBytes {
		return r.spill()
	}
	return nil
}

// chunkBytes bounds a chunk by the size of its answers as they arrived: rows
// of a wide form take several kilobytes each in Arrow, so a row count alone
// does not bound memory.
const chunkBytes = 2 << 20

// estimatedSize is about what a submission takes in Arrow memory: its
// answers' JSON text and a fixed part for the other columns.
func estimatedSize(sub *forms.Submission) int {
	n := 256 + len(sub.SubmissionID)
	for _, q := range sub.Questions {
		n += len(q.Value)
	}
	for _, c := range sub.Calculations {
		n += len(c.Value)
	}
	for _, p := range sub.URLParameters {
		n += len(p.Value)
	}
	return n
}

// spill cuts a chunk in the middle of a window and writes it to the spool
// at once: more rows follow.
func (r *batchRows) spill() error {
	r.size = 0
	if err := r.cut(); err != nil {
		return err
	}
	return r.toSpool()
}

// cut moves the builder's rows into a chunk. The builder keeps its evolved
// table for the next rows.
func (r *batchRows) cut() error {
	if r.bld == nil {
		return nil
	}
	rec, table, st := r.bld.Finish()
	defer rec.Release()
	r.table = table
	r.arrowSchema = table.ArrowSchema()
	r.merge(st)
	if rec.NumRows() == 0 && (r.first != nil || r.spool != nil) {
		return nil
	}
	r.chunkKeys = append(r.chunkKeys, r.cur)
	r.cur = map[string]bool{}
	if r.first == nil && r.spool == nil {
		rec.Retain()
		r.first = rec
		return nil
	}
	if err := r.toSpool(); err != nil {
		return err
	}
	return r.spool.Add(rec)
}

// toSpool creates the spool if needed and moves the chunk held in memory
// into it.
func (r *batchRows) toSpool() error {
	if r.spool == nil {
		sp, err := spool.New(r.spoolDir, r.mem)
		if err != nil {
			return err
		}
		r.spool = sp
	}
	if r.first == nil {
		return nil
	}
	err := r.spool.Add(r.first)
	r.first.Release()
	r.first = nil
	return err
}

func (r *batchRows) merge(st schema.Stats) {
	r.stats.Rows += st.Rows
	r.stats.Dropped += st.Dropped
	r.stats.Changes = append(r.stats.Changes, st.Changes...)
	for col, ex := range st.MisfitExamples {
		if _, ok := r.stats.MisfitExamples[col]; !ok {
			if r.stats.MisfitExamples == nil {
				r.stats.MisfitExamples = make(map[string]string)
			}
			r.stats.MisfitExamples[col] = ex
		}
	}
	for _, m := range []struct {
		dst *map[string]int
		src map[string]int
	}{
		{&r.stats.Misfits, st.Misfits}, {&r.stats.Discarded, st.Discarded},
	} {
		if len(m.src) == 0 {
			continue
		}
		if *m.dst == nil {
			*m.dst = maps.Clone(m.src)
			continue
		}
		for k, n := range m.src {
			(*m.dst)[k] += n
		}
	}
}

// finish cuts the last chunk and returns the window's table and stats.
func (r *batchRows) finish() (*schema.Table, schema.Stats, error) {
	if err := r.cut(); err != nil {
		return nil, schema.Stats{}, err
	}
	return r.table, r.stats, nil
}

// rows is the number of rows gathered.
func (r *batchRows) rows() int64 {
	switch {
	case r.spool != nil:
		return r.spool.Rows()
	case r.first != nil:
		return r.first.NumRows()
	}
	return 0
}

// commit hands the rows to the sink: one record when they fit one chunk,
// else replayed from the spool to a sink that streams, or concatenated for
// one that does not. It returns the bytes the sink reports.
func (r *batchRows) commit(ctx context.Context, f *formRun, b sink.Batch) (int64, error) {
	if r.spool == nil {
		return f.commitRecord(ctx, b, r.first)
	}
	schemaOf := r.arrowSchema
	recs := sink.Records{Schema: schemaOf, Rows: r.spool.Rows(), Each: func(fn func(arrow.Record) error) error {
		return r.spool.Each(schemaOf, fn)
	}}
	select {
	case f.p.streamSlot <- struct{}{}:
		defer func() { <-f.p.streamSlot }()
	case <-ctx.Done():
		return 0, fmt.Errorf("commit batch %s: %w", b.ID, ctx.Err())
	}
	if s, ok := f.p.sink.(sink.StreamCommitter); ok {
		return s.CommitRecords(ctx, b, recs)
	}
	rec, err := concatenate(recs, r.mem)
	if err != nil {
		return 0, fmt.Errorf("gather batch %s from its spool: %w", b.ID, err)
	}
	defer rec.Release()
	return f.commitRecord(ctx, b, rec)
}

// parts are the partitions the rows fall in, sorted.
func (r *batchRows) parts() []string {
	all := map[string]bool{}
	for _, keys := range r.chunkKeys {
		for k := range keys {
			all[k] = true
		}
	}
	return slices.Sorted(maps.Keys(all))
}

// commitParts hands the rows to a sink.Partitioner as one part per
// partition: each part replays only the chunks holding its rows, sliced to
// the runs of its rows (zero-copy), so memory holds one chunk whatever the
// batch's size, and a sparse batch of many partitions reads its one chunk
// from memory.
func (r *batchRows) commitParts(ctx context.Context, f *formRun, pt sink.Partitioner, b sink.Batch) (int64, error) {
	schemaOf := r.arrowSchema
	timeCol := schemaOf.FieldIndices(b.TimeColumn)
	if len(timeCol) != 1 {
		return 0, fmt.Errorf("commit batch %s: the table has no %s column", b.ID, b.TimeColumn)
	}
	chunk := func(i int, fn func(arrow.Record) error) error {
		if r.spool == nil {
			wide, err := spool.Widen(r.first, schemaOf, r.mem)
			if err != nil {
				return err
			}
			defer wide.Release()
			return fn(wide)
		}
		return r.spool.Replay(i, schemaOf, fn)
	}
	parts := make([]sink.Part, 0, len(b.Parts))
	for _, key := range b.Parts {
		var chunks []int
		for i, keys := range r.chunkKeys {
			if keys[key] {
				chunks = append(chunks, i)
			}
		}
		each := func(fn func(arrow.Record) error) error {
			for _, i := range chunks {
				err := chunk(i, func(rec arrow.Record) error {
					return eachRun(rec, timeCol[0], key, f.p.partOf, fn)
				})
				if err != nil {
					return err
				}
			}
			return nil
		}
		parts = append(parts, sink.Part{Key: key, Records: sink.Records{Schema: schemaOf, Rows: r.partRows[key], Each: each}})
	}
	if r.spool != nil {
		select {
		case f.p.streamSlot <- struct{}{}:
			defer func() { <-f.p.streamSlot }()
		case <-ctx.Done():
			return 0, fmt.Errorf("commit batch %s: %w", b.ID, ctx.Err())
		}
	}
	return pt.CommitParts(ctx, b, parts)
}

// eachRun calls fn with every maximal run of rec's rows whose time falls in
// partition key, as a zero-copy slice.
func eachRun(rec arrow.Record, col int, key string, partOf func(time.Time) string, fn func(arrow.Record) error) error {
	ts, ok := rec.Column(col).(*array.Timestamp)
	if !ok {
		return fmt.Errorf("column %s is %s, not a timestamp", rec.Schema().Field(col).Name, rec.Column(col).DataType())
	}
	unit := ts.DataType().(*arrow.TimestampType).Unit
	from := -1
	flush := func(to int) error {
		if from < 0 {
			return nil
		}
		s := rec.NewSlice(int64(from), int64(to))
		defer s.Release()
		from = -1
		return fn(s)
	}
	for i := 0; i < ts.Len(); i++ {
		if partOf(ts.Value(i).ToTime(unit)) == key {
			if from < 0 {
				from = i
			}
			continue
		}
		if err := flush(i); err != nil {
			return err
		}
	}
	return flush(ts.Len())
}

// concatenate reads recs into one record.
func concatenate(recs sink.Records, mem memory.Allocator) (arrow.Record, error) {
	cols := make([][]arrow.Array, recs.Schema.NumFields())
	defer func() {
		for _, parts := range cols {
			for _, a := range parts {
				a.Release()
			}
		}
	}()
	err := recs.Each(func(rec arrow.Record) error {
		for i := range cols {
			c := rec.Column(i)
			c.Retain()
			cols[i] = append(cols[i], c)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]arrow.Array, len(cols))
	for i, parts := range cols {
		a, err := array.Concatenate(parts, mem)
		if err != nil {
			for _, done := range out[:i] {
				done.Release()
			}
			return nil, fmt.Errorf("column %s: %w", recs.Schema.Field(i).Name, err)
		}
		out[i] = a
	}
	rec := array.NewRecord(recs.Schema, out, recs.Rows)
	for _, a := range out {
		a.Release()
	}
	return rec, nil
}

// release frees memory and removes the spool.
func (r *batchRows) release(f *formRun) {
	if r.bld != nil {
		r.bld.Release()
	}
	if r.first != nil {
		r.first.Release()
		r.first = nil
	}
	if r.spool != nil {
		if err := r.spool.Close(); err != nil {
			f.log.Warn("could not remove a spool folder", zap.Error(err))
		}
		r.spool = nil
	}
}
