package poller

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/syncd-dev/syncd/internal/forms"
	"github.com/syncd-dev/syncd/internal/sink"
	"github.com/syncd-dev/syncd/internal/state"
)

// memSource is one form held in memory; afterDate and beforeDate exclude
// their instants.
type memSource struct {
	mu   sync.Mutex
	subs []forms.Submission // sorted by time
}

func (m *memSource) add(times ...time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, t := range times {
		m.subs = append(m.subs, forms.Submission{SubmissionID: fmt.Sprintf("s%05d", len(m.subs)), SubmissionTime: t.UTC()})
	}
	sort.SliceStable(m.subs, func(i, j int) bool { return m.subs[i].SubmissionTime.Before(m.subs[j].SubmissionTime) })
}

func (m *memSource) GetForm(_ context.Context, formID string) (*forms.Form, error) {
	return &forms.Form{ID: formID, Name: "Span", Questions: []forms.Field{{ID: "q1", Name: "Name", Type: "ShortAnswer"}}}, nil
}

func (m *memSource) ListSubmissions(_ context.Context, _ string, p forms.ListParams) (*forms.SubmissionPage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var in []forms.Submission
	for _, s := range m.subs {
		if (p.AfterDate == nil || s.SubmissionTime.After(*p.AfterDate)) && (p.BeforeDate == nil || s.SubmissionTime.Before(*p.BeforeDate)) {
			in = append(in, s)
		}
	}
	page := &forms.SubmissionPage{TotalResponses: len(in)}
	if p.Offset < len(in) {
		page.Responses = in[p.Offset:min(len(in), p.Offset+max(p.Limit, 1))]
	}
	return page, nil
}

// memSink records the batches committed, and spans days when told to.
type memSink struct {
	span    bool
	mu      sync.Mutex
	batches []sink.Batch
	rows    map[string]int // submission id -> times committed
	perRows []int
}

type spanningSink struct{ *memSink }

func (s spanningSink) BatchesSpanDays() bool { return s.span }

func (s *memSink) Commit(_ context.Context, b sink.Batch, rec arrow.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batches = append(s.batches, b)
	s.perRows = append(s.perRows, int(rec.NumRows()))
	ids := rec.Column(rec.Schema().FieldIndices("submission_id")[0]).(*array.String)
	for i := 0; i < ids.Len(); i++ {
		s.rows[ids.Value(i)]++
	}
	return nil
}

func (s *memSink) Committed(context.Context, sink.Batch) (bool, error) { return false, nil }
func (s *memSink) Close() error                                        { return nil }

// TestWindowsSpanDaysOnlyForSinksThatTakeThem plans the same history for a
// sink that writes one partition per batch (Parquet: every batch inside one
// UTC day, as before) and for one that partitions by the column itself
// (BigQuery: one batch per pass when the gap holds at most
// MaxRowsPerBatch, and loads near that bound when it holds more).
func TestWindowsSpanDaysOnlyForSinksThatTakeThem(t *testing.T) {
	day0 := time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)
	spread := func(n int, from time.Time, over time.Duration) []time.Time {
		out := make([]time.Time, n)
		for i := range out {
			out[i] = from.Add(over * time.Duration(i) / time.Duration(n)).Add(time.Millisecond)
		}
		return out
	}
	cases := []struct {
		name        string
		span        bool
		rows        int
		maxRows     int
		backfill    int // concurrency; 0 runs the live pass
		wantBatches func(n int) bool
	}{
		{name: "day partitions, small gap", rows: 300, maxRows: 1000, wantBatches: func(n int) bool { return n == 5 }},
		{name: "day partitions, large gap", rows: 3000, maxRows: 400, wantBatches: func(n int) bool { return n >= 10 }},
		{name: "column partitions, small gap", span: true, rows: 300, maxRows: 1000, wantBatches: func(n int) bool { return n == 1 }},
		{name: "column partitions, large gap", span: true, rows: 3000, maxRows: 1000, wantBatches: func(n int) bool { return n >= 3 && n <= 4 }},
		{name: "column partitions, backfill", span: true, rows: 3000, maxRows: 1000, backfill: 3, wantBatches: func(n int) bool { return n >= 3 && n <= 4 }},
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
			mem := &memSink{span: tc.span, rows: map[string]int{}}
			var snk sink.Sink = mem
			if tc.span {
				snk = spanningSink{mem}
			}
			now := day0.AddDate(0, 0, 6).Add(-2 * time.Hour)
			p := New(src, snk, store, Options{MaxRowsPerBatch: tc.maxRows, SafetyLag: time.Nanosecond, Now: func() time.Time { return now }})
			job := Job{FormID: "fSpan"}
			var res Result
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
				if !tc.span && b.WindowEnd.After(nextMidnight(b.WindowStart)) {
					t.Errorf("batch %s of a day-partitioned sink crosses midnight: [%s, %s)", b.ID, b.WindowStart, b.WindowEnd)
				}
				if !b.Day.Equal(dayStart(b.WindowStart)) {
					t.Errorf("batch %s has day %s, window start %s", b.ID, b.Day, b.WindowStart)
				}
			}

			// New submissions on both sides of a midnight: the next pass
			// commits one batch to a spanning sink, one a day otherwise.
			before := len(mem.batches)
			src.add(now.Add(90*time.Minute), now.Add(150*time.Minute))
			now = now.Add(4 * time.Hour)
			if res := p.Sync(ctx, job); res.Err != nil {
				t.Fatal(res.Err)
			}
			want := 2
			if tc.span {
				want = 1
			}
			if got := len(mem.batches) - before; got != want {
				t.Errorf("a pass over new submissions of two days committed %d batches, want %d", got, want)
			}
			if len(mem.rows) != tc.rows+2 {
				t.Errorf("%d submissions committed, want %d", len(mem.rows), tc.rows+2)
			}
		})
	}
}

func TestSplitAt(t *testing.T) {
	a := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name           string
		b              time.Time
		count, maxRows int
		want           time.Time
	}{
		{"proportional", a.Add(100 * time.Second), 1000, 100, a.Add(9 * time.Second)},
		{"a millisecond window", a.Add(time.Millisecond), 1000, 100, a.Add(time.Millisecond)},
		{"guess below a millisecond falls back to halves", a.Add(10 * time.Millisecond), 1_000_000, 10, a.Add(5 * time.Millisecond)},
		{"count within target halves", a.Add(10 * time.Second), 90, 100, a.Add(5 * time.Second)},
	}
	for _, tc := range cases {
		if got := splitAt(a, tc.b, tc.count, tc.maxRows); !got.Equal(tc.want) {
			t.Errorf("%s: splitAt = %s, want %s", tc.name, got, tc.want)
		}
	}
}
