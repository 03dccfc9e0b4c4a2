// Package sinktest is the contract every sink keeps, as one suite that each
// backend's tests run (Litestream's RunWithReplicaClient is the model): a
// commit is visible whole or not at all, a replay adds nothing, Committed
// tells before and after, and each capability a sink has (Partitioner,
// Purger, Inventory, VersionReader) does what package sink says.
//
// The suite reads what a sink wrote through a Reader the backend's test
// supplies, independent of the sink (DuckDB over the Parquet files, the
// fake's own rows for BigQuery).
package sinktest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/syncd-dev/syncd/internal/sink"
	tablepkg "github.com/syncd-dev/syncd/internal/table"
)

// Row is one row of a table as a Reader reads it back.
type Row struct {
	Key     string
	Version int64 // last_updated_at, µs since the epoch
	Deleted bool
	BatchID string
	Extra   string // the column added by schema evolution; "" when null
}

// Reader reads a table back without the sink under test. The sink that
// newSink returns must implement it.
type Reader interface {
	// ReadRows returns every row table holds, in no order.
	ReadRows(t *testing.T, table string) []Row
	// Latest runs sink.LatestQuery over table: key -> version (µs).
	Latest(t *testing.T, table string) map[string]int64
}

// Columns of the suite's tables, as internal/schema names a form's.
const (
	KeyColumn     = "submission_id"
	VersionColumn = "last_updated_at"
	TimeColumn    = "submission_time"
	ExtraColumn   = "q_extra"
)

// Columns are the identity columns of the suite's tables, for ReadVersions.
func Columns(table string) sink.TableColumns {
	return sink.TableColumns{Table: table, Key: KeyColumn, Version: VersionColumn, Time: TimeColumn}
}

// Day is the first day of the suite's windows.
var Day = time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)

var tsUTC = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}

// Schema is the schema of the suite's records; extra adds ExtraColumn.
func Schema(extra bool) *arrow.Schema {
	fs := []arrow.Field{
		{Name: KeyColumn, Type: arrow.BinaryTypes.String},
		{Name: TimeColumn, Type: tsUTC},
		{Name: VersionColumn, Type: tsUTC},
		tablepkg.DeletedField(true),
		tablepkg.BatchIDField(),
		tablepkg.SyncedAtField(),
	}
	if extra {
		fs = append(fs, arrow.Field{Name: ExtraColumn, Type: arrow.BinaryTypes.String, Nullable: true})
	}
	return arrow.NewSchema(fs, nil)
}

// Sub is one submission version of a record.
type Sub struct {
	Key     string
	Time    time.Time // submission_time: the window and partition follow it
	Version time.Time
	Deleted bool
	Extra   string // set only with Schema(true)
}

// Record builds the rows of batch id, in the given order.
func Record(id string, extra bool, subs ...Sub) arrow.Record {
	b := array.NewRecordBuilder(memory.DefaultAllocator, Schema(extra))
	defer b.Release()
	synced := Day.Add(48 * time.Hour)
	for _, s := range subs {
		b.Field(0).(*array.StringBuilder).Append(s.Key)
		b.Field(1).(*array.TimestampBuilder).Append(arrow.Timestamp(s.Time.UnixMicro()))
		b.Field(2).(*array.TimestampBuilder).Append(arrow.Timestamp(s.Version.UnixMicro()))
		b.Field(3).(*array.BooleanBuilder).Append(s.Deleted)
		b.Field(4).(*array.StringBuilder).Append(id)
		b.Field(5).(*array.TimestampBuilder).Append(arrow.Timestamp(synced.UnixMicro()))
		if extra {
			if s.Extra == "" {
				b.Field(6).AppendNull()
			} else {
				b.Field(6).(*array.StringBuilder).Append(s.Extra)
			}
		}
	}
	return b.NewRecord()
}

// Batch is batch id of table over [from, to).
func Batch(table, id string, from, to time.Time) sink.Batch {
	return sink.Batch{
		ID: id, Stream: "f1", Table: table, WindowStart: from, WindowEnd: to,
		SchemaFingerprint: "fp", TimeColumn: TimeColumn, KeyColumn: KeyColumn, VersionColumn: VersionColumn,
		Attempt: "a1", Schema: []byte(`{"columns":["` + KeyColumn + `"]}`),
		Layout: ContractLayout,
	}
}

// ContractLayout is the layout of the contract's batches: by day, so that
// a sink that writes files writes one per day the rows fall in.
const ContractLayout = sink.LayoutDay

// subs are n submissions a minute apart from day on, keys prefix-i, each
// version a second after its time.
func subs(prefix string, day time.Time, n int) []Sub {
	out := make([]Sub, n)
	for i := range out {
		t := day.Add(time.Duration(i) * time.Minute)
		out[i] = Sub{Key: fmt.Sprintf("%s-%d", prefix, i), Time: t, Version: t.Add(time.Second)}
	}
	return out
}

// counts is how many rows each key has.
func counts(rows []Row) map[string]int {
	m := map[string]int{}
	for _, r := range rows {
		m[r.Key]++
	}
	return m
}

func mustCommitted(t *testing.T, s sink.Sink, b sink.Batch, want bool) {
	t.Helper()
	got, err := s.Committed(context.Background(), b)
	if err != nil {
		t.Fatalf("Committed(%s): %v", b.ID, err)
	}
	if got != want {
		t.Fatalf("Committed(%s) = %v, want %v", b.ID, got, want)
	}
}

var errStop = errors.New("sinktest: the attempt stops here")

// failingPart is a part whose rows fail after the first chunk: the
// attempt stops while writing it.
func failingPart(key string, rec arrow.Record) sink.Part {
	return sink.Part{Key: key, Records: sink.Records{Schema: rec.Schema(), Rows: rec.NumRows(), Each: func(fn func(arrow.Record) error) error {
		if err := fn(rec); err != nil {
			return err
		}
		return errStop
	}}}
}

func part(key string, rec arrow.Record) sink.Part {
	return sink.Part{Key: key, Records: sink.Records{Schema: rec.Schema(), Rows: rec.NumRows(), Each: func(fn func(arrow.Record) error) error { return fn(rec) }}}
}

// Run runs the contract against the sinks newSink opens: each subtest
// opens its own, on a fresh output.
// The multi-file contract (a stopped attempt between files) runs where
// the sink writes files (a sink.Partitioner); a sink whose commit is one
// atomic unit has no such state.
func Run(t *testing.T, newSink func(t *testing.T) sink.Sink) {
	t.Run("WholeOrNothing", func(t *testing.T) { testWholeOrNothing(t, newSink) })
	t.Run("Replay", func(t *testing.T) { testReplay(t, newSink) })
	if _, ok := newSink(t).(sink.Partitioner); ok {
		t.Run("StoppedAttempt", func(t *testing.T) { testStoppedAttempt(t, newSink) })
	}
	t.Run("Purge", func(t *testing.T) { testPurge(t, newSink) })
	t.Run("Evolution", func(t *testing.T) { testEvolution(t, newSink) })
	t.Run("LatestView", func(t *testing.T) { testLatestView(t, newSink) })
	t.Run("Inventory", func(t *testing.T) { testInventory(t, newSink) })
}
