package spool

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

var (
	idField   = arrow.Field{Name: "id", Type: arrow.BinaryTypes.String}
	nField    = arrow.Field{Name: "n", Type: arrow.PrimitiveTypes.Int64, Nullable: true}
	tagsField = arrow.Field{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true}
)

// chunkOf builds rows [from, from+n) with the given fields (a prefix of id,
// n, tags): id "r<i>", n = i, tags ["t<i>"].
func chunkOf(t *testing.T, mem memory.Allocator, from, n int, fields ...arrow.Field) arrow.Record {
	t.Helper()
	b := array.NewRecordBuilder(mem, arrow.NewSchema(fields, nil))
	defer b.Release()
	for i := from; i < from+n; i++ {
		for j, f := range fields {
			switch f.Name {
			case "id":
				b.Field(j).(*array.StringBuilder).Append(fmt.Sprintf("r%d", i))
			case "n":
				b.Field(j).(*array.Int64Builder).Append(int64(i))
			case "tags":
				lb := b.Field(j).(*array.ListBuilder)
				lb.Append(true)
				lb.ValueBuilder().(*array.StringBuilder).Append(fmt.Sprintf("t%d", i))
			}
		}
	}
	return b.NewRecord()
}

func TestSpoolReplaysGrowingChunksWidened(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	s, err := New(t.TempDir(), mem)
	if err != nil {
		t.Fatal(err)
	}
	chunks := []arrow.Record{
		chunkOf(t, mem, 0, 3, idField),
		chunkOf(t, mem, 3, 2, idField, nField),
		chunkOf(t, mem, 5, 4, idField, nField, tagsField),
	}
	for _, c := range chunks {
		if err := s.Add(c); err != nil {
			t.Fatal(err)
		}
		c.Release()
	}
	if s.Rows() != 9 {
		t.Fatalf("Rows = %d, want 9", s.Rows())
	}
	final := arrow.NewSchema([]arrow.Field{idField, nField, tagsField}, nil)
	var got []string
	err = s.Each(final, func(rec arrow.Record) error {
		if !rec.Schema().Equal(final) {
			t.Errorf("replayed schema %s, want %s", rec.Schema(), final)
		}
		ids := rec.Column(0).(*array.String)
		ns := rec.Column(1).(*array.Int64)
		tags := rec.Column(2).(*array.List)
		for i := 0; i < int(rec.NumRows()); i++ {
			got = append(got, fmt.Sprintf("%s/%v/%v", ids.Value(i), ns.IsValid(i), tags.IsValid(i)))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "r0/false/false r1/false/false r2/false/false r3/true/false r4/true/false r5/true/true r6/true/true r7/true/true r8/true/true"
	if strings.Join(got, " ") != want {
		t.Errorf("replayed\n%s\nwant\n%s", strings.Join(got, " "), want)
	}
	dir := s.dir
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("spool folder %s left behind: %v", dir, err)
	}
}

// A spool keeps its chunks in one file however many there are (creating a
// file per chunk cost ext4 an inode search each), and replays any chunk by
// its index, in any order.
func TestSpoolChunksShareOneFile(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	s, err := New(t.TempDir(), mem)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const chunks, per = 40, 25
	for i := 0; i < chunks; i++ {
		c := chunkOf(t, mem, i*per, per, idField, nField)
		err := s.Add(c)
		c.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("%d chunks made %d files in the spool folder, want 1", chunks, len(entries))
	}
	final := arrow.NewSchema([]arrow.Field{idField, nField}, nil)
	for _, i := range []int{chunks - 1, 0, 17, 17, 1} {
		var first, n int64 = -1, 0
		err := s.Replay(i, final, func(rec arrow.Record) error {
			ns := rec.Column(1).(*array.Int64)
			if first < 0 {
				first = ns.Value(0)
			}
			n += rec.NumRows()
			return nil
		})
		if err != nil {
			t.Fatalf("replay chunk %d: %v", i, err)
		}
		if first != int64(i*per) || n != per {
			t.Errorf("chunk %d replayed %d rows from %d, want %d from %d", i, n, first, per, i*per)
		}
	}
	if err := s.Replay(chunks, final, func(arrow.Record) error { return nil }); err == nil {
		t.Errorf("replayed chunk %d of %d", chunks, chunks)
	}
}

func TestWidenRefusesWhatTablesNeverDo(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	for _, tc := range []struct {
		name   string
		have   []arrow.Field
		final  []arrow.Field
		reason string
	}{
		{"type changed", []arrow.Field{idField, nField}, []arrow.Field{idField, {Name: "n", Type: arrow.BinaryTypes.String, Nullable: true}}, "is int64 in earlier rows and utf8 now"},
		{"column dropped", []arrow.Field{idField, nField}, []arrow.Field{idField}, "lacks"},
		{"required column added", []arrow.Field{nField}, []arrow.Field{nField, idField}, "REQUIRED"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := chunkOf(t, mem, 0, 2, tc.have...)
			defer rec.Release()
			out, err := Widen(rec, arrow.NewSchema(tc.final, nil), mem)
			if err == nil {
				out.Release()
				t.Fatal("widened")
			}
			if !strings.Contains(err.Error(), tc.reason) {
				t.Errorf("error %q does not say %q", err, tc.reason)
			}
		})
	}
}

func TestSpoolFolderMustBeWritable(t *testing.T) {
	_, err := New("/nonexistent/spool/parent", nil)
	if err == nil || !strings.Contains(err.Error(), "sync.spool_dir") {
		t.Errorf("error %v does not name sync.spool_dir", err)
	}
}

func TestCleanStaleRemovesOnlyDeadProcessesSpools(t *testing.T) {
	parent := t.TempDir()
	live, err := New(parent, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	// pid 1 is alive everywhere; a huge pid is not a process.
	for _, name := range []string{"syncd-spool-1-x", "syncd-spool-2147483600-x", "syncd-spool-notapid-x", "other-2147483600"} {
		if err := os.Mkdir(filepath.Join(parent, name), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	n, err := CleanStale(parent)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	entries, _ := os.ReadDir(parent)
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if n != 1 || len(left) != 4 || slices.Contains(left, "syncd-spool-2147483600-x") {
		t.Errorf("removed %d; left %v", n, left)
	}
}
