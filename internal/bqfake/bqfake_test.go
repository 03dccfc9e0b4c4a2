package bqfake_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/civil"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/api/googleapi"

	"github.com/syncd-dev/syncd/internal/bqfake"
	"github.com/syncd-dev/syncd/internal/sink"
	"github.com/syncd-dev/syncd/internal/sink/parquetsink"
)

const project = "proj"

var tsUTC = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}

// parquetFile encodes JSON rows of schema with the encoder the sink uses.
func parquetFile(t *testing.T, schema *arrow.Schema, rowsJSON string, opts parquetsink.EncodeOptions) []byte {
	t.Helper()
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, schema, strings.NewReader(rowsJSON))
	if err != nil {
		t.Fatalf("build record: %v", err)
	}
	defer rec.Release()
	var buf bytes.Buffer
	now := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	if _, err := parquetsink.Encode(&buf, rec, sink.Batch{ID: "b", Stream: "f", WindowStart: now, WindowEnd: now.Add(time.Hour)}, nil, opts); err != nil {
		t.Fatalf("encode: %v", err)
	}
	return buf.Bytes()
}

func newClient(t *testing.T, f *bqfake.Server) *bigquery.Client {
	t.Helper()
	c, err := bigquery.NewClient(context.Background(), project, f.ClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// setup creates dataset d (in location) and, when schema is set, table t.
func setup(t *testing.T, c *bigquery.Client, location string, schema bigquery.Schema) *bigquery.Table {
	t.Helper()
	ctx := context.Background()
	if err := c.Dataset("d").Create(ctx, &bigquery.DatasetMetadata{Location: location}); err != nil {
		t.Fatalf("create dataset: %v", err)
	}
	tb := c.Dataset("d").Table("t")
	if schema != nil {
		if err := tb.Create(ctx, &bigquery.TableMetadata{Schema: schema}); err != nil {
			t.Fatalf("create table: %v", err)
		}
	}
	return tb
}

type loadOpts struct {
	jobID         string
	noInference   bool
	noAddition    bool
	chunk         int
	createIfNeeed bool
}

func load(ctx context.Context, tb *bigquery.Table, data []byte, o loadOpts) (*bigquery.Job, error) {
	src := bigquery.NewReaderSource(bytes.NewReader(data))
	src.SourceFormat = bigquery.Parquet
	src.ParquetOptions = &bigquery.ParquetOptions{EnableListInference: !o.noInference}
	l := tb.LoaderFrom(src)
	l.JobID = o.jobID
	l.WriteDisposition = bigquery.WriteAppend
	l.CreateDisposition = bigquery.CreateNever
	if o.createIfNeeed {
		l.CreateDisposition = bigquery.CreateIfNeeded
	}
	if !o.noAddition {
		l.SchemaUpdateOptions = []string{"ALLOW_FIELD_ADDITION"}
	}
	l.MediaOptions = []googleapi.MediaOption{googleapi.ChunkSize(o.chunk)}
	return l.Run(ctx)
}

func waitDone(t *testing.T, ctx context.Context, j *bigquery.Job) *bigquery.JobStatus {
	t.Helper()
	st := j.LastStatus()
	for i := 0; !st.Done(); i++ {
		if i > 20 {
			t.Fatal("job never finished")
		}
		var err error
		if st, err = j.Status(ctx); err != nil {
			t.Fatalf("job status: %v", err)
		}
	}
	return st
}

func TestLoadStoresWhatTheFileHolds(t *testing.T) {
	ctx := context.Background()
	f := bqfake.New(t)
	c := newClient(t, f)
	item := arrow.StructOf(
		arrow.Field{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		arrow.Field{Name: "size", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	)
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.BinaryTypes.String},
		{Name: "at", Type: tsUTC},
		{Name: "day", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
		{Name: "score", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "n", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "ok", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
		{Name: "item", Type: item, Nullable: true},
		{Name: "items", Type: arrow.ListOf(item), Nullable: true},
	}, nil)
	data := parquetFile(t, schema, `[
		{"id":"s1","at":"2024-05-01T10:00:00.000001Z","day":"2024-04-30","score":1.5,"n":7,"ok":true,
		 "tags":["a","b"],"item":{"name":"x","size":3},"items":[{"name":"y","size":null}]},
		{"id":"s2","at":"2024-05-01T11:00:00Z","day":null,"score":null,"n":null,"ok":null,"tags":null,"item":null,"items":[]}
	]`, parquetsink.EncodeOptions{})
	tb := setup(t, c, "", nil)
	j, err := load(ctx, tb, data, loadOpts{jobID: "j1", createIfNeeed: true})
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	st := waitDone(t, ctx, j)
	if st.Err() != nil {
		t.Fatalf("load job failed: %v", st.Err())
	}
	if n := st.Statistics.Details.(*bigquery.LoadStatistics).OutputRows; n != 2 {
		t.Errorf("output rows = %d, want 2", n)
	}

	md, ok := f.Table(project, "d", "t")
	if !ok {
		t.Fatal("table not created by the load")
	}
	var got []string
	for _, fs := range md.Schema.Fields {
		sub := ""
		for _, c := range fs.Fields {
			sub += " " + c.Name + ":" + c.Type + ":" + c.Mode
		}
		got = append(got, fs.Name+":"+fs.Type+":"+fs.Mode+sub)
	}
	want := []string{"id:STRING:REQUIRED", "at:TIMESTAMP:REQUIRED", "day:DATE:NULLABLE", "score:FLOAT:NULLABLE",
		"n:INTEGER:NULLABLE", "ok:BOOLEAN:NULLABLE", "tags:STRING:REPEATED",
		"item:RECORD:NULLABLE name:STRING:NULLABLE size:INTEGER:NULLABLE",
		"items:RECORD:REPEATED name:STRING:NULLABLE size:INTEGER:NULLABLE"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("schema derived from the file:\n got %v\nwant %v", got, want)
	}

	rows := f.Rows(project, "d", "t")
	if len(rows) != 2 {
		t.Fatalf("rows = %d, want 2", len(rows))
	}
	r := rows[0]
	checks := []struct {
		col  string
		want any
	}{
		{"id", "s1"},
		{"at", time.Date(2024, 5, 1, 10, 0, 0, 1000, time.UTC)},
		{"day", civil.Date{Year: 2024, Month: 4, Day: 30}},
		{"score", 1.5},
		{"n", int64(7)},
		{"ok", true},
		{"tags", []any{"a", "b"}},
		{"item", map[string]any{"name": "x", "size": int64(3)}},
		{"items", []any{map[string]any{"name": "y", "size": nil}}},
	}
	for _, c := range checks {
		if fmt.Sprintf("%#v", r[c.col]) != fmt.Sprintf("%#v", c.want) {
			t.Errorf("row 0 %s = %#v, want %#v", c.col, r[c.col], c.want)
		}
	}
	if fmt.Sprint(rows[1]["tags"]) != "[]" || rows[1]["item"] != nil || rows[1]["day"] != nil {
		t.Errorf("row 1: a NULL array loads as empty and NULLs stay NULL; got %v", rows[1])
	}
}

// A load is checked against the table as BigQuery checks it; a rejected
// file loads nothing.
func TestLoadRejects(t *testing.T) {
	base := bigquery.Schema{
		{Name: "id", Type: bigquery.StringFieldType, Required: true},
		{Name: "n", Type: bigquery.IntegerFieldType},
		{Name: "tags", Type: bigquery.StringFieldType, Repeated: true},
	}
	idField := arrow.Field{Name: "id", Type: arrow.BinaryTypes.String}
	cases := []struct {
		name   string
		fields []arrow.Field
		rows   string
		opts   loadOpts
		want   string // in the job's error
	}{
		{"type change", []arrow.Field{idField, {Name: "n", Type: arrow.BinaryTypes.String, Nullable: true}},
			`[{"id":"a","n":"x"}]`, loadOpts{}, "Field n has changed type from INTEGER to STRING"},
		{"required column added", []arrow.Field{idField, {Name: "extra", Type: arrow.BinaryTypes.String}},
			`[{"id":"a","extra":"x"}]`, loadOpts{}, "Cannot add required fields to an existing schema. (field: extra)"},
		{"column added without ALLOW_FIELD_ADDITION", []arrow.Field{idField, {Name: "extra", Type: arrow.BinaryTypes.String, Nullable: true}},
			`[{"id":"a","extra":"x"}]`, loadOpts{noAddition: true}, "Cannot add fields (field: extra)"},
		{"bad column name", []arrow.Field{idField, {Name: "bad-name", Type: arrow.BinaryTypes.String, Nullable: true}},
			`[{"id":"a","bad-name":"x"}]`, loadOpts{}, `Invalid field name "bad-name"`},
		{"reserved column name", []arrow.Field{idField, {Name: "_PARTITIONTIME", Type: arrow.BinaryTypes.String, Nullable: true}},
			`[{"id":"a","_PARTITIONTIME":"x"}]`, loadOpts{}, "reserved prefix"},
		{"nullable file column for a REQUIRED one", []arrow.Field{{Name: "id", Type: arrow.BinaryTypes.String, Nullable: true}},
			`[{"id":"a"}]`, loadOpts{}, "Field id has changed mode from REQUIRED to NULLABLE"},
		{"required file column for a NULLABLE one", []arrow.Field{idField, {Name: "n", Type: arrow.PrimitiveTypes.Int64}},
			`[{"id":"a","n":1}]`, loadOpts{}, "Field n has changed mode from NULLABLE to REQUIRED"},
		{"required column missing", []arrow.Field{{Name: "n", Type: arrow.PrimitiveTypes.Int64, Nullable: true}},
			`[{"n":1}]`, loadOpts{}, "Missing required field: id"},
		{"list without list inference", []arrow.Field{idField, {Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true}},
			`[{"id":"a","tags":["x"]}]`, loadOpts{noInference: true}, "Field tags has changed type from STRING to RECORD"},
		{"null array element", []arrow.Field{idField, {Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true}},
			`[{"id":"a","tags":["x",null]}]`, loadOpts{}, "Array cannot have a null element"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			f := bqfake.New(t)
			c := newClient(t, f)
			tb := setup(t, c, "", base)
			data := parquetFile(t, arrow.NewSchema(tc.fields, nil), tc.rows, parquetsink.EncodeOptions{})
			j, err := load(ctx, tb, data, tc.opts)
			if err != nil {
				t.Fatalf("insert: %v", err)
			}
			st := waitDone(t, ctx, j)
			var be *bigquery.Error
			if !errors.As(st.Err(), &be) || be.Reason != "invalid" || !strings.Contains(be.Message, tc.want) {
				t.Fatalf("job error = %v, want reason invalid with %q", st.Err(), tc.want)
			}
			if rows := f.Rows(project, "d", "t"); len(rows) != 0 {
				t.Errorf("a rejected load left %d rows", len(rows))
			}
			if md, _ := f.Table(project, "d", "t"); len(md.Schema.Fields) != len(base) {
				t.Errorf("a rejected load changed the schema: %d fields", len(md.Schema.Fields))
			}
		})
	}
}

func TestJobIDsAreUniqueForever(t *testing.T) {
	ctx := context.Background()
	f := bqfake.New(t)
	c := newClient(t, f)
	tb := setup(t, c, "", bigquery.Schema{{Name: "id", Type: bigquery.StringFieldType, Required: true}})
	data := parquetFile(t, arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.BinaryTypes.String}}, nil), `[{"id":"a"}]`, parquetsink.EncodeOptions{})

	f.Inject(bqfake.JobBackendError)
	j, err := load(ctx, tb, data, loadOpts{jobID: "failed"})
	if err != nil {
		t.Fatal(err)
	}
	if st := waitDone(t, ctx, j); st.Err() == nil {
		t.Fatal("the job was to fail with backendError")
	}
	j, err = load(ctx, tb, data, loadOpts{jobID: "ok"})
	if err != nil {
		t.Fatal(err)
	}
	waitDone(t, ctx, j)
	for _, id := range []string{"failed", "ok"} {
		_, err := load(ctx, tb, data, loadOpts{jobID: id})
		var ge *googleapi.Error
		if !errors.As(err, &ge) || ge.Code != http.StatusConflict || ge.Errors[0].Reason != "duplicate" {
			t.Errorf("second insert of job %s: err = %v, want 409 duplicate", id, err)
		}
	}
	if got := f.IDs(project, "d", "t", "id"); got["a"] != 1 || len(got) != 1 {
		t.Errorf("rows by id = %v, want a once", got)
	}
	if n := f.JobCount(project); n != 2 {
		t.Errorf("job count = %d, want 2", n)
	}
}

func TestFaults(t *testing.T) {
	cases := []struct {
		fault     bqfake.Fault
		code      int    // of the insert's error, 0 for none
		reason    string // of the insert's error
		transport bool   // the insert gets no answer
		job       bool   // a job exists afterwards
		rows      int
	}{
		{fault: bqfake.Insert5xx, code: 503, reason: "backendError"},
		{fault: bqfake.RateLimited, code: 403, reason: "rateLimitExceeded"},
		{fault: bqfake.InsertAccessDenied, code: 403, reason: "accessDenied"},
		{fault: bqfake.JobBackendError, job: true},
		{fault: bqfake.CutAfterAccept, transport: true, job: true, rows: 1},
		{fault: bqfake.ErrorAfterAccept, code: 503, reason: "backendError", job: true, rows: 1},
	}
	for _, tc := range cases {
		t.Run(tc.fault.String(), func(t *testing.T) {
			ctx := context.Background()
			f := bqfake.New(t)
			c := newClient(t, f)
			tb := setup(t, c, "", bigquery.Schema{{Name: "id", Type: bigquery.StringFieldType, Required: true}})
			data := parquetFile(t, arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.BinaryTypes.String}}, nil), `[{"id":"a"}]`, parquetsink.EncodeOptions{})
			f.Inject(tc.fault)
			_, err := load(ctx, tb, data, loadOpts{jobID: "j"})
			var ge *googleapi.Error
			switch {
			case tc.code != 0:
				if !errors.As(err, &ge) || ge.Code != tc.code || ge.Errors[0].Reason != tc.reason {
					t.Errorf("insert err = %v, want %d %s", err, tc.code, tc.reason)
				}
			case tc.transport:
				if err == nil || errors.As(err, &ge) {
					t.Errorf("insert err = %v, want a transport error", err)
				}
			default:
				if err != nil {
					t.Errorf("insert err = %v, want none", err)
				}
			}
			if _, ok := f.Job(project, "j"); ok != tc.job {
				t.Errorf("job exists = %v, want %v", ok, tc.job)
			}
			if n := len(f.Rows(project, "d", "t")); n != tc.rows {
				t.Errorf("rows = %d, want %d", n, tc.rows)
			}
			if f.PendingFaults() != 0 {
				t.Error("the fault did not fire")
			}
		})
	}
}

func TestResumableUpload(t *testing.T) {
	ctx := context.Background()
	f := bqfake.New(t)
	c := newClient(t, f)
	tb := setup(t, c, "", bigquery.Schema{{Name: "id", Type: bigquery.StringFieldType, Required: true}, {Name: "pad", Type: bigquery.StringFieldType}})
	var sb strings.Builder
	sb.WriteString("[")
	const n = 3000
	for i := range n {
		if i > 0 {
			sb.WriteString(",")
		}
		fmt.Fprintf(&sb, `{"id":"s%d","pad":"%0128d"}`, i, i*7919)
	}
	sb.WriteString("]")
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.BinaryTypes.String}, {Name: "pad", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	data := parquetFile(t, schema, sb.String(), parquetsink.EncodeOptions{Compression: parquetsink.CompressionNone})
	if len(data) <= googleapi.MinUploadChunkSize {
		t.Fatalf("file of %d bytes fits one chunk; the test needs more", len(data))
	}
	// A 5xx on the last chunk is resent by the client within the session.
	f.Inject(bqfake.Insert5xx)
	j, err := load(ctx, tb, data, loadOpts{jobID: "big", chunk: googleapi.MinUploadChunkSize})
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if st := waitDone(t, ctx, j); st.Err() != nil {
		t.Fatal(st.Err())
	}
	if f.Uploads("resumable") != 2 || f.Uploads("multipart") != 0 {
		t.Errorf("uploads: resumable %d (want 2: the failed and the resent last chunk), multipart %d", f.Uploads("resumable"), f.Uploads("multipart"))
	}
	if ids := f.IDs(project, "d", "t", "id"); len(ids) != n {
		t.Errorf("%d distinct ids, want %d", len(ids), n)
	}
	if f.JobCount(project) != 1 {
		t.Errorf("job count = %d, want 1", f.JobCount(project))
	}
}

func TestRunningJobShowsRowsWhenDone(t *testing.T) {
	ctx := context.Background()
	f := bqfake.New(t)
	c := newClient(t, f)
	tb := setup(t, c, "europe-west2", bigquery.Schema{{Name: "id", Type: bigquery.StringFieldType, Required: true}})
	data := parquetFile(t, arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.BinaryTypes.String}}, nil), `[{"id":"a"}]`, parquetsink.EncodeOptions{})
	f.SetRunningPolls(2)
	src := bigquery.NewReaderSource(bytes.NewReader(data))
	src.SourceFormat = bigquery.Parquet
	l := tb.LoaderFrom(src)
	l.JobID, l.Location = "slow", "europe-west2"
	j, err := l.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if j.LastStatus().Done() || len(f.Rows(project, "d", "t")) != 0 {
		t.Fatal("the job was to be running, its rows invisible")
	}
	// Jobs are regional: asked without its location, the job is not found.
	if _, err := c.JobFromID(ctx, "slow"); err == nil {
		t.Error("a europe-west2 job was found without its location")
	}
	st, err := j.Status(ctx)
	if err != nil || st.Done() {
		t.Fatalf("first poll: done=%v err=%v, want running", st != nil && st.Done(), err)
	}
	if st, err = j.Status(ctx); err != nil || !st.Done() || st.Err() != nil {
		t.Fatalf("second poll: %+v %v, want done", st, err)
	}
	if len(f.Rows(project, "d", "t")) != 1 {
		t.Error("rows not visible once the job is done")
	}
}

func TestTablePatchRules(t *testing.T) {
	base := bigquery.Schema{
		{Name: "id", Type: bigquery.StringFieldType, Required: true},
		{Name: "rec", Type: bigquery.RecordFieldType, Schema: bigquery.Schema{{Name: "a", Type: bigquery.StringFieldType}}},
	}
	with := func(extra ...*bigquery.FieldSchema) bigquery.Schema {
		s := bigquery.Schema{{Name: "id", Type: bigquery.StringFieldType, Required: true},
			{Name: "rec", Type: bigquery.RecordFieldType, Schema: bigquery.Schema{{Name: "a", Type: bigquery.StringFieldType}}}}
		return append(s, extra...)
	}
	cases := []struct {
		name   string
		schema bigquery.Schema
		want   string // "" for success
	}{
		{"add nullable", with(&bigquery.FieldSchema{Name: "x", Type: bigquery.IntegerFieldType}), ""},
		{"add repeated record", with(&bigquery.FieldSchema{Name: "x", Type: bigquery.RecordFieldType, Repeated: true,
			Schema: bigquery.Schema{{Name: "y", Type: bigquery.StringFieldType, Required: true}}}), ""},
		{"add required", with(&bigquery.FieldSchema{Name: "x", Type: bigquery.IntegerFieldType, Required: true}), "Cannot add required fields"},
		{"relax", bigquery.Schema{{Name: "id", Type: bigquery.StringFieldType}, base[1]}, ""},
		{"change type", bigquery.Schema{{Name: "id", Type: bigquery.IntegerFieldType, Required: true}, base[1]}, "has changed type from STRING to INTEGER"},
		{"drop column", bigquery.Schema{base[0]}, "Field rec is missing in new schema"},
		{"add required nested", bigquery.Schema{base[0], {Name: "rec", Type: bigquery.RecordFieldType, Schema: bigquery.Schema{
			{Name: "a", Type: bigquery.StringFieldType}, {Name: "b", Type: bigquery.StringFieldType, Required: true}}}}, "(field: rec.b)"},
		{"bad name", with(&bigquery.FieldSchema{Name: "9x", Type: bigquery.IntegerFieldType}), "Invalid field name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			f := bqfake.New(t)
			tb := setup(t, newClient(t, f), "", base)
			md, err := tb.Metadata(ctx)
			if err != nil {
				t.Fatal(err)
			}
			_, err = tb.Update(ctx, bigquery.TableMetadataToUpdate{Schema: tc.schema}, md.ETag)
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("patch err = %v, want %q", err, tc.want)
			}
		})
	}
	t.Run("stale etag", func(t *testing.T) {
		ctx := context.Background()
		f := bqfake.New(t)
		tb := setup(t, newClient(t, f), "", base)
		md, _ := tb.Metadata(ctx)
		if _, err := tb.Update(ctx, bigquery.TableMetadataToUpdate{Description: "one"}, md.ETag); err != nil {
			t.Fatal(err)
		}
		_, err := tb.Update(ctx, bigquery.TableMetadataToUpdate{Description: "two"}, md.ETag)
		var ge *googleapi.Error
		if !errors.As(err, &ge) || ge.Code != http.StatusPreconditionFailed {
			t.Fatalf("patch with a stale etag: %v, want 412", err)
		}
	})
}

// recorder stands in for the test to catch the fake's complaints.
type recorder struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *recorder) Errorf(format string, a ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, a...))
}

func TestUnknownRouteIsLoud(t *testing.T) {
	rec := &recorder{TB: t}
	f := bqfake.New(rec)
	resp, err := http.Post(f.URL()+"/bigquery/v2/projects/p/datasets/d/tables/t/insertAll", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotImplemented {
		t.Errorf("status = %d, want 501", resp.StatusCode)
	}
	if len(rec.errs) != 1 || !strings.Contains(rec.errs[0], "/bigquery/v2/projects/p/datasets/d/tables/t/insertAll") {
		t.Errorf("test errors = %q, want one naming the route", rec.errs)
	}
}

// OnJobCreated sees each job once it exists and before its insert is
// answered; WaitIdle returns once nothing is being served.
func TestOnJobCreatedAndWaitIdle(t *testing.T) {
	ctx := context.Background()
	f := bqfake.New(t)
	c := newClient(t, f)
	tb := setup(t, c, "", bigquery.Schema{{Name: "id", Type: bigquery.StringFieldType, Required: true}})
	data := parquetFile(t, arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.BinaryTypes.String}}, nil), `[{"id":"a"}]`, parquetsink.EncodeOptions{})
	var seen []string
	answered := false
	f.OnJobCreated(func(project, jobID string) {
		seen = append(seen, project+"/"+jobID)
		if answered {
			t.Error("the hook ran after the insert was answered")
		}
	})
	if _, err := load(ctx, tb, data, loadOpts{jobID: "j1"}); err != nil {
		t.Fatal(err)
	}
	answered = true
	f.OnJobCreated(nil)
	if _, err := load(ctx, tb, data, loadOpts{jobID: "j2"}); err != nil {
		t.Fatal(err)
	}
	if want := []string{project + "/j1"}; fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Errorf("hook saw %v, want %v", seen, want)
	}
	if err := f.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
}
