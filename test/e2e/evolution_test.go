package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/poller"
	forms "github.com/syncd-dev/syncd/internal/source/forms/api"
	"github.com/syncd-dev/syncd/internal/testkit"
)

// TestSchemaEvolution changes a form between passes the way real forms
// change, and reads old and new files together with DuckDB.
func TestSchemaEvolution(t *testing.T) {
	start, end := history(3)
	sim := testkit.StartSim(t, formsim.Config{Seed: 21, Forms: 2, Submissions: 300, Start: start, End: end})
	form := sim.FormIDs()[1] // a narrow form
	table := poller.DefaultTable(form)
	w := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{Forms: "forms:\n  - id: " + form + "\n"})
	ctx := context.Background()
	pass := func(name string) testkit.Result {
		t.Helper()
		res := testkit.Run(ctx, syncdBin, w, "once")
		if res.Code != 0 {
			t.Fatalf("%s: exit %d: %s %s", name, res.Code, res.Stdout, tail(res.Stderr))
		}
		return res
	}
	pass("first pass")
	duck := testkit.OpenDuck(t)
	before := duck.Columns(t, w.Out, table)

	text, number := textAndNumber(t, sim, form)
	textCol, numberCol := columnOf(t, w, form, text.ID), columnOf(t, w, form, number.ID)

	// Rename, add, change type, and introduce a type nobody knows yet.
	must(t, sim.RenameQuestion(form, text.ID, "A completely new title for this question"))
	must(t, sim.AddQuestion(form, forms.Field{ID: "qAdded1", Name: "Favourite colour", Type: "ShortAnswer"}))
	must(t, sim.ChangeQuestionType(form, number.ID, "ShortAnswer"))
	must(t, sim.AddQuestion(form, forms.Field{ID: "qFuture", Name: "Hologram", Type: "FancyNewWidget"}))
	// New submissions after the first pass's checkpoint (submissions
	// back-dated behind it are a documented limitation of the live sync).
	now := time.Now().UTC()
	if _, err := sim.Insert(form, now, now.Add(time.Millisecond), now.Add(2*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	res := pass("second pass")

	after := duck.Columns(t, w.Out, table)
	if got := columnOf(t, w, form, text.ID); got != textCol {
		t.Errorf("renamed question moved from column %s to %s", textCol, got)
	}
	if _, ok := after[numberCol+"__v_string"]; !ok {
		t.Errorf("type change NumberInput -> ShortAnswer made no variant column %s__v_string; columns %v", numberCol, keys(after))
	}
	if after[numberCol] != before[numberCol] {
		t.Errorf("old column %s changed type from %s to %s", numberCol, before[numberCol], after[numberCol])
	}
	if !hasColumnLike(after, "favourite_colour") {
		t.Errorf("added question has no column; columns %v", keys(after))
	}
	if hasColumnLike(after, "hologram") {
		t.Errorf("unknown question type got a column")
	}
	if n := strings.Count(res.Stderr, "FancyNewWidget"); n != 1 {
		t.Errorf("unknown type logged %d times in a pass, want once", n)
	}
	// Old and new files read together, each submission once.
	got := duck.IDCounts(t, w.Out, table)
	testkit.CheckExactlyOnce(t, got, testkit.ExpectedIn(sim, form, testkit.Covered(t, w.State, form)))
}

// textAndNumber are the first ShortAnswer and NumberInput questions of
// form, which the evolution tests rename and retype.
func textAndNumber(t *testing.T, sim *testkit.Sim, form string) (text, number forms.Field) {
	t.Helper()
	meta, _ := sim.Form(form)
	for _, q := range meta.Questions {
		switch {
		case text.ID == "" && q.Type == "ShortAnswer":
			text = q
		case number.ID == "" && q.Type == "NumberInput":
			number = q
		}
	}
	if text.ID == "" || number.ID == "" {
		t.Fatalf("form %s lacks a ShortAnswer and a NumberInput question: %+v", form, meta.Questions)
	}
	return text, number
}

// columnOf finds the column a question's answers land in, as `syncd schema`
// shows it from the pinned schema.
func columnOf(t *testing.T, w *testkit.Workdir, formID, questionID string) string {
	t.Helper()
	out := testkit.Run(context.Background(), syncdBin, w, "schema", formID)
	for _, line := range strings.Split(out.Stdout, "\n") {
		f := strings.Fields(line)
		if len(f) >= 5 && f[3] == "question" && f[4] == questionID {
			return f[0]
		}
	}
	t.Fatalf("question %s not found in `syncd schema`:\n%s\n%s", questionID, out.Stdout, out.Stderr)
	return ""
}

func hasColumnLike(cols map[string]string, prefix string) bool {
	for c := range cols {
		if strings.HasPrefix(c, prefix) {
			return true
		}
	}
	return false
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
