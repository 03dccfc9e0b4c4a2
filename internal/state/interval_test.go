package state

import (
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

var t0 = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

// m is minute k after t0.
func m(k int) time.Time { return t0.Add(time.Duration(k) * time.Minute) }

func iv(a, b int) Interval { return Interval{Start: m(a), End: m(b)} }

// set builds Intervals from start/end minute pairs, as written.
func set(pairs ...int) Intervals {
	var s Intervals
	for k := 0; k+1 < len(pairs); k += 2 {
		s = append(s, iv(pairs[k], pairs[k+1]))
	}
	return s
}

func TestIntervalEmpty(t *testing.T) {
	tests := []struct {
		in   Interval
		want bool
	}{
		{iv(0, 1), false},
		{iv(1, 1), true},
		{iv(2, 1), true},
		{Interval{}, true},
	}
	for _, tt := range tests {
		if got := tt.in.Empty(); got != tt.want {
			t.Errorf("%v.Empty() = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestIntervalsAdd(t *testing.T) {
	tests := []struct {
		name string
		s    Intervals
		add  Interval
		want Intervals
	}{
		{"into empty", nil, iv(1, 2), set(1, 2)},
		{"disjoint before", set(5, 6), iv(1, 2), set(1, 2, 5, 6)},
		{"disjoint after", set(1, 2), iv(5, 6), set(1, 2, 5, 6)},
		{"disjoint between", set(1, 2, 8, 9), iv(4, 5), set(1, 2, 4, 5, 8, 9)},
		{"adjacent on the left", set(5, 6), iv(3, 5), set(3, 6)},
		{"adjacent on the right", set(5, 6), iv(6, 8), set(5, 8)},
		{"fills the hole exactly", set(1, 2, 3, 4), iv(2, 3), set(1, 4)},
		{"overlaps the start", set(5, 9), iv(3, 6), set(3, 9)},
		{"overlaps the end", set(5, 9), iv(8, 12), set(5, 12)},
		{"contained", set(1, 9), iv(3, 4), set(1, 9)},
		{"equal", set(1, 9), iv(1, 9), set(1, 9)},
		{"swallows several", set(2, 3, 4, 5, 6, 7, 10, 11), iv(1, 8), set(1, 8, 10, 11)},
		{"bridges two", set(1, 3, 5, 7), iv(2, 6), set(1, 7)},
		{"empty ignored", set(1, 3), iv(2, 2), set(1, 3)},
		{"empty in a hole ignored", set(1, 3, 5, 7), iv(4, 4), set(1, 3, 5, 7)},
		{"reversed ignored", set(1, 3), iv(6, 4), set(1, 3)},
		{"empty into empty", nil, iv(4, 4), nil},
		{
			"sub-µs and zone normalised: touches after truncation",
			set(1, 2),
			Interval{Start: m(2).Add(999 * time.Nanosecond).In(time.FixedZone("X", 3600)), End: m(3).Add(500 * time.Nanosecond)},
			set(1, 3),
		},
		{
			"shorter than a µs is empty",
			nil,
			Interval{Start: m(2).Add(100 * time.Nanosecond), End: m(2).Add(900 * time.Nanosecond)},
			nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := append(Intervals(nil), tt.s...)
			got := tt.s.Add(tt.add)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("%v.Add(%v) = %v, want %v", tt.s, tt.add, got, tt.want)
			}
			if err := got.check(); err != nil {
				t.Errorf("result not merged: %v", err)
			}
			if !reflect.DeepEqual(tt.s, before) {
				t.Errorf("Add modified its receiver: %v, was %v", tt.s, before)
			}
		})
	}
}

func TestIntervalsGaps(t *testing.T) {
	tests := []struct {
		name string
		s    Intervals
		want Interval
		gaps []Interval
	}{
		{"nothing covered", nil, iv(1, 5), []Interval{iv(1, 5)}},
		{"all covered", set(0, 10), iv(1, 5), nil},
		{"covered exactly", set(1, 5), iv(1, 5), nil},
		{"gap at start", set(3, 10), iv(1, 5), []Interval{iv(1, 3)}},
		{"gap at end", set(0, 3), iv(1, 5), []Interval{iv(3, 5)}},
		{"gap in the middle", set(0, 2, 4, 9), iv(1, 5), []Interval{iv(2, 4)}},
		{"gaps everywhere", set(2, 3, 5, 6), iv(1, 8), []Interval{iv(1, 2), iv(3, 5), iv(6, 8)}},
		{"covered only outside", set(0, 1, 6, 9), iv(1, 6), []Interval{iv(1, 6)}},
		{"empty want", set(0, 1), iv(3, 3), nil},
		{"reversed want", nil, iv(3, 1), nil},
		{"sub-µs want normalised", set(0, 1), Interval{Start: m(0), End: m(1).Add(999 * time.Nanosecond)}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.s.Gaps(tt.want)
			if !reflect.DeepEqual(got, tt.gaps) {
				t.Errorf("%v.Gaps(%v) = %v, want %v", tt.s, tt.want, got, tt.gaps)
			}
		})
	}
}

func TestIntervalsCovers(t *testing.T) {
	s := set(1, 3, 5, 9)
	tests := []struct {
		in   Interval
		want bool
	}{
		{iv(1, 3), true},
		{iv(5, 6), true},
		{iv(6, 9), true},
		{iv(2, 6), false}, // spans the hole
		{iv(0, 2), false},
		{iv(8, 10), false},
		{iv(3, 5), false},
		{iv(4, 4), true}, // empty
		{iv(20, 20), true},
	}
	for _, tt := range tests {
		if got := s.Covers(tt.in); got != tt.want {
			t.Errorf("%v.Covers(%v) = %v, want %v", s, tt.in, got, tt.want)
		}
	}
}

func TestIntervalsTotal(t *testing.T) {
	tests := []struct {
		s    Intervals
		want time.Duration
	}{
		{nil, 0},
		{set(1, 3), 2 * time.Minute},
		{set(1, 3, 5, 9), 6 * time.Minute},
	}
	for _, tt := range tests {
		if got := tt.s.Total(); got != tt.want {
			t.Errorf("%v.Total() = %v, want %v", tt.s, got, tt.want)
		}
	}
}

func TestIntervalsCheck(t *testing.T) {
	tests := []struct {
		name string
		s    Intervals
		ok   bool
	}{
		{"merged", set(1, 2, 3, 4), true},
		{"empty set", nil, true},
		{"touching", set(1, 2, 2, 4), false},
		{"overlapping", set(1, 3, 2, 4), false},
		{"out of order", set(3, 4, 1, 2), false},
		{"empty member", set(1, 1), false},
		{"sub-µs", Intervals{{Start: m(1).Add(time.Nanosecond), End: m(2)}}, false},
	}
	for _, tt := range tests {
		if err := tt.s.check(); (err == nil) != tt.ok {
			t.Errorf("%s: check(%v) = %v, want ok=%v", tt.name, tt.s, err, tt.ok)
		}
	}
}

// TestIntervalsProperty checks Add, Gaps, Covers and Total against a bitmap
// over a small domain of microseconds, after every one of many random adds.
func TestIntervalsProperty(t *testing.T) {
	const domain = 40 // instants 0..domain-1, one µs each
	at := func(k int) time.Time { return t0.Add(time.Duration(k) * time.Microsecond) }
	rng := rand.New(rand.NewPCG(1, 2))
	randIv := func() (int, int, Interval) {
		a, b := rng.IntN(domain+1), rng.IntN(domain+1) // may be empty or reversed
		return a, b, Interval{Start: at(a), End: at(b)}
	}
	for round := 0; round < 300; round++ {
		var s Intervals
		var bits [domain]bool
		for step := 0; step < 1+rng.IntN(12); step++ {
			a, b, add := randIv()
			s = s.Add(add)
			for k := a; k < b; k++ {
				bits[k] = true
			}
			if err := s.check(); err != nil {
				t.Fatalf("round %d step %d: %v not merged: %v", round, step, s, err)
			}
			var fromSet [domain]bool
			for _, c := range s {
				for k := 0; k < domain; k++ {
					fromSet[k] = fromSet[k] || !at(k).Before(c.Start) && at(k).Before(c.End)
				}
			}
			if fromSet != bits {
				t.Fatalf("round %d step %d: set %v holds %v, want %v", round, step, s, fromSet, bits)
			}
			covered := 0
			for _, on := range bits {
				if on {
					covered++
				}
			}
			if got := s.Total(); got != time.Duration(covered)*time.Microsecond {
				t.Fatalf("round %d: %v.Total() = %v, want %dµs", round, s, got, covered)
			}

			wa, wb, want := randIv()
			var gaps []Interval // brute force: maximal runs of uncovered instants
			for k := wa; k < wb; k++ {
				if bits[k] {
					continue
				}
				if n := len(gaps); n > 0 && gaps[n-1].End.Equal(at(k)) {
					gaps[n-1].End = at(k + 1)
				} else {
					gaps = append(gaps, Interval{Start: at(k), End: at(k + 1)})
				}
			}
			if got := s.Gaps(want); !reflect.DeepEqual(got, gaps) {
				t.Fatalf("round %d: %v.Gaps(%v) = %v, want %v", round, s, want, got, gaps)
			}
			if got := s.Covers(want); got != (len(gaps) == 0) {
				t.Fatalf("round %d: %v.Covers(%v) = %v, want %v", round, s, want, got, len(gaps) == 0)
			}
		}
	}
}
