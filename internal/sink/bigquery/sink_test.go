package bigquery

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/civil"
	"github.com/apache/arrow-go/v18/arrow"
	"google.golang.org/api/googleapi"

	"github.com/syncd-dev/syncd/internal/bqfake"
	"github.com/syncd-dev/syncd/internal/sink"
	"github.com/syncd-dev/syncd/internal/sink/parquetsink"
)

// fieldDesc renders a table column as name:TYPE:MODE[ description].
func fieldDesc(name, typ, mode, desc string) string {
	return strings.TrimSpace(name + ":" + typ + ":" + mode + " " + desc)
}

func TestCommitCreatesDatasetAndTable(t *testing.T) {
	ctx := context.Background()
	f := bqfake.New(t)
	opts := testOptions(t, f)
	opts.TablePrefix = "syncd_"
	opts.Clustering = []string{"form_id"}
	s := newSink(t, opts)

	address := arrow.StructOf(
		arrow.Field{Name: "city", Type: arrow.BinaryTypes.String, Nullable: true},
		arrow.Field{Name: "zip_code", Type: arrow.BinaryTypes.String, Nullable: true},
	)
	file := arrow.StructOf(
		arrow.Field{Name: "url", Type: arrow.BinaryTypes.String, Nullable: true},
		arrow.Field{Name: "size", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	)
	schema := schemaOf(append(baseFields(),
		arrow.Field{Name: "q_score", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		arrow.Field{Name: "q_count", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		arrow.Field{Name: "q_agree", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		arrow.Field{Name: "q_day", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
		arrow.Field{Name: "q_when", Type: tsUTC, Nullable: true},
		arrow.Field{Name: "q_colors", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true, Metadata: described("Favourite colours")},
		arrow.Field{Name: "q_address", Type: address, Nullable: true},
		arrow.Field{Name: "q_files", Type: arrow.ListOf(file), Nullable: true},
	)...)
	b := batch("fA1:2024-05-01T10:00:00Z")
	rec := record(t, schema, b, []string{"s1", "s2"}, map[string]string{
		"q_score":   "2.5",
		"q_count":   "3",
		"q_agree":   "true",
		"q_day":     `"2024-04-30"`,
		"q_when":    `"2024-05-01T09:30:00.123456Z"`,
		"q_colors":  `["red","blue"]`,
		"q_address": `{"city":"Lyon","zip_code":"69001"}`,
		"q_files":   `[{"url":"https://x/1","size":10},{"url":"https://x/2","size":null}]`,
	})
	if err := sink.CommitRecord(ctx, s, b, rec); err != nil {
		t.Fatalf("commit: %v", err)
	}

	ds, ok := f.Dataset(testProject, testDataset)
	if !ok || ds.Location != "europe-west2" {
		t.Fatalf("dataset = %+v, want created in europe-west2", ds)
	}
	md, ok := f.Table(testProject, testDataset, "syncd_form_fa1")
	if !ok {
		t.Fatal("table syncd_form_fa1 not created")
	}
	var got []string
	for _, c := range md.Schema.Fields {
		got = append(got, fieldDesc(c.Name, c.Type, c.Mode, c.Description))
		for _, sub := range c.Fields {
			got = append(got, "  "+fieldDesc(sub.Name, sub.Type, sub.Mode, sub.Description))
		}
	}
	want := []string{
		fieldDesc("form_id", "STRING", "REQUIRED", "Public id of the form"),
		fieldDesc("submission_id", "STRING", "REQUIRED", "Id of the submission, unique within the form"),
		fieldDesc("submission_time", "TIMESTAMP", "REQUIRED", "When the submission was submitted (UTC)"),
		fieldDesc("q_name", "STRING", "NULLABLE", "What is your name?"),
		fieldDesc("_batch_id", "STRING", "NULLABLE", ""),
		fieldDesc("_synced_at", "TIMESTAMP", "NULLABLE", ""),
		fieldDesc("q_score", "FLOAT", "NULLABLE", ""),
		fieldDesc("q_count", "INTEGER", "NULLABLE", ""),
		fieldDesc("q_agree", "BOOLEAN", "NULLABLE", ""),
		fieldDesc("q_day", "DATE", "NULLABLE", ""),
		fieldDesc("q_when", "TIMESTAMP", "NULLABLE", ""),
		fieldDesc("q_colors", "STRING", "REPEATED", "Favourite colours"),
		fieldDesc("q_address", "RECORD", "NULLABLE", ""),
		"  " + fieldDesc("city", "STRING", "NULLABLE", ""),
		"  " + fieldDesc("zip_code", "STRING", "NULLABLE", ""),
		fieldDesc("q_files", "RECORD", "REPEATED", ""),
		"  " + fieldDesc("url", "STRING", "NULLABLE", ""),
		"  " + fieldDesc("size", "INTEGER", "NULLABLE", ""),
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("table schema:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if tp := md.TimePartitioning; tp == nil || tp.Type != "DAY" || tp.Field != "submission_time" {
		t.Errorf("partitioning = %+v, want DAY on submission_time", tp)
	}
	if cl := md.Clustering; cl == nil || fmt.Sprint(cl.Fields) != "[form_id]" {
		t.Errorf("clustering = %+v, want [form_id]", cl)
	}

	rows := f.Rows(testProject, testDataset, "syncd_form_fa1")
	if len(rows) != 2 {
		t.Fatalf("%d rows, want 2", len(rows))
	}
	r := rows[0]
	for col, want := range map[string]any{
		"form_id":         "fA1",
		"submission_id":   "s1",
		"submission_time": time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC),
		"_batch_id":       b.ID,
		"q_score":         2.5,
		"q_count":         int64(3),
		"q_agree":         true,
		"q_day":           civil.Date{Year: 2024, Month: 4, Day: 30},
		"q_when":          time.Date(2024, 5, 1, 9, 30, 0, 123456000, time.UTC),
		"q_colors":        []any{"red", "blue"},
		"q_address":       map[string]any{"city": "Lyon", "zip_code": "69001"},
		"q_files":         []any{map[string]any{"url": "https://x/1", "size": int64(10)}, map[string]any{"url": "https://x/2", "size": nil}},
	} {
		if fmt.Sprintf("%#v", r[col]) != fmt.Sprintf("%#v", want) {
			t.Errorf("%s = %#v, want %#v", col, r[col], want)
		}
	}
	if jobs := f.JobIDs(testProject); fmt.Sprint(jobs) != fmt.Sprint([]string{jobID(b.ID, 1)}) {
		t.Errorf("jobs = %v, want [%s]", jobs, jobID(b.ID, 1))
	}
	if f.Uploads("multipart") != 1 {
		t.Errorf("multipart uploads = %d, want 1", f.Uploads("multipart"))
	}
}

func TestSchemaEvolution(t *testing.T) {
	ctx := context.Background()
	f := bqfake.New(t)
	s := newSink(t, testOptions(t, f))
	const table = "form_fa1"

	b1 := batch("b1")
	ids1 := ids("one", 3)
	if err := sink.CommitRecord(ctx, s, b1, record(t, schemaOf(baseFields()...), b1, ids1, nil)); err != nil {
		t.Fatalf("commit b1: %v", err)
	}

	// New questions: a plain one, a list of records, and one the batch
	// marks non-nullable, which BigQuery can only add as NULLABLE.
	item := arrow.StructOf(arrow.Field{Name: "sku", Type: arrow.BinaryTypes.String}, arrow.Field{Name: "qty", Type: arrow.PrimitiveTypes.Int64, Nullable: true})
	fields2 := append(baseFields(),
		arrow.Field{Name: "q_new", Type: arrow.BinaryTypes.String, Nullable: true, Metadata: described("A new question")},
		arrow.Field{Name: "q_items", Type: arrow.ListOf(item), Nullable: true, Metadata: described("Items")},
		arrow.Field{Name: "q_strict", Type: arrow.PrimitiveTypes.Int64, Metadata: described("Strict")},
	)
	b2 := batch("b2")
	ids2 := ids("two", 2)
	rec2 := record(t, schemaOf(fields2...), b2, ids2, map[string]string{
		"q_new": `"hello"`, "q_items": `[{"sku":"A","qty":2}]`, "q_strict": "5",
	})
	if err := sink.CommitRecord(ctx, s, b2, rec2); err != nil {
		t.Fatalf("commit b2 with new columns: %v", err)
	}

	// A column the table has as REQUIRED that a later batch has nullable
	// is relaxed, not refused.
	fields3 := append([]arrow.Field(nil), fields2...)
	for i := range fields3 {
		if fields3[i].Name == "_synced_at" {
			fields3[i].Nullable = true
		}
	}
	b3 := batch("b3")
	ids3 := ids("three", 1)
	if err := sink.CommitRecord(ctx, s, b3, record(t, schemaOf(fields3...), b3, ids3, map[string]string{"q_strict": "6"})); err != nil {
		t.Fatalf("commit b3 with a relaxed column: %v", err)
	}

	md, _ := f.Table(testProject, testDataset, table)
	modes := map[string]string{}
	descs := map[string]string{}
	for _, c := range md.Schema.Fields {
		modes[c.Name] = c.Type + ":" + c.Mode
		descs[c.Name] = c.Description
		for _, sub := range c.Fields {
			modes[c.Name+"."+sub.Name] = sub.Type + ":" + sub.Mode
		}
	}
	for col, want := range map[string]string{
		"submission_id": "STRING:REQUIRED",
		"_synced_at":    "TIMESTAMP:NULLABLE",
		"q_new":         "STRING:NULLABLE",
		"q_items":       "RECORD:REPEATED",
		"q_items.sku":   "STRING:NULLABLE",
		"q_items.qty":   "INTEGER:NULLABLE",
		"q_strict":      "INTEGER:NULLABLE",
	} {
		if modes[col] != want {
			t.Errorf("column %s is %q, want %q", col, modes[col], want)
		}
	}
	if descs["q_new"] != "A new question" || descs["q_strict"] != "Strict" {
		t.Errorf("added columns lost their descriptions: %q, %q", descs["q_new"], descs["q_strict"])
	}
	exactlyOnce(t, f, table, ids1, ids2, ids3)
	for _, r := range f.Rows(testProject, testDataset, table) {
		id := r["submission_id"].(string)
		switch {
		case strings.HasPrefix(id, "one"):
			if r["q_new"] != nil || r["q_strict"] != nil || fmt.Sprint(r["q_items"]) != "[]" {
				t.Errorf("old row %s: new columns should be NULL/empty, got %v %v %v", id, r["q_new"], r["q_strict"], r["q_items"])
			}
		case strings.HasPrefix(id, "two"):
			if r["q_new"] != "hello" || r["q_strict"] != int64(5) || fmt.Sprint(r["q_items"]) != "[map[qty:2 sku:A]]" {
				t.Errorf("new row %s: got %v %v %v", id, r["q_new"], r["q_strict"], r["q_items"])
			}
		}
	}
}

func TestTypeChangeFailsBeforeAnyJob(t *testing.T) {
	ctx := context.Background()
	f := bqfake.New(t)
	s := newSink(t, testOptions(t, f))
	b1 := batch("b1")
	if err := sink.CommitRecord(ctx, s, b1, record(t, schemaOf(baseFields()...), b1, ids("s", 2), nil)); err != nil {
		t.Fatal(err)
	}
	fields := baseFields()
	fields[3].Type = arrow.PrimitiveTypes.Int64 // q_name: STRING -> INT64
	b2 := batch("b2")
	err := sink.CommitRecord(ctx, s, b2, record(t, schemaOf(fields...), b2, ids("t", 1), map[string]string{"q_name": "1"}))
	var se *SchemaError
	if !errors.As(err, &se) {
		t.Fatalf("err = %v, want a *SchemaError", err)
	}
	for _, part := range []string{"proj.forms.form_fa1", "q_name", "STRING", "INTEGER"} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("error %q does not name %s", err, part)
		}
	}
	if n := f.JobCount(testProject); n != 1 {
		t.Errorf("%d jobs, want 1: a batch that cannot load must not spend a load job", n)
	}
}

// Every injected fault ends in the batch committed once: never lost, never
// loaded twice.
func TestFaultsEndCommittedOnce(t *testing.T) {
	cases := []struct {
		name     string
		faults   []bqfake.Fault
		running  int // jobs.get answers before a job is done
		chunk    int // UploadChunkSize
		attempts int // MaxAttempts, if not the default
		jobs     []int
	}{
		{name: "5xx on insert", faults: []bqfake.Fault{bqfake.Insert5xx}, jobs: []int{1}},
		{name: "rate limited", faults: []bqfake.Fault{bqfake.RateLimited, bqfake.RateLimited}, jobs: []int{1}},
		{name: "job ends in backendError", faults: []bqfake.Fault{bqfake.JobBackendError}, jobs: []int{1, 2}},
		{name: "connection cut after accept", faults: []bqfake.Fault{bqfake.CutAfterAccept}, jobs: []int{1}},
		{name: "connection cut, job still running", faults: []bqfake.Fault{bqfake.CutAfterAccept}, running: 3, jobs: []int{1}},
		{name: "5xx after accept", faults: []bqfake.Fault{bqfake.ErrorAfterAccept}, jobs: []int{1}},
		{name: "everything at once", running: 1, attempts: 6, jobs: []int{1, 2, 3},
			faults: []bqfake.Fault{bqfake.Insert5xx, bqfake.JobBackendError, bqfake.RateLimited, bqfake.JobBackendError, bqfake.CutAfterAccept}},
		{name: "resumable upload, cut after accept", chunk: 256 << 10, faults: []bqfake.Fault{bqfake.RateLimited, bqfake.CutAfterAccept}, jobs: []int{1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			f := bqfake.New(t)
			opts := testOptions(t, f)
			opts.UploadChunkSize = tc.chunk
			if tc.attempts > 0 {
				opts.MaxAttempts = tc.attempts
			}
			opts.Encode = parquetsink.EncodeOptions{Compression: parquetsink.CompressionNone}
			s := newSink(t, opts)
			b := batch("b-" + strings.ReplaceAll(tc.name, " ", "-"))
			n := 5
			extra := map[string]string(nil)
			if tc.chunk > 0 { // enough bytes for more than one chunk
				n = 2500
				extra = map[string]string{"q_name": `"{id}` + strings.Repeat("x", 120) + `"`}
			}
			want := ids("s", n)
			f.Inject(tc.faults...)
			f.SetRunningPolls(tc.running)
			if err := sink.CommitRecord(ctx, s, b, record(t, schemaOf(baseFields()...), b, want, extra)); err != nil {
				t.Fatalf("commit: %v", err)
			}
			if f.PendingFaults() != 0 {
				t.Errorf("%d faults never fired", f.PendingFaults())
			}
			exactlyOnce(t, f, "form_fa1", want)
			var wantJobs []string
			for _, a := range tc.jobs {
				wantJobs = append(wantJobs, jobID(b.ID, a))
			}
			if got := f.JobIDs(testProject); fmt.Sprint(got) != fmt.Sprint(wantJobs) {
				t.Errorf("jobs = %v, want %v", got, wantJobs)
			}
			if tc.chunk > 0 && f.Uploads("resumable") == 0 {
				t.Error("no resumable upload: the file fit one chunk")
			}
			// Committing again finds the job: nothing more is loaded.
			if err := sink.CommitRecord(ctx, s, b, record(t, schemaOf(baseFields()...), b, want, extra)); err != nil {
				t.Fatalf("second commit: %v", err)
			}
			exactlyOnce(t, f, "form_fa1", want)
			if got := len(f.JobIDs(testProject)); got != len(wantJobs) {
				t.Errorf("second commit made a job: %d jobs, want %d", got, len(wantJobs))
			}
		})
	}
}

// A process that dies anywhere in Commit leaves its batch for the next to
// resolve: Committed says whether the batch is in, and Commit completes it
// without a second copy.
func TestRecovery(t *testing.T) {
	cases := []struct {
		name      string
		crash     func(t *testing.T, f *bqfake.Server, s *Sink) // the first process's last act
		committed bool
		jobs      []int
	}{
		{name: "no job", crash: func(*testing.T, *bqfake.Server, *Sink) {}, committed: false, jobs: []int{1}},
		{name: "job succeeded", crash: func(t *testing.T, f *bqfake.Server, s *Sink) {
			b := batch("b1")
			if err := sink.CommitRecord(context.Background(), s, b, record(t, schemaOf(baseFields()...), b, ids("s", 4), nil)); err != nil {
				t.Fatal(err)
			}
		}, committed: true, jobs: []int{1}},
		{name: "job running (died between insert and answer)", crash: func(t *testing.T, f *bqfake.Server, s *Sink) {
			f.SetRunningPolls(2)
			f.Inject(bqfake.CutAfterAccept)
			b := batch("b1")
			if err := sink.CommitRecord(context.Background(), s, b, record(t, schemaOf(baseFields()...), b, ids("s", 4), nil)); err == nil {
				t.Fatal("commit with one try and no answer succeeded")
			}
			if len(f.Rows(testProject, testDataset, "form_fa1")) != 0 {
				t.Fatal("the job was to be still running")
			}
		}, committed: true, jobs: []int{1}},
		{name: "job failed", crash: func(t *testing.T, f *bqfake.Server, s *Sink) {
			f.Inject(bqfake.JobBackendError)
			b := batch("b1")
			if err := sink.CommitRecord(context.Background(), s, b, record(t, schemaOf(baseFields()...), b, ids("s", 4), nil)); err == nil {
				t.Fatal("commit with one try and a failed job succeeded")
			}
		}, committed: false, jobs: []int{1, 2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			f := bqfake.New(t)
			opts := testOptions(t, f)
			opts.MaxAttempts = 1
			tc.crash(t, f, newSink(t, opts))

			s := newSink(t, testOptions(t, f)) // the restarted process
			b := batch("b1")
			ok, err := s.Committed(ctx, b)
			if err != nil || ok != tc.committed {
				t.Fatalf("Committed = %v, %v; want %v", ok, err, tc.committed)
			}
			if ok {
				exactlyOnce(t, f, "form_fa1", ids("s", 4)) // the waited-for job is done
			}
			if err := sink.CommitRecord(ctx, s, b, record(t, schemaOf(baseFields()...), b, ids("s", 4), nil)); err != nil {
				t.Fatalf("commit after restart: %v", err)
			}
			exactlyOnce(t, f, "form_fa1", ids("s", 4))
			var want []string
			for _, a := range tc.jobs {
				want = append(want, jobID(b.ID, a))
			}
			if got := f.JobIDs(testProject); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("jobs = %v, want %v", got, want)
			}
			if ok, err := s.Committed(ctx, b); !ok || err != nil {
				t.Errorf("Committed after commit = %v, %v", ok, err)
			}
		})
	}
}

// Errors a person must fix come at once, in one sentence that names the
// project, dataset, table and the permission or column, and never cost data:
// once fixed, the batch commits once.
func TestClearErrors(t *testing.T) {
	cases := []struct {
		name  string
		setup func(f *bqfake.Server, o *Options)
		fix   func(f *bqfake.Server, o *Options)
		want  []string
	}{
		{name: "no permission to create jobs",
			setup: func(f *bqfake.Server, _ *Options) { f.Deny("bigquery.jobs.create") },
			fix:   func(f *bqfake.Server, _ *Options) { f.Allow("bigquery.jobs.create") },
			want:  []string{"proj.forms.form_fa1", "bigquery.jobs.create", "roles/bigquery.jobUser on project proj"}},
		{name: "no permission to write the table",
			setup: func(f *bqfake.Server, _ *Options) { f.Deny("bigquery.tables.updateData") },
			fix:   func(f *bqfake.Server, _ *Options) { f.Allow("bigquery.tables.updateData") },
			want:  []string{"proj.forms.form_fa1", "bigquery.tables.updateData", "roles/bigquery.dataEditor on dataset proj.forms"}},
		{name: "no permission to create the dataset",
			setup: func(f *bqfake.Server, _ *Options) { f.Deny("bigquery.datasets.create") },
			fix:   func(f *bqfake.Server, _ *Options) { f.Allow("bigquery.datasets.create") },
			want:  []string{"dataset proj.forms", "bigquery.datasets.create", "create dataset proj.forms yourself"}},
		{name: "no permission to create the table",
			setup: func(f *bqfake.Server, _ *Options) { f.Deny("bigquery.tables.create") },
			fix:   func(f *bqfake.Server, _ *Options) { f.Allow("bigquery.tables.create") },
			want:  []string{"proj.forms.form_fa1", "bigquery.tables.create"}},
		{name: "clustering on a missing column",
			setup: func(_ *bqfake.Server, o *Options) { o.Clustering = []string{"nope"} },
			fix:   func(_ *bqfake.Server, o *Options) { o.Clustering = []string{"form_id"} },
			want:  []string{"proj.forms.form_fa1", "nope", "sink.bigquery.clustering"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			f := bqfake.New(t)
			opts := testOptions(t, f)
			tc.setup(f, &opts)
			b := batch("b1")
			want := ids("s", 3)
			rec := record(t, schemaOf(baseFields()...), b, want, nil)
			start := time.Now()
			err := sink.CommitRecord(ctx, newSink(t, opts), b, rec)
			if err == nil {
				t.Fatal("commit succeeded")
			}
			t.Logf("the error: %v", err)
			for _, part := range tc.want {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("error %q does not name %q", err, part)
				}
			}
			if strings.Count(err.Error(), "\n") > 0 {
				t.Errorf("error spans lines: %q", err)
			}
			if time.Since(start) > 2*time.Second {
				t.Errorf("a permanent error took %v: it was retried", time.Since(start))
			}
			if rows := f.Rows(testProject, testDataset, "form_fa1"); len(rows) != 0 {
				t.Fatalf("%d rows after a failed commit", len(rows))
			}
			tc.fix(f, &opts)
			if err := sink.CommitRecord(ctx, newSink(t, opts), b, rec); err != nil {
				t.Fatalf("commit after the fix: %v", err)
			}
			exactlyOnce(t, f, "form_fa1", want)
		})
	}
}

func TestEmptyBatchSpendsNoJob(t *testing.T) {
	ctx := context.Background()
	f := bqfake.New(t)
	s := newSink(t, testOptions(t, f))
	b := batch("empty")
	if err := sink.CommitRecord(ctx, s, b, record(t, schemaOf(baseFields()...), b, nil, nil)); err != nil {
		t.Fatal(err)
	}
	if f.JobCount(testProject) != 0 {
		t.Errorf("%d jobs for an empty batch", f.JobCount(testProject))
	}
	if _, ok := f.Table(testProject, testDataset, "form_fa1"); !ok {
		t.Error("the table was not created")
	}
	if ok, err := s.Committed(ctx, b); ok || err != nil {
		t.Errorf("Committed(empty) = %v, %v; want false: no job holds it, and committing it again is free", ok, err)
	}
}

func TestRowCountMismatchIsAnError(t *testing.T) {
	ctx := context.Background()
	f := bqfake.New(t)
	s := newSink(t, testOptions(t, f))
	b := batch("b1")
	if err := sink.CommitRecord(ctx, s, b, record(t, schemaOf(baseFields()...), b, ids("s", 3), nil)); err != nil {
		t.Fatal(err)
	}
	err := sink.CommitRecord(ctx, s, b, record(t, schemaOf(baseFields()...), b, ids("s", 2), nil))
	if err == nil || !strings.Contains(err.Error(), "3 rows") || !strings.Contains(err.Error(), "has 2") {
		t.Fatalf("err = %v, want one naming 3 and 2 rows", err)
	}
	exactlyOnce(t, f, "form_fa1", ids("s", 3))
}

// Two deployments with the same batch ids in one project would find each
// other's jobs; the sink refuses rather than skip a batch.
func TestJobOfAnotherTableIsRefused(t *testing.T) {
	ctx := context.Background()
	f := bqfake.New(t)
	b := batch("b1")
	rec := record(t, schemaOf(baseFields()...), b, ids("s", 2), nil)
	oa := testOptions(t, f)
	oa.TablePrefix = "a_"
	if err := sink.CommitRecord(ctx, newSink(t, oa), b, rec); err != nil {
		t.Fatal(err)
	}
	ob := testOptions(t, f)
	ob.TablePrefix = "b_"
	sb := newSink(t, ob)
	if ok, err := sb.Committed(ctx, b); ok || err == nil || !strings.Contains(err.Error(), "proj.forms.a_form_fa1") {
		t.Errorf("Committed = %v, %v; want an error naming the other table", ok, err)
	}
	if err := sink.CommitRecord(ctx, sb, b, rec); err == nil || !strings.Contains(err.Error(), "same batch ids") || strings.Contains(err.Error(), "tries") {
		t.Errorf("Commit err = %v, want the collision explained at once, without retries", err)
	}
	if rows := f.Rows(testProject, testDataset, "b_form_fa1"); len(rows) != 0 {
		t.Errorf("%d rows loaded into b_form_fa1", len(rows))
	}
}

func TestDatasetInAnotherLocation(t *testing.T) {
	ctx := context.Background()
	f := bqfake.New(t)
	opts := testOptions(t, f)
	opts.Location = "EU"
	b := batch("b1")
	if err := sink.CommitRecord(ctx, newSink(t, opts), b, record(t, schemaOf(baseFields()...), b, ids("s", 1), nil)); err != nil {
		t.Fatal(err)
	}
	opts.Location = "US"
	err := sink.CommitRecord(ctx, newSink(t, opts), batch("b2"), record(t, schemaOf(baseFields()...), batch("b2"), ids("t", 1), nil))
	if err == nil || !strings.Contains(err.Error(), "is in location EU, not US") {
		t.Errorf("err = %v, want the location mismatch named", err)
	}
	// With no location configured the sink follows the dataset.
	opts.Location = ""
	if err := sink.CommitRecord(ctx, newSink(t, opts), batch("b3"), record(t, schemaOf(baseFields()...), batch("b3"), ids("u", 1), nil)); err != nil {
		t.Errorf("commit following the dataset's location: %v", err)
	}
}

func TestGivesUpAfterMaxAttempts(t *testing.T) {
	ctx := context.Background()
	f := bqfake.New(t)
	opts := testOptions(t, f)
	opts.MaxAttempts = 3
	f.Inject(bqfake.Insert5xx, bqfake.Insert5xx, bqfake.Insert5xx)
	b := batch("b1")
	err := sink.CommitRecord(ctx, newSink(t, opts), b, record(t, schemaOf(baseFields()...), b, ids("s", 1), nil))
	var be *Error
	if !errors.As(err, &be) || !be.Temporary || !strings.Contains(err.Error(), "after 3 tries") {
		t.Fatalf("err = %v, want a temporary *Error after 3 tries", err)
	}
	var ge *googleapi.Error
	if !errors.As(err, &ge) || ge.Code != 503 {
		t.Errorf("the cause is lost: %v", err)
	}
	if f.JobCount(testProject) != 0 {
		t.Errorf("%d jobs", f.JobCount(testProject))
	}
}

func TestContextCancelStopsWaiting(t *testing.T) {
	f := bqfake.New(t)
	opts := testOptions(t, f)
	opts.MinBackoff, opts.MaxBackoff = 20*time.Millisecond, 20*time.Millisecond
	f.SetRunningPolls(1 << 20) // never done
	b := batch("b1")
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := sink.CommitRecord(ctx, newSink(t, opts), b, record(t, schemaOf(baseFields()...), b, ids("s", 1), nil))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the context's deadline", err)
	}
}

// Batches of several tables commit in parallel; the same batch committed
// twice at once still lands once.
func TestConcurrentCommits(t *testing.T) {
	ctx := context.Background()
	f := bqfake.New(t)
	s := newSink(t, testOptions(t, f))
	type job struct {
		b   sink.Batch
		ids []string
	}
	var jobs []job
	for i := range 6 {
		b := batch(fmt.Sprintf("b%d", i%4)) // b0 and b1 twice
		b.Table = fmt.Sprintf("form_%d", i%4%2)
		jobs = append(jobs, job{b, ids(fmt.Sprintf("t%d-", i%4), 3)})
	}
	errs := make(chan error, len(jobs))
	for _, j := range jobs {
		rec := record(t, schemaOf(baseFields()...), j.b, j.ids, nil)
		go func() { errs <- sink.CommitRecord(ctx, s, j.b, rec) }()
	}
	for range jobs {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	exactlyOnce(t, f, "form_0", ids("t0-", 3), ids("t2-", 3))
	exactlyOnce(t, f, "form_1", ids("t1-", 3), ids("t3-", 3))
	if n := f.JobCount(testProject); n != 4 {
		t.Errorf("%d jobs, want 4", n)
	}
}

// A batch's file waits for its load in a scratch folder of its own under
// TempDir, named as spool.CleanStale expects (a process killed mid-load
// leaves it for the next start to remove), and the folder is gone once the
// commit returns, loaded or not.
func TestLoadFileInAScratchFolder(t *testing.T) {
	for _, fault := range []bqfake.Fault{0, bqfake.Insert5xx} {
		t.Run(fmt.Sprint(fault), func(t *testing.T) {
			f := bqfake.New(t)
			opts := testOptions(t, f)
			opts.TempDir = t.TempDir()
			opts.MaxAttempts = 1
			var mu sync.Mutex
			var during []string
			f.OnJobCreated(func(string, string) {
				mu.Lock()
				defer mu.Unlock()
				filepath.WalkDir(opts.TempDir, func(p string, d fs.DirEntry, err error) error {
					if err == nil && p != opts.TempDir {
						rel, _ := filepath.Rel(opts.TempDir, p)
						during = append(during, filepath.ToSlash(rel))
					}
					return nil
				})
			})
			if fault != 0 {
				f.Inject(fault)
			}
			s := newSink(t, opts)
			b := batch("b1")
			err := sink.CommitRecord(context.Background(), s, b, record(t, schemaOf(baseFields()...), b, ids("s", 4), nil))
			if (err != nil) != (fault != 0) {
				t.Fatalf("commit: %v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			folder := regexp.MustCompile(fmt.Sprintf(`^syncd-spool-%d-[^/]+$`, os.Getpid()))
			if fault == 0 && (len(during) != 2 || !folder.MatchString(during[0]) || !strings.HasPrefix(during[1], during[0]+"/") || !strings.HasSuffix(during[1], ".parquet")) {
				t.Errorf("while loading, TempDir held %q; want one folder syncd-spool-<pid>-* with the batch's .parquet file", during)
			}
			left, err := os.ReadDir(opts.TempDir)
			if err != nil || len(left) != 0 {
				t.Errorf("after the commit, TempDir holds %v (%v); want nothing", left, err)
			}
		})
	}
}
