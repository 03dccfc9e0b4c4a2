package parquetsink

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/syncd-dev/syncd/internal/sink"
)

// TestInventoryOfOlderFilesAndTemporaries: files written before
// syncd.parts existed count as a whole batch only when the batch is one
// file whose window lies in its partition; temporary files and hidden
// folders are never listed.
func TestInventoryOfOlderFilesAndTemporaries(t *testing.T) {
	d := func(day, h int) time.Time { return time.Date(2024, 1, day, h, 0, 0, 0, time.UTC) }
	root := t.TempDir()
	s, err := New(Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	// writeOld writes a file of batch id in partition part as versions
	// before syncd.parts did: no parts, no attempt in the footer.
	writeOld := func(id, part string, from, to time.Time, times ...time.Time) {
		t.Helper()
		rec := timedRecord(times...)
		defer rec.Release()
		f := createDayFile(t, root, part, id)
		defer f.Close()
		b := sink.Batch{ID: id, Stream: "f", Table: "t", WindowStart: from, WindowEnd: to}
		if _, err := Encode(f, rec, b, nil, EncodeOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	writeOld("old-one", "2024-01-05", d(5, 1), d(5, 3), d(5, 1), d(5, 2))
	// A window across two days, of which one file is there: nothing says
	// whether the other day had rows.
	writeOld("old-span", "2024-01-06", d(6, 20), d(7, 4), d(6, 21))
	// Leftovers no reader sees.
	for _, p := range []string{"t/submission_date=2024-01-05/.tmp1" + tmpMarker + "123", "t/.hidden/x.parquet", "t/_SUCCESS"} {
		p = filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("PAR1"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	ids, err := s.HeldBatches(ctx, "t")
	if err != nil || !slices.Equal(ids, []string{"old-one", "old-span"}) {
		t.Fatalf("HeldBatches = %v, %v; want [old-one old-span]", ids, err)
	}
	held, err := s.DescribeBatches(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		complete bool
		allParts []string
		rows     int64
	}{
		{true, []string{"2024-01-05"}, 2},
		{false, nil, 1},
	}
	for i, c := range cases {
		h := held[i]
		if h.Complete != c.complete || !slices.Equal(h.AllParts, c.allParts) || h.Rows != c.rows || h.Attempt != "" {
			t.Errorf("%s: complete %v, all parts %v, %d rows, attempt %q; want %v, %v, %d, \"\"", h.ID, h.Complete, h.AllParts, h.Rows, h.Attempt, c.complete, c.allParts, c.rows)
		}
	}
	var keys []string
	err = s.ReadVersions(ctx, sink.TableColumns{Table: "t", Key: "submission_id", Time: "submission_time"}, func(v sink.RowVersion) error {
		keys = append(keys, v.BatchID+"/"+v.Key)
		return nil
	})
	if err != nil || !slices.Equal(keys, []string{"old-one/s0", "old-one/s1"}) {
		t.Fatalf("ReadVersions = %v, %v; want the rows of old-one only", keys, err)
	}
}

// TestJudgeFooters: a batch is complete only when its files prove it,
// whether they are this version's (the first partition's file lists the
// partitions, the others count them), a version's that listed them in
// every file, or a version's that listed none.
func TestJudgeFooters(t *testing.T) {
	day := func(d int) time.Time { return time.Date(2024, 1, d, 0, 0, 0, 0, time.UTC) }
	parts := []string{"2024-01-01", "2024-01-02", "2024-01-03"}
	// file is a file of attempt a in partition part of a batch with
	// window [Jan 1, Jan 4) (or [from, to)), listing or counting parts.
	type file struct {
		part, attempt string
		list          []string
		count         int
		from, to      time.Time
	}
	listing := func(part, attempt string) file { return file{part: part, attempt: attempt, list: parts} }
	counting := func(part, attempt string) file { return file{part: part, attempt: attempt, count: len(parts)} }
	cases := []struct {
		name     string
		files    []file
		complete bool
		attempt  string
		allParts []string
		rows     int64
	}{
		{"this version: whole", []file{listing(parts[0], "a"), counting(parts[1], "a"), counting(parts[2], "a")}, true, "a", parts, 3},
		{"this version: a counting file missing", []file{listing(parts[0], "a"), counting(parts[2], "a")}, false, "a", parts, 2},
		{"this version: the listing file missing", []file{counting(parts[1], "a"), counting(parts[2], "a")}, false, "a", nil, 2},
		{"this version: a file counting otherwise", []file{listing(parts[0], "a"), counting(parts[1], "a"), {part: parts[2], attempt: "a", count: 2}}, false, "a", parts, 3},
		{"this version: a file neither listing nor counting", []file{listing(parts[0], "a"), counting(parts[1], "a"), {part: parts[2], attempt: "a"}}, false, "a", parts, 3},
		{"this version: one counting file whose window lies in its partition", []file{{part: parts[0], attempt: "a", count: 2, from: day(1), to: day(2)}}, false, "a", nil, 1},
		// The listing file replaced by a stopped attempt: the other
		// attempt's list names the partitions.
		{"this version: two attempts", []file{listing(parts[0], "b"), counting(parts[1], "a"), counting(parts[2], "a")}, false, "a", parts, 2},
		{"this version: the later attempt whole", []file{listing(parts[0], "b"), counting(parts[1], "b"), counting(parts[2], "b")}, true, "b", parts, 3},
		{"every file listing: whole", []file{listing(parts[0], "a"), listing(parts[1], "a"), listing(parts[2], "a")}, true, "a", parts, 3},
		{"every file listing: one missing", []file{listing(parts[1], "a"), listing(parts[2], "a")}, false, "a", parts, 2},
		{"every file listing: lists disagree", []file{listing(parts[0], "a"), listing(parts[1], "a"), {part: parts[2], attempt: "a", list: parts[:2]}}, false, "a", parts, 3},
		{"none listing: one file in its partition", []file{{part: parts[0], from: day(1), to: day(2)}}, true, "", parts[:1], 1},
		{"none listing: a window across partitions", []file{{part: parts[0]}}, false, "", nil, 1},
		{"none listing: two files", []file{{part: parts[0], from: day(1), to: day(2)}, {part: parts[1], from: day(1), to: day(2)}}, false, "", nil, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var footers []fileFooter
			for _, f := range c.files {
				ff := fileFooter{heldFile: heldFile{key: f.part, id: "b", part: f.part}, stream: "f", attempt: f.attempt,
					windowStart: day(1), windowEnd: day(4), allParts: f.list, partCount: f.count, rows: 1}
				if !f.from.IsZero() {
					ff.windowStart, ff.windowEnd = f.from, f.to
				}
				footers = append(footers, ff)
			}
			h, whole := judge("b", footers)
			if h.Complete != c.complete || h.Attempt != c.attempt || !slices.Equal(h.AllParts, c.allParts) || h.Rows != c.rows {
				t.Errorf("complete %v, attempt %q, all parts %v, %d rows; want %v, %q, %v, %d", h.Complete, h.Attempt, h.AllParts, h.Rows, c.complete, c.attempt, c.allParts, c.rows)
			}
			if h.Complete && int64(len(whole)) != h.Rows {
				t.Errorf("%d files of the whole batch, want %d", len(whole), h.Rows)
			}
		})
	}
}

// TestInventoryOfFilesListingEveryPartition: files of the versions that
// wrote syncd.parts and syncd.schema, uncompressed, into every file of a
// batch are described as before: whole when every listed partition has a
// file of the attempt, with the schema they carry; and a batch of this
// version beside them the same way.
func TestInventoryOfFilesListingEveryPartition(t *testing.T) {
	d := func(day, h int) time.Time { return time.Date(2024, 1, day, h, 0, 0, 0, time.UTC) }
	root := t.TempDir()
	s, err := New(Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	const schema = `{"version":1,"columns":["submission_id"]}`
	parts := []string{"2024-01-05", "2024-01-06"}
	partsJSON := `["2024-01-05","2024-01-06"]`
	// writeOld writes batch id's file in part with the footer those
	// versions wrote.
	writeOld := func(id, part string, times ...time.Time) {
		t.Helper()
		rec := timedRecord(times...)
		defer rec.Release()
		f := createDayFile(t, root, part, id)
		defer f.Close()
		w, err := pqarrow.NewFileWriter(rec.Schema(), f, parquet.NewWriterProperties(), pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
		if err != nil {
			t.Fatal(err)
		}
		kv := [][2]string{{KeyAttempt, "a1"}, {KeyBatchID, id}, {KeyFormID, "f"}, {KeyParts, partsJSON}, {KeySchema, schema},
			{KeySchemaFingerprint, "fp"}, {KeyVersion, "v0.9.0"}, {KeyWindowEnd, formatTime(d(7, 0))}, {KeyWindowStart, formatTime(d(5, 0))}}
		for _, e := range kv {
			if err := w.AppendKeyValueMetadata(e[0], e[1]); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	writeOld("old-whole", parts[0], d(5, 1))
	writeOld("old-whole", parts[1], d(6, 1), d(6, 2))
	writeOld("old-part", parts[1], d(6, 3))
	// A batch of this version across the same two days.
	b := spanBatch("new-whole", d(5, 0), d(7, 0))
	b.Attempt, b.Schema = "a2", []byte(schema)
	rec := timedRecord(d(5, 2), d(6, 4), d(6, 5))
	defer rec.Release()
	if err := sink.CommitRecord(context.Background(), s, b, rec); err != nil {
		t.Fatal(err)
	}
	held, err := s.DescribeBatches(context.Background(), "t")
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		id       string
		complete bool
		parts    []string
		rows     int64
		attempt  string
	}{
		{"new-whole", true, parts, 3, "a2"},
		{"old-part", false, parts[1:], 1, "a1"},
		{"old-whole", true, parts, 3, "a1"},
	}
	if len(held) != len(want) {
		t.Fatalf("DescribeBatches = %+v, want %d batches", held, len(want))
	}
	for i, w := range want {
		h := held[i]
		if h.ID != w.id || h.Complete != w.complete || !slices.Equal(h.Parts, w.parts) || !slices.Equal(h.AllParts, parts) || h.Rows != w.rows || h.Attempt != w.attempt {
			t.Errorf("%s: complete %v, parts %v of %v, %d rows, attempt %q; want %s: %v, %v of %v, %d, %q",
				h.ID, h.Complete, h.Parts, h.AllParts, h.Rows, h.Attempt, w.id, w.complete, w.parts, parts, w.rows, w.attempt)
		}
		if string(h.Schema) != schema {
			t.Errorf("%s: schema %q, want %q", h.ID, h.Schema, schema)
		}
	}
}

// createDayFile creates the file of batch id in day partition part of
// table t under root, as a writer of an older version would have.
func createDayFile(t *testing.T, root, part, id string) *os.File {
	t.Helper()
	dir := filepath.Join(root, "t", "submission_date="+part)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, id+".parquet"))
	if err != nil {
		t.Fatal(err)
	}
	return f
}
