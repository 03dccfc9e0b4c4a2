package webhook

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// recheckRuns is a Run that records the windows each pass was given and
// answers with the outcome missed makes of them.
type recheckRuns struct {
	got    chan []Window
	missed func([]Window) []Window // nil: every window committed
	fail   int                     // passes that fail first
	mu     sync.Mutex
	runs   int
}

func newRecheckRuns() *recheckRuns { return &recheckRuns{got: make(chan []Window, 100)} }

func (r *recheckRuns) Run(_ context.Context, _ Stream, recheck []Window) Outcome {
	r.mu.Lock()
	r.runs++
	ok := r.runs > r.fail
	r.mu.Unlock()
	r.got <- slices.Clone(recheck)
	out := Outcome{OK: ok}
	if ok && r.missed != nil {
		out.Missed = r.missed(recheck)
	}
	return out
}

func (r *recheckRuns) next(t *testing.T) []Window {
	t.Helper()
	select {
	case w := <-r.got:
		return w
	case <-time.After(10 * time.Second):
		t.Fatal("no pass started")
		return nil
	}
}

func (r *recheckRuns) none(t *testing.T) {
	t.Helper()
	select {
	case w := <-r.got:
		t.Fatalf("another pass started, with %v", w)
	case <-time.After(100 * time.Millisecond):
	}
}

func TestBellCarriesAnnouncedTimes(t *testing.T) {
	f1 := Stream{Account: "a", Source: "forms", Stream: "f1"}
	day := time.Date(2023, 6, 1, 12, 0, 0, 0, time.UTC)
	ms := time.Millisecond
	w := func(a, b time.Time) Window { return Window{Start: a, End: b} }
	tests := []struct {
		name      string
		announced []time.Time // one delivery each; zero: the delivery names no time
		want      [][]Window  // per pass
	}{
		{"no announced time", []time.Time{{}}, [][]Window{nil}},
		{"one delivery: its millisecond", []time.Time{day}, [][]Window{{w(day, day.Add(ms))}}},
		{"sub-millisecond time: floored", []time.Time{day.Add(400 * time.Microsecond)}, [][]Window{{w(day, day.Add(ms))}}},
		{"a duplicate: one window", []time.Time{day, day}, [][]Window{{w(day, day.Add(ms))}}},
		{"close times: joined", []time.Time{day.Add(5 * time.Minute), day, {}}, [][]Window{{w(day, day.Add(5*time.Minute+ms))}}},
		{"far apart: two windows", []time.Time{day, day.Add(time.Hour)},
			[][]Window{{w(day, day.Add(ms)), w(day.Add(time.Hour), day.Add(time.Hour+ms))}}},
		{"across midnight: one window per day", []time.Time{day.Add(12*time.Hour - ms), day.Add(12 * time.Hour)},
			[][]Window{{w(day.Add(12*time.Hour-ms), day.Add(12*time.Hour)), w(day.Add(12*time.Hour), day.Add(12*time.Hour+ms))}}},
		{"a time years back costs its millisecond", []time.Time{day.AddDate(-30, 0, 0)},
			[][]Window{{w(day.AddDate(-30, 0, 0), day.AddDate(-30, 0, 0).Add(ms))}}},
	}
	// More days than a pass re-reads: the next pass takes the others.
	var many []time.Time
	var first, second []Window
	for i := range maxRecheck + 4 {
		d := day.AddDate(0, 0, -i)
		many = append(many, d)
		if i < 4 {
			first = append(first, w(day.AddDate(0, 0, -(maxRecheck+3-i)), day.AddDate(0, 0, -(maxRecheck+3-i)).Add(ms)))
		}
	}
	for i := maxRecheck - 1; i >= 0; i-- {
		d := day.AddDate(0, 0, -i)
		second = append(second, w(d, d.Add(ms)))
	}
	// Oldest first: the first pass takes the 16 oldest days.
	first, second = append(first, second[:maxRecheck-4]...), second[maxRecheck-4:]
	tests = append(tests, struct {
		name      string
		announced []time.Time
		want      [][]Window
	}{"more days than one pass takes", many, [][]Window{first, second}})

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, r := newClock(), newRecheckRuns()
			b := &Bell{Lag: time.Second, Debounce: 100 * time.Millisecond, Retry: time.Second, Run: r.Run, Now: c.Now, After: c.After}
			b.Start(context.Background())
			defer b.Close()
			for _, a := range tt.announced {
				b.Ring(f1, c.Now(), a)
			}
			c.fire(t, 2*time.Second)
			for i, want := range tt.want {
				if got := r.next(t); !slices.Equal(got, want) {
					t.Errorf("pass %d re-reads %v, want %v", i+1, got, want)
				}
			}
			r.none(t)
		})
	}
}

// TestBellAnnouncedNotYetCovered: a time is handed to a pass only once the
// pass covers every delivery that announced it (the service lists a record
// only after the safety lag); the delivery waiting for it is then sampled
// by the pass that re-reads its time, not before.
func TestBellAnnouncedNotYetCovered(t *testing.T) {
	f1 := Stream{Account: "a", Source: "forms", Stream: "f1"}
	old := time.Date(2023, 6, 1, 12, 0, 0, 0, time.UTC)
	c, r := newClock(), newRecheckRuns()
	var samples latencyCount
	b := &Bell{Lag: time.Second, Retry: time.Second, Run: r.Run, Now: c.Now, After: c.After,
		Latency: samples.observe}
	b.Start(context.Background())
	defer b.Close()
	b.Ring(f1, c.Now(), time.Time{})
	c.advance(500 * time.Millisecond)
	b.Ring(f1, c.Now(), old) // covered only half a second after the first
	c.fire(t, 600*time.Millisecond)
	if got := r.next(t); got != nil {
		t.Errorf("the first pass re-reads %v before the announcing delivery's lag has passed", got)
	}
	c.fire(t, time.Second)
	if got, want := r.next(t), []Window{{Start: old, End: old.Add(time.Millisecond)}}; !slices.Equal(got, want) {
		t.Errorf("the second pass re-reads %v, want %v", got, want)
	}
	r.none(t)
	if samples.n() != 2 {
		t.Errorf("%d latency samples, want 2 (one per pass)", samples.n())
	}
}

// TestBellLatencyOnlyWhenCommitted: a delivery whose announced time the
// pass did not commit (Missed) gets no latency sample; the others do. A
// failed pass hands the same windows to its retry.
func TestBellLatencyOnlyWhenCommitted(t *testing.T) {
	f1 := Stream{Account: "a", Source: "forms", Stream: "f1"}
	behind := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC) // where the index does not reach, say
	fresh := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	c, r := newClock(), newRecheckRuns()
	r.fail = 1
	r.missed = func(ws []Window) []Window {
		return slices.DeleteFunc(slices.Clone(ws), func(w Window) bool { return !w.Start.Equal(behind) })
	}
	var samples latencyCount
	b := &Bell{Lag: time.Second, Retry: time.Second, Run: r.Run, Now: c.Now, After: c.After,
		Latency: samples.observe}
	b.Start(context.Background())
	defer b.Close()
	b.Ring(f1, c.Now(), behind)
	b.Ring(f1, c.Now(), fresh)
	b.Ring(f1, c.Now(), time.Time{})
	c.fire(t, 2*time.Second)
	first := r.next(t) // fails
	c.fire(t, 2*time.Second)
	if retry := r.next(t); !slices.Equal(first, retry) || len(first) != 2 {
		t.Errorf("the retry re-reads %v, the failed pass %v: want the same two windows", retry, first)
	}
	r.none(t)
	if samples.n() != 2 {
		t.Errorf("%d latency samples, want 2: the delivery of the missed window has none", samples.n())
	}
}

// TestBellAnnouncedBounded: past maxAnnounced distinct times per stream,
// the others are left to the scheduled reconcile, logged, and their
// deliveries get no latency sample.
func TestBellAnnouncedBounded(t *testing.T) {
	f1 := Stream{Account: "a", Source: "forms", Stream: "f1"}
	core, logs := observer.New(zap.WarnLevel)
	c, r := newClock(), newRecheckRuns()
	var samples latencyCount
	b := &Bell{Lag: time.Second, Retry: time.Second, Run: r.Run, Now: c.Now, After: c.After, Log: zap.New(core),
		Latency: samples.observe}
	b.Start(context.Background())
	defer b.Close()
	base := time.Date(2023, 6, 1, 0, 0, 0, 0, time.UTC)
	const extra = 10
	for i := range maxAnnounced + extra {
		// A second apart: one window per 10 minutes, 600 times each.
		b.Ring(f1, c.Now(), base.Add(time.Duration(i)*time.Second))
	}
	c.fire(t, 2*time.Second)
	times := 0
	for times < maxAnnounced {
		ws := r.next(t)
		if len(ws) == 0 || len(ws) > maxRecheck {
			t.Fatalf("a pass re-reads %d windows, want 1 to %d", len(ws), maxRecheck)
		}
		for _, w := range ws {
			if w.End.Sub(w.Start) > 24*time.Hour {
				t.Errorf("window %v spans more than a day", w)
			}
			times += int(w.End.Sub(w.Start) / time.Second) // a second apart
			times++
		}
	}
	r.none(t)
	if n := samples.n(); n > maxArrivals {
		t.Errorf("%d latency samples, want at most %d", n, maxArrivals)
	}
	if n := logs.FilterMessageSnippet("left out are re-read by the scheduled reconcile").Len(); n != 1 {
		t.Errorf("%d warnings for the times left out, want 1", n)
	}
}

// TestBellDuplicateAnnouncementWaits: a duplicate delivery of the same
// time holds the time for a pass that covers it too; the first delivery,
// covered by the window earlier, waits with it, and no pass runs before
// then (none every instant until it).
func TestBellDuplicateAnnouncementWaits(t *testing.T) {
	f1 := Stream{Account: "a", Source: "forms", Stream: "f1"}
	old := time.Date(2023, 6, 1, 12, 0, 0, 0, time.UTC)
	c, r := newClock(), newRecheckRuns()
	var samples latencyCount
	b := &Bell{Lag: time.Second, Retry: time.Second, Run: r.Run, Now: c.Now, After: c.After,
		Latency: samples.observe}
	b.Start(context.Background())
	defer b.Close()
	b.Ring(f1, c.Now(), old)
	c.advance(500 * time.Millisecond)
	b.Ring(f1, c.Now(), old) // the duplicate
	c.fire(t, 600*time.Millisecond)
	if got := r.next(t); got != nil {
		t.Errorf("the first pass re-reads %v before the duplicate's lag has passed", got)
	}
	r.none(t) // no pass until the clock reaches the duplicate's
	c.fire(t, time.Second)
	if got, want := r.next(t), []Window{{Start: old, End: old.Add(time.Millisecond)}}; !slices.Equal(got, want) {
		t.Errorf("the second pass re-reads %v, want %v", got, want)
	}
	r.none(t)
	if samples.n() != 2 {
		t.Errorf("%d latency samples, want 2 (both by the second pass)", samples.n())
	}
}

// latencyCount counts the latency samples a Bell reports.
type latencyCount struct {
	mu      sync.Mutex
	samples int
}

func (c *latencyCount) observe(Stream, time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.samples++
}

func (c *latencyCount) n() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.samples
}
