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
// time column (sink.Layout): one folder per UTC day, month or year, or
// none (every file in the table's folder).
type Layout sink.Layout

// The layouts.
const (
	LayoutDay   = Layout(sink.LayoutDay)   // <table>/submission_date=YYYY-MM-DD/<batch id>.parquet
	LayoutMonth = Layout(sink.LayoutMonth) // <table>/submission_month=YYYY-MM/<batch id>.parquet
	LayoutYear  = Layout(sink.LayoutYear)  // <table>/submission_year=YYYY/<batch id>.parquet
	LayoutNone  = Layout(sink.LayoutNone)  // <table>/<batch id>.parquet
)

// PartitionKey is the day folder key of a form's table, for readers'
// hive_partitioning.
const PartitionKey = "submission_date"

// ParseLayout accepts day, month, year or none; "" is day, the layout of
// every table written before layouts were chosen per table.
func ParseLayout(s string) (Layout, error) {
	if s == "" {
		return LayoutDay, nil
	}
	l, err := sink.ParseLayout(s)
	return Layout(l), err
}

// PartitionOf names the partition of a row whose time is t.
func (l Layout) PartitionOf(t time.Time) string { return sink.Layout(l).PartitionOf(t) }

// PartitionStart is the first instant of the partition holding t; the
// zero time for none.
func (l Layout) PartitionStart(t time.Time) time.Time { return sink.Layout(l).PartitionStart(t) }

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
	case LayoutYear:
		return prefix + "_year"
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

// found is the layout of a table whose folder holds the entry name; ""
// when the entry tells nothing (a hidden file, another folder).
func found(prefix, name string) Layout {
	for _, l := range []Layout{LayoutDay, LayoutMonth, LayoutYear} {
		if strings.HasPrefix(name, l.key(prefix)+"=") {
			return l
		}
	}
	if strings.HasSuffix(name, ".parquet") && !strings.HasPrefix(name, ".") {
		return LayoutNone
	}
	return ""
}

// layoutOf is the layout of the table whose folder holds entries; "" when
// they tell none.
func layoutOf(prefix string, entries []string) Layout {
	for _, name := range entries {
		if l := found(prefix, name); l != "" {
			return l
		}
	}
	return ""
}

// partLayout is the layout whose partitions are named like part.
func partLayout(part string) Layout {
	switch len(part) {
	case 0:
		return LayoutNone
	case len("2006"):
		return LayoutYear
	case len("2006-01"):
		return LayoutMonth
	}
	return LayoutDay
}

// CheckTable refuses a table whose folder (its entries' names) was written
// with another layout: readers' hive_partitioning needs one layout per table.
func (l Layout) CheckTable(table, prefix string, entries []string) error {
	for _, name := range entries {
		f := found(prefix, name)
		if f == "" || f == l {
			continue
		}
		return fmt.Errorf("table %s is partitioned by %s but its state or the config says %s: set sink.parquet.partition to %s or auto (each table keeps the layout it was written with), or run `syncd refresh --form ID` to rewrite the table with the new layout", table, f.describe(prefix), l, f)
	}
	return nil
}

func (l Layout) describe(prefix string) string {
	switch l {
	case LayoutYear:
		return "year (" + l.key(prefix) + "=)"
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
	return l.Cut(b, sink.Single(rec))
}

// Cut is Split of rows replayed in chunks: it reads them once to find each
// partition's runs of rows, and each part then replays the chunks, sliced
// to its runs (zero-copy), so memory holds one chunk, whatever the rows'
// number. It sets b.Parts to the partitions found.
func (l Layout) Cut(b sink.Batch, recs sink.Records) (sink.Batch, []sink.Part, error) {
	col := b.TimeColumn
	if col == "" {
		// No column to partition by: the whole record is the partition of
		// its window, which must then lie in one.
		part := l.PartitionOf(b.WindowStart)
		if last := b.WindowEnd.Add(-time.Microsecond); l.PartitionOf(last) != part {
			return b, nil, fmt.Errorf("commit batch %s: window [%s, %s) spans partitions %s to %s but the batch names no time column to split it by", b.ID, formatTime(b.WindowStart), formatTime(b.WindowEnd), part, l.PartitionOf(last))
		}
		if recs.Rows == 0 {
			return b, nil, nil
		}
		b.Parts = []string{part}
		return b, []sink.Part{{Key: part, Records: recs}}, nil
	}
	idx := recs.Schema.FieldIndices(col)
	if len(idx) != 1 {
		return b, nil, fmt.Errorf("commit batch %s: the record has no single %s column to partition by", b.ID, col)
	}
	type run struct{ from, to int64 }
	// runs[i][key] are the runs of chunk i's rows in partition key.
	var runs []map[string][]run
	rows := map[string]int64{}
	err := recs.Each(func(rec arrow.Record) error {
		ts, ok := rec.Column(idx[0]).(*array.Timestamp)
		if !ok {
			return fmt.Errorf("commit batch %s: column %s is %s, not a timestamp", b.ID, col, rec.Column(idx[0]).DataType())
		}
		unit := ts.DataType().(*arrow.TimestampType).Unit
		chunk := map[string][]run{}
		key, from := "", int64(0)
		for i := 0; i < ts.Len(); i++ {
			k := l.PartitionOf(ts.Value(i).ToTime(unit))
			if i > 0 && k != key {
				chunk[key] = append(chunk[key], run{from, int64(i)})
				rows[key] += int64(i) - from
				from = int64(i)
			}
			key = k
		}
		if ts.Len() > 0 {
			chunk[key] = append(chunk[key], run{from, int64(ts.Len())})
			rows[key] += int64(ts.Len()) - from
		}
		runs = append(runs, chunk)
		return nil
	})
	if err != nil {
		return b, nil, err
	}
	keys := make([]string, 0, len(rows))
	for k := range rows {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]sink.Part, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, sink.Part{Key: k, Records: sink.Records{Schema: recs.Schema, Rows: rows[k], Each: func(fn func(arrow.Record) error) error {
			i := 0
			return recs.Each(func(rec arrow.Record) error {
				defer func() { i++ }()
				if i >= len(runs) {
					return fmt.Errorf("commit batch %s: the rows replayed differ from those read", b.ID)
				}
				for _, r := range runs[i][k] {
					s := rec.NewSlice(r.from, r.to)
					err := fn(s)
					s.Release()
					if err != nil {
						return err
					}
				}
				return nil
			})
		}}})
	}
	b.Parts = keys
	return b, parts, nil
}
