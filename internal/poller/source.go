package poller

import (
	"context"
	"strings"
	"time"

	"github.com/syncd-dev/syncd/internal/state"
	"github.com/syncd-dev/syncd/internal/table"
)

// A source is a package that offers streams (internal/source/forms,
// internal/source/scheduling; the account-level contract is
// internal/source); the engine knows streams, never forms or bookings. A
// stream declares its table and reads windows; what more it can do is
// named by the optional interfaces below, which the engine finds by type
// assertion (as Litestream's ReplicaClient capabilities, CloudQuery's
// SourceClient per table).

// Columns name the roles of a stream's table's columns.
type Columns struct {
	Time    string // windows and partitions follow it
	Key     string // names a record: its rows are its versions
	Version string // orders a record's versions
	// Required are the columns every record has (BigQuery makes them
	// REQUIRED).
	Required []string
}

// Describer is a Stream that says what its table holds, in a few words
// ("Submissions of form F"): a warehouse's table description.
type Describer interface {
	Description() string
}

// Window is a half-open range [Start, End) of a stream's time column.
type Window struct {
	Start, End time.Time
	// Count is how many records the source counted in it when it was
	// planned; -1 when unknown.
	Count int
	// AtMost bounds the records of a window whose Count is unknown (0: no
	// bound is known), as a window cut back to a partition's start knows.
	// It sizes what a read allocates up front; what is read never depends
	// on it.
	AtMost int
	// Empty: the source knows the window holds nothing. It is committed
	// without a batch.
	Empty bool
	// First is what planning already read of the window (the source's own
	// value, handed back to its Read); nil when nothing.
	First any
	// Since is the time of the window's first record, when planning saw
	// it (zero: unknown): with Count, it is what a new table's layout is
	// chosen from (sink.ChooseLayout).
	Since time.Time
}

// SizeHint is about how many records w holds, to size memory up front:
// its count, else its bound; 0 when neither is known.
func (w Window) SizeHint() int {
	if w.Count >= 0 {
		return w.Count
	}
	return w.AtMost
}

// Stream is one table of a source, read window by window along its time
// column. Its Key names it in the state and in its batch ids.
type Stream interface {
	Key() string
	Table() string
	Columns() Columns
	// Read puts every record of w into rows, once (see Rows).
	Read(ctx context.Context, w Window, rows *Rows) error
	// Requests is how many requests the stream has made so far.
	Requests() int64
}

// Planner is a Stream that cuts a gap into its windows itself (the forms
// plan by their first page and counts); a stream without it is cut by its
// Counter.
type Planner interface {
	// Plan emits, in order, windows of at most cut.MaxRows records that
	// cover gap exactly.
	Plan(ctx context.Context, gap state.Interval, cut Cutter, emit func(Window) error) error
}

// Counter is a Stream that can count the records of a range: it plans a
// stream without a Planner, and sizes a backfill's progress. A count may
// be a lower bound (the bookings count by updatedAt, and read the bookings
// never updated by createdAt too): a window it plans may then hold a few
// more records than MaxRowsPerBatch, which the spool bounds in memory
// anyway.
type Counter interface {
	Count(ctx context.Context, start, end time.Time) (int, error)
}

// Evolver is a Stream whose table follows the source's metadata (a form's
// questions): the engine pins the table in the state, and each pass
// evolves it. A stream without it has a fixed table: its rows come as
// whole records (Rows.Record).
type Evolver interface {
	// Evolve maps the source's metadata to the table, from the pinned one
	// (nil: the first pass), and says what changed.
	Evolve(ctx context.Context, pinned table.Schema) (table.Schema, []table.Change, error)
	// Unpin reads a schema its Marshal wrote (the state's pinned schema, a
	// batch file's footer).
	Unpin(raw []byte) (table.Schema, error)
}

// Reconciler is a Stream whose records change after they are written
// (edits, deletions, back-dated imports): its Read records each row's
// version in the version index (Rows.Index), and a reconcile reads
// committed windows again and compares them with it.
type Reconciler interface {
	// Reconcile reads w again and returns what changed since known (the
	// index's records of w): new versions and late imports, and the records
	// gone (deleted, seen gone at seen).
	Reconcile(ctx context.Context, w Window, known map[string]state.Version, seen time.Time) (Changes, error)
}

// Changes are what a reconcile found in a window.
type Changes struct {
	// Index is what the changes make of the version index: Put the new
	// versions, Gone the records deleted.
	Index state.IndexChange
	// Write puts the changed rows and the tombstones into a batch's rows.
	Write func(rows *Rows) error
}

// Empty reports whether nothing changed.
func (c Changes) Empty() bool { return len(c.Index.Put) == 0 && len(c.Index.Gone) == 0 }

// Cutter is what a Planner cuts windows with: the bound on a window's
// records, and the engine's split (at partition starts, so that a pass
// writes one file per partition).
type Cutter struct {
	MaxRows int
	// Split picks the end of the first window of [a, b), which holds total
	// > MaxRows records, none before lo, counting [a, t) with count. It
	// returns the end and the records before it; -1 when unknown, and then
	// there are at most MaxRows (Window.AtMost).
	Split func(a, lo, b time.Time, total int, count func(t time.Time) (int, error)) (time.Time, int, error)
}

// Window is the window [start, end) of count records as Split returned
// them: a count it could not know (-1) is bounded by MaxRows.
func (c Cutter) Window(start, end time.Time, count int) Window {
	w := Window{Start: start, End: end, Count: count}
	if count < 0 {
		w.AtMost = c.MaxRows
	}
	return w
}

// Source names the source of a stream: what its key says before the "/"
// ("scheduling/bookings"), or forms for a form (whose key is its id). An
// account's namespace ("acme/" in "acme/vLp2aX") is not a source.
func Source(s Stream) string {
	return keySource(s.Key())
}

func keySource(k string) string {
	_, k = table.SplitStreamKey(k)
	if src, _, ok := strings.Cut(k, "/"); ok {
		return src
	}
	return SourceForms
}
