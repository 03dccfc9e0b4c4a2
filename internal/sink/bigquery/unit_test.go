package bigquery

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"cloud.google.com/go/bigquery"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func validJobID(id string) bool {
	if id == "" || len(id) > maxJobID {
		return false
	}
	for _, c := range []byte(id) {
		if !(c == '_' || c == '-' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

func TestJobID(t *testing.T) {
	long := strings.Repeat("x", 2000)
	cases := []struct {
		batch   string
		attempt int
		want    string // "" when only validity and distinctness are checked
	}{
		{"form_1-2024", 1, "form_1-2024_a1"},
		{"form_1-2024", 12, "form_1-2024_a12"},
		{"fA1:2024-05-01T10:00:00Z", 1, ""},
		{"fA1_2024-05-01T10_00_00Z", 1, "fA1_2024-05-01T10_00_00Z_a1"},
		{"fA1.2024-05-01T10:00:00Z", 1, ""},
		{"été/2024", 1, ""},
		{long, 3, ""},
		{long + "y", 3, ""},
	}
	seen := map[string]string{}
	for _, tc := range cases {
		got := jobID(tc.batch, tc.attempt)
		if !validJobID(got) {
			t.Errorf("jobID(%.20q, %d) = %.40q: not a valid BigQuery job id", tc.batch, tc.attempt, got)
		}
		if tc.want != "" && got != tc.want {
			t.Errorf("jobID(%q, %d) = %q, want %q", tc.batch, tc.attempt, got, tc.want)
		}
		if !strings.HasSuffix(got, fmt.Sprintf("_a%d", tc.attempt)) {
			t.Errorf("jobID(%.20q, %d) = %.40q: attempt suffix missing", tc.batch, tc.attempt, got)
		}
		if other, dup := seen[got]; dup {
			t.Errorf("batches %.30q and %.30q share job id %.40q", other, tc.batch, got)
		}
		seen[got] = tc.batch
		if jobID(tc.batch, tc.attempt) != got {
			t.Errorf("jobID(%.20q) is not deterministic", tc.batch)
		}
	}
}

func TestReconcile(t *testing.T) {
	str := func(name string, required bool) *bigquery.FieldSchema {
		return &bigquery.FieldSchema{Name: name, Type: bigquery.StringFieldType, Required: required}
	}
	rec := func(name string, repeated bool, fs ...*bigquery.FieldSchema) *bigquery.FieldSchema {
		return &bigquery.FieldSchema{Name: name, Type: bigquery.RecordFieldType, Repeated: repeated, Schema: fs}
	}
	render := func(s bigquery.Schema) string {
		var parts []string
		var walk func(prefix string, s bigquery.Schema)
		walk = func(prefix string, s bigquery.Schema) {
			for _, f := range s {
				mode := "NULLABLE"
				switch {
				case f.Required:
					mode = "REQUIRED"
				case f.Repeated:
					mode = "REPEATED"
				}
				part := prefix + f.Name + ":" + string(f.Type) + ":" + mode
				if f.Description != "" {
					part += "(" + f.Description + ")"
				}
				parts = append(parts, part)
				walk(prefix+f.Name+".", f.Schema)
			}
		}
		walk("", s)
		return strings.Join(parts, " ")
	}
	cases := []struct {
		name    string
		have    bigquery.Schema
		want    bigquery.Schema
		result  string
		changes int
		err     string
	}{
		{name: "same", have: bigquery.Schema{str("a", true)}, want: bigquery.Schema{str("a", true)},
			result: "a:STRING:REQUIRED"},
		{name: "names ignore case", have: bigquery.Schema{str("A", false)}, want: bigquery.Schema{str("a", false)},
			result: "A:STRING:NULLABLE"},
		{name: "type names by meaning", have: bigquery.Schema{{Name: "n", Type: "INT64"}}, want: bigquery.Schema{{Name: "n", Type: bigquery.IntegerFieldType}},
			result: "n:INT64:NULLABLE"},
		{name: "new columns arrive NULLABLE", have: bigquery.Schema{str("a", true)},
			want:   bigquery.Schema{str("a", true), str("b", true), rec("r", true, str("x", true))},
			result: "a:STRING:REQUIRED b:STRING:NULLABLE r:RECORD:REPEATED r.x:STRING:NULLABLE", changes: 2},
		{name: "new nested field", have: bigquery.Schema{rec("r", false, str("x", false))},
			want:   bigquery.Schema{rec("r", false, str("x", false), str("y", true))},
			result: "r:RECORD:NULLABLE r.x:STRING:NULLABLE r.y:STRING:NULLABLE", changes: 1},
		{name: "relax", have: bigquery.Schema{str("a", true)}, want: bigquery.Schema{str("a", false)},
			result: "a:STRING:NULLABLE", changes: 1},
		{name: "table NULLABLE, batch required: the file adapts", have: bigquery.Schema{str("a", false)}, want: bigquery.Schema{str("a", true)},
			result: "a:STRING:NULLABLE"},
		{name: "extra table column kept", have: bigquery.Schema{str("a", true), str("old", false)}, want: bigquery.Schema{str("a", true)},
			result: "a:STRING:REQUIRED old:STRING:NULLABLE"},
		{name: "description updated", have: bigquery.Schema{str("a", false)},
			want:   bigquery.Schema{{Name: "a", Type: bigquery.StringFieldType, Description: "new text"}},
			result: "a:STRING:NULLABLE(new text)", changes: 1},
		{name: "type change", have: bigquery.Schema{str("a", false)}, want: bigquery.Schema{{Name: "a", Type: bigquery.IntegerFieldType}},
			err: "column a as STRING but the batch has it as INTEGER"},
		{name: "repeated change", have: bigquery.Schema{str("a", false)}, want: bigquery.Schema{{Name: "a", Type: bigquery.StringFieldType, Repeated: true}},
			err: "as STRING but the batch has it as REPEATED STRING"},
		{name: "nested type change", have: bigquery.Schema{rec("r", false, str("x", false))},
			want: bigquery.Schema{rec("r", false, &bigquery.FieldSchema{Name: "x", Type: bigquery.DateFieldType})},
			err:  "column r.x as STRING"},
		{name: "required column gone", have: bigquery.Schema{str("a", true), str("b", true)}, want: bigquery.Schema{str("a", true)},
			err: "REQUIRED column b"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := render(tc.have)
			got, changes, err := reconcile("p.d.t", tc.have, tc.want)
			if render(tc.have) != before {
				t.Errorf("reconcile changed its input: %s became %s", before, render(tc.have))
			}
			if tc.err != "" {
				var se *SchemaError
				if !errors.As(err, &se) || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "p.d.t") {
					t.Fatalf("err = %v, want a *SchemaError with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r := render(got); r != tc.result {
				t.Errorf("schema = %s, want %s", r, tc.result)
			}
			if len(changes) != tc.changes {
				t.Errorf("changes = %q, want %d", changes, tc.changes)
			}
		})
	}
}

func TestTableSchemaRefusesWhatBigQueryCannotHold(t *testing.T) {
	cases := []struct {
		field arrow.Field
		want  string
	}{
		{arrow.Field{Name: "ll", Type: arrow.ListOf(arrow.ListOf(arrow.BinaryTypes.String))}, "list of lists"},
		{arrow.Field{Name: "ns", Type: &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}}, "nanosecond"},
		{arrow.Field{Name: "bin", Type: arrow.BinaryTypes.Binary}, "Arrow type binary"},
		{arrow.Field{Name: "empty", Type: arrow.StructOf()}, "struct without fields"},
		{arrow.Field{Name: "r", Type: arrow.StructOf(arrow.Field{Name: "m", Type: arrow.MapOf(arrow.BinaryTypes.String, arrow.BinaryTypes.String)})}, "column r.m"},
	}
	for _, tc := range cases {
		_, err := tableSchema(arrow.NewSchema([]arrow.Field{tc.field}, nil), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.field.Name, err, tc.want)
		}
	}
}

func TestConformKeepsDataAndTakesTableModes(t *testing.T) {
	item := arrow.StructOf(
		arrow.Field{Name: "sku", Type: arrow.BinaryTypes.String},
		arrow.Field{Name: "qty", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	)
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "submission_id", Type: arrow.BinaryTypes.String},
		{Name: "opt", Type: arrow.BinaryTypes.String},
		{Name: "items", Type: arrow.ListOf(item), Nullable: true},
		{Name: "one", Type: item, Nullable: true},
	}, nil)
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, schema, strings.NewReader(
		`[{"submission_id":"a","opt":"x","items":[{"sku":"s1","qty":1},{"sku":"s2","qty":null}],"one":{"sku":"k","qty":3}},
		  {"submission_id":"b","opt":"y","items":null,"one":null}]`))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	want, err := tableSchema(schema, []string{"form_id", "submission_id", "submission_time"})
	if err != nil {
		t.Fatal(err)
	}
	// The table has opt NULLABLE (added later), the rest as created.
	table, _, err := reconcile("p.d.t", bigquery.Schema{want[0], {Name: "opt", Type: bigquery.StringFieldType}, want[2], want[3]}, want)
	if err != nil {
		t.Fatal(err)
	}
	out, err := conform(rec, table)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Release()
	fs := out.Schema().Fields()
	if fs[0].Nullable || !fs[1].Nullable {
		t.Errorf("top-level nullability = %v %v, want false (REQUIRED) true (NULLABLE)", fs[0].Nullable, fs[1].Nullable)
	}
	for _, f := range []arrow.Field{fs[2].Type.(*arrow.ListType).ElemField(), {Type: fs[3].Type}} {
		if st := f.Type.(*arrow.StructType); st.Field(0).Nullable != true {
			t.Errorf("nested sku stays non-nullable in %s; the table has it NULLABLE", f.Type)
		}
	}
	if fs[0].Metadata.Len() != schema.Field(0).Metadata.Len() {
		t.Error("field metadata lost")
	}
	for i := range schema.Fields() {
		a, b := rec.Column(i), out.Column(i)
		for r := 0; r < int(rec.NumRows()); r++ {
			if a.ValueStr(r) != b.ValueStr(r) || a.IsNull(r) != b.IsNull(r) {
				t.Errorf("column %s row %d: %s became %s", schema.Field(i).Name, r, a.ValueStr(r), b.ValueStr(r))
			}
		}
	}
}

func TestErrorNamesTheCulprit(t *testing.T) {
	cases := []struct {
		msg, column, permission string
	}{
		{"Provided Schema does not match Table p:d.t. Field q_age has changed type from STRING to INTEGER", "q_age", ""},
		{"Provided Schema does not match Table p:d.t. Cannot add required fields to an existing schema. (field: rec.b)", "rec.b", ""},
		{`Invalid field name "bad-name". Fields must contain only letters`, "bad-name", ""},
		{"Error while reading data, error message: Required field submission_id cannot be null", "submission_id", ""},
		{"Access Denied: Table p:d.t: Permission bigquery.tables.updateData denied on table p:d.t (or it may not exist).", "", "bigquery.tables.updateData"},
		{"Access Denied: Project p: User does not have bigquery.jobs.create permission in project p.", "", "bigquery.jobs.create"},
	}
	s := &Sink{opts: Options{Project: "p", Dataset: "d"}}
	for _, tc := range cases {
		err := s.apiError("load batch b", "t", "j", &bigquery.Error{Reason: "invalid", Message: tc.msg})
		var e *Error
		if !errors.As(err, &e) || e.Column != tc.column || e.Permission != tc.permission {
			t.Errorf("%q: column %q permission %q, want %q %q", tc.msg, e.Column, e.Permission, tc.column, tc.permission)
		}
	}
}
