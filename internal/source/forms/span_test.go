package forms

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/sink"
	api "github.com/syncd-dev/syncd/internal/source/forms/api"
	"github.com/syncd-dev/syncd/internal/state"
)

// memSource is one form held in memory; afterDate and beforeDate exclude
// their instants.
type memSource struct {
	mu   sync.Mutex
	subs []api.Submission // sorted by time
}

func (m *memSource) add(times ...time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, t := range times {
		m.subs = append(m.subs, api.Submission{SubmissionID: fmt.Sprintf("s%05d", len(m.subs)), SubmissionTime: t.UTC()})
	}
	sort.SliceStable(m.subs, func(i, j int) bool { return m.subs[i].SubmissionTime.Before(m.subs[j].SubmissionTime) })
}

func (m *memSource) GetForm(_ context.Context, formID string) (*api.Form, error) {
	return &api.Form{ID: formID, Name: "Span", Questions: []api.Field{{ID: "q1", Name: "Name", Type: "ShortAnswer"}}}, nil
}

func (m *memSource) ListSubmissions(_ context.Context, _ string, p api.ListParams) (*api.SubmissionPage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var in []api.Submission
	for _, s := range m.subs {
		if (p.AfterDate == nil || s.SubmissionTime.After(*p.AfterDate)) && (p.BeforeDate == nil || s.SubmissionTime.Before(*p.BeforeDate)) {
			in = append(in, s)
		}
	}
	page := &api.SubmissionPage{TotalResponses: len(in)}
	if p.Offset < len(in) {
		page.Responses = in[p.Offset:min(len(in), p.Offset+max(p.Limit, 1))]
	}
	return page, nil
}

// memSink records the batches committed.
type memSink struct {
	mu      sync.Mutex
	batches []sink.Batch
	rows    map[string]int // submission id -> times committed
	perRows []int
}

// Commit gathers the batch's parts into one record.
func (s *memSink) Commit(ctx context.Context, b sink.Batch, parts sink.Parts) (int64, error) {
	return sink.WithGathered(parts, func(rec arrow.Record) error { return s.commitRecord(ctx, b, rec) })
}

func (s *memSink) commitRecord(_ context.Context, b sink.Batch, rec arrow.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batches = append(s.batches, b)
	s.perRows = append(s.perRows, int(rec.NumRows()))
	s.count(rec)
	return nil
}

func (s *memSink) count(rec arrow.Record) {
	ids := rec.Column(rec.Schema().FieldIndices("submission_id")[0]).(*array.String)
	for i := 0; i < ids.Len(); i++ {
		s.rows[strings.Clone(ids.Value(i))]++ // Value shares the record's memory, reused once released
	}
}

func (s *memSink) Committed(context.Context, sink.Batch) (bool, error) { return false, nil }
func (s *memSink) Close() error                                        { return nil }

// partSink is a memSink that partitions by the batch's layout, as the
// Parquet sinks do, and records every part it is handed.
type partSink struct {
	*memSink
	files map[string]int // partition -> files written
}

// WritesFilePerPartition marks the sink.Partitioner capability.
func (s *partSink) WritesFilePerPartition() {}

func (s *partSink) Commit(_ context.Context, b sink.Batch, parts sink.Parts) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batches = append(s.batches, b)
	n := 0
	for i, p := range parts {
		if p.Key != b.Parts[i] {
			return 0, fmt.Errorf("part %d is %s, the batch lists %s", i, p.Key, b.Parts[i])
		}
		s.files[p.Key]++
		err := p.Records.Each(func(rec arrow.Record) error {
			times := rec.Column(rec.Schema().FieldIndices("submission_time")[0]).(*array.Timestamp)
			for j := 0; j < times.Len(); j++ {
				if got := b.Layout.PartitionOf(times.Value(j).ToTime(arrow.Microsecond)); got != p.Key {
					return fmt.Errorf("a row of %s in part %s", got, p.Key)
				}
			}
			n += int(rec.NumRows())
			s.count(rec)
			return nil
		})
		if err != nil {
			return 0, err
		}
	}
	s.perRows = append(s.perRows, n)
	return 0, nil
}

// countingMem counts the requests a memSource answers.
type countingMem struct {
	*memSource
	requests atomic.Int64 // windows are fetched concurrently
}

func (c *countingMem) GetForm(ctx context.Context, id string) (*api.Form, error) {
	c.requests.Add(1)
	return c.memSource.GetForm(ctx, id)
}

func (c *countingMem) ListSubmissions(ctx context.Context, id string, p api.ListParams) (*api.SubmissionPage, error) {
	c.requests.Add(1)
	return c.memSource.ListSubmissions(ctx, id, p)
}

func spread(n int, from time.Time, over time.Duration) []time.Time {
	out := make([]time.Time, n)
	for i := range out {
		out[i] = from.Add(time.Duration(float64(over) * float64(i) / float64(n))).Add(time.Millisecond)
	}
	return out
}

// TestWindowsAreBoundedByRows plans the same history for a sink that takes
// a batch whole (BigQuery) and one that writes a file per day partition
// (Parquet): one batch when the gap holds at most MaxRowsPerBatch, batches
// near that bound when it holds more, every submission once, and for the
// partitioned sink at most one file per day per pass.
func TestWindowsAreBoundedByRows(t *testing.T) {
	day0 := time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name        string
		parts       bool
		rows        int
		maxRows     int
		backfill    int // concurrency; 0 runs the live pass
		wantBatches func(n int) bool
	}{
		{name: "whole batches, small gap", rows: 300, maxRows: 1000, wantBatches: func(n int) bool { return n == 1 }},
		{name: "whole batches, large gap", rows: 3000, maxRows: 1000, wantBatches: func(n int) bool { return n >= 3 && n <= 5 }},
		{name: "whole batches, backfill", rows: 3000, maxRows: 1000, backfill: 3, wantBatches: func(n int) bool { return n >= 3 && n <= 5 }},
		{name: "day parts, small gap", parts: true, rows: 300, maxRows: 1000, wantBatches: func(n int) bool { return n == 1 }},
		{name: "day parts, large gap", parts: true, rows: 3000, maxRows: 1000, wantBatches: func(n int) bool { return n >= 3 && n <= 6 }},
		{name: "day parts, days larger than a batch", parts: true, rows: 3000, maxRows: 250, wantBatches: func(n int) bool { return n >= 12 && n <= 20 }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			src := &memSource{}
			src.add(spread(tc.rows, day0, 5*24*time.Hour)...)
			store, err := state.OpenBolt(ctx, state.BoltOptions{Path: filepath.Join(t.TempDir(), "s.db")})
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			mem := &memSink{rows: map[string]int{}}
			var snk sink.Sink = mem
			ps := &partSink{memSink: mem, files: map[string]int{}}
			if tc.parts {
				snk = ps
			}
			now := day0.AddDate(0, 0, 6).Add(-2 * time.Hour)
			p := newTestPoller(src, snk, store, poller.Options{MaxRowsPerBatch: tc.maxRows, SafetyLag: time.Nanosecond, Now: func() time.Time { return now }, Layout: sink.LayoutDay})
			job := poller.Job{Stream: "fSpan"}
			var res poller.Result
			if tc.backfill > 0 {
				res = p.Backfill(ctx, job, day0, now, tc.backfill, nil)
			} else {
				res = p.Sync(ctx, job)
			}
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			if len(mem.rows) != tc.rows {
				t.Errorf("%d submissions committed, want %d", len(mem.rows), tc.rows)
			}
			for id, n := range mem.rows {
				if n != 1 {
					t.Errorf("submission %s committed %d times", id, n)
				}
			}
			t.Logf("%d batches of %v rows", len(mem.batches), mem.perRows)
			if !tc.wantBatches(len(mem.batches)) {
				t.Errorf("%d batches for %d submissions at most %d a batch", len(mem.batches), tc.rows, tc.maxRows)
			}
			for i, b := range mem.batches {
				if mem.perRows[i] > tc.maxRows {
					t.Errorf("batch %s holds %d rows, more than %d", b.ID, mem.perRows[i], tc.maxRows)
				}
			}
			if tc.parts {
				// 600 submissions a day: a day holds more than a batch only
				// when maxRows is below 600.
				for day, n := range ps.files {
					if n > 1 && tc.maxRows >= 600 {
						t.Errorf("partition %s got %d files in one pass", day, n)
					}
				}
			}

			// New submissions on both sides of a midnight: the next pass
			// commits them in one batch (in one file per day when parted).
			before := len(mem.batches)
			src.add(now.Add(90*time.Minute), now.Add(150*time.Minute))
			now = now.Add(4 * time.Hour)
			if res := p.Sync(ctx, job); res.Err != nil {
				t.Fatal(res.Err)
			}
			if got := len(mem.batches) - before; got != 1 {
				t.Errorf("a pass over new submissions of two days committed %d batches, want 1", got)
			}
			if last := mem.batches[len(mem.batches)-1]; tc.parts && len(last.Parts) != 2 {
				t.Errorf("the batch of two days has parts %v, want two", last.Parts)
			}
			if len(mem.rows) != tc.rows+2 {
				t.Errorf("%d submissions committed, want %d", len(mem.rows), tc.rows+2)
			}
		})
	}
}

// TestRequestsNearTheMinimum: a form's first sync costs at most
// 1.1 x (ceil(n/150) + 1) + 4 requests, sparse or dense; a pass with
// nothing new one request; a pass with a few new ones at most three.
func TestRequestsNearTheMinimum(t *testing.T) {
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name  string
		n     int
		over  time.Duration
		parts bool
	}{
		{"300 over 5 years", 300, 5 * 365 * 24 * time.Hour, true},
		{"2000 over 2 years", 2000, 2 * 365 * 24 * time.Hour, true},
		{"100 over 1 year", 100, 365 * 24 * time.Hour, true},
		{"40000 over 70 days", 40000, 70 * 24 * time.Hour, true},
		{"40000 over 70 days, whole batches", 40000, 70 * 24 * time.Hour, false},
		{"150 exactly", 150, 30 * 24 * time.Hour, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			src := &countingMem{memSource: &memSource{}}
			src.add(spread(tc.n, now.Add(-tc.over-time.Hour), tc.over)...)
			store, err := state.OpenBolt(ctx, state.BoltOptions{Path: filepath.Join(t.TempDir(), "s.db")})
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			mem := &memSink{rows: map[string]int{}}
			var snk sink.Sink = mem
			if tc.parts {
				snk = &partSink{memSink: mem, files: map[string]int{}}
			}
			clock := now
			p := newTestPoller(src, snk, store, poller.Options{MaxRowsPerBatch: 10000, Now: func() time.Time { return clock }})
			job := poller.Job{Stream: "fReq"}
			if res := p.Sync(ctx, job); res.Err != nil {
				t.Fatal(res.Err)
			}
			ideal := (tc.n+149)/150 + 1
			limit := int(1.1*float64(ideal)) + 4
			t.Logf("first sync: %d requests, ideal %d, limit %d", src.requests.Load(), ideal, limit)
			if n := int(src.requests.Load()); n > limit {
				t.Errorf("first sync of %d submissions made %d requests, more than %d (ideal %d)", tc.n, n, limit, ideal)
			}
			if len(mem.rows) != tc.n {
				t.Errorf("%d submissions committed, want %d", len(mem.rows), tc.n)
			}

			src.requests.Store(0)
			clock = clock.Add(15 * time.Minute)
			if res := p.Sync(ctx, job); res.Err != nil {
				t.Fatal(res.Err)
			}
			if n := src.requests.Load(); n != 1 {
				t.Errorf("a pass with nothing new made %d requests, want 1", n)
			}

			src.requests.Store(0)
			src.add(clock.Add(time.Minute), clock.Add(2*time.Minute), clock.Add(3*time.Minute))
			clock = clock.Add(15 * time.Minute)
			if res := p.Sync(ctx, job); res.Err != nil {
				t.Fatal(res.Err)
			}
			if n := src.requests.Load(); n > 3 {
				t.Errorf("a pass with 3 new submissions made %d requests, want at most 3", n)
			}
			if len(mem.rows) != tc.n+3 {
				t.Errorf("%d submissions committed, want %d", len(mem.rows), tc.n+3)
			}
		})
	}
}

// TestPlanBoundsWindowsOfUnknownCount: a window the engine's split cut back
// to a partition's start (its count unknown) carries the batch bound, which
// sizes its read; a window the split counted carries its count.
func TestPlanBoundsWindowsOfUnknownCount(t *testing.T) {
	src := &memSource{}
	t0 := time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)
	for i := range 500 {
		src.add(t0.Add(time.Duration(i) * time.Hour))
	}
	for _, splitCount := range []int{-1, 42} {
		cut := poller.Cutter{MaxRows: 100, Split: func(a, lo, b time.Time, total int, count func(time.Time) (int, error)) (time.Time, int, error) {
			return a.Add(24 * time.Hour), splitCount, nil
		}}
		var got []poller.Window
		err := NewStream(src, "f", "t", StreamOptions{}).Plan(context.Background(), state.Interval{Start: t0, End: t0.Add(30 * 24 * time.Hour)}, cut, func(w poller.Window) error {
			got = append(got, w)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) < 2 {
			t.Fatalf("split count %d: %d windows planned, want several", splitCount, len(got))
		}
		for _, w := range got[:len(got)-1] { // the last holds at most a batch and is counted
			if w.Count != splitCount || (splitCount < 0) != (w.AtMost == cut.MaxRows) {
				t.Errorf("split count %d: window [%s, %s) planned with count %d, bound %d", splitCount, w.Start, w.End, w.Count, w.AtMost)
			}
		}
	}
}
