package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/testkit"
)

// dayLayoutFixture is the state and output that syncd at 0b5e8d6 (the
// last main before tables chose their own layout, whose default was day)
// wrote of two of dayLayoutSim's three forms: on local disk and in a
// file:// bucket. Its README says how.
const dayLayoutFixture = "testdata/day-layout"

// dayLayoutSim serves what the fixture was synced from: the same seed,
// forms, counts and times give the same submissions.
func dayLayoutSim() formsim.Config {
	return formsim.Config{Seed: 41, Forms: 3, Submissions: 100,
		Start: time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC),
		End:   time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)}
}

// TestDayLayoutUpgrade is the upgrade promise of the layout change: a
// state and output written by the previous main with its default (day)
// keep day for those tables, while a form new to them takes auto (here
// month: 100 rows over 10 days, with batches of 40); a config that asks another layout of the old tables is
// refused with one sentence and writes nothing; and `state adopt` of that
// output records the same layouts. On local disk and in a bucket.
func TestDayLayoutUpgrade(t *testing.T) {
	for _, kind := range []string{"local", "bucket"} {
		t.Run(kind, func(t *testing.T) { testDayLayoutUpgrade(t, kind) })
	}
}

func testDayLayoutUpgrade(t *testing.T, kind string) {
	sim := testkit.StartSim(t, dayLayoutSim())
	forms := sim.FormIDs()
	oldForms, newForm := []string{"ye9ht1ap0w9p", "xeew303my22e"}, "vuhd799cz4jx"
	if strings.Join(forms, " ") != strings.Join(append(oldForms[:2:2], newForm), " ") {
		t.Fatalf("the simulator serves forms %v, the fixture was written from %v and %s: regenerate it (%s/README.md)", forms, oldForms, newForm, dayLayoutFixture)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	sinkPath := out
	if kind == "bucket" {
		sinkPath = "file://" + out
	}
	sinkFor := func(partition string) string {
		s := "sink:\n  type: parquet\n  parquet:\n    path: " + sinkPath + "\n"
		if partition != "" {
			s += "    partition: " + partition + "\n"
		}
		return s
	}
	w := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{Sync: "  safety_lag: 0s\n  max_rows_per_batch: 40\n", Sink: sinkFor("")})
	copyDir(t, filepath.Join(dayLayoutFixture, kind, "output"), out)
	copyDir(t, filepath.Join(dayLayoutFixture, kind, "state"), filepath.Dir(w.State))
	duck := testkit.OpenDuck(t)
	ctx := context.Background()
	exact := func(t *testing.T, what string) {
		t.Helper()
		for _, f := range forms {
			table := poller.DefaultTable(f)
			testkit.CheckExactlyOnce(t, duck.IDCounts(t, out, table), sim.ExpectedIDs(f))
		}
		if t.Failed() {
			t.Fatalf("%s: the output is not exactly the service's submissions", what)
		}
	}
	layouts := func(t *testing.T) map[string]string {
		t.Helper()
		res := testkit.Run(ctx, syncdBin, w, "state", "show", "-o", "json")
		if res.Code != 0 {
			t.Fatalf("state show exited %d: %s", res.Code, res.Stderr)
		}
		var v struct {
			Forms []struct {
				FormID string `json:"form_id"`
				Layout string `json:"layout"`
			} `json:"forms"`
		}
		if err := json.Unmarshal([]byte(res.Stdout), &v); err != nil {
			t.Fatalf("state show -o json: %v\n%s", err, res.Stdout)
		}
		m := map[string]string{}
		for _, f := range v.Forms {
			m[f.FormID] = f.Layout
		}
		return m
	}
	// The new form's 100 rows over 10 days, with batches of 40 (the rows a
	// partition should hold at least): month.
	want := map[string]string{oldForms[0]: "day", oldForms[1]: "day", newForm: "month"}
	checkLayouts := func(t *testing.T, what string) {
		t.Helper()
		got := layouts(t)
		for f, l := range want {
			if got[f] != l {
				t.Errorf("%s: form %s has layout %q in the state, want %q (all: %v)", what, f, got[f], l, got)
			}
		}
	}
	files := func(t *testing.T) []string {
		t.Helper()
		var list []string
		err := filepath.WalkDir(out, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(p, ".parquet") {
				rel, _ := filepath.Rel(out, p)
				list = append(list, filepath.ToSlash(rel))
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return list
	}
	before := files(t)

	// A config that asks month of an old table is refused, in one
	// sentence naming the layout it has, and writes nothing.
	month := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{Sync: "  safety_lag: 0s\n  max_rows_per_batch: 40\n", Sink: sinkFor("month"),
		State: "  path: " + w.State + "\n"})
	_ = os.RemoveAll(month.Out)
	res := testkit.Run(ctx, syncdBin, month, "once", "--form", oldForms[0])
	if res.Code == 0 || !strings.Contains(res.Stdout+res.Stderr, "is partitioned by day but sink.parquet.partition says month") {
		t.Fatalf("once with partition: month over a day table exited %d, want a refusal naming both layouts\nstdout:\n%s\nstderr:\n%s", res.Code, res.Stdout, tail(res.Stderr))
	}
	if after := files(t); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Fatalf("the refused pass changed the output:\nbefore %v\nafter  %v", before, after)
	}

	// The default config (auto): the old tables keep day, the new form's
	// table takes the layout its density asks for.
	res = testkit.Run(ctx, syncdBin, w, "once", "-o", "json")
	if res.Code != 0 {
		t.Fatalf("syncd once exited %d\nstdout:\n%s\nstderr:\n%s", res.Code, res.Stdout, tail(res.Stderr))
	}
	exact(t, "after the upgrade's first pass")
	checkLayouts(t, "after the upgrade's first pass")
	for _, f := range files(t) {
		table, rest, _ := strings.Cut(f, "/")
		switch {
		case table == poller.DefaultTable(newForm) && !strings.HasPrefix(rest, "submission_month="):
			t.Errorf("the new form's file %s is not in a month folder", f)
		case table != poller.DefaultTable(newForm) && !strings.HasPrefix(rest, "submission_date="):
			t.Errorf("the old form's file %s is not in a day folder", f)
		}
	}

	// The state lost: adopt reads each table's layout from its files.
	if err := os.RemoveAll(filepath.Dir(w.State)); err != nil {
		t.Fatal(err)
	}
	res = testkit.Run(ctx, syncdBin, w, "state", "adopt", "-o", "json")
	if res.Code != 0 {
		t.Fatalf("state adopt exited %d\nstdout:\n%s\nstderr:\n%s", res.Code, res.Stdout, tail(res.Stderr))
	}
	checkLayouts(t, "after state adopt")
	n := len(files(t))
	res = testkit.Run(ctx, syncdBin, w, "once")
	if res.Code != 0 {
		t.Fatalf("syncd once after adopt exited %d\nstdout:\n%s\nstderr:\n%s", res.Code, res.Stdout, tail(res.Stderr))
	}
	exact(t, "after adopt and a pass")
	if got := len(files(t)); got != n {
		t.Errorf("the pass after adopt wrote %d files, want none", got-n)
	}
}
