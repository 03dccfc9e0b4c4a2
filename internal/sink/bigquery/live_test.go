package bigquery

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"
	"github.com/apache/arrow-go/v18/arrow"
	"go.uber.org/zap/zaptest"
	"golang.org/x/oauth2/google"
	"google.golang.org/api/iterator"

	"github.com/syncd-dev/syncd/internal/sink"
)

// TestLiveBigQuery runs the sink against real BigQuery, in a dataset of its
// own that it deletes afterwards. It needs SYNCD_BIGQUERY_PROJECT and
// Application Default Credentials with bigquery.dataEditor and
// bigquery.jobUser on that project; SYNCD_BIGQUERY_LOCATION picks the
// location (default US).
func TestLiveBigQuery(t *testing.T) {
	project := os.Getenv("SYNCD_BIGQUERY_PROJECT")
	if project == "" {
		t.Skip("set SYNCD_BIGQUERY_PROJECT (and Application Default Credentials) to run against real BigQuery")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if _, err := google.FindDefaultCredentials(ctx, bigquery.Scope); err != nil {
		t.Skipf("SYNCD_BIGQUERY_PROJECT is set but no Application Default Credentials were found: %v", err)
	}
	location := os.Getenv("SYNCD_BIGQUERY_LOCATION")
	if location == "" {
		location = "US"
	}
	dataset := fmt.Sprintf("syncd_test_%d", time.Now().UnixNano())
	client, err := bigquery.NewClient(ctx, project)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	t.Cleanup(func() {
		if err := client.Dataset(dataset).DeleteWithContents(context.Background()); err != nil {
			t.Logf("delete dataset %s: %v", dataset, err)
		}
	})

	opts := Options{
		Project: project, Dataset: dataset, Location: location, TablePrefix: "t_",
		Clustering: []string{"form_id"}, Logger: zaptest.NewLogger(t), Version: "live-test",
		MinBackoff: time.Second, MaxBackoff: 10 * time.Second,
	}
	s := newSink(t, opts)
	item := arrow.StructOf(arrow.Field{Name: "sku", Type: arrow.BinaryTypes.String}, arrow.Field{Name: "qty", Type: arrow.PrimitiveTypes.Int64, Nullable: true})
	b1 := batch("live:b1")
	ids1 := ids("one", 3)
	if err := sink.CommitRecord(ctx, s, b1, record(t, schemaOf(baseFields()...), b1, ids1, nil)); err != nil {
		t.Fatalf("commit b1: %v", err)
	}
	fields2 := append(baseFields(),
		arrow.Field{Name: "q_new", Type: arrow.BinaryTypes.String, Nullable: true, Metadata: described("A new question")},
		arrow.Field{Name: "q_items", Type: arrow.ListOf(item), Nullable: true},
		arrow.Field{Name: "q_strict", Type: arrow.PrimitiveTypes.Int64},
		arrow.Field{Name: "q_day", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
		arrow.Field{Name: "q_tags", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
	)
	b2 := batch("live:b2")
	ids2 := ids("two", 2)
	rec2 := record(t, schemaOf(fields2...), b2, ids2, map[string]string{
		"q_new": `"hello"`, "q_items": `[{"sku":"A","qty":2}]`, "q_strict": "5", "q_day": `"2024-04-30"`, "q_tags": `["a","b"]`,
	})
	if err := sink.CommitRecord(ctx, s, b2, rec2); err != nil {
		t.Fatalf("commit b2 with new columns: %v", err)
	}
	if err := sink.CommitRecord(ctx, s, b2, rec2); err != nil {
		t.Fatalf("commit b2 again: %v", err)
	}
	s2 := newSink(t, opts)
	if ok, err := s2.Committed(ctx, b2); !ok || err != nil {
		t.Fatalf("Committed(b2) = %v, %v", ok, err)
	}
	if ok, err := s2.Committed(ctx, batch("live:never")); ok || err != nil {
		t.Fatalf("Committed(never) = %v, %v", ok, err)
	}

	table := client.Dataset(dataset).Table("t_form_fa1")
	md, err := table.Metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range md.Schema {
		if f.Name == "q_strict" && f.Required {
			t.Error("q_strict was added REQUIRED")
		}
		if f.Name == "submission_id" && !f.Required {
			t.Error("submission_id is not REQUIRED")
		}
	}
	if md.TimePartitioning == nil || md.TimePartitioning.Field != "submission_time" {
		t.Errorf("partitioning = %+v", md.TimePartitioning)
	}
	q := client.Query(fmt.Sprintf("SELECT submission_id, COUNT(*) AS n FROM `%s.%s.t_form_fa1` GROUP BY 1", project, dataset))
	q.Location = location
	it, err := q.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for {
		var row struct {
			ID string `bigquery:"submission_id"`
			N  int64  `bigquery:"n"`
		}
		if err := it.Next(&row); err == iterator.Done {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		got[row.ID] = row.N
	}
	for _, id := range append(ids1, ids2...) {
		if got[id] != 1 {
			t.Errorf("submission %s appears %d times", id, got[id])
		}
	}
	if len(got) != len(ids1)+len(ids2) {
		t.Errorf("%d submissions, want %d", len(got), len(ids1)+len(ids2))
	}
}
