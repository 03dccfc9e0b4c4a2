package poller

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/syncd-dev/syncd/internal/sink"
	"github.com/syncd-dev/syncd/internal/state"
)

// memStream is a fixed-schema stream held in memory: uid and a version
// time, one version per instant.
type memStream struct {
	times    []time.Time // sorted
	requests int64
	mu       sync.Mutex
}

// memStreamBefore is a memStream of n records a minute apart, the last a
// minute before now.
func memStreamBefore(now time.Time, n int) *memStream {
	m := &memStream{}
	for i := range n {
		m.times = append(m.times, now.Add(-time.Duration(n-i)*time.Minute))
	}
	return m
}

// openTestStore opens a state store in the test's folder, closed when the
// test ends.
func openTestStore(t *testing.T) *state.Bolt {
	t.Helper()
	store, err := state.OpenBolt(context.Background(), state.BoltOptions{Path: filepath.Join(t.TempDir(), "state.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store
}

var memStreamSchema = arrow.NewSchema([]arrow.Field{
	{Name: "uid", Type: arrow.BinaryTypes.String},
	{Name: "_version_time", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
	{Name: "_batch_id", Type: arrow.BinaryTypes.String},
}, nil)

func (m *memStream) Key() string   { return "mem/versions" }
func (m *memStream) Table() string { return "versions" }
func (m *memStream) Columns() Columns {
	return Columns{Time: "_version_time", Key: "uid", Version: "_version_time"}
}
func (m *memStream) Requests() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.requests
}

func (m *memStream) Count(_ context.Context, start, end time.Time) (int, error) {
	m.mu.Lock()
	m.requests++
	m.mu.Unlock()
	n := 0
	for _, t := range m.times {
		if !t.Before(start) && t.Before(end) {
			n++
		}
	}
	return n, nil
}

func (m *memStream) Read(_ context.Context, w Window, rows *Rows) error {
	start, end, lin, chunkRows := w.Start, w.End, rows.Lineage(), 64
	emit := rows.Record
	b := array.NewRecordBuilder(rows.Allocator(), memStreamSchema)
	defer b.Release()
	flush := func() error {
		rec := b.NewRecordBatch()
		defer rec.Release()
		if rec.NumRows() == 0 {
			return nil
		}
		return emit(rec)
	}
	for i, t := range m.times {
		if t.Before(start) || !t.Before(end) {
			continue
		}
		b.Field(0).(*array.StringBuilder).Append(time.Duration(i).String())
		b.Field(1).(*array.TimestampBuilder).Append(arrow.Timestamp(t.UnixMicro()))
		b.Field(2).(*array.StringBuilder).Append(lin.BatchID)
		if b.Field(0).Len() >= chunkRows {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

// chunkSink is a sink that records the chunks its parts stream.
type chunkSink struct {
	mu       sync.Mutex
	chunks   int
	maxChunk int64
	rows     int64
	done     map[string]bool
}

func (s *chunkSink) Commit(_ context.Context, b sink.Batch, parts sink.Parts) (int64, error) {
	recs := parts.Records()
	s.mu.Lock()
	defer s.mu.Unlock()
	err := recs.Each(func(rec arrow.Record) error {
		s.chunks++
		s.maxChunk = max(s.maxChunk, rec.NumRows())
		s.rows += rec.NumRows()
		return nil
	})
	s.done[b.ID] = true
	return recs.Rows * 10, err
}

func (s *chunkSink) Committed(_ context.Context, b sink.Batch) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done[b.ID], nil
}
func (s *chunkSink) Close() error { return nil }

// A fixed-schema stream runs through the same path as a form: a window
// larger than a chunk is spooled and streamed to the sink chunk by chunk
// (never one record in memory), and the bytes written are counted.
func TestStreamWindowsAreSpooledAndCounted(t *testing.T) {
	ctx := context.Background()
	store := openTestStore(t)
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	src := memStreamBefore(now, 1000)
	snk := &chunkSink{done: map[string]bool{}}
	p := New(snk, store, Options{ChunkRows: 64, MaxRowsPerBatch: 600, SpoolDir: t.TempDir(), Now: func() time.Time { return now }})
	res := p.Sync(ctx, src, time.Time{})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if res.Rows != 1000 || snk.rows != 1000 {
		t.Fatalf("rows: result %d, sink %d; want 1000", res.Rows, snk.rows)
	}
	if snk.maxChunk > 64 || snk.chunks < 1000/64 {
		t.Errorf("the sink got %d chunks of at most %d rows; want chunks of at most 64 rows", snk.chunks, snk.maxChunk)
	}
	if res.Batches < 2 {
		t.Errorf("%d batches: a stream of 1000 versions with at most 600 a batch is cut in two or more", res.Batches)
	}
	if res.Bytes != 10000 {
		t.Errorf("bytes written: %d, want the 10000 the sink reported", res.Bytes)
	}
	st, err := store.Get(ctx, src.Key())
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Intents) != 0 || len(st.Committed) != 1 || st.Batches != int64(res.Batches) {
		t.Errorf("state after the pass: %d intents, windows %v, %d batches", len(st.Intents), st.Committed, st.Batches)
	}
}

// plannedStream plans a gap as an empty first half (committed without a
// batch) and a second half that is read.
type plannedStream struct{ *memStream }

func (s plannedStream) Plan(_ context.Context, gap state.Interval, _ Cutter, emit func(Window) error) error {
	mid := gap.Start.Add(gap.End.Sub(gap.Start) / 2).Truncate(time.Millisecond)
	if err := emit(Window{Start: gap.Start, End: mid, Empty: true}); err != nil {
		return err
	}
	return emit(Window{Start: mid, End: gap.End, Count: -1})
}

// failingSink refuses every commit while fail is set.
type failingSink struct {
	*chunkSink
	fail bool
}

func (s *failingSink) Commit(ctx context.Context, b sink.Batch, parts sink.Parts) (int64, error) {
	if s.fail {
		return 0, errors.New("disk full")
	}
	return s.chunkSink.Commit(ctx, b, parts)
}

// A pass that committed an empty range and then failed to write is no
// success: the state says when the last pass that ended well ended, never
// when the last commit was.
func TestOnlyAPassThatEndedWellIsASuccess(t *testing.T) {
	ctx := context.Background()
	store := openTestStore(t)
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	src := plannedStream{&memStream{times: []time.Time{now.Add(-time.Hour), now.Add(-time.Minute)}}}
	snk := &failingSink{chunkSink: &chunkSink{done: map[string]bool{}}, fail: true}
	p := New(snk, store, Options{ChunkRows: 1, Now: func() time.Time { return now }})
	start := now.Add(-48 * time.Hour)
	if res := p.Sync(ctx, src, start); res.Err == nil {
		t.Fatal("a pass whose sink refused every commit succeeded")
	}
	st, err := store.Get(ctx, src.Key())
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Committed) == 0 || !st.LastSuccess.IsZero() || !strings.Contains(st.LastError, "disk full") {
		t.Fatalf("after a failed pass that committed an empty range: committed %v, last success %v, last error %q; want the range, no success, the error",
			st.Committed, st.LastSuccess, st.LastError)
	}
	snk.fail = false
	if res := p.Sync(ctx, src, start); res.Err != nil {
		t.Fatal(res.Err)
	}
	if st, _ = store.Get(ctx, src.Key()); !st.LastSuccess.Equal(now) || st.LastError != "" {
		t.Errorf("after a pass that ended well: last success %v, last error %q", st.LastSuccess, st.LastError)
	}
}

// windowsSeen is a memStream that keeps the windows it is asked to read.
type windowsSeen struct {
	*memStream
	seen []Window
}

func (w *windowsSeen) Read(ctx context.Context, win Window, rows *Rows) error {
	w.mu.Lock()
	w.seen = append(w.seen, win)
	w.mu.Unlock()
	return w.memStream.Read(ctx, win, rows)
}

// A stream cut by its counts hands each window its own count (not the
// count of the rest of the gap it was cut from), or a bound when the count
// is unknown: what the window's memory is sized by.
func TestCountedWindowsCarryTheirCounts(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	src := &windowsSeen{memStream: memStreamBefore(now, 1000)}
	p := New(&chunkSink{done: map[string]bool{}}, openTestStore(t), Options{ChunkRows: 64, MaxRowsPerBatch: 300, SpoolDir: t.TempDir(), Now: func() time.Time { return now }})
	if res := p.Sync(ctx, src, time.Time{}); res.Err != nil {
		t.Fatal(res.Err)
	}
	if len(src.seen) < 4 {
		t.Fatalf("%d windows read; 1000 records at most 300 a batch take at least 4", len(src.seen))
	}
	for _, w := range src.seen {
		n, _ := src.Count(ctx, w.Start, w.End)
		switch {
		case w.Count >= 0 && w.Count != n:
			t.Errorf("window [%s, %s) holds %d records, its Count says %d", w.Start, w.End, n, w.Count)
		case w.Count < 0 && (w.AtMost <= 0 || n > w.AtMost):
			t.Errorf("window [%s, %s) holds %d records, of unknown count and bound %d", w.Start, w.End, n, w.AtMost)
		}
	}
}
