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

	"github.com/syncd-dev/syncd/internal/sink"
	"github.com/syncd-dev/syncd/internal/spool"
	"github.com/syncd-dev/syncd/internal/state"
	"github.com/syncd-dev/syncd/internal/table"
)

// Rows gathers the rows of one window with bounded memory: a source's
// Read appends each row to a builder of its own and notes it (Row); when
// Row says the chunk is full, or at the end, the source cuts the builder
// into a record (Chunk). Past the first chunk, chunks are spooled to local
// disk: a window of any size holds one chunk in memory while it is fetched
// and while it is committed, and a window that fits one chunk never touches
// the disk. A stream with a fixed table hands whole records (Record).
type Rows struct {
	mem       memory.Allocator
	chunkRows int
	spoolDir  string
	lin       table.Lineage
	timeCol   string
	n         int // rows noted since the last chunk
	size      int // estimated bytes of the rows noted since the last chunk

	first arrow.Record // the only chunk so far, kept in memory
	spool *spool.Spool // every chunk, once there are two

	// partOf names a row's partition (nil: one part). Each chunk's
	// partitions are kept, so that a part replays only its chunks.
	partOf    func(time.Time) string
	cur       map[string]bool   // partitions of the rows since the last chunk
	lastKey   string            // the partition of the last row noted
	runRows   int               // rows of lastKey's run in the chunk being built
	runSize   int               // and their estimated bytes
	peekTime  time.Time         // the time Opens last named a partition of
	peekKey   string            // and that partition
	chunkKeys []map[string]bool // per chunk, in order
	partRows  map[string]int64  // rows per partition

	base  table.Schema // the table the window's rows start from; nil: a fixed table
	table table.Schema // after the last chunk; nil for rows that came as records
	stats table.Stats  // of every chunk
	// arrowSchema is the schema every chunk is committed with: the table's
	// after the last chunk, or that of the records added.
	arrowSchema *arrow.Schema
	// index is what the batch changes in the version index; indexHint is
	// the window's planned count, its first capacity (growing it by
	// doubling copied and re-scanned every entry's id several times).
	index     state.IndexChange
	indexHint int
}

func newRows(base table.Schema, lin table.Lineage, timeCol string, mem memory.Allocator, chunkRows int, spoolDir string, partOf func(time.Time) string) *Rows {
	r := &Rows{mem: mem, chunkRows: chunkRows, spoolDir: spoolDir, lin: lin, timeCol: timeCol, base: base, table: base,
		partOf: partOf, cur: map[string]bool{}, partRows: map[string]int64{}}
	if base != nil {
		r.arrowSchema = base.ArrowSchema()
	}
	return r
}

// Lineage is what every row of the batch carries (_batch_id, _synced_at).
func (r *Rows) Lineage() table.Lineage { return r.lin }

// Table is the table the window's rows are built on (an Evolver's pinned
// table, evolved for this pass); nil for a fixed table.
func (r *Rows) Table() table.Schema { return r.base }

// Allocator is the memory the rows' records are built in.
func (r *Rows) Allocator() memory.Allocator { return r.mem }

// Opens reports, before the source appends a row at t, whether the row
// opens another partition than the last row's after a run of that
// partition of at least a quarter chunk: the source then cuts the chunk
// first. Rows that come in time order then make chunks of one dense
// partition each, which the commit reads once, whole, instead of once per
// partition the chunk holds and row by row. Short runs (a sparse form, a
// row a day) share chunks as before.
func (r *Rows) Opens(t time.Time) bool {
	if r.partOf == nil || r.n == 0 {
		return false
	}
	r.peekTime, r.peekKey = t, r.partOf(t)
	return r.peekKey != r.lastKey && (4*r.runRows >= r.chunkRows || 4*r.runSize >= chunkBytes)
}

// Row notes a row the source appended to its builder: its time (for its
// partition) and about what it takes in memory. It reports whether the
// builder is full: the source then cuts it into a Chunk.
func (r *Rows) Row(t time.Time, size int) bool {
	if r.partOf != nil {
		var key string
		if t.Equal(r.peekTime) && r.peekKey != "" {
			key = r.peekKey // Opens named it
		} else {
			key = r.partOf(t)
		}
		// Rows come mostly in time order: a row of the last row's
		// partition need not be noted again.
		if key != r.lastKey || len(r.cur) == 0 {
			r.cur[key] = true
			r.lastKey = key
			r.runRows, r.runSize = 0, 0
		}
		r.partRows[key]++
		r.runRows++
		r.runSize += size
	}
	r.n++
	r.size += size
	return r.n >= r.chunkRows || r.size >= chunkBytes
}

// Index records what a row changes in the version index (a Reconciler's
// Read records every row's version).
func (r *Rows) Index(e state.Entry) {
	if r.index.Put == nil && r.indexHint > 0 {
		r.index.Put = make([]state.Entry, 0, r.indexHint)
	}
	r.index.Put = append(r.index.Put, e)
}

// Chunk takes the rows cut from the source's builder, with the table the
// builder holds after them and what their values did.
func (r *Rows) Chunk(rec arrow.Record, t table.Schema, st table.Stats) error {
	r.n, r.size = 0, 0
	r.table = t
	r.arrowSchema = t.ArrowSchema()
	r.merge(st)
	if rec.NumRows() == 0 && (r.first != nil || r.spool != nil) {
		return nil
	}
	return r.add(rec)
}

// Record takes a chunk of rows built whole, of a fixed table: the records
// of one batch share one schema.
func (r *Rows) Record(rec arrow.Record) error {
	if r.base != nil {
		return errors.New("a batch of a table that follows its source takes chunks, not whole records")
	}
	if rec.NumRows() == 0 {
		return nil
	}
	if r.arrowSchema != nil && !r.arrowSchema.Equal(rec.Schema()) {
		return fmt.Errorf("a record of the batch has the schema %s, another %s: a fixed table's records share one", rec.Schema(), r.arrowSchema)
	}
	r.arrowSchema = rec.Schema()
	if r.partOf != nil {
		idx := rec.Schema().FieldIndices(r.timeCol)
		if len(idx) != 1 {
			return fmt.Errorf("the record has no single %s column", r.timeCol)
		}
		ts, ok := rec.Column(idx[0]).(*array.Timestamp)
		if !ok {
			return fmt.Errorf("column %s is %s, not a timestamp", r.timeCol, rec.Column(idx[0]).DataType())
		}
		unit := ts.DataType().(*arrow.TimestampType).Unit
		for i := 0; i < ts.Len(); i++ {
			key := r.partOf(ts.Value(i).ToTime(unit))
			r.cur[key] = true
			r.partRows[key]++
		}
	}
	return r.add(rec)
}

// add keeps a chunk: in memory while it is the only one, else spooled.
func (r *Rows) add(rec arrow.Record) error {
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

// chunkBytes bounds a chunk by the size of its answers as they arrived: rows
// of a wide form take several kilobytes each in Arrow, so a row count alone
// does not bound memory.
const chunkBytes = 2 << 20

// toSpool creates the spool if needed and moves the chunk held in memory
// into it.
func (r *Rows) toSpool() error {
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

func (r *Rows) merge(st table.Stats) {
	r.stats.Rows += st.Rows
	r.stats.Changes = append(r.stats.Changes, st.Changes...)
	for _, m := range []struct {
		dst *map[string]string
		src map[string]string
	}{
		{&r.stats.MisfitExamples, st.MisfitExamples}, {&r.stats.KeptIn, st.KeptIn},
	} {
		for col, v := range m.src {
			if _, ok := (*m.dst)[col]; !ok {
				if *m.dst == nil {
					*m.dst = make(map[string]string)
				}
				(*m.dst)[col] = v
			}
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

// finish returns the window's table and stats, once the source's Read
// has cut its last chunk.
func (r *Rows) finish() (table.Schema, table.Stats) {
	return r.table, r.stats
}

// rows is the number of rows gathered.
func (r *Rows) rows() int64 {
	switch {
	case r.spool != nil:
		return r.spool.Rows()
	case r.first != nil:
		return r.first.NumRows()
	}
	return 0
}

// parts are the partitions the rows fall in, sorted.
func (r *Rows) parts() []string {
	all := map[string]bool{}
	for _, keys := range r.chunkKeys {
		for k := range keys {
			all[k] = true
		}
	}
	return slices.Sorted(maps.Keys(all))
}

// commit hands the rows to the sink, in one Commit: as one part per
// partition to a sink.Partitioner (cut), else as one part of the whole
// batch. Each part replays only the chunks holding its rows, sliced to the
// runs of its rows (zero-copy), so memory holds one chunk whatever the
// batch's size, and a sparse batch of many partitions reads its one chunk
// from memory. It returns the bytes the sink reports.
func (r *Rows) commit(ctx context.Context, f *streamRun, b sink.Batch, cut bool) (int64, error) {
	schemaOf := r.arrowSchema
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
	var parts sink.Parts
	if cut {
		timeCol := schemaOf.FieldIndices(b.TimeColumn)
		if len(timeCol) != 1 {
			return 0, fmt.Errorf("commit batch %s: the table has no %s column", b.ID, b.TimeColumn)
		}
		parts = make(sink.Parts, 0, len(b.Parts))
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
						if len(r.chunkKeys[i]) == 1 {
							return fn(rec) // the chunk is this partition's alone
						}
						return eachRun(rec, timeCol[0], key, f.partOf(), fn)
					})
					if err != nil {
						return err
					}
				}
				return nil
			}
			parts = append(parts, sink.Part{Key: key, Records: sink.Records{Schema: schemaOf, Rows: r.partRows[key], Each: each}})
		}
	} else {
		each := func(fn func(arrow.Record) error) error {
			if r.spool == nil {
				return chunk(0, fn)
			}
			return r.spool.Each(schemaOf, fn)
		}
		parts = sink.Parts{{Records: sink.Records{Schema: schemaOf, Rows: r.rows(), Each: each}, Whole: true}}
	}
	if r.spool != nil {
		select {
		case f.p.streamSlot <- struct{}{}:
			defer func() { <-f.p.streamSlot }()
		case <-ctx.Done():
			return 0, fmt.Errorf("commit batch %s: %w", b.ID, ctx.Err())
		}
	}
	return f.p.sink.Commit(ctx, b, parts)
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

// release frees memory and removes the spool.
func (r *Rows) release(f *streamRun) {
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
