package blobsink

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/syncd-dev/syncd/internal/sink"
	"github.com/syncd-dev/syncd/internal/testkit"
	"github.com/syncd-dev/syncd/internal/testkit/fakegcs"
)

var day = time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)

func batch(id string) sink.Batch {
	return sink.Batch{ID: id, Stream: "f1", Table: "form_f1",
		WindowStart: day.Add(time.Hour), WindowEnd: day.Add(2 * time.Hour), SchemaFingerprint: "fp"}
}

var schema = arrow.NewSchema([]arrow.Field{{Name: "submission_id", Type: arrow.BinaryTypes.String}}, nil)

func record(ids ...string) arrow.Record {
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for _, id := range ids {
		b.Field(0).(*array.StringBuilder).Append(id)
	}
	return b.NewRecord()
}

// fakeBucket starts fake-gcs-server with one bucket and points this
// process's GCS clients at it.
func fakeBucket(t *testing.T) (*fakegcs.Server, string) {
	t.Helper()
	f := fakegcs.Start(t)
	t.Setenv("STORAGE_EMULATOR_HOST", f.Host)
	f.CreateBucket(t, "lake")
	return f, "lake"
}

func open(t *testing.T, url string) *Sink {
	t.Helper()
	s, err := New(context.Background(), Options{URL: url, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// readBack downloads the bucket's objects and counts rows per id with DuckDB.
func readBack(t *testing.T, f *fakegcs.Server, bucket, prefix string) map[string]int {
	t.Helper()
	dir := t.TempDir()
	f.Download(t, bucket, prefix, dir)
	return testkit.OpenDuck(t).IDCounts(t, dir, "form_f1")
}

func TestCommitReadBackAndIdempotence(t *testing.T) {
	f, bucket := fakeBucket(t)
	ctx := context.Background()
	s := open(t, "gs://"+bucket+"/lake/v1")

	b := batch("b1")
	if ok, err := s.Committed(ctx, b); err != nil || ok {
		t.Fatalf("before commit: committed=%v err=%v", ok, err)
	}
	rec := record("s1", "s2", "s3")
	defer rec.Release()
	if err := sink.CommitRecord(ctx, s, b, rec); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.Committed(ctx, b); err != nil || !ok {
		t.Fatalf("after commit: committed=%v err=%v", ok, err)
	}
	// The object lands under the layout of the local sink.
	got := f.Object(t, bucket, "lake/v1/form_f1/submission_date=2024-05-01/b1.parquet")
	if len(got) < 8 || string(got[:4]) != "PAR1" {
		t.Fatalf("object is not Parquet: %q...", got[:min(8, len(got))])
	}
	// Committing again, from this sink or another, writes nothing new.
	again := record("s1", "s2", "s3", "s4")
	defer again.Release()
	if err := sink.CommitRecord(ctx, s, b, again); err != nil {
		t.Fatal(err)
	}
	if err := sink.CommitRecord(ctx, open(t, "gs://"+bucket+"/lake/v1"), b, again); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"s1": 1, "s2": 1, "s3": 1}
	if got := readBack(t, f, bucket, "lake/v1/"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("read back %v, want %v", got, want)
	}
}

// TestAbandonedUploadLeavesNothing: an upload whose encoding fails or whose
// context ends never appears under its final name.
func TestAbandonedUploadLeavesNothing(t *testing.T) {
	_, bucket := fakeBucket(t)
	s := open(t, "gs://"+bucket+"/p")
	boom := errors.New("boom")
	cases := []struct {
		name   string
		ctx    func() (context.Context, context.CancelFunc)
		each   func(ctx context.CancelFunc) func(fn func(arrow.Record) error) error
		wantIs error
	}{
		{"encoding fails after a chunk", func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) },
			func(context.CancelFunc) func(fn func(arrow.Record) error) error {
				return func(fn func(arrow.Record) error) error {
					r := record("a")
					defer r.Release()
					if err := fn(r); err != nil {
						return err
					}
					return boom
				}
			}, boom},
		{"context cancelled mid-upload", func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) },
			func(cancel context.CancelFunc) func(fn func(arrow.Record) error) error {
				return func(fn func(arrow.Record) error) error {
					r := record("a")
					defer r.Release()
					if err := fn(r); err != nil {
						return err
					}
					cancel()
					return nil
				}
			}, context.Canceled},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := tc.ctx()
			defer cancel()
			b := batch(fmt.Sprintf("bad%d", i))
			_, err := commitRecords(s, ctx, b, sink.Records{Schema: schema, Rows: 1, Each: tc.each(cancel)})
			if !errors.Is(err, tc.wantIs) {
				t.Fatalf("commit error %v, want %v", err, tc.wantIs)
			}
			if ok, err := s.Committed(context.Background(), b); err != nil || ok {
				t.Fatalf("abandoned upload is visible: committed=%v err=%v", ok, err)
			}
		})
	}
}

// TestFileURL: file:///abs/path writes the same layout into a folder.
func TestFileURL(t *testing.T) {
	dir := t.TempDir()
	s := open(t, "file://"+dir)
	rec := record("x", "y")
	defer rec.Release()
	n, err := commitRecords(s, context.Background(), batch("fb"), sink.Records{Schema: schema, Rows: 2, Each: func(fn func(arrow.Record) error) error { return fn(rec) }})
	if err != nil || n == 0 {
		t.Fatalf("commit: %d bytes, %v", n, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "form_f1", "submission_date=2024-05-01", "fb.parquet")); err != nil {
		t.Fatal(err)
	}
	if got := testkit.OpenDuck(t).IDCounts(t, dir, "form_f1"); got["x"] != 1 || got["y"] != 1 || len(got) != 2 {
		t.Fatalf("read back %v", got)
	}
}

// TestRaceOfTwoWritersOfOneBatch: a batch committed by another writer
// between the existence check and the upload is not written again: the
// upload's precondition (GCS: the object does not exist) refuses it, and
// the commit reports success, since the batch is there.
func TestRaceOfTwoWritersOfOneBatch(t *testing.T) {
	f, bucket := fakeBucket(t)
	ctx := context.Background()
	url := "gs://" + bucket + "/race"
	first, second := open(t, url), open(t, url)
	b := batch("raced")
	mine := record("mine-1", "mine-2")
	defer mine.Release()
	theirs := record("theirs-1")
	defer theirs.Release()
	second.store.beforeUpload = func(string) {
		if err := sink.CommitRecord(ctx, first, b, theirs); err != nil {
			t.Errorf("first writer: %v", err)
		}
	}
	if err := sink.CommitRecord(ctx, second, b, mine); err != nil {
		t.Fatalf("second writer: %v", err)
	}
	want := map[string]int{"theirs-1": 1}
	if got := readBack(t, f, bucket, "race/"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("read back %v, want only the first writer's rows %v", got, want)
	}
}

// TestStopWhenLeaseLost: once the state's lease is gone, an upload in
// flight is abandoned and a new one refused; nothing appears either way.
func TestStopWhenLeaseLost(t *testing.T) {
	_, bucket := fakeBucket(t)
	cases := []struct {
		name       string
		closeEarly bool // lost before the commit starts, or after its first chunk
	}{
		{"lost before the commit", true},
		{"lost mid-upload", false},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t, "gs://"+bucket+"/fenced")
			gone := make(chan struct{})
			s.StopWhen(gone)
			if tc.closeEarly {
				close(gone)
			}
			b := batch(fmt.Sprintf("fenced%d", i))
			_, err := commitRecords(s, context.Background(), b, sink.Records{Schema: schema, Rows: 2, Each: func(fn func(arrow.Record) error) error {
				r := record("a")
				defer r.Release()
				if err := fn(r); err != nil {
					return err
				}
				if !tc.closeEarly {
					close(gone)
				}
				return fn(r)
			}})
			if !errors.Is(err, ErrStopped) {
				t.Fatalf("commit error %v, want ErrStopped", err)
			}
			if ok, err := s.Committed(context.Background(), b); err != nil || ok {
				t.Fatalf("a fenced upload is visible: committed=%v err=%v", ok, err)
			}
		})
	}
}

// commitRecords commits recs as the one part of b, in b's day.
func commitRecords(s *Sink, ctx context.Context, b sink.Batch, recs sink.Records) (int64, error) {
	b.Parts = []string{"2024-05-01"}
	return s.Commit(ctx, b, []sink.Part{{Key: "2024-05-01", Records: recs}})
}

// BenchmarkCommitSmallFile commits batches of three rows to fake GCS: what
// a sparse form's file costs in a bucket, its upload's buffer included.
//
//	go test ./internal/sink/blobsink -run '^$' -bench CommitSmallFile -benchmem
func BenchmarkCommitSmallFile(b *testing.B) {
	f := fakegcs.Start(b)
	b.Setenv("STORAGE_EMULATOR_HOST", f.Host)
	f.CreateBucket(b, "lake")
	s, err := New(context.Background(), Options{URL: "gs://lake/v1", Version: "test"})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	rec := record("s1", "s2", "s3")
	defer rec.Release()
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		i++
		if err := sink.CommitRecord(context.Background(), s, batch(fmt.Sprintf("b%d", i)), rec); err != nil {
			b.Fatal(err)
		}
	}
}
