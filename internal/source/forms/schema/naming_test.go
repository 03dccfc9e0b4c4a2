package schema

import (
	"slices"
	"strings"
	"testing"

	forms "github.com/syncd-dev/syncd/internal/source/forms/api"
)

func TestSanitizeName(t *testing.T) {
	long := strings.Repeat("abcdefghij", 20) // 200 characters
	tests := []struct {
		in, want string
	}{
		{"Prénom", "prenom"},
		{"Email Address?", "email_address"},
		{"  Hello,   World!  ", "hello_world"},
		{"already_snake", "already_snake"},
		{"__x__y__", "x_y"},
		{"Straße", "strasse"},
		{"Ærøskøbing Œuvre", "aeroskobing_oeuvre"},
		{"Ｆｕｌｌ ｗｉｄｔｈ ²", "full_width_2"},
		{"Crème brûlée à gogo", "creme_brulee_a_gogo"},
		{"Łódź", "lodz"},
		{"What's your e-mail?", "what_s_your_e_mail"},
		{"1st choice", "n_1st_choice"},
		{"2024", "n_2024"},
		{"Select", "select_"},
		{"ORDER", "order_"},
		{"by", "by_"},
		{"all", "all_"},
		{"selection", "selection"},
		{"_TABLE_suffix", "table_suffix"},
		{"__root__", "root"},
		{"???", ""},
		{"日本", ""},
		{"", ""},
		{"名前 name", "name"},
		{long, long[:MaxNameLen]},
		{strings.Repeat("a", 127) + " b", strings.Repeat("a", 127)}, // no trailing "_" after the cut
		{"9" + long, "n_9" + long[:MaxNameLen-3]},
	}
	for _, tt := range tests {
		got := SanitizeName(tt.in)
		if got != tt.want {
			t.Errorf("SanitizeName(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if got != "" && !validName(got) {
			t.Errorf("SanitizeName(%q) = %q, which is not a valid column name", tt.in, got)
		}
	}
}

func TestColumnNamesInTable(t *testing.T) {
	long := strings.Repeat("x", 200)
	f := &forms.Form{
		ID: "f1",
		Questions: []forms.Field{
			q("q1", "Name", "ShortAnswer"),
			q("q2", "name", "ShortAnswer"),
			q("q3", "NAME!", "ShortAnswer"),
			q("q4", "???", "ShortAnswer"),
			q("日本", "日本", "ShortAnswer"),
			q("q6", "Submission ID", "ShortAnswer"),
			q("q7", "Select", "ShortAnswer"),
			q("q8", "1st choice", "ShortAnswer"),
			q("q9", long, "ShortAnswer"),
			q("q10", long, "ShortAnswer"),
			q("q11", "Edit link", "ShortAnswer"), // reserved even without the column
			q("q12", "name 2", "ShortAnswer"),
		},
		Calculations:  []forms.Field{{ID: "c1", Name: "Total", Type: "number"}, {ID: "c2", Name: "", Type: "text"}},
		URLParameters: []forms.Field{{ID: "p1", Name: "utm_source"}},
		Scheduling:    []forms.Field{{ID: "s1", Name: "Meeting"}},
		Payments:      []forms.Field{{ID: "pay1", Name: "Order"}},
	}
	tab := mustNew(t, f)
	want := []string{
		"form_id", "submission_id", "submission_time", "last_updated_at", "started_at", "login_email",
		"quiz_score", "quiz_max_score", "documents", "_batch_id", "_synced_at", "_deleted",
		"name", "name_2", "name_3", "q4", "question", "submission_id_2", "select_", "n_1st_choice",
		strings.Repeat("x", 128), strings.Repeat("x", 126) + "_2", "edit_link_2", "name_2_2",
		"calc_total", "calc_c2", "param_utm_source", "scheduling_meeting", "payment_order",
	}
	if got := tableNames(tab); !slices.Equal(got, want) {
		t.Errorf("columns\n got %q\nwant %q", got, want)
	}
	for _, c := range tab.Columns {
		if len(c.Name) > MaxNameLen || !validName(c.Name) {
			t.Errorf("column name %q is not valid", c.Name)
		}
	}
}

func TestEditLinkOption(t *testing.T) {
	tab, _, err := New(form(q("q1", "Edit link", "ShortAnswer")), Options{IncludeEditLink: true})
	if err != nil {
		t.Fatal(err)
	}
	got := tableNames(tab)
	want := []string{"form_id", "submission_id", "submission_time", "last_updated_at", "started_at", "login_email",
		"quiz_score", "quiz_max_score", "edit_link", "documents", "_batch_id", "_synced_at", "_deleted", "edit_link_2"}
	if !slices.Equal(got, want) {
		t.Errorf("columns\n got %q\nwant %q", got, want)
	}
}

func TestVariantNamesFit(t *testing.T) {
	long := strings.Repeat("y", 200)
	tab := mustNew(t, form(q("q1", long, "ShortAnswer")))
	tab, _ = mustEvolve(t, tab, form(q("q1", long, "Checkboxes")))
	want := strings.Repeat("y", MaxNameLen-len("__v_list_string")) + "__v_list_string"
	if c := tab.Columns[len(tab.Columns)-1]; c.Name != want {
		t.Errorf("variant name %q, want %q", c.Name, want)
	}
}
