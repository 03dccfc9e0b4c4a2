// Package sink commits batches of Arrow records to a destination, atomically
// and idempotently under a deterministic batch id.
package sink

import (
	"context"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
)

// Batch names one unit of commit: the submissions of one form whose
// submission time falls in the half-open window [WindowStart, WindowEnd).
// A window never crosses a UTC midnight, so a batch belongs to one Day,
// unless the sink is a DaySpanner that says otherwise; Day is then the
// day of WindowStart.
type Batch struct {
	ID                string    // deterministic: the same window always gets the same id
	FormID            string    // source form
	Table             string    // destination table name (already sanitised)
	Day               time.Time // UTC midnight of the submissions' date: the partition
	WindowStart       time.Time // inclusive
	WindowEnd         time.Time // exclusive
	SchemaFingerprint string    // of the pinned table schema the record was built with
}

// DaySpanner is a capability a Sink may have. A sink whose tables are
// partitioned by the submission_time column itself, not by where a batch is
// written (BigQuery partitions by day on the column), can take a batch that
// spans several UTC days: the poller then plans windows bounded only by
// their row count, so that a pass commits one batch per table, and a
// backfill a few large ones. A sink without it gets windows of one UTC day.
type DaySpanner interface {
	BatchesSpanDays() bool
}

// Sink is a destination that commits whole batches.
type Sink interface {
	// Commit writes rec as batch b so that it becomes visible whole or not at
	// all. Committing a batch id that is already committed must not create a
	// second copy of its rows.
	Commit(ctx context.Context, b Batch, rec arrow.Record) error
	// Committed reports whether batch b is already committed. It is how an
	// open intent found at start-up is resolved.
	Committed(ctx context.Context, b Batch) (bool, error)
	// Close releases what the sink holds.
	Close() error
}

// Records is a batch too large to hold in memory at once, replayed in
// chunks. Each calls fn with the batch's rows, in order, as records of
// Schema; a record is valid only during its call. Each may be called more
// than once (a sink that retries replays the rows again).
type Records struct {
	Schema *arrow.Schema
	Rows   int64
	Each   func(fn func(arrow.Record) error) error
}

// StreamCommitter is a capability a Sink may have: committing a batch from
// Records, so that memory stays bounded by one chunk whatever the batch's
// size. The guarantee is Commit's. It returns the bytes written, for the
// metrics. A sink without it gets the chunks concatenated into one record.
type StreamCommitter interface {
	CommitRecords(ctx context.Context, b Batch, recs Records) (int64, error)
}

// Purger is a capability a Sink may have: removing a table's whole output
// (its files, or the table itself), for a full refresh. Purging a table
// that has no output succeeds.
type Purger interface {
	Purge(ctx context.Context, table string) error
}
