package sink

import (
	"context"
	"fmt"
	"time"
)

// Layout is how a table's rows are grouped into partitions by their time
// column, in UTC: one partition per day, month or year, or none (the
// whole table is one partition). A sink that writes files (a Partitioner)
// writes one file per partition a batch touches, so the layout decides how
// many files a reader gets: it is chosen per table, once, from the table's
// density (ChooseLayout), recorded in the state and never changed under a
// reader.
type Layout string

// The layouts, finest last.
const (
	LayoutNone  Layout = "none"
	LayoutYear  Layout = "year"
	LayoutMonth Layout = "month"
	LayoutDay   Layout = "day"
)

// LayoutAuto is not a layout but the setting that lets each table's
// density choose its own (the default of sink.parquet.partition).
const LayoutAuto = "auto"

// ParseLayout accepts none, year, month or day.
func ParseLayout(s string) (Layout, error) {
	switch l := Layout(s); l {
	case LayoutNone, LayoutYear, LayoutMonth, LayoutDay:
		return l, nil
	}
	return "", fmt.Errorf("partition %q is not one of auto, none, year, month, day", s)
}

// PartitionOf names the partition of a row whose time is t: YYYY-MM-DD,
// YYYY-MM, YYYY, or "" for none.
func (l Layout) PartitionOf(t time.Time) string {
	if l == LayoutNone {
		return ""
	}
	t = t.UTC()
	// Written by hand: the engine names the partition of every row it
	// gathers and commits, and time.Format's layout parsing was 1.5% of a
	// backfill's CPU. Years outside 0-9999 keep Format's spelling.
	y, m, d := t.Date()
	if y < 0 || y > 9999 {
		switch l {
		case LayoutYear:
			return t.Format("2006")
		case LayoutMonth:
			return t.Format("2006-01")
		}
		return t.Format(time.DateOnly)
	}
	b := [10]byte{
		byte('0' + y/1000), byte('0' + y/100%10), byte('0' + y/10%10), byte('0' + y%10), '-',
		byte('0' + int(m)/10), byte('0' + int(m)%10), '-',
		byte('0' + d/10), byte('0' + d%10),
	}
	switch l {
	case LayoutYear:
		return string(b[:4])
	case LayoutMonth:
		return string(b[:7])
	}
	return string(b[:])
}

// PartitionStart is the first instant of the partition holding t; the
// zero time for none.
func (l Layout) PartitionStart(t time.Time) time.Time {
	t = t.UTC()
	switch l {
	case LayoutNone:
		return time.Time{}
	case LayoutYear:
		return time.Date(t.Year(), 1, 1, 0, 0, 0, 0, time.UTC)
	case LayoutMonth:
		return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
	}
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

// partitions counts the partitions of l that [first, end) touches, at
// least 1.
func (l Layout) partitions(first, end time.Time) int {
	first, end = first.UTC(), end.UTC()
	if !first.Before(end) {
		return 1
	}
	last := end.Add(-time.Nanosecond)
	switch l {
	case LayoutNone:
		return 1
	case LayoutYear:
		return last.Year() - first.Year() + 1
	case LayoutMonth:
		return (last.Year()-first.Year())*12 + int(last.Month()) - int(first.Month()) + 1
	}
	// Whole UTC days between the two partition starts, plus the first.
	return int(l.PartitionStart(last).Sub(l.PartitionStart(first))/(24*time.Hour)) + 1
}

// ChooseLayout is the layout of a new table that holds rows records whose
// times lie in [first, end): the finest in which the partitions the span
// touches hold, on average, at least target rows each; none when not even
// a year does. Partitions are counted over the span the rows were seen
// in, never projected forward: a young table, or a burst, is never split
// finer than what it has shown, so a table gets day only once it fills
// days. A sink that writes a file per partition then writes files of at
// least target rows (or one per table and batch) as the data allows.
func ChooseLayout(first, end time.Time, rows, target int) Layout {
	if target < 1 {
		target = 1
	}
	for _, l := range []Layout{LayoutDay, LayoutMonth, LayoutYear} {
		if rows/l.partitions(first, end) >= target {
			return l
		}
	}
	return LayoutNone
}

// LayoutFinder is a capability a Sink may have: telling the layout a
// table's output was written with, from the output itself (its folders),
// "" when the table holds nothing. It is how a table written before
// layouts were recorded in the state keeps its layout, and how `syncd
// state adopt` records it.
type LayoutFinder interface {
	TableLayout(ctx context.Context, table, timeColumn string) (Layout, error)
}
