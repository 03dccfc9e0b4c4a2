package icebergsink

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"iter"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"

	"github.com/syncd-dev/syncd/internal/sink"
)

// newTableProps are the properties of every table syncd creates.
func (s *Sink) newTableProps(b sink.Batch, latest bool) iceberg.Properties {
	p := iceberg.Properties{
		"format-version":                          "2",
		table.ParquetCompressionKey:               "zstd",
		table.WriteTargetFileSizeBytesKey:         strconv.FormatInt(s.opts.TargetFileSize, 10),
		table.ManifestMergeEnabledKey:             "true",
		table.MetadataDeleteAfterCommitEnabledKey: "true",
		table.MetadataPreviousVersionsMaxKey:      "20",
		// syncd retries commits itself, after looking for its batch:
		// the library's own retry would add a batch a second time when
		// the answer to the first try was lost.
		table.CommitNumRetriesKey: "0",
		SummaryStream:             b.Stream,
	}
	if b.Description != "" {
		p["comment"] = b.Description
	}
	if latest {
		p[PropFollows] = s.opts.Namespace + "." + b.Table
		p["comment"] = "the current state of " + s.opts.Namespace + "." + b.Table + ": one row per live record (written by syncd)"
	}
	return p
}

// icebergSchema is the Iceberg schema of a new table with the columns of
// sc, in order, every top-level field optional: a column a later form
// version drops, or an older row lacks, reads as null.
func icebergSchema(sc *arrow.Schema) (*iceberg.Schema, error) {
	fields := make([]arrow.Field, sc.NumFields())
	for i, f := range sc.Fields() {
		f.Nullable = true
		fields[i] = f
	}
	md := sc.Metadata()
	out, err := table.ArrowSchemaToIcebergWithFreshIDs(arrow.NewSchema(fields, &md), false)
	if err != nil {
		return nil, fmt.Errorf("map the batch's columns to an Iceberg schema: %w", err)
	}
	return out, nil
}

// loadOrCreate loads a stream's table (latest: its current-state table),
// creating it at its first batch, and adds the columns of sc it lacks.
func (s *Sink) loadOrCreate(ctx context.Context, name string, sc *arrow.Schema, b sink.Batch, latest bool) (*table.Table, error) {
	if latest {
		name += LatestSuffix
	}
	t, err := s.load(ctx, name)
	if err != nil {
		return nil, err
	}
	want, err := icebergSchema(sc)
	if err != nil {
		return nil, asPermanent(err)
	}
	if t == nil {
		t, err = s.cat.CreateTable(ctx, s.Ident(name), want, catalog.WithProperties(s.newTableProps(b, latest)))
		if errors.Is(err, catalog.ErrTableAlreadyExists) {
			// Another writer (or a try whose answer was lost) made it.
			t, err = s.load(ctx, name)
		}
		if err != nil {
			return nil, fmt.Errorf("create Iceberg table %s.%s: %w", s.opts.Namespace, name, err)
		}
		if t == nil {
			return nil, fmt.Errorf("create Iceberg table %s.%s: the catalog does not find it after creating it", s.opts.Namespace, name)
		}
		s.log.Info("created an Iceberg table", zapString("table", s.opts.Namespace+"."+name), zapString("location", t.Location()))
	}
	return s.evolveSchema(ctx, t, want)
}

// evolveSchema adds the columns of want that t lacks, by name: a
// renamed question keeps its column (syncd pins columns), so it keeps
// its field id; a new question, or a new type of one (its variant
// column), is a new field. Old rows read null in it.
func (s *Sink) evolveSchema(ctx context.Context, t *table.Table, want *iceberg.Schema) (*table.Table, error) {
	have := t.Schema()
	missing := false
	for _, f := range want.Fields() {
		if _, ok := have.FindFieldByName(f.Name); !ok {
			missing = true
			break
		}
	}
	if !missing {
		return t, nil
	}
	txn := t.NewTransaction()
	if err := txn.UpdateSchema(true, false).UnionByNameWith(want).Commit(); err != nil {
		return nil, asPermanent(fmt.Errorf("add the new columns to Iceberg table %s: %w", t.Identifier(), err))
	}
	nt, err := txn.Commit(ctx)
	if err != nil {
		return nil, fmt.Errorf("add the new columns to Iceberg table %s: %w", t.Identifier(), err)
	}
	return nt, nil
}

// layoutOf is the time layout of t's partition spec: the transform on
// its time column, none when unpartitioned.
func layoutOf(t *table.Table, timeCol string) (sink.Layout, string) {
	spec := t.Spec()
	src, ok := t.Schema().FindFieldByName(timeCol)
	if !ok {
		return sink.LayoutNone, ""
	}
	for _, f := range spec.Fields() {
		if len(f.SourceIDs) != 1 || f.SourceIDs[0] != src.ID {
			continue
		}
		switch f.Transform.(type) {
		case iceberg.DayTransform:
			return sink.LayoutDay, f.Name
		case iceberg.MonthTransform:
			return sink.LayoutMonth, f.Name
		case iceberg.YearTransform:
			return sink.LayoutYear, f.Name
		}
	}
	return sink.LayoutNone, ""
}

func finer(a, b sink.Layout) bool { return rank(a) > rank(b) }

func rank(l sink.Layout) int {
	switch l {
	case sink.LayoutYear:
		return 1
	case sink.LayoutMonth:
		return 2
	case sink.LayoutDay:
		return 3
	}
	return 0
}

func transformOf(l sink.Layout) iceberg.Transform {
	switch l {
	case sink.LayoutYear:
		return iceberg.YearTransform{}
	case sink.LayoutMonth:
		return iceberg.MonthTransform{}
	}
	return iceberg.DayTransform{}
}

// span is what a batch's rows show of the table's density: how many, and
// the first and last time of the time column.
type span struct {
	rows        int64
	first, last time.Time
}

// spanOf reads the time column of recs (a pass over the rows, before they
// are written).
func spanOf(recs sink.Records, timeCol string) (span, error) {
	sp := span{rows: recs.Rows}
	if timeCol == "" {
		return sp, nil
	}
	err := recs.Each(func(rec arrow.Record) error {
		idx := rec.Schema().FieldIndices(timeCol)
		if len(idx) == 0 {
			return nil
		}
		col, ok := rec.Column(idx[0]).(*array.Timestamp)
		if !ok {
			return nil
		}
		unit := col.DataType().(*arrow.TimestampType).Unit
		for i := 0; i < col.Len(); i++ {
			if col.IsNull(i) {
				continue
			}
			t := col.Value(i).ToTime(unit)
			if sp.first.IsZero() || t.Before(sp.first) {
				sp.first = t
			}
			if t.After(sp.last) {
				sp.last = t
			}
		}
		return nil
	})
	return sp, err
}

// evolveSpec partitions t by the finest time layout its density (its
// rows with the batch's, over the time they span) fills with at least
// PartitionTarget rows a partition, when that is finer than its spec:
// the spec evolves, files already written keep theirs, nothing is
// rewritten. A table is never split finer than what it has shown.
func (s *Sink) evolveSpec(ctx context.Context, t *table.Table, b sink.Batch, sp span) (*table.Table, error) {
	if b.TimeColumn == "" || sp.first.IsZero() {
		return t, nil
	}
	props := t.Properties()
	first, last := sp.first, sp.last
	if f, ok := parseTimeProp(props[PropTimeFirst]); ok && f.Before(first) {
		first = f
	}
	if l, ok := parseTimeProp(props[PropTimeLast]); ok && l.After(last) {
		last = l
	}
	rows := sp.rows + totalRecords(t)
	want := sink.ChooseLayout(first, last.Add(time.Microsecond), int(min(rows, int64(1<<62))), s.opts.PartitionTarget)
	have, field := layoutOf(t, b.TimeColumn)
	if !finer(want, have) {
		return t, nil
	}
	txn := t.NewTransaction()
	us := txn.UpdateSpec(true)
	if field != "" {
		us = us.RemoveField(field)
	}
	us = us.AddField(b.TimeColumn, transformOf(want), b.TimeColumn+"_"+string(want))
	if err := us.Commit(); err != nil {
		return nil, asPermanent(fmt.Errorf("partition Iceberg table %s by %s: %w", t.Identifier(), want, err))
	}
	nt, err := txn.Commit(ctx)
	if err != nil {
		return nil, fmt.Errorf("partition Iceberg table %s by %s: %w", t.Identifier(), want, err)
	}
	s.log.Info("Iceberg table partitioned by its density", zapString("table", fmt.Sprint(t.Identifier())),
		zapString("from", string(have)), zapString("to", string(want)), zapString("rows", strconv.FormatInt(rows, 10)))
	return nt, nil
}

// totalRecords is the row count of t's current snapshot (its summary).
func totalRecords(t *table.Table) int64 {
	sn := t.CurrentSnapshot()
	if sn == nil || sn.Summary == nil {
		return 0
	}
	n, _ := strconv.ParseInt(sn.Summary.Properties["total-records"], 10, 64)
	return n
}

// writeUUID names a batch's data files: derived from the batch id (and
// which table), so a try that writes them again writes the same names.
func writeUUID(batchID, which string) uuid.UUID {
	return uuid.NewSHA1(uuid.NameSpaceURL, []byte("syncd:"+which+":"+batchID))
}

// records is recs as the pull iterator iceberg-go's writer reads: each
// record retained for it (it releases what it consumes).
func records(recs sink.Records) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		stop := errors.New("stop")
		err := recs.Each(func(rec arrow.Record) error {
			rec.Retain()
			if !yield(rec, nil) {
				return stop
			}
			return nil
		})
		if err != nil && !errors.Is(err, stop) {
			yield(nil, err)
		}
	}
}

// writeFiles writes recs as data files of t, and returns them with the
// bytes written.
func (s *Sink) writeFiles(ctx context.Context, t *table.Table, sc *arrow.Schema, recs iter.Seq2[arrow.RecordBatch, error], id uuid.UUID) ([]iceberg.DataFile, int64, error) {
	var files []iceberg.DataFile
	var n int64
	for df, err := range table.WriteRecords(ctx, t, sc, recs,
		table.WithWriteUUID(id), table.WithTargetFileSize(s.opts.TargetFileSize), table.WithMaxWriteWorkers(1)) {
		if err != nil {
			return nil, n, fmt.Errorf("write the data files of Iceberg table %s: %w", t.Identifier(), err)
		}
		files = append(files, df)
		n += df.FileSizeBytes()
	}
	return files, n, nil
}

// summary is the snapshot summary of batch b.
func (s *Sink) summary(b sink.Batch) iceberg.Properties {
	p := iceberg.Properties{SummaryBatchID: b.ID, SummaryStream: b.Stream}
	if !b.WindowStart.IsZero() {
		p[SummaryWindowStart] = timeProp(b.WindowStart)
	}
	if !b.WindowEnd.IsZero() {
		p[SummaryWindowEnd] = timeProp(b.WindowEnd)
	}
	if s.opts.Version != "" {
		p[SummaryVersion] = s.opts.Version
	}
	return p
}

// commitVersions adds batch b's rows to the versions table vt in one
// snapshot, unless vt holds the batch already. It returns the table as
// it is after the commit.
func (s *Sink) commitVersions(ctx context.Context, vt *table.Table, b sink.Batch, recs sink.Records) (int64, *table.Table, error) {
	if Holds(vt, b.ID) {
		return 0, vt, nil
	}
	sp, err := spanOf(recs, b.TimeColumn)
	if err != nil {
		return 0, vt, fmt.Errorf("read batch %s: %w", b.ID, err)
	}
	want, err := icebergSchema(recs.Schema)
	if err != nil {
		return 0, vt, asPermanent(err)
	}
	var (
		files   []iceberg.DataFile
		written int64
		specID  = -1
	)
	t := vt
	err = s.retry(ctx, "commit batch "+b.ID+" to Iceberg table "+s.opts.Namespace+"."+b.Table, func(attempt int) (bool, error) {
		if attempt > 1 {
			nt, err := s.load(ctx, b.Table)
			if err != nil || nt == nil {
				return false, err
			}
			if Holds(nt, b.ID) {
				t = nt
				return true, nil
			}
			if nt, err = s.evolveSchema(ctx, nt, want); err != nil {
				return false, err
			}
			t = nt
		}
		nt, err := s.evolveSpec(ctx, t, b, sp)
		if err != nil {
			return false, err
		}
		t = nt
		if spec := t.Spec(); files == nil || specID != spec.ID() {
			files, written, err = s.writeFiles(ctx, t, recs.Schema, records(recs), writeUUID(b.ID, "versions"))
			if err != nil {
				return false, err
			}
			specID = spec.ID()
		}
		txn := t.NewTransaction()
		props := iceberg.Properties{PropRecentBatches: withRecent(t.Properties(), b.ID)}
		if !sp.first.IsZero() {
			if f, ok := parseTimeProp(t.Properties()[PropTimeFirst]); !ok || sp.first.Before(f) {
				props[PropTimeFirst] = timeProp(sp.first)
			}
			if l, ok := parseTimeProp(t.Properties()[PropTimeLast]); !ok || sp.last.After(l) {
				props[PropTimeLast] = timeProp(sp.last)
			}
		}
		if err := txn.SetProperties(props); err != nil {
			return false, asPermanent(err)
		}
		if len(files) > 0 {
			if err := txn.AddDataFiles(ctx, files, s.summary(b), table.WithoutDuplicateCheck()); err != nil {
				return false, fmt.Errorf("add the files of batch %s: %w", b.ID, err)
			}
		}
		nt, err = txn.Commit(ctx)
		if err != nil {
			return false, err
		}
		t = nt
		return true, nil
	})
	return written, t, err
}

// removeTableFiles removes what a dropped table's location holds, for a
// purge: the SQL catalog drops only its row.
func removeTableFiles(ctx context.Context, t *table.Table) error {
	fs, err := t.FS(ctx)
	if err != nil {
		return err
	}
	var paths []string
	for mf, err := range t.AllManifests(ctx) {
		if err != nil {
			break
		}
		paths = append(paths, mf.FilePath())
		entries, err := mf.FetchEntries(fs, false)
		if err != nil {
			continue
		}
		for _, e := range entries {
			paths = append(paths, e.DataFile().FilePath())
		}
	}
	for _, sn := range t.Metadata().Snapshots() {
		paths = append(paths, sn.ManifestList)
	}
	paths = append(paths, t.MetadataLocation())
	for le := range t.Metadata().PreviousFiles() {
		paths = append(paths, le.MetadataFile)
	}
	var errs []error
	for _, p := range paths {
		if err := fs.Remove(p); err != nil && !errors.Is(err, iofs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
