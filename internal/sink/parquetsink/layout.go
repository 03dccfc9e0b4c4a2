package parquetsink

import (
	"fmt"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/syncd-dev/syncd/internal/sink"
)

// Layout is how a table's files are partitioned into Hive folders by the
// time column: one folder per UTC day (the default), per UTC month, or
// none (every file in the table's folder).
type Layout string

// The layouts.
const (
	LayoutDay   Layout = "day"   // <table>/submission_date=YYYY-MM-DD/<batch id>.parquet
	LayoutMonth Layout = "month" // <table>/submission_month=YYYY-MM/<batch id>.parquet
	LayoutNone  Layout = "none"  // <table>/<batch id>.parquet
)

// PartitionKey is the day folder key of a form's table, for readers'
// hive_partitioning.
const PartitionKey = "submission_date"

// ParseLayout accepts day, month or none; "" is day.
func ParseLayout(s string) (Layout, error) {
	switch Layout(s) {
	case "", LayoutDay:
		return LayoutDay, nil
	case LayoutMonth, LayoutNone:
		return Layout(s), nil
	}
	return "", fmt.Errorf("partition %q is not one of day, month, none", s)
}

// PartitionOf names the partition of a row whose time is t.
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
		if l == LayoutMonth {
			return t.Format("2006-01")
		}
		return t.Format(time.DateOnly)
	}
	b := [10]byte{
		byte('0' + y/1000), byte('0' + y/100%10), byte('0' + y/10%10), byte('0' + y%10), '-',
		byte('0' + int(m)/10), byte('0' + int(m)%10), '-',
		byte('0' + d/10), byte('0' + d%10),
	}
	if l == LayoutMonth {
		return string(b[:7])
	}
	return string(b[:])
}

// PartitionStart is the first instant of the partition holding t; the
// zero time for none.
func (l Layout) PartitionStart(t time.Time) time.Time {
	t = t.UTC()
	switch l {
	case LayoutMonth:
		return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
	case LayoutNone:
		return time.Time{}
	}
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

// Prefix is the first word of a table's partition folders: the time
// column's name without a leading "_" or a trailing "_time" or "_at"
// (submission_time: submission_date=...; _version_time: version_date=...).
func Prefix(timeColumn string) string {
	p := strings.TrimPrefix(timeColumn, "_")
	for _, suffix := range []string{"_time", "_at"} {
		p = strings.TrimSuffix(p, suffix)
	}
	if p == "" {
		return "submission"
	}
	return p
}

// key is the folder's key= prefix for a time column's prefix; "" for none.
func (l Layout) key(prefix string) string {
	switch l {
	case LayoutMonth:
		return prefix + "_month"
	case LayoutNone:
		return ""
	}
	return prefix + "_date"
}

// Dir is the folder of partition part of a table whose partition folders
// start with prefix (see Prefix); "" for none.
func (l Layout) Dir(prefix, part string) string {
	if l.key(prefix) == "" {
		return ""
	}
	return l.key(prefix) + "=" + part
}

// RelPath is where the file of batch id in partition part lives relative
// to the root, with '/' separators; it is the object key under a bucket
// prefix.
func (l Layout) RelPath(table, prefix, part, id string) string {
	return path.Join(table, l.Dir(prefix, part), id+".parquet")
}

// CheckTable refuses a table whose folder (its entries' names) was written
// with another layout: readers' hive_partitioning needs one layout per table.
func (l Layout) CheckTable(table, prefix string, entries []string) error {
	for _, name := range entries {
		var found Layout
		switch {
		case strings.HasPrefix(name, LayoutDay.key(prefix)+"="):
			found = LayoutDay
		case strings.HasPrefix(name, LayoutMonth.key(prefix)+"="):
			found = LayoutMonth
		case strings.HasSuffix(name, ".parquet") && !strings.HasPrefix(name, "."):
			found = LayoutNone
		default:
			continue
		}
		if found != l {
			return fmt.Errorf("table %s is partitioned by %s (sink.parquet.partition: %s) but the config says %s: set it back to %s, or run `syncd refresh --form ID` to rewrite the table with the new layout", table, found.describe(prefix), found, l, found)
		}
	}
	return nil
}

func (l Layout) describe(prefix string) string {
	switch l {
	case LayoutMonth:
		return "month (" + l.key(prefix) + "=)"
	case LayoutNone:
		return "nothing (files in the table's folder)"
	}
	return "day (" + l.key(prefix) + "=)"
}

// PartsOf is b.Parts, or, for a batch of an older version that recorded
// none, the partition of its window's start (its windows never crossed
// one).
func (l Layout) PartsOf(b sink.Batch) []string {
	if len(b.Parts) > 0 {
		return b.Parts
	}
	return []string{l.PartitionOf(b.WindowStart)}
}

// checkParts makes sure parts name the partitions of b.Parts, in order.
func checkParts(b sink.Batch, parts []sink.Part) error {
	if len(parts) != len(b.Parts) {
		return fmt.Errorf("commit batch %s: %d parts for %d partition keys", b.ID, len(parts), len(b.Parts))
	}
	for i, p := range parts {
		if p.Key != b.Parts[i] {
			return fmt.Errorf("commit batch %s: part %d is %q, the batch lists %q", b.ID, i, p.Key, b.Parts[i])
		}
	}
	return nil
}

// Split cuts rec into one part per partition of its time column, in
// partition order, each part a list of zero-copy slices (rows out of time
// order give several slices). The parts' records are valid while rec is.
func (l Layout) Split(b sink.Batch, rec arrow.Record) (sink.Batch, []sink.Part, error) {
	col := b.TimeColumn
	if col == "" {
		// No column to partition by: the whole record is the partition of
		// its window, which must then lie in one.
		part := l.PartitionOf(b.WindowStart)
		if last := b.WindowEnd.Add(-time.Microsecond); l.PartitionOf(last) != part {
			return b, nil, fmt.Errorf("commit batch %s: window [%s, %s) spans partitions %s to %s but the batch names no time column to split it by", b.ID, formatTime(b.WindowStart), formatTime(b.WindowEnd), part, l.PartitionOf(last))
		}
		if rec.NumRows() == 0 {
			return b, nil, nil
		}
		b.Parts = []string{part}
		return b, []sink.Part{{Key: part, Records: sink.Records{Schema: rec.Schema(), Rows: rec.NumRows(), Each: func(fn func(arrow.Record) error) error { return fn(rec) }}}}, nil
	}
	idx := rec.Schema().FieldIndices(col)
	if len(idx) != 1 {
		return b, nil, fmt.Errorf("commit batch %s: the record has no single %s column to partition by", b.ID, col)
	}
	ts, ok := rec.Column(idx[0]).(*array.Timestamp)
	if !ok {
		return b, nil, fmt.Errorf("commit batch %s: column %s is %s, not a timestamp", b.ID, col, rec.Column(idx[0]).DataType())
	}
	unit := ts.DataType().(*arrow.TimestampType).Unit
	type run struct{ from, to int64 }
	runs := map[string][]run{}
	key, from := "", int64(0)
	for i := 0; i < ts.Len(); i++ {
		k := l.PartitionOf(ts.Value(i).ToTime(unit))
		if i > 0 && k != key {
			runs[key] = append(runs[key], run{from, int64(i)})
			from = int64(i)
		}
		key = k
	}
	if ts.Len() > 0 {
		runs[key] = append(runs[key], run{from, int64(ts.Len())})
	}
	keys := make([]string, 0, len(runs))
	for k := range runs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]sink.Part, 0, len(keys))
	for _, k := range keys {
		var rows int64
		for _, r := range runs[k] {
			rows += r.to - r.from
		}
		rs := runs[k]
		parts = append(parts, sink.Part{Key: k, Records: sink.Records{Schema: rec.Schema(), Rows: rows, Each: func(fn func(arrow.Record) error) error {
			for _, r := range rs {
				s := rec.NewSlice(r.from, r.to)
				err := fn(s)
				s.Release()
				if err != nil {
					return err
				}
			}
			return nil
		}}})
	}
	b.Parts = keys
	return b, parts, nil
}
