package schema

import (
	"slices"
	"testing"
)

// README: "A value that does not fit its column leaves the typed cell null
// and is kept whole, as JSON text, in <name>__v_json", and the batch log
// says where (kept_in). A question whose type changes to one held as JSON
// text (ShortAnswer -> Matrix) took that very name for its variant column
// <name>__v_<type>, so the misfits of the old column went to
// <name>__v_json_2 and <name>__v_json held answers of another type. Such a
// variant is now named by its question type.
func TestTypeChangeToJSONTypeKeepsTheCompanionName(t *testing.T) {
	tab := mustNew(t, form(q("q1", "Notes", "ShortAnswer")))
	tab, _ = mustEvolve(t, tab, form(q("q1", "Notes", "Matrix")))
	rec, out, st := build(t, tab,
		sub("s1", ans("q1", "Matrix", `{"row1":"a"}`)),
		sub("s2", ans("q1", "ShortAnswer", `42`)), // an old-type answer that does not fit "notes"
	)
	var companion string
	var names []string
	for _, c := range out.Columns {
		names = append(names, c.Name)
		if c.Kind == KindVariantJSON && c.Parent == "notes" {
			companion = c.Name
		}
	}
	if companion != "notes__v_json" {
		t.Errorf("misfits of column notes are kept in %q, not notes__v_json as documented; notes__v_json holds %v",
			companion, values(t, rec, "notes__v_json"))
	}
	if !slices.Contains(names, "notes__v_matrix") {
		t.Fatalf("no column notes__v_matrix for the Matrix answers: %v", names)
	}
	if got := values(t, rec, "notes__v_matrix"); got[0] != `{"row1":"a"}` || got[1] != nil {
		t.Errorf("notes__v_matrix holds %v, want the Matrix answer of s1 only", got)
	}
	if got := st.KeptIn["notes"]; got != companion {
		t.Errorf("the stats say the misfits of notes are kept in %q, the table in %q", got, companion)
	}
}

func TestVariantSuffix(t *testing.T) {
	for _, tc := range []struct {
		ct          ColumnType
		questionTyp string
		want        string
	}{
		{TypeDouble, "NumberInput", "__v_double"},
		{TypeString, "ShortAnswer", "__v_string"},
		{TypeJSON, "Matrix", "__v_matrix"},
		{TypeJSON, "MultipleChoiceGrid", "__v_multiplechoicegrid"},
		{TypeJSON, "Json", "__v_json_text"},
		{TypeJSON, "", "__v_json_text"},
	} {
		if got := variantSuffix(tc.ct, tc.questionTyp); got != tc.want {
			t.Errorf("variantSuffix(%s, %q) = %q, want %q", tc.ct, tc.questionTyp, got, tc.want)
		}
	}
}
