package state

import (
	"fmt"
	"sort"
	"time"
)

// Normalize is the form in which the store keeps every instant: UTC,
// truncated to the microsecond. Intervals compare exactly only when both
// sides went through it, so every entry point applies it.
func Normalize(t time.Time) time.Time {
	return t.UTC().Truncate(time.Microsecond)
}

// Interval is the half-open span [Start, End) of submission time.
type Interval struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
}

// Empty reports whether the interval holds no instant (End <= Start).
func (i Interval) Empty() bool { return !i.Start.Before(i.End) }

// String formats the interval as "[start, end)" in RFC 3339 with µs.
func (i Interval) String() string {
	const layout = "2006-01-02T15:04:05.000000Z07:00"
	return fmt.Sprintf("[%s, %s)", i.Start.UTC().Format(layout), i.End.UTC().Format(layout))
}

func (i Interval) normal() Interval {
	return Interval{Start: Normalize(i.Start), End: Normalize(i.End)}
}

// Intervals is a set of instants kept as sorted, non-overlapping and
// non-adjacent intervals: every set has exactly one representation, so two
// sets are equal when their slices are.
type Intervals []Interval

// Add returns the set with i added; overlapping and adjacent intervals merge.
// An empty (or reversed) i changes nothing. s itself is never modified, so a
// FormState handed out earlier keeps its value.
func (s Intervals) Add(i Interval) Intervals {
	i = i.normal()
	if i.Empty() {
		return s
	}
	out := make(Intervals, 0, len(s)+1)
	k := 0
	// Wholly before i and not touching it.
	for ; k < len(s) && s[k].End.Before(i.Start); k++ {
		out = append(out, s[k])
	}
	// Overlapping or adjacent: absorbed into i.
	for ; k < len(s) && !s[k].Start.After(i.End); k++ {
		if s[k].Start.Before(i.Start) {
			i.Start = s[k].Start
		}
		if s[k].End.After(i.End) {
			i.End = s[k].End
		}
	}
	out = append(out, i)
	return append(out, s[k:]...)
}

// Before returns the part of the set before instant t.
func (s Intervals) Before(t time.Time) Intervals {
	t = Normalize(t)
	var out Intervals
	for _, c := range s {
		if !c.Start.Before(t) {
			break
		}
		if c.End.After(t) {
			c.End = t
		}
		out = append(out, c)
	}
	return out
}

// End is the end of the last interval; zero for an empty set.
func (s Intervals) End() time.Time {
	if len(s) == 0 {
		return time.Time{}
	}
	return s[len(s)-1].End
}

// Gaps returns the parts of want that s does not cover, in order.
func (s Intervals) Gaps(want Interval) []Interval {
	want = want.normal()
	if want.Empty() {
		return nil
	}
	var gaps []Interval
	cur := want.Start
	for _, c := range s[s.firstEndingAfter(cur):] {
		if !c.Start.Before(want.End) {
			break
		}
		if c.Start.After(cur) {
			gaps = append(gaps, Interval{Start: cur, End: c.Start})
		}
		cur = c.End
		if !cur.Before(want.End) {
			return gaps
		}
	}
	return append(gaps, Interval{Start: cur, End: want.End})
}

// Covers reports whether every instant of i is in s. An empty i is covered.
func (s Intervals) Covers(i Interval) bool {
	i = i.normal()
	if i.Empty() {
		return true
	}
	// s is merged, so i is covered only by a single member.
	k := s.firstEndingAfter(i.Start)
	return k < len(s) && !s[k].Start.After(i.Start) && !s[k].End.Before(i.End)
}

// Total is the summed length of the set.
func (s Intervals) Total() time.Duration {
	var d time.Duration
	for _, c := range s {
		d += c.End.Sub(c.Start)
	}
	return d
}

// firstEndingAfter is the index of the first member that ends after t.
func (s Intervals) firstEndingAfter(t time.Time) int {
	return sort.Search(len(s), func(k int) bool { return s[k].End.After(t) })
}

// check reports why s is not in the merged form Add produces, or nil.
func (s Intervals) check() error {
	for k, c := range s {
		if n := c.normal(); !n.Start.Equal(c.Start) || !n.End.Equal(c.End) {
			return fmt.Errorf("interval %d %v has sub-µs precision", k, c)
		}
		if c.Empty() {
			return fmt.Errorf("interval %d %v is empty", k, c)
		}
		if k > 0 && !s[k-1].End.Before(c.Start) {
			return fmt.Errorf("intervals %d %v and %d %v overlap, touch or are out of order", k-1, s[k-1], k, c)
		}
	}
	return nil
}
