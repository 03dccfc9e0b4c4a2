package bigquery

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"go.uber.org/zap/zaptest"

	"github.com/syncd-dev/syncd/internal/bqfake"
	"github.com/syncd-dev/syncd/internal/sink"
)

const (
	testProject = "proj"
	testDataset = "forms"
)

var tsUTC = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}

func described(d string) arrow.Metadata {
	return arrow.NewMetadata([]string{"syncd.source_kind", "syncd.description"}, []string{"question", d})
}

// baseFields are the columns internal/schema gives every table.
func baseFields() []arrow.Field {
	return []arrow.Field{
		{Name: "form_id", Type: arrow.BinaryTypes.String, Metadata: described("Public id of the form")},
		{Name: "submission_id", Type: arrow.BinaryTypes.String, Metadata: described("Id of the submission, unique within the form")},
		{Name: "submission_time", Type: tsUTC, Metadata: described("When the submission was submitted (UTC)")},
		{Name: "q_name", Type: arrow.BinaryTypes.String, Nullable: true, Metadata: described("What is your name?")},
		{Name: "_batch_id", Type: arrow.BinaryTypes.String},
		{Name: "_synced_at", Type: tsUTC},
	}
}

func schemaOf(fields ...arrow.Field) *arrow.Schema { return arrow.NewSchema(fields, nil) }

func batch(id string) sink.Batch {
	day := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	return sink.Batch{
		ID:                id,
		Stream:            "fA1",
		Table:             "form_fa1",
		WindowStart:       day.Add(10 * time.Hour),
		WindowEnd:         day.Add(11 * time.Hour),
		SchemaFingerprint: "fp",
		TimeColumn:        "submission_time",
		Required:          []string{"form_id", "submission_id", "submission_time"},
	}
}

// record builds a record of schema s with one row per submission id;
// extra gives JSON values for other columns, by column, with {id} replaced
// by the row's submission id.
func record(t testing.TB, s *arrow.Schema, b sink.Batch, ids []string, extra map[string]string) arrow.Record {
	t.Helper()
	var sb strings.Builder
	sb.WriteString("[")
	for i, id := range ids {
		if i > 0 {
			sb.WriteString(",")
		}
		fmt.Fprintf(&sb, `{"form_id":%q,"submission_id":%q,"submission_time":"2024-05-01T10:%02d:00Z","_batch_id":%q,"_synced_at":"2024-05-01T12:00:00Z"`,
			b.Stream, id, i%60, b.ID)
		for _, f := range s.Fields() {
			if v, ok := extra[f.Name]; ok {
				fmt.Fprintf(&sb, ",%q:%s", f.Name, strings.ReplaceAll(v, "{id}", id))
			} else if f.Name == "q_name" {
				fmt.Fprintf(&sb, `,"q_name":"name of %s"`, id)
			}
		}
		sb.WriteString("}")
	}
	sb.WriteString("]")
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, s, strings.NewReader(sb.String()))
	if err != nil {
		t.Fatalf("build record: %v", err)
	}
	t.Cleanup(rec.Release)
	return rec
}

func ids(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%03d", prefix, i)
	}
	return out
}

// testOptions point a sink at the fake, with fast backoff.
func testOptions(t testing.TB, f *bqfake.Server) Options {
	return Options{
		Project:       testProject,
		Dataset:       testDataset,
		Location:      "europe-west2",
		ClientOptions: f.ClientOptions(),
		MaxAttempts:   5,
		MinBackoff:    time.Millisecond,
		MaxBackoff:    5 * time.Millisecond,
		Logger:        zaptest.NewLogger(t),
		Version:       "test",
	}
}

func newSink(t testing.TB, opts Options) *Sink {
	t.Helper()
	s, err := New(context.Background(), opts)
	if err != nil {
		t.Fatalf("new sink: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// exactlyOnce checks that the table holds every id once and nothing else.
func exactlyOnce(t testing.TB, f *bqfake.Server, table string, want ...[]string) {
	t.Helper()
	got := f.IDs(testProject, testDataset, table, "submission_id")
	n := 0
	for _, w := range want {
		for _, id := range w {
			n++
			if got[id] != 1 {
				t.Errorf("submission %s is in %s %d times, want once", id, table, got[id])
			}
		}
	}
	if len(got) != n {
		t.Errorf("%s has %d distinct submissions, want %d", table, len(got), n)
	}
}
