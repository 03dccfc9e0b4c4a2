package schema

import (
	"bytes"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	forms "github.com/syncd-dev/syncd/internal/source/forms/api"
)

// sourceColumns lists "name:type" of the non-fixed columns, in order.
func sourceColumns(tab *Table) []string {
	var out []string
	for _, c := range tab.Columns {
		if c.Kind != KindFixed && c.Kind != KindLineage {
			out = append(out, c.Name+":"+string(c.Type))
		}
	}
	return out
}

func changeKinds(ch []Change) []string {
	out := make([]string, len(ch))
	for i, c := range ch {
		out[i] = c.Kind + " " + c.Column
	}
	return out
}

func route(t *testing.T, tab *Table, kind SourceKind, id string) string {
	t.Helper()
	for _, s := range tab.Sources {
		if s.Kind == kind && s.ID == id {
			return s.Column
		}
	}
	t.Fatalf("no source %s %s", kind, id)
	return ""
}

func TestNewDefaultTypes(t *testing.T) {
	var qs []forms.Field
	for typ := range questionTypes {
		qs = append(qs, q("id_"+typ, typ, typ))
	}
	slices.SortFunc(qs, func(a, b forms.Field) int { return strings.Compare(a.ID, b.ID) })
	qs = append(qs, q("qx", "Hologram", "FancyNewWidget"))
	tab := mustNew(t, form(qs...))
	for _, f := range qs {
		want, known := questionTypes[f.Type]
		var got []Column
		for _, c := range tab.Columns {
			if c.SourceID == f.ID {
				got = append(got, c)
			}
		}
		switch {
		case !known || want == "":
			if len(got) != 0 {
				t.Errorf("%s got columns %+v, want none", f.Type, got)
			}
		case len(got) != 1 || got[0].Type != want || got[0].SourceType != f.Type || got[0].Kind != KindQuestion:
			t.Errorf("%s got columns %+v, want one %s column", f.Type, got, want)
		}
	}
	if len(questionTypes) != 38 {
		t.Errorf("%d documented question types, want 38", len(questionTypes))
	}
}

func TestRenamePinsColumn(t *testing.T) {
	tab := mustNew(t, form(q("q1", "Email Address?", "EmailInput")))
	tab2, ch := mustEvolve(t, tab, form(q("q1", "Work e-mail", "EmailInput")))
	c := columnNamed(t, tab2, "email_address")
	if c.SourceName != "Work e-mail" || !strings.Contains(c.Description, "Work e-mail") {
		t.Errorf("renamed column keeps old source name: %+v", c)
	}
	if got := changeKinds(ch); !slices.Equal(got, []string{"renamed email_address"}) {
		t.Errorf("changes %q", got)
	}
	if len(tab2.Columns) != len(tab.Columns) {
		t.Errorf("rename added columns: %v", tableNames(tab2))
	}
	// A new question may now take the old name's column name? No: it is pinned.
	tab3, _ := mustEvolve(t, tab2, form(q("q1", "Work e-mail", "EmailInput"), q("q2", "Email address", "EmailInput")))
	if got := sourceColumns(tab3); !slices.Equal(got, []string{"email_address:string", "email_address_2:string"}) {
		t.Errorf("columns %q", got)
	}
}

func TestAddedAndRemovedQuestions(t *testing.T) {
	tab := mustNew(t, form(q("q1", "A", "ShortAnswer"), q("q2", "B", "NumberInput")))
	tab2, ch := mustEvolve(t, tab, form(q("q3", "C", "Switch"), q("q1", "A", "ShortAnswer")))
	if got := sourceColumns(tab2); !slices.Equal(got, []string{"a:string", "b:double", "c:bool"}) {
		t.Errorf("columns %q", got)
	}
	if got := changeKinds(ch); !slices.Equal(got, []string{"added c"}) {
		t.Errorf("changes %q", got)
	}
	if c := columnNamed(t, tab2, "c"); c.Required {
		t.Errorf("added column is required")
	}
	if len(tab.Columns) != len(tab2.Columns)-1 {
		t.Errorf("Evolve modified its receiver")
	}
}

func TestTypeChanges(t *testing.T) {
	tab := mustNew(t, form(q("q1", "Rating", "ShortAnswer")))
	steps := []struct {
		typ     string
		columns []string
		route   string
		changes []string
	}{
		{"LongAnswer", []string{"rating:string"}, "rating", []string{"type_updated rating"}},
		{"NumberInput", []string{"rating:string", "rating__v_double:double"}, "rating__v_double", []string{"variant rating__v_double"}},
		{"Slider", []string{"rating:string", "rating__v_double:double"}, "rating__v_double", []string{"type_updated rating__v_double"}},
		{"ShortAnswer", []string{"rating:string", "rating__v_double:double"}, "rating", []string{"type_updated rating"}},
		{"Checkboxes", []string{"rating:string", "rating__v_double:double", "rating__v_list_string:list_string"}, "rating__v_list_string", []string{"variant rating__v_list_string"}},
		{"Password", []string{"rating:string", "rating__v_double:double", "rating__v_list_string:list_string"}, "", []string{"type_updated "}},
		{"NumberInput", []string{"rating:string", "rating__v_double:double", "rating__v_list_string:list_string"}, "rating__v_double", []string{"type_updated rating__v_double"}},
		{"NumberInput", []string{"rating:string", "rating__v_double:double", "rating__v_list_string:list_string"}, "rating__v_double", nil},
	}
	for i, s := range steps {
		var ch []Change
		tab, ch = mustEvolve(t, tab, form(q("q1", "Rating", s.typ)))
		if got := sourceColumns(tab); !slices.Equal(got, s.columns) {
			t.Errorf("step %d (%s): columns %q, want %q", i, s.typ, got, s.columns)
		}
		if got := route(t, tab, KindQuestion, "q1"); got != s.route {
			t.Errorf("step %d (%s): routes to %q, want %q", i, s.typ, got, s.route)
		}
		if got := changeKinds(ch); !slices.Equal(got, s.changes) {
			t.Errorf("step %d (%s): changes %q, want %q", i, s.typ, got, s.changes)
		}
	}
	if c := columnNamed(t, tab, "rating"); c.SourceType != "ShortAnswer" {
		t.Errorf("old column source type %q, want the last type that wrote to it", c.SourceType)
	}
}

func TestPasswordNeverAColumn(t *testing.T) {
	tab := mustNew(t, form(q("q1", "Secret", "Password"), q("q2", "Name", "ShortAnswer")))
	if got := sourceColumns(tab); !slices.Equal(got, []string{"name:string"}) {
		t.Errorf("columns %q", got)
	}
	// It becomes an exported type: now it gets a column, named as usual.
	tab, ch := mustEvolve(t, tab, form(q("q1", "Secret", "ShortAnswer"), q("q2", "Name", "ShortAnswer")))
	if got := changeKinds(ch); !slices.Equal(got, []string{"added secret"}) {
		t.Errorf("changes %q", got)
	}
}

func TestCalculationAndOtherSources(t *testing.T) {
	f := form()
	f.Calculations = []forms.Field{{ID: "c1", Name: "Total", Type: "number"}, {ID: "c2", Name: "Tier", Type: "text"},
		{ID: "c3", Name: "Time", Type: "duration"}, {ID: "c4", Name: "New", Type: "currency"}}
	f.URLParameters = []forms.Field{{ID: "p1", Name: "ref"}}
	f.Scheduling = []forms.Field{{ID: "s1", Name: "Call"}}
	f.Payments = []forms.Field{{ID: "pay1", Name: "Checkout"}}
	tab := mustNew(t, f)
	want := []string{"calc_total:double", "calc_tier:string", "calc_time:string", "calc_new:string",
		"param_ref:string", "scheduling_call:scheduling", "payment_checkout:payment"}
	if got := sourceColumns(tab); !slices.Equal(got, want) {
		t.Errorf("columns %q, want %q", got, want)
	}
	f.Calculations[0].Type = "text"
	tab, _ = mustEvolve(t, tab, f)
	if got := route(t, tab, KindCalculation, "c1"); got != "calc_total__v_string" {
		t.Errorf("number -> text routes to %q", got)
	}
}

func TestEvolveErrors(t *testing.T) {
	tab := mustNew(t, form())
	if _, _, err := tab.Evolve(nil); err == nil {
		t.Error("Evolve(nil) succeeded")
	}
	if _, _, err := tab.Evolve(&forms.Form{ID: "other"}); err == nil {
		t.Error("Evolve with another form's metadata succeeded")
	}
	if _, _, err := New(nil, Options{}); err == nil {
		t.Error("New(nil) succeeded")
	}
	if _, _, err := New(&forms.Form{}, Options{}); err == nil {
		t.Error("New without a form id succeeded")
	}
}

func fullTable(t *testing.T) *Table {
	f := form(q("q1", "Name", "ShortAnswer"), q("q2", "Score", "NumberInput"), q("q3", "Where", "Address"))
	f.Calculations = []forms.Field{{ID: "c1", Name: "Total", Type: "number"}}
	f.Scheduling = []forms.Field{{ID: "s1", Name: "Call"}}
	tab, _, err := New(f, Options{IncludeEditLink: true})
	if err != nil {
		t.Fatal(err)
	}
	f.Questions[1] = q("q2", "Score (new)", "ShortAnswer")
	tab, _ = mustEvolve(t, tab, f)
	// A misfit adds a __v_json companion.
	_, tab, _ = build(t, tab, sub("s1", ans("q2", "ShortAnswer", "12")))
	return tab
}

func TestMarshalRoundTrip(t *testing.T) {
	tab := fullTable(t)
	columnNamed(t, tab, "score__v_string__v_json")
	b, err := Marshal(tab)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, tab) {
		t.Errorf("round trip differs:\n got %+v\nwant %+v", got, tab)
	}
	b2, err := Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, b2) {
		t.Errorf("second marshal differs:\n%s\n%s", b, b2)
	}
	if got.Fingerprint() != tab.Fingerprint() {
		t.Error("fingerprint changed across a round trip")
	}
}

func TestFingerprint(t *testing.T) {
	a := mustNew(t, form(q("q1", "Name", "ShortAnswer")))
	// Pinned: the fingerprint is stored next to committed batches, so it
	// must not change across processes or releases for the same schema.
	// (It changed once, when tables gained the _deleted tombstone column.)
	const golden = "7c6503e1624fd6d8c317c4ee7bbd222c"
	fp := a.Fingerprint()
	if fp != golden {
		t.Fatalf("fingerprint %q, want %q", fp, golden)
	}
	if b := mustNew(t, form(q("q1", "Name", "ShortAnswer"))); b.Fingerprint() != fp {
		t.Error("same schema, different fingerprint")
	}
	renamed, _ := mustEvolve(t, a, form(q("q1", "Full name", "LongAnswer")))
	if renamed.Fingerprint() != fp {
		t.Error("a rename or a same-column-type change moved the fingerprint")
	}
	added, _ := mustEvolve(t, a, form(q("q1", "Name", "ShortAnswer"), q("q2", "Age", "NumberInput")))
	retyped, _ := mustEvolve(t, a, form(q("q1", "Name", "NumberInput")))
	if added.Fingerprint() == fp || retyped.Fingerprint() == fp || added.Fingerprint() == retyped.Fingerprint() {
		t.Error("different schemas share a fingerprint")
	}
}

func TestUnmarshalRejects(t *testing.T) {
	good, err := Marshal(fullTable(t))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		old, new  string
		errSubstr string
	}{
		{"not json", `{`, `x`, "read pinned schema"},
		{"newer version", `"version":1`, `"version":2`, "format version 2"},
		{"duplicate column", `"name":"score"`, `"name":"name"`, "twice"},
		{"bad name", `"name":"score"`, `"name":"Score"`, "invalid name"},
		{"unknown type", `"type":"double"`, `"type":"decimal"`, "unknown type"},
		{"unknown kind", `"kind":"calculation"`, `"kind":"formula"`, "unknown source kind"},
		{"missing fixed", `"name":"_batch_id"`, `"name":"batch_id"`, "fixed column"},
		{"dangling route", `"column":"name"`, `"column":"nowhere"`, "routes to column"},
		{"orphan companion", `"parent":"score__v_string"`, `"parent":"nothing"`, "keeps misfits"},
		{"no form", `"form_id":"f1"`, `"form_id":""`, "no form id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := string(good)
			if tt.old == "{" {
				in = "{"
			} else {
				if !strings.Contains(in, tt.old) {
					t.Fatalf("fixture lacks %s", tt.old)
				}
				in = strings.Replace(in, tt.old, tt.new, 1)
			}
			_, err := Unmarshal([]byte(in))
			if err == nil || !strings.Contains(err.Error(), tt.errSubstr) {
				t.Errorf("Unmarshal error %v, want one containing %q", err, tt.errSubstr)
			}
		})
	}
}

func TestArrowSchema(t *testing.T) {
	tab := fullTable(t)
	s := tab.ArrowSchema()
	if s.NumFields() != len(tab.Columns) {
		t.Fatalf("%d fields for %d columns", s.NumFields(), len(tab.Columns))
	}
	ts := &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
	tests := []struct {
		name     string
		typ      arrow.DataType
		nullable bool
		meta     map[string]string
	}{
		{"form_id", arrow.BinaryTypes.String, false, map[string]string{MetaSourceKind: "fixed"}},
		{"submission_time", ts, false, nil},
		{"last_updated_at", ts, true, nil},
		{"edit_link", arrow.BinaryTypes.String, true, nil},
		{"documents", arrow.ListOf(arrow.StructOf(
			arrow.Field{Name: "id", Type: arrow.BinaryTypes.String, Nullable: true},
			arrow.Field{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
			arrow.Field{Name: "url", Type: arrow.BinaryTypes.String, Nullable: true})), true, nil},
		{"_batch_id", arrow.BinaryTypes.String, false, map[string]string{MetaSourceKind: "lineage"}},
		{"_synced_at", ts, false, nil},
		{"name", arrow.BinaryTypes.String, true, map[string]string{MetaSourceKind: "question", MetaSourceID: "q1",
			MetaSourceName: "Name", MetaSourceType: "ShortAnswer", MetaDescription: `Question "Name" (ShortAnswer)`}},
		{"score", arrow.PrimitiveTypes.Float64, true, map[string]string{MetaSourceName: "Score (new)", MetaSourceType: "NumberInput"}},
		{"score__v_string", arrow.BinaryTypes.String, true, map[string]string{MetaSourceType: "ShortAnswer"}},
		{"score__v_string__v_json", arrow.BinaryTypes.String, true, map[string]string{MetaSourceKind: "variant_json", MetaSourceID: "q2"}},
		{"where_", arrow.StructOf(
			arrow.Field{Name: "address", Type: arrow.BinaryTypes.String, Nullable: true},
			arrow.Field{Name: "city", Type: arrow.BinaryTypes.String, Nullable: true},
			arrow.Field{Name: "state", Type: arrow.BinaryTypes.String, Nullable: true},
			arrow.Field{Name: "zip_code", Type: arrow.BinaryTypes.String, Nullable: true},
			arrow.Field{Name: "country", Type: arrow.BinaryTypes.String, Nullable: true}), true, nil},
		{"calc_total", arrow.PrimitiveTypes.Float64, true, map[string]string{MetaSourceKind: "calculation", MetaSourceType: "number"}},
		{"scheduling_call", arrow.StructOf(
			arrow.Field{Name: "full_name", Type: arrow.BinaryTypes.String, Nullable: true},
			arrow.Field{Name: "email", Type: arrow.BinaryTypes.String, Nullable: true},
			arrow.Field{Name: "timezone", Type: arrow.BinaryTypes.String, Nullable: true},
			arrow.Field{Name: "event_start_time", Type: ts, Nullable: true},
			arrow.Field{Name: "event_end_time", Type: ts, Nullable: true},
			arrow.Field{Name: "event_id", Type: arrow.BinaryTypes.String, Nullable: true},
			arrow.Field{Name: "event_url", Type: arrow.BinaryTypes.String, Nullable: true},
			arrow.Field{Name: "reschedule_or_cancel_url", Type: arrow.BinaryTypes.String, Nullable: true},
			arrow.Field{Name: "user_id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
			arrow.Field{Name: "scheduled_user_email", Type: arrow.BinaryTypes.String, Nullable: true},
			arrow.Field{Name: "meeting_notes", Type: arrow.BinaryTypes.String, Nullable: true}), true,
			map[string]string{MetaSourceKind: "scheduling", MetaSourceID: "s1", MetaSourceName: "Call"}},
	}
	for _, tt := range tests {
		idx := s.FieldIndices(tt.name)
		if len(idx) != 1 {
			t.Errorf("field %s: %d matches", tt.name, len(idx))
			continue
		}
		f := s.Field(idx[0])
		if !arrow.TypeEqual(f.Type, tt.typ) {
			t.Errorf("field %s: type %s, want %s", tt.name, f.Type, tt.typ)
		}
		if f.Nullable != tt.nullable {
			t.Errorf("field %s: nullable %v, want %v", tt.name, f.Nullable, tt.nullable)
		}
		for k, v := range tt.meta {
			if i := f.Metadata.FindKey(k); i < 0 || f.Metadata.Values()[i] != v {
				t.Errorf("field %s: metadata %s = %q, want %q", tt.name, k, f.Metadata.Values()[max(i, 0)], v)
			}
		}
		if f.Metadata.FindKey(MetaDescription) < 0 {
			t.Errorf("field %s has no description", tt.name)
		}
	}
}

func TestMerge(t *testing.T) {
	base := mustNew(t, form(q("q1", "Name", "ShortAnswer")))
	// Two windows built from the same snapshot, each evolving on its own.
	_, a, _ := build(t, base, sub("s1", ans("q1", "ShortAnswer", `5`), ans("qa", "ShortAnswer", `"x"`)))
	_, b, _ := build(t, base, sub("s2", ans("q1", "NumberInput", `5`), ans("qb", "NumberInput", `1`), ans("qa", "ShortAnswer", `"y"`)))
	m := a.Merge(b)
	want := []string{"name:string", "name__v_json:json", "qa:string", "name__v_double:double", "qb:double"}
	if got := sourceColumns(m); !slices.Equal(got, want) {
		t.Errorf("merged columns %q, want %q", got, want)
	}
	if err := m.validate(); err != nil {
		t.Errorf("merged table is invalid: %v", err)
	}
	if got := route(t, m, KindQuestion, "qb"); got != "qb" {
		t.Errorf("qb routes to %q", got)
	}
	if len(a.Columns) != len(base.Columns)+2 {
		t.Error("Merge modified its receiver")
	}
	if again := m.Merge(b); !reflect.DeepEqual(again, m) {
		t.Error("merging the same table twice is not idempotent")
	}
	if m2 := base.Merge(nil); !reflect.DeepEqual(m2, base) {
		t.Error("Merge(nil) is not a copy")
	}

	// Two different new sources that picked the same name: the second is renamed.
	_, c, _ := build(t, base, sub("s3", forms.Answer{ID: "qc", Name: "Colour", Type: "ShortAnswer", Value: []byte(`"red"`)}))
	_, d, _ := build(t, base, sub("s4", forms.Answer{ID: "qd", Name: "Colour", Type: "ShortAnswer", Value: []byte(`"blue"`)}))
	m = c.Merge(d)
	if got := route(t, m, KindQuestion, "qd"); got != "colour_2" {
		t.Errorf("clashing new source routes to %q, want colour_2", got)
	}
	if err := m.validate(); err != nil {
		t.Errorf("merged table is invalid: %v", err)
	}
}
