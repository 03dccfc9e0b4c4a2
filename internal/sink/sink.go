// Package sink commits batches of Arrow records to a destination, atomically
// and idempotently under a deterministic batch id.
package sink

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/syncd-dev/syncd/internal/table"
)

// Batch names one unit of commit: the records of one stream whose time
// falls in the half-open window [WindowStart, WindowEnd). A window is
// bounded by its row count, not by calendar days, so a batch may span
// several partitions of a sink that partitions by time (a Partitioner):
// such a sink writes one file per partition, all under the batch id.
type Batch struct {
	ID                string    // deterministic: the same window always gets the same id
	Stream            string    // source form
	Table             string    // destination table name (already sanitised)
	WindowStart       time.Time // inclusive
	WindowEnd         time.Time // exclusive
	SchemaFingerprint string    // of the pinned table schema the record was built with
	// TimeColumn is the column the window and the partitions follow.
	TimeColumn string
	// Layout is the table's partition layout (a Partitioner's), recorded
	// in the state when the table was first written; "" is the sink's
	// own default.
	Layout Layout
	// KeyColumn and VersionColumn name a record and order its versions,
	// for the latest view (see LatestQuery); empty: the table keeps no
	// versions.
	KeyColumn, VersionColumn string
	// Required are the columns every record of the stream has (a warehouse
	// may enforce them: BigQuery's REQUIRED), and Description says what the
	// table holds; both come from the stream, so a sink knows no source.
	Required    []string
	Description string
	// Attempt names the attempt that wrote a batch's files (its intent
	// records it with the files): a file of the batch written by another,
	// stopped attempt is not part of this one. A stop part-way through an
	// attempt that rewrites files leaves files of two attempts; only this
	// check keeps Committed from taking that mix for the batch. Empty: not
	// checked (batches of older versions).
	Attempt string
	// Replace is set on a batch fetched again after a stop: files of it in
	// place are from an attempt that never committed, and are rewritten
	// with this attempt's rows (which the state then records), not kept.
	// Stale lists partitions that attempt wrote and this one does not:
	// their files are removed. A batch fetched again with no rows is
	// committed with no parts, only to remove them.
	Replace bool
	Stale   []string
	// Parts are the partition keys of a Partitioner's batch, sorted: the
	// intent records them once the rows are fetched, so an open batch found
	// at start-up is checked file by file. Empty: the partition of
	// WindowStart (batches of older versions never crossed a partition).
	Parts []string
	// Schema is the pinned table schema the rows were built with
	// (schema.Marshal), stored beside them (a Parquet footer key) so that
	// the state can be rebuilt from the output; nil: not stored.
	Schema []byte
}

// Sink is a destination that commits whole batches. Its one commit takes a
// batch's rows as parts streamed from the spool, so that a sink's memory is
// bounded by a chunk of a part, never by the batch.
type Sink interface {
	// Commit writes parts as batch b so that it becomes visible whole or
	// not at all, and returns the bytes it wrote (for the metrics; 0 when
	// it wrote nothing, as for a replay). Committing a batch id that is
	// already committed must not create a second copy of its rows.
	//
	// A Partitioner's batch comes cut: one part per key of b.Parts, in
	// that order; with no parts at all, b.Replace asks only that the files
	// of b.Stale go. Any other batch comes whole, as one part marked Whole,
	// which a Partitioner cuts itself by its time column (setting b.Parts).
	Commit(ctx context.Context, b Batch, parts Parts) (int64, error)
	// Committed reports whether batch b is already committed. It is how an
	// open intent found at start-up is resolved.
	Committed(ctx context.Context, b Batch) (bool, error)
	// Close releases what the sink holds.
	Close() error
}

// Records is rows too many to hold in memory at once, replayed in chunks.
// Each calls fn with the rows, in order, as records of Schema; a record is
// valid only during its call. Each may be called more than once (a sink
// that retries replays the rows again).
type Records struct {
	Schema *arrow.Schema
	Rows   int64
	Each   func(fn func(arrow.Record) error) error
}

// Part is the rows of one batch that fall in one partition, or all of its
// rows (Whole).
type Part struct {
	Key     string // the partition, as the batch's Layout names it; "" for a whole batch
	Records Records
	// Whole is set on the one part of a batch that is not cut into
	// partitions: a sink that writes a file per partition cuts it.
	Whole bool
}

// Parts are the rows of one batch, in order. Each part replays its rows
// from where the batch is kept (the spool) only when the sink reads it, so
// holding the list holds none of the rows.
type Parts []Part

// Whole is a batch held in one record, as its one Whole part (a record of
// no rows still makes a part: the sink learns the batch's schema from it).
func Whole(rec arrow.Record) Parts {
	return Parts{{Records: Single(rec), Whole: true}}
}

// Single is the rows of one record, replayed as one chunk.
func Single(rec arrow.Record) Records {
	return Records{Schema: rec.Schema(), Rows: rec.NumRows(), Each: func(fn func(arrow.Record) error) error { return fn(rec) }}
}

// Rows counts the rows of every part.
func (ps Parts) Rows() int64 {
	var n int64
	for _, p := range ps {
		n += p.Records.Rows
	}
	return n
}

// Schema is the schema of the parts' records (every part shares it); nil
// when there is no part.
func (ps Parts) Schema() *arrow.Schema {
	if len(ps) == 0 {
		return nil
	}
	return ps[0].Records.Schema
}

// Records replays the rows of every part, part after part, as one stream:
// what a sink that writes a batch as one unit (a load file) reads.
func (ps Parts) Records() Records {
	return Records{Schema: ps.Schema(), Rows: ps.Rows(), Each: func(fn func(arrow.Record) error) error {
		for _, p := range ps {
			if err := p.Records.Each(fn); err != nil {
				return err
			}
		}
		return nil
	}}
}

// Purger is a capability a Sink may have: removing a table's whole output
// (its files, or the table itself), for a full refresh. Purging a table
// that has no output succeeds.
type Purger interface {
	Purge(ctx context.Context, table string) error
}

// Partitioner is a capability a Sink may have: it writes one file per
// partition of the time column, in the batch's Layout, so the poller hands
// it batches cut into parts (Batch.Layout's PartitionOf names them, and
// Batch.Parts lists them) and cuts windows at partition starts, so that a
// pass writes one file per partition. Each part becomes one file, visible
// whole or not at all; a file already in place is kept, so a replay adds
// nothing; the batch is committed when every part is.
type Partitioner interface {
	Sink
	// WritesFilePerPartition marks the capability; it does nothing.
	WritesFilePerPartition()
}

// LatestQuery is the query of a table's current state, in SQL that DuckDB
// and BigQuery both run: the latest version of each record (by version
// column, then _synced_at), tombstones (_deleted) dropped. from is what the
// FROM clause reads (a table, or read_parquet(...)). It is the one
// definition behind the documented query, the tests and BigQuery's
// <table>_latest views.
func LatestQuery(from, key, version string) string {
	return "SELECT * FROM (SELECT * FROM " + from + " WHERE TRUE QUALIFY ROW_NUMBER() OVER (PARTITION BY " + key +
		" ORDER BY " + version + " DESC, " + table.ColSyncedAt + " DESC) = 1) WHERE NOT COALESCE(" + table.ColDeleted + ", FALSE)"
}

// Prober is a capability a Sink may have: proving, for `syncd validate`,
// that the output can be written, without writing a batch (a hidden file
// written and deleted, a dry-run job). A sink opened to be probed must not
// clean up temporary files: a running daemon may be writing them.
type Prober interface {
	Probe(ctx context.Context) (Probe, error)
}

// Probe is what a Prober found: Checked says what was done ("a probe file
// was written and deleted"), Warning something to fix that does not stop
// a sync (a dataset the first load will create).
type Probe struct {
	Checked, Warning string
}

// LeaseBound is a capability a Sink may have: it stops writing once the
// state store's lease is lost (ch closed), so that a syncd another one took
// over from cannot complete an upload of a batch the new one may already
// have resolved as never committed. Call it before the first commit.
type LeaseBound interface {
	StopWhen(ch <-chan struct{})
}

// Held is what a table's output records of one batch: enough to rebuild
// the state that wrote it (`syncd state adopt`).
type Held struct {
	ID     string // the batch id
	Stream string // the stream the batch belongs to, as its files name it (Batch.FormID)
	// WindowStart and WindowEnd are the batch's window, as its files
	// record it (zero when the sink keeps no such record).
	WindowStart, WindowEnd time.Time
	// Attempt names the attempt whose files are in place (Batch.Attempt).
	Attempt string
	// Parts are the partitions the batch has files in; AllParts those its
	// files say the batch writes (Batch.Parts). Complete is set when
	// every one of AllParts is in place, written by one attempt: only
	// then is the batch whole in the output. A sink whose commit is one
	// atomic unit (a BigQuery load job) reports every batch complete.
	Parts, AllParts []string
	Complete        bool
	Rows            int64
	// Schema is the pinned table schema the rows were built with
	// (Batch.Schema); nil when the files do not carry it.
	Schema []byte
}

// Inventory is a capability a Sink may have: telling which batches a
// table's output holds. It is how a state that is not the one that wrote
// the output is noticed before it writes the same rows a second time, and
// how `syncd state adopt` rebuilds that state from the output.
type Inventory interface {
	// HeldBatches lists the ids of the batches a table holds files (or
	// rows) of, cheaply: names only, no file is opened. A table with no
	// output has none.
	HeldBatches(ctx context.Context, table string) ([]string, error)
	// DescribeBatches reads what the output records of each batch of a
	// table (its footers, its object metadata or its rows), sorted by id.
	DescribeBatches(ctx context.Context, table string) ([]Held, error)
}

// TableInfo is what a table of the output holds now: its current
// snapshot and files (a table format's; a sink without snapshots leaves
// them zero).
type TableInfo struct {
	Table            string    `json:"table"`
	SnapshotID       int64     `json:"snapshot_id"`
	SnapshotAt       time.Time `json:"snapshot_at"`
	Snapshots        int       `json:"snapshots"`
	DataFiles        int64     `json:"data_files"`
	DeleteFiles      int64     `json:"delete_files"`
	Rows             int64     `json:"rows"`
	Bytes            int64     `json:"bytes"`
	Partitioning     string    `json:"partitioning"`
	LastBatch        string    `json:"last_batch"`
	MetadataLocation string    `json:"metadata_location"`
}

// Lister is a capability a Sink may have: describing every table of its
// output (`syncd tables`).
type Lister interface {
	Tables(ctx context.Context) ([]TableInfo, error)
}

// Maintainer is a capability a Sink may have: keeping a table's output
// well-sized after the stream's commits (compaction, expiry, orphan
// cleanup), when it is due. The engine calls it at the end of a stream's
// pass that ended well, still under the stream's lock, so that it never
// runs beside that stream's own commits. An error is a warning: the
// rows are committed.
type Maintainer interface {
	MaintainIfDue(ctx context.Context, table string) (bool, error)
}

// TableColumns names a table and the columns of its rows' identity.
type TableColumns struct {
	Table   string
	Key     string // names a record (KeyColumn)
	Version string // orders its versions (VersionColumn)
	Time    string // the column windows and partitions follow (TimeColumn)
}

// RowVersion is one row of a table, read back: which record, which
// version, when, and whether it is a tombstone (_deleted).
type RowVersion struct {
	BatchID string
	Key     string
	Version time.Time
	Time    time.Time
	Deleted bool
}

// VersionReader is a capability a Sink may have: reading back the identity
// of every row a table holds, in no particular order, so that a version
// index can be rebuilt from the output. Only files of complete batches
// (see Held) are read.
type VersionReader interface {
	ReadVersions(ctx context.Context, t TableColumns, fn func(RowVersion) error) error
}

// CommitRecord commits batch b held whole in one record: Commit of one
// part, for callers (tests, tools) that build a batch in memory.
func CommitRecord(ctx context.Context, s Sink, b Batch, rec arrow.Record) error {
	if rec == nil {
		return fmt.Errorf("commit batch %s: no record", b.ID)
	}
	_, err := s.Commit(ctx, b, Whole(rec))
	return err
}

// WithGathered calls fn with parts gathered into one record (Gather, in
// Go's memory), released after: the Commit of a test's fake that reads a
// batch whole. It reports no bytes written.
func WithGathered(parts Parts, fn func(arrow.Record) error) (int64, error) {
	rec, err := Gather(parts, memory.DefaultAllocator)
	if err != nil {
		return 0, err
	}
	defer rec.Release()
	return 0, fn(rec)
}

// Gather reads parts into one record, in mem: for a sink that must hold a
// batch whole (a test's fake); a real sink reads the parts as they stream.
// The caller releases the record.
func Gather(parts Parts, mem memory.Allocator) (arrow.Record, error) {
	recs := parts.Records()
	if recs.Schema == nil {
		return nil, errors.New("gather a batch: no parts")
	}
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
		return nil, fmt.Errorf("gather a batch: %w", err)
	}
	out := make([]arrow.Array, len(cols))
	for i, parts := range cols {
		if len(parts) == 0 {
			a := array.MakeArrayOfNull(mem, recs.Schema.Field(i).Type, 0)
			out[i] = a
			continue
		}
		a, err := array.Concatenate(parts, mem)
		if err != nil {
			for _, done := range out[:i] {
				done.Release()
			}
			return nil, fmt.Errorf("gather a batch: column %s: %w", recs.Schema.Field(i).Name, err)
		}
		out[i] = a
	}
	rec := array.NewRecord(recs.Schema, out, recs.Rows)
	for _, a := range out {
		a.Release()
	}
	return rec, nil
}
