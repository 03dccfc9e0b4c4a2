// Package sourcetest is the contract every source's stream keeps, as one
// suite each source's tests run over its simulator (Litestream's
// RunWithReplicaClient is the model). The suite drives the stream through
// the engine itself (poller.New over an in-memory sink and a bolt state),
// as the daemon does, and judges what reached the sink against the
// service's own truth:
//
//   - Paging: a range read covers every record of exactly [start, end)
//     once: none twice, none missing, every row inside its batch's window.
//   - Cursor: the committed windows, in time order, cover the range with
//     no gap and no overlap; a Count (for a Counter) agrees with what Read
//     gave; a later pass reads only what came since.
//   - Versions: an edited record's new version reaches the sink with a
//     later version value, and nothing else is written again.
//   - Deletions (for a Reconciler): Reconcile of a window after a delete
//     returns the record in Changes.Index.Gone, after an edit its new
//     version in Put; the engine's reconcile writes the tombstone and the
//     new version and updates the index.
//
// A capability a stream lacks (a Counter, a Reconciler, deletions) is
// skipped inside the suite by type assertion, with the reason logged.
package sourcetest

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/sink"
	"github.com/syncd-dev/syncd/internal/state"
	"github.com/syncd-dev/syncd/internal/testkit/clock"
)

// Record is one record as the service holds it now.
type Record struct {
	Key  string
	Time time.Time // the value of the stream's time column
	// Version is the value of the version column when the service says
	// it (zero: unknown to the harness).
	Version time.Time
}

// Service is one running simulator of a source, with the hooks a test
// uses to change it and to read its truth.
type Service interface {
	// Stream is a new stream over the service.
	Stream(t *testing.T) poller.Stream
	// Records is every live record's latest version.
	Records(t *testing.T) []Record
	// Add adds a record at time at and returns its key; a stream whose
	// time is its version time adds it at the service's now instead
	// (Records says where).
	Add(t *testing.T, at time.Time) string
	// Edit makes a new version of the record, at the service's now; false
	// when the record cannot be edited (a cancelled booking).
	Edit(t *testing.T, key string) bool
	// Delete deletes the record; false when the service has no deletion
	// (a cancellation is a version).
	Delete(t *testing.T, key string) bool
}

// Harness starts the services of one source.
type Harness struct {
	// Start starts a fresh service whose data clock is now.
	Start func(t *testing.T, now func() time.Time) Service
	// Window tunes the engine so that a range needs several windows and
	// each window several pages: at most this many records a batch.
	MaxRowsPerBatch int
	// CountsLow is set for a Counter whose counts are a lower bound (the
	// bookings never updated are read by another field than the one
	// counted): the suite then checks Count <= Read, not equality.
	CountsLow bool
}

// T0 is the suite's now when a test starts.
var T0 = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

// Lag is the engine's safety lag in the suite.
const Lag = time.Minute

// Clock is the suite's clock, shared by the service and the engine.
type Clock = clock.Clock

// Row is one row the sink received.
type Row struct {
	Key           string
	Time, Version time.Time
	Deleted       bool
	Batch         string
}

// Batch is one batch the sink committed.
type Batch struct {
	sink.Batch
	Rows []Row
}

// MemSink keeps what it is given in memory (a sink.Sink).
type MemSink struct {
	cols    poller.Columns
	mu      sync.Mutex
	batches []Batch
	done    map[string]bool
}

// NewMemSink reads each batch's rows by the stream's columns.
func NewMemSink(cols poller.Columns) *MemSink {
	return &MemSink{cols: cols, done: map[string]bool{}}
}

// Commit keeps the rows of b; a batch committed already adds nothing.
// Commit gathers the batch's parts into one record.
func (m *MemSink) Commit(ctx context.Context, b sink.Batch, parts sink.Parts) (int64, error) {
	return sink.WithGathered(parts, func(rec arrow.Record) error { return m.commitRecord(ctx, b, rec) })
}

func (m *MemSink) commitRecord(_ context.Context, b sink.Batch, rec arrow.Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.done[b.ID] {
		return nil
	}
	rows, err := readRows(m.cols, rec)
	if err != nil {
		return err
	}
	for i := range rows {
		rows[i].Batch = b.ID
	}
	m.batches = append(m.batches, Batch{Batch: b, Rows: rows})
	m.done[b.ID] = true
	return nil
}

// Committed reports whether b was committed.
func (m *MemSink) Committed(_ context.Context, b sink.Batch) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.done[b.ID], nil
}

// Close does nothing.
func (m *MemSink) Close() error { return nil }

// Batches are the batches committed so far, in order.
func (m *MemSink) Batches() []Batch {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Batch(nil), m.batches...)
}

// Rows are every row committed so far.
func (m *MemSink) Rows() []Row {
	var out []Row
	for _, b := range m.Batches() {
		out = append(out, b.Rows...)
	}
	return out
}

func readRows(cols poller.Columns, rec arrow.Record) ([]Row, error) {
	n := int(rec.NumRows())
	out := make([]Row, n)
	col := func(name string) arrow.Array {
		idx := rec.Schema().FieldIndices(name)
		if len(idx) != 1 {
			return nil
		}
		return rec.Column(idx[0])
	}
	times := func(name string, set func(i int, t time.Time)) {
		ts, ok := col(name).(*array.Timestamp)
		if !ok {
			return
		}
		unit := ts.DataType().(*arrow.TimestampType).Unit
		for i := range n {
			if ts.IsValid(i) {
				set(i, ts.Value(i).ToTime(unit).UTC())
			}
		}
	}
	if keys, ok := col(cols.Key).(*array.String); ok {
		for i := range n {
			out[i].Key = strings.Clone(keys.Value(i)) // Value shares the record's memory, which is reused once released
		}
	}
	times(cols.Time, func(i int, t time.Time) { out[i].Time = t })
	times(cols.Version, func(i int, t time.Time) { out[i].Version = t })
	if del, ok := col("_deleted").(*array.Boolean); ok {
		for i := range n {
			out[i].Deleted = del.IsValid(i) && del.Value(i)
		}
	}
	return out, nil
}

// Committed is one state.Commit the engine made.
type Committed struct {
	Window  state.Interval
	BatchID string
	Rows    int
}

// RecordingStore is a state.Store that records every Commit it accepts.
type RecordingStore struct {
	state.Store
	mu      sync.Mutex
	commits []Committed
}

// Commit records c once the store accepted it.
func (r *RecordingStore) Commit(ctx context.Context, key string, c state.Commit) error {
	if err := r.Store.Commit(ctx, key, c); err != nil {
		return err
	}
	if c.Window.Start.IsZero() && c.Window.End.IsZero() {
		return nil // the index's start, no window
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.commits = append(r.commits, Committed{Window: c.Window, BatchID: c.BatchID, Rows: c.Rows})
	return nil
}

// Commits are the commits recorded so far, in order.
func (r *RecordingStore) Commits() []Committed {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Committed(nil), r.commits...)
}

// env is one service, its stream, and the engine over them.
type env struct {
	clk   *Clock
	svc   Service
	s     poller.Stream
	snk   *MemSink
	store *RecordingStore
	p     *poller.Poller
}

func start(t *testing.T, h Harness) *env {
	t.Helper()
	clk := clock.New(T0)
	svc := h.Start(t, clk.Now)
	s := svc.Stream(t)
	bolt, err := state.OpenBolt(context.Background(), state.BoltOptions{Path: filepath.Join(t.TempDir(), "state.db"), Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bolt.Close() })
	e := &env{clk: clk, svc: svc, s: s, snk: NewMemSink(s.Columns()), store: &RecordingStore{Store: bolt}}
	e.p = poller.New(e.snk, e.store, poller.Options{
		MaxRowsPerBatch: h.MaxRowsPerBatch, SafetyLag: Lag, ChunkRows: 16, SpoolDir: t.TempDir(), Now: clk.Now,
	})
	return e
}

func ok(t *testing.T, what string, res poller.Result) {
	t.Helper()
	if res.Err != nil {
		t.Fatalf("%s: %v", what, res.Err)
	}
}

// Run runs the contract over the services h starts.
func Run(t *testing.T, h Harness) {
	if h.MaxRowsPerBatch <= 0 {
		h.MaxRowsPerBatch = 40
	}
	t.Run("Paging", func(t *testing.T) { testPaging(t, h) })
	t.Run("Cursor", func(t *testing.T) { testCursor(t, h) })
	t.Run("Versions", func(t *testing.T) { testVersions(t, h) })
	t.Run("Deletions", func(t *testing.T) { testDeletions(t, h) })
}
