package schema

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	forms "github.com/syncd-dev/syncd/internal/source/forms/api"
)

var (
	testTime = time.Date(2024, 2, 1, 9, 30, 0, 0, time.UTC)
	testLin  = Lineage{BatchID: "b-2024-02-01", SyncedAt: time.Date(2024, 2, 2, 0, 0, 0, 0, time.UTC)}
)

func form(qs ...forms.Field) *forms.Form {
	return &forms.Form{ID: "f1", Name: "Test form", Questions: qs}
}

func q(id, name, typ string) forms.Field { return forms.Field{ID: id, Name: name, Type: typ} }

func mustNew(t testing.TB, f *forms.Form) *Table {
	t.Helper()
	tab, _, err := New(f, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

func mustEvolve(t testing.TB, tab *Table, f *forms.Form) (*Table, []Change) {
	t.Helper()
	out, ch, err := tab.Evolve(f)
	if err != nil {
		t.Fatal(err)
	}
	return out, ch
}

func ans(id, typ, value string) forms.Answer {
	return forms.Answer{ID: id, Name: id, Type: typ, Value: json.RawMessage(value)}
}

func sub(id string, answers ...forms.Answer) *forms.Submission {
	return &forms.Submission{SubmissionID: id, SubmissionTime: testTime, Questions: answers}
}

// build appends subs to a Builder over tab with a checked allocator and
// returns the record (released at cleanup), the final table and the stats.
func build(t testing.TB, tab *Table, subs ...*forms.Submission) (arrow.Record, *Table, Stats) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	b := NewBuilder(tab, mem)
	for _, s := range subs {
		if err := b.Append(s, testLin); err != nil {
			t.Fatalf("append %s: %v", s.SubmissionID, err)
		}
	}
	rec, out, st := b.Finish()
	b.Release()
	t.Cleanup(func() {
		rec.Release()
		mem.AssertSize(t, 0)
	})
	if got, want := rec.Schema(), out.ArrowSchema(); !got.Equal(want) {
		t.Fatalf("record schema differs from the table's:\n%v\n%v", got, want)
	}
	return rec, out, st
}

// values returns column name of rec as Go values (see cellValue).
func values(t testing.TB, rec arrow.Record, name string) []any {
	t.Helper()
	idx := rec.Schema().FieldIndices(name)
	if len(idx) != 1 {
		t.Fatalf("record has %d columns named %q; columns: %v", len(idx), name, columnNames(rec.Schema()))
	}
	a := rec.Column(idx[0])
	out := make([]any, a.Len())
	for i := range out {
		out[i] = cellValue(a, i)
	}
	return out
}

func columnNames(s *arrow.Schema) []string {
	out := make([]string, s.NumFields())
	for i, f := range s.Fields() {
		out[i] = f.Name
	}
	return out
}

func tableNames(tab *Table) []string {
	out := make([]string, len(tab.Columns))
	for i, c := range tab.Columns {
		out[i] = c.Name
	}
	return out
}

func columnNamed(t testing.TB, tab *Table, name string) Column {
	t.Helper()
	for _, c := range tab.Columns {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("table has no column %q; columns: %v", name, tableNames(tab))
	return Column{}
}

// cellValue renders one Arrow slot as a plain Go value: nil, string,
// float64, int64, bool, a date as "YYYY-MM-DD", a timestamp as RFC 3339 UTC,
// a list as []any and a struct as map[string]any.
func cellValue(a arrow.Array, i int) any {
	if a.IsNull(i) {
		return nil
	}
	switch a := a.(type) {
	case *array.String:
		return a.Value(i)
	case *array.Float64:
		return a.Value(i)
	case *array.Int64:
		return a.Value(i)
	case *array.Boolean:
		return a.Value(i)
	case *array.Date32:
		return a.Value(i).ToTime().Format(time.DateOnly)
	case *array.Timestamp:
		return time.UnixMicro(int64(a.Value(i))).UTC().Format(time.RFC3339Nano)
	case *array.List:
		start, end := a.ValueOffsets(i)
		out := []any{}
		for j := start; j < end; j++ {
			out = append(out, cellValue(a.ListValues(), int(j)))
		}
		return out
	case *array.Struct:
		st := a.DataType().(*arrow.StructType)
		m := make(map[string]any, st.NumFields())
		for j, f := range st.Fields() {
			m[f.Name] = cellValue(a.Field(j), i)
		}
		return m
	}
	return fmt.Sprintf("<unsupported %T>", a)
}
