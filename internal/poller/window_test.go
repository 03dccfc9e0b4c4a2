package poller

import (
	"strings"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/sink"
)

func ts(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

func TestBatchID(t *testing.T) {
	a, b := ts("2024-03-01T00:00:00Z"), ts("2024-03-01T12:30:00.250Z")
	tests := []struct {
		form string
		want string
	}{
		{"abc123", "20240301T000000000Z-20240301T123000250Z-abc123"},
		{"_hidden", "20240301T000000000Z-20240301T123000250Z-_hidden"},
		{"ABC-x_9", "20240301T000000000Z-20240301T123000250Z-ABC-x_9"},
	}
	for _, tt := range tests {
		if got := BatchID(tt.form, a, b); got != tt.want {
			t.Errorf("BatchID(%q) = %q, want %q", tt.form, got, tt.want)
		}
	}
	// Unsafe characters are folded but distinct ids stay distinct.
	x, y := BatchID("a/b", a, b), BatchID("a.b", a, b)
	if x == y || strings.ContainsAny(x+y, "/.") {
		t.Errorf("unsafe ids: %q %q", x, y)
	}
	if BatchID("abc123", a, b) != BatchID("abc123", a, b) {
		t.Error("not deterministic")
	}
}

func TestMidpoint(t *testing.T) {
	tests := []struct {
		a, b, want string
	}{
		{"2024-03-01T00:00:00Z", "2024-03-02T00:00:00Z", "2024-03-01T12:00:00Z"},
		{"2024-03-01T00:00:00Z", "2024-03-01T00:00:00.003Z", "2024-03-01T00:00:00.001Z"},
		{"2024-03-01T00:00:00Z", "2024-03-01T00:00:00.002Z", "2024-03-01T00:00:00.001Z"},
		{"2024-03-01T00:00:00Z", "2024-03-01T00:00:00.001Z", "2024-03-01T00:00:00.001Z"}, // cannot split: b
	}
	for _, tt := range tests {
		got := midpoint(ts(tt.a), ts(tt.b))
		if !got.Equal(ts(tt.want)) {
			t.Errorf("midpoint(%s, %s) = %s, want %s", tt.a, tt.b, got, tt.want)
		}
		if got.Before(ts(tt.a)) || got.After(ts(tt.b)) {
			t.Errorf("midpoint outside the window")
		}
	}
}

func TestDayBounds(t *testing.T) {
	tests := []struct{ in, day string }{
		{"2024-03-01T00:00:00Z", "2024-03-01T00:00:00Z"},
		{"2024-03-01T23:59:59.999Z", "2024-03-01T00:00:00Z"},
		{"2024-02-29T10:00:00+05:00", "2024-02-29T00:00:00Z"},
		{"2024-12-31T22:00:00-03:00", "2025-01-01T00:00:00Z"},
	}
	for _, tt := range tests {
		if got := dayStart(ts(tt.in)); !got.Equal(ts(tt.day)) {
			t.Errorf("dayStart(%s) = %s", tt.in, got)
		}
	}
}

// TestSplitBoundsUnknownCounts: a window split cuts back to a partition's
// start counts either exactly what it holds or -1, and then it holds at
// most a batch (what Window.AtMost promises the source).
func TestSplitBoundsUnknownCounts(t *testing.T) {
	const maxRows = 100
	day := 24 * time.Hour
	a := ts("2024-03-01T00:00:00Z")
	spread := func(n int, every time.Duration) []time.Time {
		out := make([]time.Time, n)
		for i := range out {
			out[i] = a.Add(time.Duration(i) * every)
		}
		return out
	}
	tests := []struct {
		name        string
		times       []time.Time
		wantUnknown bool // some window cut back to a day's start
	}{
		{"dense, many a day", spread(1000, 7*time.Minute), true},
		{"sparse, one a day", spread(400, day+time.Minute), true},
		{"a burst in one millisecond", append(spread(50, time.Hour), spread(300, 0)...), false},
		{"a day over a batch", spread(500, 90*time.Second), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			count := func(from, to time.Time) int {
				n := 0
				for _, x := range tc.times {
					if !x.Before(from) && x.Before(to) {
						n++
					}
				}
				return n
			}
			unknown := 0
			for _, partitioned := range []bool{false, true} {
				p := &Poller{opts: Options{MaxRowsPerBatch: maxRows}}
				layout := sink.Layout("")
				if partitioned {
					layout = sink.LayoutDay
				}
				b := tc.times[len(tc.times)-1].Add(time.Millisecond)
				for from := a; from.Before(b); {
					total := count(from, b)
					if total <= maxRows {
						break
					}
					end, n, err := p.split(layout, from, from, b, total, func(x time.Time) (int, error) { return count(from, x), nil })
					if err != nil {
						t.Fatal(err)
					}
					if !end.After(from) {
						t.Fatalf("partitioned %v: split [%s, %s) at %s", partitioned, from, b, end)
					}
					got := count(from, end)
					if n < 0 {
						unknown++
					}
					switch {
					case n >= 0 && n != got:
						t.Errorf("partitioned %v: [%s, %s) counted %d, holds %d", partitioned, from, end, n, got)
					case n < 0 && got > maxRows:
						t.Errorf("partitioned %v: [%s, %s) of unknown count holds %d, over the batch of %d", partitioned, from, end, got, maxRows)
					case n < 0 && !partitioned:
						t.Errorf("[%s, %s): an unknown count without partitions", from, end)
					}
					from = end
				}
			}
			if (unknown > 0) != tc.wantUnknown {
				t.Errorf("%d windows of unknown count; want some: %v", unknown, tc.wantUnknown)
			}
		})
	}
}
