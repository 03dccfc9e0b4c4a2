package sink

import (
	"testing"
	"time"
)

func TestChooseLayout(t *testing.T) {
	at := func(s string) time.Time {
		t.Helper()
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	const target = 50000
	end := at("2026-11-01T00:00:00Z")
	tests := []struct {
		name  string
		first time.Time
		rows  int
		want  Layout
	}{
		{"a sparse form: 300 over six years", at("2021-01-01T00:00:00Z"), 300, LayoutNone},
		{"a batch's worth over years", at("2021-01-01T00:00:00Z"), 50000, LayoutNone},
		{"200,000 over four years: 50,000 a year", at("2022-11-01T00:00:00Z"), 250000, LayoutYear},
		{"a million over two years: 40,000 a month", at("2024-11-01T00:00:00Z"), 1000000, LayoutYear},
		{"two million over two years", at("2024-11-01T00:00:00Z"), 2000000, LayoutMonth},
		{"a burst: 40,000 in the last hour is less than a day's partition", at("2026-10-31T23:00:00Z"), 40000, LayoutNone},
		{"a burst of two batches in an hour fills its day", at("2026-10-31T23:00:00Z"), 100000, LayoutDay},
		{"60,000 a day for 70 days", at("2026-08-23T00:00:00Z"), 70 * 60000, LayoutDay},
		{"no span at all", end, 10, LayoutNone},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ChooseLayout(tc.first, end, tc.rows, target); got != tc.want {
				t.Errorf("ChooseLayout(%s, %s, %d) = %s, want %s", tc.first.Format(time.RFC3339), end.Format(time.RFC3339), tc.rows, got, tc.want)
			}
		})
	}
}

func TestLayoutPartitions(t *testing.T) {
	at := time.Date(2024, 2, 29, 23, 59, 59, 0, time.UTC)
	tests := []struct {
		layout Layout
		part   string
		start  time.Time
	}{
		{LayoutDay, "2024-02-29", time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC)},
		{LayoutMonth, "2024-02", time.Date(2024, 2, 1, 0, 0, 0, 0, time.UTC)},
		{LayoutYear, "2024", time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)},
		{LayoutNone, "", time.Time{}},
	}
	for _, tc := range tests {
		if got := tc.layout.PartitionOf(at); got != tc.part {
			t.Errorf("%s.PartitionOf = %q, want %q", tc.layout, got, tc.part)
		}
		if got := tc.layout.PartitionStart(at); !got.Equal(tc.start) {
			t.Errorf("%s.PartitionStart = %s, want %s", tc.layout, got, tc.start)
		}
		if got := tc.layout.partitions(tc.start, tc.start.Add(time.Nanosecond)); got != 1 {
			t.Errorf("%s: an instant touches %d partitions, want 1", tc.layout, got)
		}
	}
	// [2023-12-31, 2024-03-01) touches 2 years, 3 months and 61 days.
	a, b := time.Date(2023, 12, 31, 0, 0, 0, 0, time.UTC), time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)
	for l, want := range map[Layout]int{LayoutYear: 2, LayoutMonth: 3, LayoutDay: 61, LayoutNone: 1} {
		if got := l.partitions(a, b); got != want {
			t.Errorf("%s.partitions = %d, want %d", l, got, want)
		}
	}
}
