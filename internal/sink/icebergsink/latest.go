package icebergsink

import (
	"context"
	"fmt"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/syncd-dev/syncd/internal/sink"
	syncdtable "github.com/syncd-dev/syncd/internal/table"
)

// catchUp carries the versions table's last batch over to the latest
// table when a stop came between the two commits (and the batch was then
// resolved as committed, or is b itself, found in the versions table).
func (s *Sink) catchUp(ctx context.Context, vt *table.Table, b sink.Batch) error {
	ids := recentBatches(vt.Properties())
	if len(ids) == 0 {
		return nil
	}
	last := ids[len(ids)-1]
	if err := s.catchUpBatch(ctx, vt, b, last); err != nil {
		return err
	}
	if last != b.ID && Holds(vt, b.ID) {
		return s.catchUpBatch(ctx, vt, b, b.ID)
	}
	return nil
}

// catchUpBatch applies batch id to the latest table from the rows the
// versions table holds of it, unless the latest table has it.
func (s *Sink) catchUpBatch(ctx context.Context, vt *table.Table, b sink.Batch, id string) error {
	lt, err := s.load(ctx, b.Table+LatestSuffix)
	if err != nil {
		return err
	}
	if lt != nil && Holds(lt, id) {
		return nil
	}
	recs, err := scanBatch(ctx, vt, id)
	if err != nil {
		return err
	}
	cb := b
	cb.ID = id
	s.log.Info("carrying a batch over to the latest table from the versions table", zapString("batch", id), zapString("table", b.Table+LatestSuffix))
	_, err = s.commitLatest(ctx, vt, cb, recs)
	return err
}

// scanBatch is the rows batch id wrote to the versions table, read back
// from it (its files hold one batch each, so the filter on _batch_id
// skips every other file by its column bounds).
func scanBatch(ctx context.Context, vt *table.Table, id string) (sink.Records, error) {
	filter := iceberg.EqualTo(iceberg.Reference(syncdtable.ColBatchID), id)
	sc, _, err := vt.Scan(table.WithRowFilter(filter)).ToArrowRecords(ctx)
	if err != nil {
		return sink.Records{}, fmt.Errorf("read batch %s back from Iceberg table %s: %w", id, vt.Identifier(), err)
	}
	return sink.Records{Schema: sc, Rows: -1, Each: func(fn func(arrow.Record) error) error {
		_, it, err := vt.Scan(table.WithRowFilter(filter)).ToArrowRecords(ctx)
		if err != nil {
			return err
		}
		for rec, err := range it {
			if err != nil {
				return fmt.Errorf("read batch %s back from Iceberg table %s: %w", id, vt.Identifier(), err)
			}
			err = fn(rec)
			rec.Release()
			if err != nil {
				return err
			}
		}
		return nil
	}}, nil
}

// winner is the newest version of one record in a batch.
type winner struct {
	row             int64 // index of the row in the batch
	version, synced int64
}

// changes is what a batch changes in the latest table: every key it
// holds a version of (each deleted from the table), and the rows that
// become the records' current state (the newest version of each, unless
// it is a tombstone).
type changes struct {
	keys []string
	rows map[int64]bool
}

// changesOf reads the key, version, synced-at and deleted columns of recs.
func changesOf(recs sink.Records, b sink.Batch) (changes, error) {
	best := map[string]winner{}
	var order []string
	deleted := map[int64]bool{}
	var base int64
	err := recs.Each(func(rec arrow.Record) error {
		keys, err := keyStrings(rec, b.KeyColumn)
		if err != nil {
			return err
		}
		vers := timestamps(rec, b.VersionColumn)
		synced := timestamps(rec, syncdtable.ColSyncedAt)
		var del *array.Boolean
		if idx := rec.Schema().FieldIndices(syncdtable.ColDeleted); len(idx) > 0 {
			del, _ = rec.Column(idx[0]).(*array.Boolean)
		}
		for i, k := range keys {
			row := base + int64(i)
			w := winner{row: row, version: at(vers, i), synced: at(synced, i)}
			if del != nil && del.IsValid(i) && del.Value(i) {
				deleted[row] = true
			}
			old, seen := best[k]
			if !seen {
				order = append(order, k)
			}
			if !seen || w.version > old.version || (w.version == old.version && w.synced >= old.synced) {
				best[k] = w
			}
		}
		base += rec.NumRows()
		return nil
	})
	if err != nil {
		return changes{}, err
	}
	c := changes{keys: order, rows: make(map[int64]bool, len(best))}
	for _, w := range best {
		if !deleted[w.row] {
			c.rows[w.row] = true
		}
	}
	return c, nil
}

func keyStrings(rec arrow.Record, col string) ([]string, error) {
	idx := rec.Schema().FieldIndices(col)
	if len(idx) == 0 {
		return nil, asPermanent(fmt.Errorf("the batch has no key column %s", col))
	}
	out := make([]string, rec.NumRows())
	switch a := rec.Column(idx[0]).(type) {
	case *array.String:
		for i := range out {
			out[i] = a.Value(i)
		}
	case *array.Int64:
		for i := range out {
			out[i] = strconv.FormatInt(a.Value(i), 10)
		}
	default:
		return nil, asPermanent(fmt.Errorf("key column %s is %s: the latest table needs a string or int64 key", col, a.DataType()))
	}
	return out, nil
}

func timestamps(rec arrow.Record, col string) *array.Timestamp {
	if col == "" {
		return nil
	}
	idx := rec.Schema().FieldIndices(col)
	if len(idx) == 0 {
		return nil
	}
	a, _ := rec.Column(idx[0]).(*array.Timestamp)
	return a
}

func at(a *array.Timestamp, i int) int64 {
	if a == nil || a.IsNull(i) {
		return 0
	}
	return int64(a.Value(i))
}

// keyRecords is the keys as the one record of an equality-delete file on
// the key field.
func keyRecords(keys []string, field iceberg.NestedField, sc *arrow.Schema) (arrow.Record, error) {
	mem := memory.DefaultAllocator
	var col arrow.Array
	switch field.Type.(type) {
	case iceberg.StringType:
		bld := array.NewStringBuilder(mem)
		defer bld.Release()
		bld.AppendValues(keys, nil)
		col = bld.NewArray()
	case iceberg.Int64Type:
		bld := array.NewInt64Builder(mem)
		defer bld.Release()
		for _, k := range keys {
			v, err := strconv.ParseInt(k, 10, 64)
			if err != nil {
				return nil, err
			}
			bld.Append(v)
		}
		col = bld.NewArray()
	default:
		return nil, asPermanent(fmt.Errorf("key field %s is %s: the latest table needs a string or long key", field.Name, field.Type))
	}
	defer col.Release()
	return array.NewRecord(sc, []arrow.Array{col}, int64(len(keys))), nil
}

// selected is recs cut to the rows of c: the records' current state.
func selected(ctx context.Context, recs sink.Records, c changes) sink.Records {
	return sink.Records{Schema: recs.Schema, Rows: int64(len(c.rows)), Each: func(fn func(arrow.Record) error) error {
		var base int64
		return recs.Each(func(rec arrow.Record) error {
			n := rec.NumRows()
			bld := array.NewBooleanBuilder(memory.DefaultAllocator)
			any := false
			for i := int64(0); i < n; i++ {
				keep := c.rows[base+i]
				any = any || keep
				bld.Append(keep)
			}
			base += n
			mask := bld.NewBooleanArray()
			bld.Release()
			defer mask.Release()
			if !any {
				return nil
			}
			out, err := compute.FilterRecordBatch(ctx, rec, mask, compute.DefaultFilterOptions())
			if err != nil {
				return fmt.Errorf("select the current rows: %w", err)
			}
			defer out.Release()
			return fn(out)
		})
	}}
}

// commitLatest applies batch b's changes (recs: its rows) to the latest
// table, in one row delta: an equality delete of every key the batch
// holds, and the newest live version of each. The delete applies only to
// rows of earlier snapshots, so the new rows stay.
func (s *Sink) commitLatest(ctx context.Context, vt *table.Table, b sink.Batch, recs sink.Records) (int64, error) {
	lt, err := s.loadOrCreate(ctx, b.Table, recs.Schema, b, true)
	if err != nil {
		return 0, err
	}
	if Holds(lt, b.ID) {
		return 0, nil
	}
	c, err := changesOf(recs, b)
	if err != nil {
		return 0, fmt.Errorf("read the changes of batch %s: %w", b.ID, err)
	}
	var (
		files   []iceberg.DataFile
		written int64
	)
	name := b.Table + LatestSuffix
	err = s.retry(ctx, "commit batch "+b.ID+" to Iceberg table "+s.opts.Namespace+"."+name, func(attempt int) (bool, error) {
		if attempt > 1 {
			nt, err := s.load(ctx, name)
			if err != nil || nt == nil {
				return false, err
			}
			if Holds(nt, b.ID) {
				return true, nil
			}
			lt = nt
		}
		txn := lt.NewTransaction()
		key, ok := lt.Schema().FindFieldByName(b.KeyColumn)
		if !ok {
			return false, asPermanent(fmt.Errorf("Iceberg table %s has no key column %s", name, b.KeyColumn))
		}
		ksc, err := table.SchemaToArrowSchema(iceberg.NewSchema(0, key), nil, true, false)
		if err != nil {
			return false, asPermanent(err)
		}
		var dels []iceberg.DataFile
		if len(c.keys) > 0 {
			krec, err := keyRecords(c.keys, key, ksc)
			if err != nil {
				return false, err
			}
			dels, err = txn.WriteEqualityDeletes(ctx, []int{key.ID}, func(yield func(arrow.RecordBatch, error) bool) { yield(krec, nil) })
			if err != nil {
				return false, fmt.Errorf("write the equality deletes of batch %s: %w", b.ID, err)
			}
		}
		if files == nil && len(c.rows) > 0 {
			sel := selected(ctx, recs, c)
			files, written, err = s.writeFiles(ctx, lt, sel.Schema, records(sel), writeUUID(b.ID, "latest"))
			if err != nil {
				return false, err
			}
		}
		if err := txn.SetProperties(iceberg.Properties{PropRecentBatches: withRecent(lt.Properties(), b.ID)}); err != nil {
			return false, asPermanent(err)
		}
		if len(dels) > 0 || len(files) > 0 {
			rd := txn.NewRowDelta(s.summary(b))
			rd.AddDeletes(dels...)
			rd.AddRows(files...)
			if err := rd.Commit(ctx); err != nil {
				return false, fmt.Errorf("stage the changes of batch %s: %w", b.ID, err)
			}
		}
		nt, err := txn.Commit(ctx)
		if err != nil {
			return false, err
		}
		lt = nt
		return true, nil
	})
	return written, err
}
