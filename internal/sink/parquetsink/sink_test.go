package parquetsink

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/syncd-dev/syncd/internal/sink"
)

func newSink(t *testing.T, root string) *Sink {
	t.Helper()
	s, err := New(Options{Root: root, Version: "v9.9.9-test"})
	if err != nil {
		t.Fatalf("New(%s): %v", root, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func commit(t *testing.T, s *Sink, b sink.Batch, rows []row) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	rec := buildRecord(t, mem, b.ID, rows)
	err := sink.CommitRecord(context.Background(), s, b, rec)
	rec.Release()
	mem.AssertSize(t, 0)
	if err != nil {
		t.Fatalf("Commit(%s): %v", b.ID, err)
	}
}

func committed(t *testing.T, s *Sink, b sink.Batch) bool {
	t.Helper()
	ok, err := s.Committed(context.Background(), b)
	if err != nil {
		t.Fatalf("Committed(%s): %v", b.ID, err)
	}
	return ok
}

// dirNames lists a folder, hidden files included.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestCommitRoundTrip(t *testing.T) {
	root := t.TempDir()
	s := newSink(t, root)
	b := testBatch("b1", testDay())
	if committed(t, s, b) {
		t.Fatal("Committed before Commit")
	}
	commit(t, s, b, testRows())
	if !committed(t, s, b) {
		t.Fatal("not Committed after Commit")
	}
	want := filepath.Join(root, "answers", "submission_date=2024-05-01", "b1.parquet")
	if s.disk.path(s.Key(b, "2024-05-01")) != want {
		t.Errorf("Path = %s; want %s", s.disk.path(s.Key(b, "2024-05-01")), want)
	}
	if got := dirNames(t, filepath.Dir(want)); !reflect.DeepEqual(got, []string{"b1.parquet"}) {
		t.Errorf("partition folder holds %q; want only b1.parquet", got)
	}

	db := duck(t)
	src := "read_parquet(" + glob(root, "answers") + ", hive_partitioning=true)"

	t.Run("types", func(t *testing.T) {
		want := [][2]string{
			{"_batch_id", "VARCHAR"},
			{"_synced_at", "TIMESTAMP WITH TIME ZONE"},
			{"submission_id", "VARCHAR"},
			{"submitted_at", "TIMESTAMP WITH TIME ZONE"},
			{"name", "VARCHAR"},
			{"age", "BIGINT"},
			{"score", "DOUBLE"},
			{"agree", "BOOLEAN"},
			{"birthday", "DATE"},
			{"tags", "VARCHAR[]"},
			{"address", "STRUCT(street VARCHAR, zip VARCHAR, geo STRUCT(lat DOUBLE, lng DOUBLE))"},
			{"items", "STRUCT(sku VARCHAR, qty BIGINT)[]"},
			{"submission_date", "DATE"},
		}
		rows, err := db.Query("SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM " + src + ")")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var got [][2]string
		for rows.Next() {
			var c [2]string
			if err := rows.Scan(&c[0], &c[1]); err != nil {
				t.Fatal(err)
			}
			got = append(got, c)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("DuckDB sees columns\n%q\nwant\n%q", got, want)
		}
	})

	t.Run("values", func(t *testing.T) {
		// Timestamps as epoch µs so that nothing depends on a time zone.
		want := []string{
			`{"_batch_id":"b1","synced_us":1714536000123456,"submission_id":"s1","submitted_us":1714530615654321,"name":"Ada","age":36,"score":9.5,"agree":true,"birthday":"1988-12-10","tags":["a","b"],"address":{"street":"1 Main St","zip":"12345","geo":{"lat":51.5,"lng":-0.12}},"items":[{"sku":"x","qty":2},{"sku":"y","qty":null}],"submission_date":"2024-05-01"}`,
			`{"_batch_id":"b1","synced_us":1714536000123456,"submission_id":"s2","submitted_us":null,"name":null,"age":null,"score":null,"agree":null,"birthday":null,"tags":null,"address":null,"items":null,"submission_date":"2024-05-01"}`,
			`{"_batch_id":"b1","synced_us":1714536000123456,"submission_id":"s3","submitted_us":1714532399999999,"name":"Ünïcødé, \"quoted\"","age":-1,"score":-0.25,"agree":false,"birthday":"1970-01-01","tags":[],"address":{"street":null,"zip":"0","geo":null},"items":[],"submission_date":"2024-05-01"}`,
		}
		rows, err := db.Query(`SELECT to_json(t)::VARCHAR FROM (
			SELECT * EXCLUDE (_synced_at, submitted_at) REPLACE (birthday::VARCHAR AS birthday, submission_date::VARCHAR AS submission_date),
				epoch_us(_synced_at) AS synced_us, epoch_us(submitted_at) AS submitted_us
			FROM ` + src + `) t ORDER BY submission_id`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		i := 0
		for ; rows.Next(); i++ {
			var got string
			if err := rows.Scan(&got); err != nil {
				t.Fatal(err)
			}
			if i < len(want) && !jsonEqual(t, got, want[i]) {
				t.Errorf("row %d:\n got %s\nwant %s", i, got, want[i])
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if i != len(want) {
			t.Errorf("read %d rows; want %d", i, len(want))
		}
		// And a driver-level check that the timestamp is a real instant.
		var at time.Time
		if err := db.QueryRow("SELECT submitted_at FROM " + src + " WHERE submission_id = 's1'").Scan(&at); err != nil {
			t.Fatal(err)
		}
		if want := time.Date(2024, 5, 1, 2, 30, 15, 654321000, time.UTC); !at.Equal(want) {
			t.Errorf("submitted_at = %s; want %s", at, want)
		}
	})

	t.Run("required", func(t *testing.T) {
		want := map[string]string{
			"_batch_id": "REQUIRED", "_synced_at": "REQUIRED", "submission_id": "REQUIRED",
			"submitted_at": "OPTIONAL", "name": "OPTIONAL", "age": "OPTIONAL", "score": "OPTIONAL",
			"agree": "OPTIONAL", "birthday": "OPTIONAL", "tags": "OPTIONAL", "address": "OPTIONAL",
			"street": "OPTIONAL", "zip": "REQUIRED", "geo": "OPTIONAL", "lat": "OPTIONAL", "lng": "OPTIONAL",
			"items": "OPTIONAL", "sku": "REQUIRED", "qty": "OPTIONAL",
		}
		rows, err := db.Query("SELECT name, repetition_type FROM parquet_schema(" + glob(root, "answers") + ") WHERE name NOT IN ('schema', 'list', 'element')")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		got := map[string]string{}
		for rows.Next() {
			var name, rep string
			if err := rows.Scan(&name, &rep); err != nil {
				t.Fatal(err)
			}
			got[name] = rep
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("repetition types\n got %v\nwant %v", got, want)
		}
	})

	t.Run("footer", func(t *testing.T) {
		want := map[string]string{
			KeyVersion:           "v9.9.9-test",
			KeyFormID:            "form-1",
			KeyBatchID:           "b1",
			KeyWindowStart:       "2024-05-01T02:00:00.000000Z",
			KeyWindowEnd:         "2024-05-01T03:00:00.000500Z",
			KeySchemaFingerprint: "fp-b1",
			KeyPartsZst:          `["2024-05-01"]`, // unpacked below
		}
		rows, err := db.Query("SELECT decode(key), decode(value) FROM parquet_kv_metadata(" + glob(root, "answers") + ") WHERE decode(key) LIKE 'syncd.%'")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		got := map[string]string{}
		for rows.Next() {
			var k, v string
			if err := rows.Scan(&k, &v); err != nil {
				t.Fatal(err)
			}
			if strings.HasSuffix(k, ".zst") {
				b, err := unpack(v)
				if err != nil {
					t.Fatalf("footer value %s: %v", k, err)
				}
				v = string(b)
			}
			got[k] = v
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("footer metadata\n got %v\nwant %v", got, want)
		}
		// No Arrow schema: pqarrow reads the same types back without it
		// (TestAllTypesReadBack), and it was most of a small file.
		if n := queryInt(t, db, "SELECT count(*) FROM parquet_kv_metadata("+glob(root, "answers")+") WHERE decode(key) = 'ARROW:schema'"); n != 0 {
			t.Errorf("%d ARROW:schema entries in the footer; want none", n)
		}
	})
}

func jsonEqual(t *testing.T, a, b string) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal([]byte(a), &va); err != nil {
		t.Fatalf("bad JSON %s: %v", a, err)
	}
	if err := json.Unmarshal([]byte(b), &vb); err != nil {
		t.Fatalf("bad JSON %s: %v", b, err)
	}
	return reflect.DeepEqual(va, vb)
}

func TestCommitIdempotent(t *testing.T) {
	root := t.TempDir()
	s := newSink(t, root)
	b := testBatch("b1", testDay())
	commit(t, s, b, testRows())
	before, err := os.ReadFile(s.disk.path(s.Key(b, "2024-05-01")))
	if err != nil {
		t.Fatal(err)
	}
	// Again, even with other rows: the batch is already in place.
	commit(t, s, b, testRows()[:1])
	// And from a fresh sink, as after a restart.
	commit(t, newSink(t, root), b, testRows())

	if got := dirNames(t, filepath.Dir(s.disk.path(s.Key(b, "2024-05-01")))); !reflect.DeepEqual(got, []string{"b1.parquet"}) {
		t.Errorf("partition folder holds %q; want only b1.parquet", got)
	}
	after, err := os.ReadFile(s.disk.path(s.Key(b, "2024-05-01")))
	if err != nil {
		t.Fatal(err)
	}
	if string(before) != string(after) {
		t.Error("the committed file was rewritten")
	}
	if n := queryInt(t, duck(t), "SELECT count(*) FROM read_parquet("+glob(root, "answers")+")"); n != 3 {
		t.Errorf("DuckDB reads %d rows; want 3", n)
	}
}

func TestCommitConcurrentSameBatch(t *testing.T) {
	root := t.TempDir()
	s := newSink(t, root)
	b := testBatch("b1", testDay())
	rec := buildRecord(t, memory.DefaultAllocator, b.ID, testRows())
	defer rec.Release()
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() { errs[i] = sink.CommitRecord(context.Background(), s, b, rec) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if got := dirNames(t, filepath.Dir(s.disk.path(s.Key(b, "2024-05-01")))); !reflect.DeepEqual(got, []string{"b1.parquet"}) {
		t.Errorf("partition folder holds %q; want only b1.parquet", got)
	}
}

func TestCommitReplacesBadFile(t *testing.T) {
	otherBatch := func(t *testing.T, path string) {
		// A valid Parquet file of another batch under b1's name.
		rec := buildRecord(t, memory.DefaultAllocator, "b2", testRows()[:1])
		defer rec.Release()
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := Encode(f, rec, testBatch("b2", testDay()), nil, EncodeOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name  string
		write func(t *testing.T, path string)
	}{
		{"garbage", func(t *testing.T, path string) { os.WriteFile(path, []byte("not parquet"), 0o644) }},
		{"empty", func(t *testing.T, path string) { os.WriteFile(path, nil, 0o644) }},
		{"truncated", func(t *testing.T, path string) {
			otherBatch(t, path)
			data, _ := os.ReadFile(path)
			os.WriteFile(path, data[:len(data)-10], 0o644)
		}},
		{"other batch", otherBatch},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			s := newSink(t, root)
			b := testBatch("b1", testDay())
			os.MkdirAll(filepath.Dir(s.disk.path(s.Key(b, "2024-05-01"))), 0o755)
			tc.write(t, s.disk.path(s.Key(b, "2024-05-01")))
			if committed(t, s, b) {
				t.Fatal("Committed is true for a bad file")
			}
			commit(t, s, b, testRows())
			if !committed(t, s, b) {
				t.Fatal("Committed is false after replacing the bad file")
			}
			db := duck(t)
			if n := queryInt(t, db, "SELECT count(*) FROM read_parquet("+glob(root, "answers")+") WHERE _batch_id = 'b1'"); n != 3 {
				t.Errorf("DuckDB reads %d rows of b1; want 3", n)
			}
		})
	}
}

func TestSchemaEvolution(t *testing.T) {
	root := t.TempDir()
	s := newSink(t, root)
	ctx := context.Background()
	mk := func(withY bool, x int64) arrow.Record {
		fields := []arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}
		if withY {
			fields = append(fields, arrow.Field{Name: "y", Type: arrow.BinaryTypes.String, Nullable: true})
		}
		b := array.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema(fields, nil))
		defer b.Release()
		b.Field(0).(*array.Int64Builder).Append(x)
		if withY {
			b.Field(1).(*array.StringBuilder).Append("new")
		}
		return b.NewRecord()
	}
	a, bb := mk(false, 1), mk(true, 2)
	defer a.Release()
	defer bb.Release()
	next := testDay().AddDate(0, 0, 1)
	if err := sink.CommitRecord(ctx, s, testBatch("a", testDay()), a); err != nil {
		t.Fatal(err)
	}
	if err := sink.CommitRecord(ctx, s, testBatch("b", next), bb); err != nil {
		t.Fatal(err)
	}
	rows, err := duck(t).Query("SELECT x, y, submission_date::VARCHAR FROM read_parquet(" + glob(root, "answers") + ", union_by_name=true, hive_partitioning=true) ORDER BY x")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	type r struct {
		X   int64
		Y   sql.NullString
		Day string
	}
	var got []r
	for rows.Next() {
		var v r
		if err := rows.Scan(&v.X, &v.Y, &v.Day); err != nil {
			t.Fatal(err)
		}
		got = append(got, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := []r{{1, sql.NullString{}, "2024-05-01"}, {2, sql.NullString{String: "new", Valid: true}, "2024-05-02"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("read %+v; want %+v", got, want)
	}
}

func TestCommitCancelled(t *testing.T) {
	tests := []struct {
		name string
		// cancel cancels at some point of the commit
		setup func(s *Sink, cancel context.CancelFunc)
	}{
		{"before the commit", func(s *Sink, cancel context.CancelFunc) { cancel() }},
		{"between write and rename", func(s *Sink, cancel context.CancelFunc) {
			s.disk.beforeRename = func(tmp, final string) {
				if _, err := os.Stat(tmp); err != nil {
					panic("the temporary file is not there: " + err.Error())
				}
				cancel()
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			s := newSink(t, root)
			b := testBatch("b1", testDay())
			rec := buildRecord(t, memory.DefaultAllocator, b.ID, testRows())
			defer rec.Release()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			tc.setup(s, cancel)
			if err := sink.CommitRecord(ctx, s, b, rec); !errors.Is(err, context.Canceled) {
				t.Fatalf("Commit error = %v; want context.Canceled", err)
			}
			if committed(t, s, b) {
				t.Error("Committed after a cancelled commit")
			}
			var files []string
			filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					files = append(files, p)
				}
				return err
			})
			if len(files) != 0 {
				t.Errorf("a cancelled commit left %q", files)
			}
		})
	}
}

func TestCommitRejectsBadBatch(t *testing.T) {
	day := testDay()
	tests := []struct {
		name    string
		edit    func(b *sink.Batch)
		wantErr string
	}{
		{"empty id", func(b *sink.Batch) { b.ID = "" }, "batch id is empty"},
		{"slash in id", func(b *sink.Batch) { b.ID = "a/b" }, "path separator"},
		{"dot-dot id", func(b *sink.Batch) { b.ID = ".." }, "path separator or '..'"},
		{"hidden id", func(b *sink.Batch) { b.ID = "_x" }, "starts with '.' or '_'"},
		{"control char", func(b *sink.Batch) { b.ID = "a\nb" }, "control character"},
		{"long id", func(b *sink.Batch) { b.ID = strings.Repeat("a", 201) }, "longer than 200 bytes"},
		{"empty table", func(b *sink.Batch) { b.Table = "" }, "table name is empty"},
		{"table escapes", func(b *sink.Batch) { b.Table = "../etc" }, "path separator"},
		{"table partition-like", func(b *sink.Batch) { b.Table = "a=b" }, "Hive partition"},
		{"empty window", func(b *sink.Batch) { b.WindowEnd = b.WindowStart }, "is empty"},
	}
	root := t.TempDir()
	s := newSink(t, root)
	rec := buildRecord(t, memory.DefaultAllocator, "x", testRows())
	defer rec.Release()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := testBatch("b1", day)
			tc.edit(&b)
			err := sink.CommitRecord(context.Background(), s, b, rec)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Commit error = %v; want one containing %q", err, tc.wantErr)
			}
			if _, err := s.Committed(context.Background(), b); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Committed error = %v; want one containing %q", err, tc.wantErr)
			}
		})
	}
	if got := dirNames(t, root); len(got) != 0 {
		t.Errorf("rejected batches left %q in the root", got)
	}
}

func TestBadRoot(t *testing.T) {
	base := t.TempDir()
	aFile := filepath.Join(base, "file")
	if err := os.WriteFile(aFile, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, root, wantErr string
	}{
		{"empty", "", "set sink.parquet.path"},
		{"a file", aFile, aFile + " is not a folder: point sink.parquet.path at a folder"},
		{"under a file", filepath.Join(aFile, "out"), filepath.Join(aFile, "out") + ": not a directory: a file is in the way of a folder: remove it or point sink.parquet.path elsewhere"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(Options{Root: tc.root})
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("New error = %v; want one containing %q", err, tc.wantErr)
			}
		})
	}

	t.Run("created", func(t *testing.T) {
		root := filepath.Join(base, "a", "b", "c")
		newSink(t, root)
		if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
			t.Errorf("New did not create %s: %v", root, err)
		}
	})

	t.Run("table folder blocked", func(t *testing.T) {
		root := t.TempDir()
		s := newSink(t, root)
		os.WriteFile(filepath.Join(root, "answers"), nil, 0o644)
		rec := buildRecord(t, memory.DefaultAllocator, "b1", testRows())
		defer rec.Release()
		err := sink.CommitRecord(context.Background(), s, testBatch("b1", testDay()), rec)
		want := "create folder " + filepath.Join(root, "answers") + ": something else is in the way"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Commit error = %v; want one containing %q", err, want)
		}
	})

	t.Run("read-only", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("root ignores folder permissions")
		}
		root := t.TempDir()
		s := newSink(t, root)
		if err := os.Chmod(root, 0o555); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(root, 0o755) })
		rec := buildRecord(t, memory.DefaultAllocator, "b1", testRows())
		defer rec.Release()
		err := sink.CommitRecord(context.Background(), s, testBatch("b1", testDay()), rec)
		if !errors.Is(err, os.ErrPermission) || !strings.Contains(err.Error(), root) || !strings.Contains(err.Error(), "give syncd write access") {
			t.Errorf("Commit error = %v; want permission denied naming %s and the fix", err, root)
		}
	})
}

func TestStaleTempsCleaned(t *testing.T) {
	root := t.TempDir()
	s := newSink(t, root)
	b1 := testBatch("b1", testDay())
	dir := filepath.Dir(s.disk.path(s.Key(b1, "2024-05-01")))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	touch := func(name string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	touch(".b1.parquet.tmp-111")
	touch(".b2.parquet.tmp-222")
	touch("keep.txt")

	// A commit of b1 clears b1's leftovers and only those.
	commit(t, s, b1, testRows())
	if got, want := dirNames(t, dir), []string{".b2.parquet.tmp-222", "b1.parquet", "keep.txt"}; !reflect.DeepEqual(got, want) {
		t.Errorf("after Commit(b1) the folder holds %q; want %q", got, want)
	}
	// Opening the sink clears every leftover.
	newSink(t, root)
	if got, want := dirNames(t, dir), []string{"b1.parquet", "keep.txt"}; !reflect.DeepEqual(got, want) {
		t.Errorf("after New the folder holds %q; want %q", got, want)
	}
}

// The crash test re-runs this test binary as a writer that SIGKILLs itself
// at a chosen point of a commit.
const (
	envCrashAt   = "PARQUETSINK_CRASH_AT"
	envCrashRoot = "PARQUETSINK_CRASH_ROOT"
)

// TestCrashHelper is the writer process of TestCrash; it does nothing in a
// normal run.
func TestCrashHelper(t *testing.T) {
	at, root := os.Getenv(envCrashAt), os.Getenv(envCrashRoot)
	if at == "" {
		t.Skip("run by TestCrash as a subprocess")
	}
	s, err := New(Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	die := func(tmp, final string) {
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		time.Sleep(time.Minute) // the signal arrives before this ends
	}
	switch at {
	case "before-rename":
		s.disk.beforeRename = die
	case "after-rename":
		s.disk.afterRename = die
	default:
		t.Fatalf("unknown crash point %q", at)
	}
	b := testBatch("b1", testDay())
	rec := buildRecord(t, memory.DefaultAllocator, b.ID, testRows())
	err = sink.CommitRecord(context.Background(), s, b, rec)
	t.Fatalf("Commit returned (%v) instead of being killed", err)
}

func TestCrash(t *testing.T) {
	tests := []struct {
		at            string
		wantCommitted bool // what a restarted syncd must be told
	}{
		{"before-rename", false},
		{"after-rename", true},
	}
	for _, tc := range tests {
		t.Run(tc.at, func(t *testing.T) {
			root := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestCrashHelper$", "-test.count=1")
			cmd.Env = append(os.Environ(), envCrashAt+"="+tc.at, envCrashRoot+"="+root)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("writer: %v\n%s", err, out)
			}
			if ws, ok := exit.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
				t.Fatalf("writer was not killed at %s: %v\n%s", tc.at, err, out)
			}

			b := testBatch("b1", testDay())
			dir := filepath.Join(root, "answers", "submission_date=2024-05-01")
			names := dirNames(t, dir)
			db := duck(t)
			files := "SELECT count(*) FROM glob(" + glob(root, "answers") + ")"
			rowsOf := "SELECT count(*) FROM read_parquet(" + glob(root, "answers") + ")"
			if tc.wantCommitted {
				if !reflect.DeepEqual(names, []string{"b1.parquet"}) {
					t.Fatalf("after the crash the folder holds %q; want only b1.parquet", names)
				}
				if n := queryInt(t, db, rowsOf); n != 3 {
					t.Errorf("DuckDB reads %d rows of the crashed commit; want all 3", n)
				}
			} else {
				// The writer died holding a complete temporary file that
				// readers must not see.
				if len(names) != 1 || !isTemp(names[0]) {
					t.Fatalf("after the crash the folder holds %q; want one temporary file", names)
				}
				if n := queryInt(t, db, files); n != 0 {
					t.Errorf("DuckDB's glob finds %d files; want none", n)
				}
			}

			s := newSink(t, root) // the restart
			if got := committed(t, s, b); got != tc.wantCommitted {
				t.Fatalf("Committed after the crash = %v; want %v", got, tc.wantCommitted)
			}
			commit(t, s, b, testRows()) // resolving the open intent
			if !committed(t, s, b) {
				t.Error("not Committed after the retry")
			}
			if got := dirNames(t, dir); !reflect.DeepEqual(got, []string{"b1.parquet"}) {
				t.Errorf("after the retry the folder holds %q; want only b1.parquet", got)
			}
			var n, ids int64
			if err := db.QueryRow("SELECT count(*), count(DISTINCT submission_id) FROM read_parquet("+glob(root, "answers")+")").Scan(&n, &ids); err != nil {
				t.Fatal(err)
			}
			if n != 3 || ids != 3 {
				t.Errorf("DuckDB reads %d rows, %d distinct; want each of the 3 exactly once", n, ids)
			}
		})
	}
}

// TestCommitNeedsATimeColumnAcrossPartitions: a record whose window spans
// partitions cannot be placed without a time column to split it by.
func TestCommitNeedsATimeColumnAcrossPartitions(t *testing.T) {
	s := newSink(t, t.TempDir())
	b := testBatch("span", testDay())
	b.WindowEnd = testDay().Add(25 * time.Hour)
	rec := buildRecord(t, memory.DefaultAllocator, "x", testRows())
	defer rec.Release()
	if err := sink.CommitRecord(context.Background(), s, b, rec); err == nil || !strings.Contains(err.Error(), "spans partitions 2024-05-01 to 2024-05-02") {
		t.Fatalf("Commit error = %v", err)
	}
}
