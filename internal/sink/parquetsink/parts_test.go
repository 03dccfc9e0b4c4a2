package parquetsink

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/syncd-dev/syncd/internal/sink"
)

// timedRecord has one row per time: submission_id "s<i>" and
// submission_time, in the given order.
func timedRecord(times ...time.Time) arrow.Record {
	ts := &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
	sc := arrow.NewSchema([]arrow.Field{{Name: "submission_id", Type: arrow.BinaryTypes.String}, {Name: "submission_time", Type: ts}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	for i, t := range times {
		b.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("s%d", i))
		b.Field(1).(*array.TimestampBuilder).Append(arrow.Timestamp(t.UnixMicro()))
	}
	return b.NewRecord()
}

func spanBatch(id string, start, end time.Time) sink.Batch {
	return sink.Batch{ID: id, Stream: "f", Table: "t", WindowStart: start, WindowEnd: end, TimeColumn: "submission_time"}
}

// TestBatchAcrossPartitions: a batch of several days (and months) writes
// one file per partition under its id, for every layout; DuckDB reads each
// layout back with hive_partitioning, every row once; a replay adds nothing.
func TestBatchAcrossPartitions(t *testing.T) {
	d := func(m, day, h int) time.Time { return time.Date(2024, time.Month(m), day, h, 0, 0, 0, time.UTC) }
	// Out of time order on purpose: a window walked again appends late rows.
	times := []time.Time{d(1, 30, 1), d(1, 30, 5), d(1, 31, 2), d(2, 1, 3), d(1, 30, 7), d(2, 2, 0), d(2, 2, 23)}
	cases := []struct {
		layout Layout
		files  []string
		hive   string // the partition column DuckDB derives
	}{
		{LayoutDay, []string{"t/submission_date=2024-01-30/b.parquet", "t/submission_date=2024-01-31/b.parquet", "t/submission_date=2024-02-01/b.parquet", "t/submission_date=2024-02-02/b.parquet"}, "submission_date"},
		{LayoutMonth, []string{"t/submission_month=2024-01/b.parquet", "t/submission_month=2024-02/b.parquet"}, "submission_month"},
		{LayoutNone, []string{"t/b.parquet"}, ""},
	}
	for _, tc := range cases {
		t.Run(string(tc.layout), func(t *testing.T) {
			root := t.TempDir()
			s, err := New(Options{Root: root, Layout: tc.layout})
			if err != nil {
				t.Fatal(err)
			}
			rec := timedRecord(times...)
			defer rec.Release()
			b := spanBatch("b", d(1, 1, 0), d(3, 1, 0))
			ctx := context.Background()
			if err := sink.CommitRecord(ctx, s, b, rec); err != nil {
				t.Fatal(err)
			}
			if got := parquetFiles(t, root); !reflect.DeepEqual(got, tc.files) {
				t.Errorf("files %v, want %v", got, tc.files)
			}
			_, parts, _ := tc.layout.Split(b, rec)
			for _, p := range parts {
				b.Parts = append(b.Parts, p.Key)
			}
			if ok, err := s.Committed(ctx, b); err != nil || !ok {
				t.Errorf("Committed = %v, %v", ok, err)
			}
			if err := sink.CommitRecord(ctx, s, b, rec); err != nil {
				t.Fatal(err)
			}
			db := duck(t)
			src := "read_parquet(" + glob(root, "t") + ", hive_partitioning=true)"
			if tc.layout == LayoutNone {
				src = "read_parquet(" + sqlString(root+"/t/*.parquet") + ")"
			}
			if n := queryInt(t, db, "SELECT count(*) FROM "+src); n != int64(len(times)) {
				t.Errorf("DuckDB reads %d rows, want %d", n, len(times))
			}
			if n := queryInt(t, db, "SELECT count(DISTINCT submission_id) FROM "+src); n != int64(len(times)) {
				t.Errorf("DuckDB reads %d distinct ids, want %d", n, len(times))
			}
			if tc.hive != "" {
				// Every row sits in the partition of its own time.
				q := fmt.Sprintf("SELECT count(*) FROM %s WHERE %s::VARCHAR <> strftime(make_timestamp(epoch_us(submission_time)), '%s')", src, tc.hive,
					map[string]string{"submission_date": "%Y-%m-%d", "submission_month": "%Y-%m"}[tc.hive])
				if n := queryInt(t, db, q); n != 0 {
					t.Errorf("%d rows in a partition that is not their own", n)
				}
			}
		})
	}
}

// TestStopBetweenFilesOfABatch: a commit stopped after some of a batch's
// files landed is not committed; replaying it writes the rest, never a
// second copy of the files in place.
func TestStopBetweenFilesOfABatch(t *testing.T) {
	d := func(day int) time.Time { return time.Date(2024, 5, day, 12, 0, 0, 0, time.UTC) }
	root := t.TempDir()
	s, err := New(Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	rec := timedRecord(d(1), d(2), d(2), d(3), d(4))
	defer rec.Release()
	b := spanBatch("multi", d(1).Add(-time.Hour), d(5))
	b, parts, err := s.layout.Split(b, rec)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	renamed := 0
	s.disk.afterRename = func(_, _ string) {
		if renamed++; renamed == 2 {
			cancel() // the process dies after two of the four files
		}
	}
	if _, err := s.Commit(ctx, b, parts); !errors.Is(err, context.Canceled) {
		t.Fatalf("stopped commit: %v", err)
	}
	if got := len(parquetFiles(t, root)); got != 2 {
		t.Fatalf("%d files after the stop, want 2", got)
	}
	if ok, err := s.Committed(context.Background(), b); err != nil || ok {
		t.Fatalf("a batch with 2 of its 4 files reads as committed (%v, %v)", ok, err)
	}
	before, _ := os.Stat(filepath.Join(root, "t", "submission_date=2024-05-01", "multi.parquet"))
	s.disk.afterRename = nil
	if _, err := s.Commit(context.Background(), b, parts); err != nil {
		t.Fatal(err)
	}
	after, _ := os.Stat(filepath.Join(root, "t", "submission_date=2024-05-01", "multi.parquet"))
	if !os.SameFile(before, after) {
		t.Error("the replay rewrote a file that was already in place")
	}
	if ok, err := s.Committed(context.Background(), b); err != nil || !ok {
		t.Fatalf("after the replay: committed %v, %v", ok, err)
	}
	if n := queryInt(t, duck(t), "SELECT count(*) FROM read_parquet("+glob(root, "t")+", hive_partitioning=true)"); n != 5 {
		t.Errorf("%d rows after the replay, want 5", n)
	}
}

// TestLayoutChangeRefused: a table written with one layout refuses a sink
// configured with another, in one sentence naming both and the remedy.
func TestLayoutChangeRefused(t *testing.T) {
	root := t.TempDir()
	day := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	rec := timedRecord(day)
	defer rec.Release()
	first, err := New(Options{Root: root, Layout: LayoutDay})
	if err != nil {
		t.Fatal(err)
	}
	if err := sink.CommitRecord(context.Background(), first, spanBatch("b1", day.Add(-time.Hour), day.Add(time.Hour)), rec); err != nil {
		t.Fatal(err)
	}
	for _, l := range []Layout{LayoutMonth, LayoutNone} {
		s, err := New(Options{Root: root, Layout: l})
		if err != nil {
			t.Fatal(err)
		}
		err = sink.CommitRecord(context.Background(), s, spanBatch("b2", day.Add(-time.Hour), day.Add(time.Hour)), rec)
		if err == nil || !strings.Contains(err.Error(), "table t is partitioned by day") || !strings.Contains(err.Error(), "syncd refresh") {
			t.Errorf("layout %s over a day table: %v", l, err)
		}
	}
	if _, err := ParseLayout("week"); err == nil {
		t.Error("ParseLayout accepted week")
	}
}

func parquetFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, e os.DirEntry, err error) error {
		if err == nil && !e.IsDir() && strings.HasSuffix(p, ".parquet") {
			rel, _ := filepath.Rel(root, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRedoReplacesAnUncommittedAttempt: a batch fetched again after a stop
// (Replace) rewrites the files the stopped attempt left with its own rows,
// and removes the file of a partition it no longer has (Stale).
func TestRedoReplacesAnUncommittedAttempt(t *testing.T) {
	d := func(day int) time.Time { return time.Date(2024, 5, day, 12, 0, 0, 0, time.UTC) }
	root := t.TempDir()
	s, err := New(Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	first := timedRecord(d(1), d(2), d(3))
	defer first.Release()
	b := spanBatch("redo", d(1).Add(-time.Hour), d(5))
	if err := sink.CommitRecord(context.Background(), s, b, first); err != nil {
		t.Fatal(err)
	}
	// The second attempt: day 2's submission is gone, day 1 has two now.
	second := timedRecord(d(1), d(1).Add(time.Minute), d(3))
	defer second.Release()
	b2, parts, err := s.layout.Split(b, second)
	if err != nil {
		t.Fatal(err)
	}
	b2.Replace, b2.Stale = true, []string{"2024-05-02"}
	if _, err := s.Commit(context.Background(), b2, parts); err != nil {
		t.Fatal(err)
	}
	if got := parquetFiles(t, root); !reflect.DeepEqual(got, []string{"t/submission_date=2024-05-01/redo.parquet", "t/submission_date=2024-05-03/redo.parquet"}) {
		t.Errorf("files after the redo: %v", got)
	}
	if n := queryInt(t, duck(t), "SELECT count(*) FROM read_parquet("+glob(root, "t")+", hive_partitioning=true)"); n != 3 {
		t.Errorf("%d rows after the redo, want the second attempt's 3", n)
	}
}

// TestFilesOfAnotherAttempt: a file of the batch written by another
// (stopped) attempt is not this attempt's: Committed says no, and a commit
// rewrites it, so a mix of two attempts never passes for the batch.
func TestFilesOfAnotherAttempt(t *testing.T) {
	d := func(day int) time.Time { return time.Date(2024, 5, day, 12, 0, 0, 0, time.UTC) }
	root := t.TempDir()
	s, err := New(Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	rec := timedRecord(d(1), d(2))
	defer rec.Release()
	b := spanBatch("att", d(1).Add(-time.Hour), d(3))
	b.Attempt = "first"
	if err := sink.CommitRecord(context.Background(), s, b, rec); err != nil {
		t.Fatal(err)
	}
	b, parts, err := s.layout.Split(b, rec)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := s.Committed(context.Background(), b); err != nil || !ok {
		t.Fatalf("its own attempt: committed %v, %v", ok, err)
	}
	b.Attempt = "second"
	if ok, err := s.Committed(context.Background(), b); err != nil || ok {
		t.Fatalf("files of another attempt read as committed (%v, %v)", ok, err)
	}
	if _, err := s.Commit(context.Background(), b, parts); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.Committed(context.Background(), b); err != nil || !ok {
		t.Fatalf("after the second attempt's commit: committed %v, %v", ok, err)
	}
}

// TestPartitionOf holds the hand-written partition names to time.Format's,
// across years, months, days, zones and years Format spells differently.
func TestPartitionOf(t *testing.T) {
	times := []time.Time{
		time.Date(2024, 2, 29, 23, 59, 59, 999999999, time.UTC),
		time.Date(2024, 3, 1, 0, 30, 0, 0, time.FixedZone("CET", 3600)), // UTC day before
		time.Date(1999, 12, 31, 23, 0, 0, 0, time.FixedZone("west", -3600)),
		time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 6, 15, 0, 0, 0, 0, time.UTC),
		{},
	}
	for i := 0; i < 500; i++ { // every month and many days of four centuries
		times = append(times, time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i)*(292*24*time.Hour+7*time.Hour)))
	}
	for _, tc := range []struct {
		layout Layout
		format string
	}{
		{LayoutDay, time.DateOnly},
		{LayoutMonth, "2006-01"},
		{LayoutNone, ""},
	} {
		for _, at := range times {
			want := ""
			if tc.format != "" {
				want = at.UTC().Format(tc.format)
			}
			if got := tc.layout.PartitionOf(at); got != want {
				t.Errorf("%s.PartitionOf(%v) = %q, want %q", tc.layout, at, got, want)
			}
		}
	}
}
