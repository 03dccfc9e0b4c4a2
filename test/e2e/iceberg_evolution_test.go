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
	"github.com/syncd-dev/syncd/internal/testkit/icebird"
)

// TestIcebergSchemaEvolution: a renamed question keeps its column and its
// Iceberg field id, a new question adds a field, a type change adds its
// variant field; old rows read null in the new fields, all through the
// binary and read by icebird.
func TestIcebergSchemaEvolution(t *testing.T) {
	start, end := history(3)
	sim := testkit.StartSim(t, formsim.Config{Seed: 21, Forms: 2, Submissions: 300, Start: start, End: end})
	form := sim.FormIDs()[1] // a narrow form
	table := poller.DefaultTable(form)
	w := testkit.NewWorkdir(t, sim.BaseURL, icebergConfig("  safety_lag: 0s\n"))
	ctx := context.Background()
	pass := func(name string) {
		t.Helper()
		if res := testkit.Run(ctx, syncdBin, w, "once"); res.Code != 0 {
			t.Fatalf("%s: exit %d: %s %s", name, res.Code, res.Stdout, tail(res.Stderr))
		}
	}
	pass("first pass")
	before := icebergTable(t, w, table)
	oldIDs := map[string]bool{}
	for _, r := range before.Rows {
		oldIDs[r["submission_id"].(string)] = true
	}

	text, number := textAndNumber(t, sim, form)
	textCol, numberCol := columnOf(t, w, form, text.ID), columnOf(t, w, form, number.ID)
	must(t, sim.RenameQuestion(form, text.ID, "A completely new title for this question"))
	must(t, sim.AddQuestion(form, forms.Field{ID: "qAdded1", Name: "Favourite colour", Type: "ShortAnswer"}))
	must(t, sim.ChangeQuestionType(form, number.ID, "ShortAnswer"))
	now := time.Now().UTC()
	if _, err := sim.Insert(form, now, now.Add(time.Millisecond), now.Add(2*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	pass("second pass")

	after := icebergTable(t, w, table)
	fieldOf := func(tb *icebird.Table, name string) (icebird.Field, bool) {
		for _, f := range tb.Schema {
			if f.Name == name {
				return f, true
			}
		}
		return icebird.Field{}, false
	}
	if got := columnOf(t, w, form, text.ID); got != textCol {
		t.Errorf("renamed question moved from column %s to %s", textCol, got)
	}
	old, _ := fieldOf(before, textCol)
	now2, ok := fieldOf(after, textCol)
	if !ok || now2.ID != old.ID {
		t.Errorf("the renamed question's field %s: id %d before, %d (present %v) after", textCol, old.ID, now2.ID, ok)
	}
	variant, ok := fieldOf(after, numberCol+"__v_string")
	if !ok {
		t.Fatalf("type change NumberInput -> ShortAnswer made no variant field %s__v_string", numberCol)
	}
	if f, _ := fieldOf(after, numberCol); f.Type != func() string { f0, _ := fieldOf(before, numberCol); return f0.Type }() {
		t.Errorf("old field %s changed type to %s", numberCol, f.Type)
	}
	var added icebird.Field
	for _, f := range after.Schema {
		if strings.HasPrefix(f.Name, "favourite_colour") {
			added = f
		}
	}
	if added.Name == "" {
		t.Fatalf("the added question has no field")
	}
	maxOld := 0
	for _, f := range before.Schema {
		maxOld = max(maxOld, f.ID)
	}
	if added.ID <= maxOld || variant.ID <= maxOld {
		t.Errorf("new fields reuse old ids: added %d, variant %d, old ids up to %d", added.ID, variant.ID, maxOld)
	}
	// Old rows read null in the new fields.
	for _, r := range after.Rows {
		if oldIDs[r["submission_id"].(string)] && (r[added.Name] != nil || r[variant.Name] != nil) {
			t.Fatalf("an old row has a value in a new field: %v", r)
		}
	}
	checkIceberg(t, sim, w, start)
}
