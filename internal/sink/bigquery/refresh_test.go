package bigquery

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	gbq "cloud.google.com/go/bigquery"
	"github.com/apache/arrow-go/v18/arrow"
	"google.golang.org/api/option"

	"github.com/syncd-dev/syncd/internal/bqfake"
	"github.com/syncd-dev/syncd/internal/sink"
)

// testClient is a client of the fake, for changing a table as a person
// would.
func testClient(t *testing.T, f *bqfake.Server) *gbq.Client {
	t.Helper()
	c, err := gbq.NewClient(context.Background(), testProject, f.ClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// relax makes columns of table NULLABLE, as ALTER TABLE … DROP NOT NULL
// does.
func relax(t *testing.T, c *gbq.Client, table string, columns ...string) {
	t.Helper()
	ctx := context.Background()
	tb := c.Dataset(testDataset).Table(table)
	md, err := tb.Metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, fs := range md.Schema {
		for _, col := range columns {
			if fs.Name == col {
				fs.Required = false
			}
		}
	}
	if _, err := tb.Update(ctx, gbq.TableMetadataToUpdate{Schema: md.Schema}, md.ETag); err != nil {
		t.Fatalf("relax %v: %v", columns, err)
	}
}

// versioned is batch id of a table that keeps versions, so that the sink
// keeps its latest view.
func versioned(id string) sink.Batch {
	b := batch(id)
	b.KeyColumn, b.VersionColumn = "submission_id", "_synced_at"
	return b
}

// The SchemaError of a REQUIRED column that batches no longer carry tells
// the user to relax it; once they have, the same Sink loads the batch.
func TestSchemaErrorClearsOnceTheColumnIsRelaxed(t *testing.T) {
	ctx := context.Background()
	f := bqfake.New(t)
	opts := testOptions(t, f)
	s := newSink(t, opts)
	fields1 := append(baseFields(), arrow.Field{Name: "legacy", Type: arrow.BinaryTypes.String})
	b1 := batch("b1")
	b1.Required = append(b1.Required, "legacy")
	if err := sink.CommitRecord(ctx, s, b1, record(t, schemaOf(fields1...), b1, ids("one", 2), map[string]string{"legacy": `"x"`})); err != nil {
		t.Fatalf("commit b1: %v", err)
	}
	b2 := batch("b2")
	rec2 := record(t, schemaOf(baseFields()...), b2, ids("two", 2), nil)
	var se *SchemaError
	if err := sink.CommitRecord(ctx, s, b2, rec2); !errors.As(err, &se) {
		t.Fatalf("commit b2 without legacy: err = %v, want a *SchemaError", err)
	}
	relax(t, testClient(t, f), "form_fa1", "legacy")
	if err := sink.CommitRecord(ctx, s, b2, rec2); err != nil {
		t.Errorf("commit b2 after legacy was relaxed, same Sink: %v", err)
	}
	if err := sink.CommitRecord(ctx, newSink(t, opts), b2, rec2); err != nil {
		t.Errorf("commit b2 again, new Sink: %v", err)
	}
	exactlyOnce(t, f, "form_fa1", ids("one", 2), ids("two", 2))
}

// The SchemaError of a changed type tells the user to move the old table
// aside; once they have, the same Sink creates the table anew and loads.
func TestSchemaErrorClearsOnceTheTableIsMovedAside(t *testing.T) {
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
	rec2 := record(t, schemaOf(fields...), b2, ids("t", 1), map[string]string{"q_name": "1"})
	var se *SchemaError
	if err := sink.CommitRecord(ctx, s, b2, rec2); !errors.As(err, &se) {
		t.Fatalf("commit b2 with q_name as INT64: err = %v, want a *SchemaError", err)
	}
	if err := testClient(t, f).Dataset(testDataset).Table("form_fa1").Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sink.CommitRecord(ctx, s, b2, rec2); err != nil {
		t.Errorf("commit b2 after the old table was moved aside, same Sink: %v", err)
	}
	exactlyOnce(t, f, "form_fa1", ids("t", 1))
}

// A person relaxes a REQUIRED column the sink has cached: the next load
// writes the file with the table's modes as they are now.
func TestLoadFollowsARelaxedColumn(t *testing.T) {
	ctx := context.Background()
	f := bqfake.New(t)
	s := newSink(t, testOptions(t, f))
	b1 := batch("b1")
	if err := sink.CommitRecord(ctx, s, b1, record(t, schemaOf(baseFields()...), b1, ids("one", 2), nil)); err != nil {
		t.Fatal(err)
	}
	relax(t, testClient(t, f), "form_fa1", "form_id")
	b2 := batch("b2")
	if err := sink.CommitRecord(ctx, s, b2, record(t, schemaOf(baseFields()...), b2, ids("two", 2), nil)); err != nil {
		t.Errorf("commit after a person relaxed form_id: %v (jobs: %v)", err, f.JobIDs(testProject))
	}
	b3 := batch("b3")
	if err := sink.CommitRecord(ctx, s, b3, record(t, schemaOf(baseFields()...), b3, ids("three", 1), nil)); err != nil {
		t.Errorf("commit after that: %v (jobs: %v)", err, f.JobIDs(testProject))
	}
	exactlyOnce(t, f, "form_fa1", ids("one", 2), ids("two", 2), ids("three", 1))
	md, _ := f.Table(testProject, testDataset, "form_fa1")
	for _, c := range md.Schema.Fields {
		if c.Name == "form_id" && c.Mode != "NULLABLE" {
			t.Errorf("form_id is %s, want NULLABLE as the person left it", c.Mode)
		}
	}
}

// failViewInsert fails the first insert of a view as a lost connection
// would.
type failViewInsert struct {
	next    http.RoundTripper
	tripped atomic.Bool
}

func (f *failViewInsert) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/tables") && r.Body != nil {
		body, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			return nil, err
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte(`"view"`)) && f.tripped.CompareAndSwap(false, true) {
			return nil, errors.New("connection lost")
		}
	}
	return f.next.RoundTrip(r)
}

// The view's insert fails after the table was created: the rows load all
// the same, and a later Commit creates the view.
func TestLatestViewCreatedAfterAFailedInsert(t *testing.T) {
	ctx := context.Background()
	f := bqfake.New(t)
	opts := testOptions(t, f)
	fail := &failViewInsert{next: http.DefaultTransport}
	opts.ClientOptions = append(opts.ClientOptions, option.WithHTTPClient(&http.Client{Transport: fail}))
	s := newSink(t, opts)
	b := versioned("b1")
	if err := sink.CommitRecord(ctx, s, b, record(t, schemaOf(baseFields()...), b, ids("s", 2), nil)); err != nil {
		t.Fatalf("commit b1, whose view insert fails: %v", err)
	}
	if !fail.tripped.Load() {
		t.Fatal("the view insert was never tried")
	}
	if _, ok := f.Table(testProject, testDataset, "form_fa1_latest"); ok {
		t.Fatal("form_fa1_latest exists although its insert failed")
	}
	b2 := versioned("b2")
	if err := sink.CommitRecord(ctx, s, b2, record(t, schemaOf(baseFields()...), b2, ids("t", 2), nil)); err != nil {
		t.Fatalf("commit b2: %v", err)
	}
	exactlyOnce(t, f, "form_fa1", ids("s", 2), ids("t", 2))
	if _, ok := f.Table(testProject, testDataset, "form_fa1_latest"); !ok {
		t.Errorf("form_fa1 holds both batches but form_fa1_latest was never created")
	}
}

// A table created without its view (by an older syncd, or another
// process) gets the view from the first Sink that loads into it.
func TestLatestViewCreatedForAnExistingTable(t *testing.T) {
	ctx := context.Background()
	f := bqfake.New(t)
	opts := testOptions(t, f)
	b0 := batch("b0") // an older syncd: same table, no view
	if err := sink.CommitRecord(ctx, newSink(t, opts), b0, record(t, schemaOf(baseFields()...), b0, ids("o", 1), nil)); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.Table(testProject, testDataset, "form_fa1_latest"); ok {
		t.Fatal("a batch without key and version columns made a latest view")
	}
	b := versioned("b1")
	if err := sink.CommitRecord(ctx, newSink(t, opts), b, record(t, schemaOf(baseFields()...), b, ids("s", 2), nil)); err != nil {
		t.Fatal(err)
	}
	v, ok := f.Table(testProject, testDataset, "form_fa1_latest")
	if !ok {
		t.Fatal("a batch with key and version columns committed, but form_fa1_latest does not exist")
	}
	if want := sink.LatestQuery("`proj.forms.form_fa1`", "submission_id", "_synced_at"); v.View == nil || v.View.Query != want {
		t.Errorf("form_fa1_latest is %+v, want a view of %s", v.View, want)
	}
}

// A <table>_latest that someone defined otherwise is theirs: the sink
// keeps it as it is.
func TestLatestViewOfAnotherDefinitionIsKept(t *testing.T) {
	ctx := context.Background()
	f := bqfake.New(t)
	const mine = "SELECT * FROM `proj.forms.form_fa1`"
	c := testClient(t, f)
	if err := c.Dataset(testDataset).Create(ctx, &gbq.DatasetMetadata{Location: "europe-west2"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Dataset(testDataset).Table("form_fa1_latest").Create(ctx, &gbq.TableMetadata{ViewQuery: mine}); err != nil {
		t.Fatal(err)
	}
	b := versioned("b1")
	if err := sink.CommitRecord(ctx, newSink(t, testOptions(t, f)), b, record(t, schemaOf(baseFields()...), b, ids("s", 2), nil)); err != nil {
		t.Fatal(err)
	}
	if v, _ := f.Table(testProject, testDataset, "form_fa1_latest"); v.View == nil || v.View.Query != mine {
		t.Errorf("form_fa1_latest is %+v, want the view as it was: %s", v.View, mine)
	}
}

// newCountingSink is a sink on f whose GETs of table (or view) metadata
// are counted.
func newCountingSink(t *testing.T, f *bqfake.Server) (*Sink, *countTableGets) {
	t.Helper()
	opts := testOptions(t, f)
	gets := &countTableGets{next: http.DefaultTransport, n: map[string]int{}}
	opts.ClientOptions = append(opts.ClientOptions, option.WithHTTPClient(&http.Client{Transport: gets}))
	return newSink(t, opts), gets
}

// countTableGets counts the GETs of table (or view) metadata.
type countTableGets struct {
	next http.RoundTripper
	mu   sync.Mutex
	n    map[string]int // by table id
}

func (c *countTableGets) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet {
		if _, id, ok := strings.Cut(r.URL.Path, "/tables/"); ok {
			c.mu.Lock()
			c.n[id]++
			c.mu.Unlock()
		}
	}
	return c.next.RoundTrip(r)
}

// A cached schema that fits costs no table call, and the view is looked at
// once per viewRecheck (TestLatestViewLookedAtAgain moves the clock).
func TestFittingBatchesReadNoTable(t *testing.T) {
	ctx := context.Background()
	f := bqfake.New(t)
	s, gets := newCountingSink(t, f)
	b1 := versioned("b1")
	if err := sink.CommitRecord(ctx, s, b1, record(t, schemaOf(baseFields()...), b1, ids("s", 2), nil)); err != nil {
		t.Fatal(err)
	}
	gets.mu.Lock()
	first := map[string]int{"form_fa1": gets.n["form_fa1"], "form_fa1_latest": gets.n["form_fa1_latest"]}
	gets.mu.Unlock()
	for _, id := range []string{"b2", "b3"} {
		b := versioned(id)
		if err := sink.CommitRecord(ctx, s, b, record(t, schemaOf(baseFields()...), b, ids(id, 2), nil)); err != nil {
			t.Fatal(err)
		}
	}
	gets.mu.Lock()
	defer gets.mu.Unlock()
	for table, n := range first {
		if gets.n[table] != n {
			t.Errorf("%s was read %d times by the first batch and %d by all three: a fitting batch should read no table", table, n, gets.n[table])
		}
	}
}

// A load refused by a table that changed for good (recreated with another
// type) is not tried again: the commit fails with the SchemaError of the
// table as it is now.
func TestLoadRefusedByARecreatedTableIsASchemaError(t *testing.T) {
	ctx := context.Background()
	f := bqfake.New(t)
	s := newSink(t, testOptions(t, f))
	b1 := batch("b1")
	if err := sink.CommitRecord(ctx, s, b1, record(t, schemaOf(baseFields()...), b1, ids("one", 2), nil)); err != nil {
		t.Fatal(err)
	}
	tb := testClient(t, f).Dataset(testDataset).Table("form_fa1")
	md, err := tb.Metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, fs := range md.Schema {
		if fs.Name == "q_name" {
			fs.Type = gbq.IntegerFieldType
		}
	}
	if err := tb.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if err := tb.Create(ctx, &gbq.TableMetadata{Schema: md.Schema}); err != nil {
		t.Fatal(err)
	}
	b2 := batch("b2")
	err = sink.CommitRecord(ctx, s, b2, record(t, schemaOf(baseFields()...), b2, ids("two", 2), nil))
	var se *SchemaError
	if !errors.As(err, &se) || se.Column != "q_name" {
		t.Fatalf("commit into the recreated table: err = %v, want a *SchemaError of q_name", err)
	}
	if got := f.JobIDs(testProject); len(got) != 2 {
		t.Errorf("jobs %v, want b1_a1 and one refused b2_a1", got)
	}
}
