package icebergsink

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"

	"github.com/syncd-dev/syncd/internal/sink"
	syncdtable "github.com/syncd-dev/syncd/internal/table"
)

var (
	_ sink.Inventory     = (*Sink)(nil)
	_ sink.VersionReader = (*Sink)(nil)
)

// HeldBatches lists the batches the versions table holds rows of, read
// from its _batch_id column: snapshot summaries vanish with expiry and
// compaction rewrites files, but every row keeps its batch id. Only a
// state that committed nothing yet asks (syncd state adopt, the check
// for another state's output), so a read of one column is its cost.
func (s *Sink) HeldBatches(ctx context.Context, name string) ([]string, error) {
	counts, err := s.batchRows(ctx, name)
	if err != nil {
		return nil, err
	}
	return slices.Sorted(maps.Keys(counts)), nil
}

// DescribeBatches says, for each batch the versions table holds, its rows
// and, while its snapshot is kept, its window. A batch is one snapshot,
// so every batch found is complete.
func (s *Sink) DescribeBatches(ctx context.Context, name string) ([]sink.Held, error) {
	counts, err := s.batchRows(ctx, name)
	if err != nil || len(counts) == 0 {
		return nil, err
	}
	vt, err := s.load(ctx, name)
	if err != nil || vt == nil {
		return nil, err
	}
	summaries := map[string]iceberg.Properties{}
	for _, sn := range vt.Metadata().Snapshots() {
		if sn.Summary != nil && sn.Summary.Properties[SummaryBatchID] != "" {
			summaries[sn.Summary.Properties[SummaryBatchID]] = sn.Summary.Properties
		}
	}
	out := make([]sink.Held, 0, len(counts))
	for _, id := range slices.Sorted(maps.Keys(counts)) {
		h := sink.Held{ID: id, Rows: counts[id], Complete: true, Stream: vt.Properties()[SummaryStream]}
		if p, ok := summaries[id]; ok {
			if p[SummaryStream] != "" {
				h.Stream = p[SummaryStream]
			}
			h.WindowStart, _ = parseTimeProp(p[SummaryWindowStart])
			h.WindowEnd, _ = parseTimeProp(p[SummaryWindowEnd])
		}
		out = append(out, h)
	}
	return out, nil
}

// batchRows counts the versions table's rows by batch id.
func (s *Sink) batchRows(ctx context.Context, name string) (map[string]int64, error) {
	out := map[string]int64{}
	vt, err := s.load(ctx, name)
	if err != nil || vt == nil || vt.CurrentSnapshot() == nil {
		return out, err
	}
	recs, err := scan(ctx, vt, iceberg.AlwaysTrue{}, syncdtable.ColBatchID)
	if err != nil {
		return nil, err
	}
	err = recs.Each(func(rec arrow.Record) error {
		col := stringCol(rec, syncdtable.ColBatchID)
		if col == nil {
			return fmt.Errorf("Iceberg table %s has no %s column", name, syncdtable.ColBatchID)
		}
		for i := 0; i < col.Len(); i++ {
			out[col.Value(i)]++
		}
		return nil
	})
	return out, err
}

// ReadVersions reads the identity of every row of the versions table.
func (s *Sink) ReadVersions(ctx context.Context, tc sink.TableColumns, fn func(sink.RowVersion) error) error {
	vt, err := s.load(ctx, tc.Table)
	if err != nil || vt == nil || vt.CurrentSnapshot() == nil {
		return err
	}
	fields := []string{tc.Key, syncdtable.ColBatchID}
	for _, c := range []string{tc.Version, tc.Time, syncdtable.ColDeleted} {
		if _, ok := vt.Schema().FindFieldByName(c); ok && c != "" && !slices.Contains(fields, c) {
			fields = append(fields, c)
		}
	}
	recs, err := scan(ctx, vt, iceberg.AlwaysTrue{}, fields...)
	if err != nil {
		return err
	}
	return recs.Each(func(rec arrow.Record) error {
		keys, err := keyStrings(rec, tc.Key)
		if err != nil {
			return err
		}
		ver, tm := timestamps(rec, tc.Version), timestamps(rec, tc.Time)
		batches := stringCol(rec, syncdtable.ColBatchID)
		var del *array.Boolean
		if idx := rec.Schema().FieldIndices(syncdtable.ColDeleted); len(idx) > 0 {
			del, _ = rec.Column(idx[0]).(*array.Boolean)
		}
		for i, k := range keys {
			v := sink.RowVersion{Key: k, Version: micros(ver, i), Time: micros(tm, i)}
			if batches != nil {
				v.BatchID = batches.Value(i)
			}
			v.Deleted = del != nil && del.IsValid(i) && del.Value(i)
			if err := fn(v); err != nil {
				return err
			}
		}
		return nil
	})
}

func micros(a *array.Timestamp, i int) time.Time {
	if a == nil || a.IsNull(i) {
		return time.Time{}
	}
	return time.UnixMicro(int64(a.Value(i))).UTC()
}
