package icebergsink

import (
	"context"
	"fmt"
	"slices"
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
// table when a stop came between the two commits; and b itself, when the
// versions table holds it already.
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

// catchUpBatch applies batch id to the latest table unless it has it.
func (s *Sink) catchUpBatch(ctx context.Context, vt *table.Table, b sink.Batch, id string) error {
	lt, err := s.load(ctx, b.Table+LatestSuffix)
	if err != nil {
		return err
	}
	if lt != nil && Holds(lt, id) {
		return nil
	}
	cb := b
	cb.ID = id
	s.log.Info("carrying a batch over to the latest table", zapString("batch", id), zapString("table", b.Table+LatestSuffix))
	_, err = s.commitLatest(ctx, vt, cb)
	return err
}

// scan is the rows of vt that match filter, columns cut to fields (all
// when none), as Records.
func scan(ctx context.Context, vt *table.Table, filter iceberg.BooleanExpression, fields ...string) (sink.Records, error) {
	opts := []table.ScanOption{table.WithRowFilter(filter)}
	_, all := filter.(iceberg.AlwaysTrue)
	if len(fields) > 0 && all {
		// Only without a row filter: iceberg-go v0.7.0's scan fails
		// ("invalid", from Arrow's compute) when it filters the rows of
		// a projection. A filtered scan reads every column (it reads one
		// batch's files, which the filter picks by their bounds).
		opts = append(opts, table.WithSelectedFields(fields...))
	}
	sc, _, err := vt.Scan(opts...).ToArrowRecords(ctx)
	if err != nil {
		return sink.Records{}, fmt.Errorf("read Iceberg table %s: %w", vt.Identifier(), err)
	}
	return sink.Records{Schema: sc, Rows: -1, Each: func(fn func(arrow.Record) error) error {
		_, it, err := vt.Scan(opts...).ToArrowRecords(ctx)
		if err != nil {
			return fmt.Errorf("read Iceberg table %s: %w", vt.Identifier(), err)
		}
		for rec, err := range it {
			if err != nil {
				return fmt.Errorf("read Iceberg table %s: %w", vt.Identifier(), err)
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

// version is one version of a record, as the latest query orders them:
// by version, then by when syncd fetched it.
type version struct {
	version, synced int64
	deleted         bool
	batch           string
}

func (v version) newer(o version) bool {
	return v.version > o.version || (v.version == o.version && v.synced > o.synced)
}

// winners reads, for every record batch id holds a version of, its newest
// version in the versions table: the batch changes the latest table for
// the records whose newest version it wrote. A late import of an older
// version changes nothing, and a record deleted by a newer tombstone
// stays deleted.
func winners(ctx context.Context, vt *table.Table, b sink.Batch, keys []string) (map[string]version, error) {
	key, ver := b.KeyColumn, b.VersionColumn
	fields := []string{key, syncdtable.ColSyncedAt, syncdtable.ColBatchID}
	if ver != "" {
		fields = append(fields, ver)
	}
	if _, ok := vt.Schema().FindFieldByName(syncdtable.ColDeleted); ok {
		fields = append(fields, syncdtable.ColDeleted)
	}
	if len(keys) == 0 {
		return map[string]version{}, nil
	}
	want := make(map[string]bool, len(keys))
	for _, k := range keys {
		want[k] = true
	}
	// Every row's identity columns, the keys picked here: a filter on the
	// key would not skip files (keys are spread over all of them).
	all, err := scan(ctx, vt, iceberg.AlwaysTrue{}, fields...)
	if err != nil {
		return nil, err
	}
	best := make(map[string]version, len(keys))
	err = all.Each(func(rec arrow.Record) error {
		ks, err := keyStrings(rec, key)
		if err != nil {
			return err
		}
		vers, synced := timestamps(rec, ver), timestamps(rec, syncdtable.ColSyncedAt)
		batches := stringCol(rec, syncdtable.ColBatchID)
		var del *array.Boolean
		if idx := rec.Schema().FieldIndices(syncdtable.ColDeleted); len(idx) > 0 {
			del, _ = rec.Column(idx[0]).(*array.Boolean)
		}
		for i, k := range ks {
			if !want[k] {
				continue
			}
			v := version{version: at(vers, i), synced: at(synced, i)}
			if batches != nil && batches.IsValid(i) {
				v.batch = batches.Value(i)
			}
			v.deleted = del != nil && del.IsValid(i) && del.Value(i)
			if old, ok := best[k]; !ok || v.newer(old) || (!old.newer(v) && v.batch == b.ID) {
				best[k] = v
			}
		}
		return nil
	})
	return best, err
}

// keysOf is the keys of recs, each once.
func keysOf(recs sink.Records, col string) ([]string, error) {
	var keys []string
	seen := map[string]bool{}
	err := recs.Each(func(rec arrow.Record) error {
		ks, err := keyStrings(rec, col)
		for _, k := range ks {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
		return err
	})
	return keys, err
}

func stringCol(rec arrow.Record, col string) *array.String {
	idx := rec.Schema().FieldIndices(col)
	if len(idx) == 0 {
		return nil
	}
	a, _ := rec.Column(idx[0]).(*array.String)
	return a
}

func keyStrings(rec arrow.Record, col string) ([]string, error) {
	idx := rec.Schema().FieldIndices(col)
	if len(idx) == 0 {
		return nil, asPermanent(fmt.Errorf("the rows have no key column %s", col))
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

// current is the rows batch b wrote that are now their records' newest
// live version: what the latest table gains.
func current(ctx context.Context, rows sink.Records, b sink.Batch, best map[string]version) sink.Records {
	return sink.Records{Schema: rows.Schema, Rows: -1, Each: func(fn func(arrow.Record) error) error {
		taken := map[string]bool{}
		return rows.Each(func(rec arrow.Record) error {
			ks, err := keyStrings(rec, b.KeyColumn)
			if err != nil {
				return err
			}
			vers, synced := timestamps(rec, b.VersionColumn), timestamps(rec, syncdtable.ColSyncedAt)
			bld := array.NewBooleanBuilder(memory.DefaultAllocator)
			some := false
			for i, k := range ks {
				w, ok := best[k]
				keep := ok && w.batch == b.ID && !w.deleted && !taken[k] && w.version == at(vers, i) && w.synced == at(synced, i)
				if keep {
					taken[k] = true
					some = true
				}
				bld.Append(keep)
			}
			mask := bld.NewBooleanArray()
			bld.Release()
			defer mask.Release()
			if !some {
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

// commitLatest applies batch b to the latest table, from the versions
// table vt (which holds it), in one row delta: an equality delete of
// every record whose newest version b wrote, and that version unless it
// is a tombstone. The delete applies only to rows of earlier snapshots,
// so the new rows stay. The versions table is read, not the batch as
// fetched: a batch carried over after a stop is applied as it was
// committed.
func (s *Sink) commitLatest(ctx context.Context, vt *table.Table, b sink.Batch) (int64, error) {
	rows, err := scan(ctx, vt, iceberg.EqualTo(iceberg.Reference(syncdtable.ColBatchID), b.ID))
	if err != nil {
		return 0, err
	}
	lt, err := s.loadOrCreate(ctx, b.Table, rows.Schema, b, true)
	if err != nil {
		return 0, err
	}
	if Holds(lt, b.ID) {
		return 0, nil
	}
	keys, err := keysOf(rows, b.KeyColumn)
	if err != nil {
		return 0, fmt.Errorf("read the keys of batch %s: %w", b.ID, err)
	}
	best, err := winners(ctx, vt, b, keys)
	if err != nil {
		return 0, fmt.Errorf("read the versions of batch %s: %w", b.ID, err)
	}
	var changed []string
	for k, w := range best {
		if w.batch == b.ID {
			changed = append(changed, k)
		}
	}
	slices.Sort(changed)
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
		if len(changed) > 0 && lt.CurrentSnapshot() != nil {
			krec, err := keyRecords(changed, key, ksc)
			if err != nil {
				return false, err
			}
			dels, err = txn.WriteEqualityDeletes(ctx, []int{key.ID}, func(yield func(arrow.RecordBatch, error) bool) { yield(krec, nil) })
			if err != nil {
				return false, fmt.Errorf("write the equality deletes of batch %s: %w", b.ID, err)
			}
		}
		if files == nil && len(changed) > 0 {
			sel := current(ctx, rows, b, best)
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
