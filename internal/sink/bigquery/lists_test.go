package bigquery

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/syncd-dev/syncd/internal/bqfake"
	"github.com/syncd-dev/syncd/internal/sink"
	forms "github.com/syncd-dev/syncd/internal/source/forms/api"
	"github.com/syncd-dev/syncd/internal/source/forms/schema"
)

// A Checkboxes / MultiSelect answer with an empty choice (the field notes:
// empty answers appear as "" or null) or a FileUpload list with an empty
// slot was mapped by the schema builder to a list with a NULL element.
// BigQuery refuses a NULL array element on load ("Array cannot have a null
// element"), so the whole batch failed, every retry, and the form was stuck:
// no submission of the window (nor after it) reached the table. Such an
// answer is now kept whole in __v_json, the typed cell null.
func TestListAnswerWithEmptyElementLoads(t *testing.T) {
	for _, tc := range []struct{ typ, value string }{
		{"Checkboxes", `["a",""]`},
		{"MultiSelect", `["a",null]`},
		{"FileUpload", `[{"url":"https://x/1"},{}]`},
	} {
		t.Run(tc.typ, func(t *testing.T) {
			ctx := context.Background()
			f := bqfake.New(t)
			s := newSink(t, testOptions(t, f))
			form := &forms.Form{ID: "fA1", Name: "F", Questions: []forms.Field{{ID: "q1", Name: "Choices", Type: tc.typ}}}
			tab, _, err := schema.New(form, schema.Options{})
			if err != nil {
				t.Fatal(err)
			}
			b := batch("fA1:2024-05-01T10:00:00Z")
			bld := schema.NewBuilder(tab, memory.NewGoAllocator())
			defer bld.Release()
			sub := &forms.Submission{SubmissionID: "s1", SubmissionTime: time.Date(2024, 5, 1, 10, 30, 0, 0, time.UTC),
				Questions: []forms.Answer{{ID: "q1", Name: "Choices", Type: tc.typ, Value: json.RawMessage(tc.value)}}}
			if err := bld.Append(sub, schema.Lineage{BatchID: b.ID, SyncedAt: time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)}); err != nil {
				t.Fatal(err)
			}
			rec, _, _ := bld.Finish()
			defer rec.Release()
			if err := sink.CommitRecord(ctx, s, b, rec); err != nil {
				t.Fatalf("answer %s to a %s question: commit failed: %v", tc.value, tc.typ, err)
			}
		})
	}
}
