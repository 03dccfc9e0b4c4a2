package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	bq "google.golang.org/api/bigquery/v2"

	"github.com/syncd-dev/syncd/internal/bqfake"
	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/sink"
	forms "github.com/syncd-dev/syncd/internal/source/forms/api"
	"github.com/syncd-dev/syncd/internal/source/forms/schema"
	"github.com/syncd-dev/syncd/internal/testkit"
)

// TestBigQueryEndToEnd syncs every form of the simulator into the fake
// BigQuery through the real binary, with every fault the fake can inject
// queued for the first loads: every form lands in its own table, partitioned
// by day on submission_time, with the column types and modes of the pinned
// schema, each submission once. Then the form changes (an added question, a
// type change, a rename) and new submissions arrive: the next pass adds the
// new question as a NULLABLE column with the question's text as its
// description, in one load job, and old rows read NULL there.
func TestBigQueryEndToEnd(t *testing.T) {
	start, end := history(4)
	sim := testkit.StartSim(t, formsim.Config{Seed: 31, Forms: 3, Submissions: 300, Start: start, End: end})
	f := bqfake.New(t)
	const project, dataset = "e2e", "forms"
	w := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{
		Sync: "  safety_lag: 0s\n  max_rows_per_batch: 200\n  concurrency: 3\n",
		Sink: bqSink(f, project, dataset),
	})
	ctx := context.Background()
	f.Inject(bqfake.Insert5xx, bqfake.RateLimited, bqfake.JobBackendError, bqfake.CutAfterAccept, bqfake.ErrorAfterAccept)
	f.SetRunningPolls(2)
	pass := func(name string) testkit.Result {
		t.Helper()
		res := testkit.Run(ctx, syncdBin, w, "once")
		if res.Code != 0 {
			t.Fatalf("%s: exit %d\nstdout:\n%s\nstderr:\n%s", name, res.Code, res.Stdout, tail(res.Stderr))
		}
		return res
	}
	pass("first pass")
	if n := f.PendingFaults(); n != 0 {
		t.Errorf("%d injected faults never fired: the pass made too few loads to prove anything", n)
	}
	checkBigQuery(t, sim, f, w, project, dataset, end)
	for _, id := range sim.FormIDs() {
		checkTableLayout(t, f, w, project, dataset, id)
	}

	// The form changes and new submissions arrive after the checkpoint.
	form := sim.FormIDs()[1]
	table := poller.DefaultTable(form)
	meta, _ := sim.Form(form)
	var text, number forms.Field
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
	textCol, numberCol := columnOf(t, w, form, text.ID), columnOf(t, w, form, number.ID)
	oldRows := len(f.Rows(project, dataset, table))
	must(t, sim.RenameQuestion(form, text.ID, "A completely new title for this question"))
	must(t, sim.AddQuestion(form, forms.Field{ID: "qAdded1", Name: "Favourite colour", Type: "ShortAnswer"}))
	must(t, sim.ChangeQuestionType(form, number.ID, "ShortAnswer"))
	now := time.Now().UTC()
	if _, err := sim.Insert(form, now, now.Add(time.Millisecond), now.Add(2*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond) // the pass's end (now) must be past the new submissions
	jobsBefore := f.JobCount(project)
	pass("second pass")

	if got := f.JobCount(project) - jobsBefore; got != 1 {
		t.Errorf("the second pass made %d load jobs for one changed table, want 1", got)
	}
	checkBigQuery(t, sim, f, w, project, dataset, now)
	checkTableLayout(t, f, w, project, dataset, form)
	// Beside the table, the view of its current state.
	if view, ok := f.Table(project, dataset, table+"_latest"); !ok || view.View == nil || view.View.UseLegacySql ||
		view.View.Query != sink.LatestQuery("`"+project+"."+dataset+"."+table+"`", "submission_id", "last_updated_at") {
		t.Errorf("no %s_latest view with the documented latest query: %+v", table, view.View)
	}
	tm, _ := f.Table(project, dataset, table)
	added := fieldNamed(tm.Schema.Fields, func(n string) bool { return strings.HasPrefix(n, "favourite_colour") })
	switch {
	case added == nil:
		t.Fatalf("the added question has no column in %s: %v", table, names(tm.Schema.Fields))
	case added.Mode != "NULLABLE" && added.Mode != "":
		t.Errorf("added column %s is %s, want NULLABLE", added.Name, added.Mode)
	case !strings.Contains(added.Description, "Favourite colour"):
		t.Errorf("added column %s has description %q, without the question's text", added.Name, added.Description)
	}
	if fieldNamed(tm.Schema.Fields, func(n string) bool { return n == numberCol+"__v_string" }) == nil {
		t.Errorf("type change made no variant column %s__v_string: %v", numberCol, names(tm.Schema.Fields))
	}
	if got := columnOf(t, w, form, text.ID); got != textCol {
		t.Errorf("renamed question moved from column %s to %s", textCol, got)
	}
	rows := f.Rows(project, dataset, table)
	for i, r := range rows {
		if added != nil && i < oldRows && r[added.Name] != nil {
			t.Errorf("row %d, loaded before the question existed, has %s = %v", i, added.Name, r[added.Name])
			break
		}
	}
}

// checkTableLayout compares a form's table with the schema syncd pinned for
// it: the same columns in the same order, each of the BigQuery type its
// Arrow type loads as, form_id, submission_id and submission_time REQUIRED
// and every other column NULLABLE or REPEATED, question columns described by
// the question's text; partitioned by day on submission_time.
func checkTableLayout(t *testing.T, f *bqfake.Server, w *testkit.Workdir, project, dataset, formID string) {
	t.Helper()
	pinned := pinnedSchema(t, w, formID)
	table := poller.DefaultTable(formID)
	tm, ok := f.Table(project, dataset, table)
	if !ok {
		t.Errorf("form %s has no table", formID)
		return
	}
	if p := tm.TimePartitioning; p == nil || p.Type != "DAY" || p.Field != "submission_time" {
		t.Errorf("table %s is partitioned %+v, want by DAY on submission_time", table, p)
	}
	got := tm.Schema.Fields
	want := pinned.ArrowSchema().Fields()
	if len(got) != len(want) {
		t.Errorf("table %s has columns %v, the pinned schema %d", table, names(got), len(want))
		return
	}
	required := map[string]bool{schema.ColFormID: true, schema.ColSubmissionID: true, schema.ColSubmissionTime: true}
	for i, af := range want {
		g := got[i]
		if g.Name != af.Name {
			t.Errorf("table %s column %d is %s, the pinned schema's %s", table, i, g.Name, af.Name)
			continue
		}
		typ, mode := bqTypeOf(af)
		if required[af.Name] {
			mode = "REQUIRED"
		}
		gotMode := g.Mode
		if gotMode == "" {
			gotMode = "NULLABLE"
		}
		if g.Type != typ || gotMode != mode {
			t.Errorf("table %s column %s is %s %s, want %s %s (Arrow %s)", table, g.Name, gotMode, g.Type, mode, typ, af.Type)
		}
	}
	for _, c := range pinned.Columns {
		if c.Kind != "question" || c.SourceName == "" {
			continue
		}
		if g := fieldNamed(got, func(n string) bool { return n == c.Name }); g != nil && g.Description == "" {
			t.Errorf("table %s column %s (question %q) has no description", table, c.Name, c.SourceName)
		}
	}
}

// bqTypeOf is the BigQuery type and mode a Parquet column written from an
// Arrow field loads as, with list inference.
func bqTypeOf(f arrow.Field) (typ, mode string) {
	mode = "NULLABLE"
	dt := f.Type
	if l, ok := dt.(*arrow.ListType); ok {
		mode, dt = "REPEATED", l.Elem()
	}
	switch dt.ID() {
	case arrow.STRING, arrow.LARGE_STRING:
		return "STRING", mode
	case arrow.FLOAT64, arrow.FLOAT32:
		return "FLOAT", mode
	case arrow.INT64, arrow.INT32:
		return "INTEGER", mode
	case arrow.BOOL:
		return "BOOLEAN", mode
	case arrow.DATE32:
		return "DATE", mode
	case arrow.TIMESTAMP:
		return "TIMESTAMP", mode
	case arrow.STRUCT:
		return "RECORD", mode
	}
	return "unexpected " + dt.String(), mode
}

func fieldNamed(fs []*bq.TableFieldSchema, match func(string) bool) *bq.TableFieldSchema {
	for _, f := range fs {
		if match(f.Name) {
			return f
		}
	}
	return nil
}

func names(fs []*bq.TableFieldSchema) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Name
	}
	return out
}

// TestBigQueryFailuresAreClearAndLoseNothing runs the binary into failures
// it cannot retry away: a missing permission (fails at once) and temporary
// faults that outlast max_attempts. Each ends the pass with exit 1 and one
// sentence naming the table and the cause, loads nothing twice, and the
// next pass, once the cause is gone, commits every submission once.
func TestBigQueryFailuresAreClearAndLoseNothing(t *testing.T) {
	start, end := history(2)
	sim := testkit.StartSim(t, formsim.Config{Seed: 41, Forms: 1, Submissions: 120, Start: start, End: end})
	form := sim.FormIDs()[0]
	cases := []struct {
		name  string
		setup func(f *bqfake.Server)
		fix   func(f *bqfake.Server)
		want  []string
	}{
		{name: "no permission to write the table",
			setup: func(f *bqfake.Server) { f.Deny("bigquery.tables.updateData") },
			fix:   func(f *bqfake.Server) { f.Allow("bigquery.tables.updateData") },
			want:  []string{"e2e.forms." + poller.DefaultTable(form), "bigquery.tables.updateData", "roles/bigquery.dataEditor on dataset e2e.forms"}},
		{name: "no permission to run jobs",
			setup: func(f *bqfake.Server) { f.Deny("bigquery.jobs.create") },
			fix:   func(f *bqfake.Server) { f.Allow("bigquery.jobs.create") },
			want:  []string{"bigquery.jobs.create", "roles/bigquery.jobUser on project e2e"}},
		{name: "5xx on every try",
			setup: func(f *bqfake.Server) {
				f.Inject(bqfake.Insert5xx, bqfake.RateLimited, bqfake.Insert5xx, bqfake.RateLimited, bqfake.Insert5xx, bqfake.Insert5xx)
			},
			fix:  func(*bqfake.Server) {},
			want: []string{"not committed after 6 tries", "backendError"}},
		{name: "jobs end in backendError on every try",
			setup: func(f *bqfake.Server) {
				for range 6 {
					f.Inject(bqfake.JobBackendError)
				}
			},
			fix:  func(*bqfake.Server) {},
			want: []string{"not committed after 6 tries", "backendError"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := bqfake.New(t)
			const project, dataset = "e2e", "forms"
			w := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{Sync: "  safety_lag: 0s\n", Sink: bqSink(f, project, dataset)})
			ctx := context.Background()
			tc.setup(f)
			res := testkit.Run(ctx, syncdBin, w, "once")
			if res.Code != 1 {
				t.Fatalf("exit %d, want 1\nstdout:\n%s\nstderr:\n%s", res.Code, res.Stdout, tail(res.Stderr))
			}
			var line string
			for _, l := range strings.Split(res.Stdout, "\n") {
				if strings.HasPrefix(l, "FAIL "+form) {
					line = l
				}
			}
			if line == "" {
				t.Fatalf("no FAIL line for form %s in:\n%s", form, res.Stdout)
			}
			t.Logf("the error: %s", line)
			for _, part := range tc.want {
				if !strings.Contains(line, part) {
					t.Errorf("the error does not name %q", part)
				}
			}
			if rows := f.Rows(project, dataset, poller.DefaultTable(form)); len(rows) != 0 {
				t.Errorf("%d rows loaded by a failed pass", len(rows))
			}
			tc.fix(f)
			if res := testkit.Run(ctx, syncdBin, w, "once"); res.Code != 0 {
				t.Fatalf("pass after the fix: exit %d\n%s\n%s", res.Code, res.Stdout, tail(res.Stderr))
			}
			checkBigQuery(t, sim, f, w, project, dataset, end)
			if n := f.PendingFaults(); n != 0 {
				t.Errorf("%d faults never fired", n)
			}
		})
	}
}

// TestBigQueryValidateWarnsOfQuota: `syncd validate` says when the schedule
// would spend more load jobs a day than a BigQuery table takes, and stays
// quiet for a schedule that fits; a warning does not fail validation.
func TestBigQueryValidateWarnsOfQuota(t *testing.T) {
	start, end := history(1)
	sim := testkit.StartSim(t, formsim.Config{Seed: 43, Forms: 1, Submissions: 10, Start: start, End: end})
	f := bqfake.New(t)
	cases := []struct {
		schedule string
		warn     bool
	}{
		{"*/15 * * * *", false},
		{"@every 30s", true},
	}
	for _, tc := range cases {
		t.Run(tc.schedule, func(t *testing.T) {
			w := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{
				Sync: fmt.Sprintf("  safety_lag: 0s\n  schedule: %q\n", tc.schedule),
				Sink: bqSink(f, "e2e", "forms"),
			})
			res := testkit.Run(context.Background(), syncdBin, w, "validate")
			if res.Code != 0 {
				t.Fatalf("validate exited %d:\n%s\n%s", res.Code, res.Stdout, tail(res.Stderr))
			}
			warned := strings.Contains(res.Stdout, "WARN quota: sync.schedule")
			if warned != tc.warn {
				t.Errorf("quota warning = %v, want %v:\n%s", warned, tc.warn, res.Stdout)
			}
			if tc.warn && !strings.Contains(res.Stdout, "2880 passes") {
				t.Errorf("the warning does not count the passes:\n%s", res.Stdout)
			}
		})
	}
}
