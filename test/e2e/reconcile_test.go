package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/testkit"
)

// rowsBefore is every row (id, last_updated_at, deleted) of the table whose
// submission time is before end, as a multiset.
func rowsBefore(t *testing.T, duck *testkit.Duck, out, table string, end time.Time) map[string]int {
	t.Helper()
	rows, err := duck.DB.Query(`SELECT submission_id || '/' || coalesce(epoch_us(last_updated_at)::VARCHAR, '') || '/' || coalesce(_deleted, false)::VARCHAR
		FROM `+testkit.Scan(out, table)+` WHERE submission_time < make_timestamp(?)`, end.UnixMicro())
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string]int{}
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		got[k]++
	}
	return got
}

// TestReconcileEditsDeletionsAndLateImports: after a sync, submissions are
// edited, deleted and imported with past times, inside the lookback and
// outside it. A reconcile makes the latest view equal the service inside
// the lookback, leaves every row outside it as it was, writes each version
// once, and a second reconcile with nothing changed writes nothing.
func TestReconcileEditsDeletionsAndLateImports(t *testing.T) {
	now := time.Now().UTC()
	start, end := now.AddDate(0, 0, -60), now.Add(-time.Hour)
	sim := testkit.StartSim(t, formsim.Config{Seed: 71, Forms: 1, Submissions: 1800, Start: start, End: end})
	form := sim.FormIDs()[0]
	table := defaultTable(form)
	w := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{Sync: "  safety_lag: 0s\n  max_rows_per_batch: 400\n  lookback: 30d\n  reconcile_every: 24h\n"})
	ctx := context.Background()
	if res := testkit.Run(ctx, syncdBin, w, "once"); res.Code != 0 {
		t.Fatalf("once: exit %d %s", res.Code, tail(res.Stderr))
	}
	lookback := now.AddDate(0, 0, -30)
	duck := testkit.OpenDuck(t)
	before := rowsBefore(t, duck, w.Out, table, lookback)

	rng := rand.New(rand.NewPCG(71, 1))
	inside, outside := sim.ExpectedIDsBetween(form, lookback.Add(time.Hour), end), sim.ExpectedIDsBetween(form, start, lookback.Add(-time.Hour))
	rng.Shuffle(len(inside), func(i, j int) { inside[i], inside[j] = inside[j], inside[i] })
	rng.Shuffle(len(outside), func(i, j int) { outside[i], outside[j] = outside[j], outside[i] })
	change := func(ids []string, edits, deletes int) {
		for _, id := range ids[:edits] {
			if err := sim.Edit(form, id); err != nil {
				t.Fatal(err)
			}
		}
		for _, id := range ids[edits : edits+deletes] {
			if err := sim.Delete(form, id); err != nil {
				t.Fatal(err)
			}
		}
	}
	time.Sleep(5 * time.Millisecond) // edits get a lastUpdatedAt after the sync's
	change(inside, 20, 10)
	change(outside, 5, 5)
	var imported []string
	for i := 0; i < 10; i++ {
		ids, err := sim.Insert(form, lookback.Add(time.Duration(rng.Int64N(int64(29*24*time.Hour)))))
		if err != nil {
			t.Fatal(err)
		}
		imported = append(imported, ids...)
	}
	for i := 0; i < 5; i++ {
		if _, err := sim.Insert(form, start.Add(time.Duration(rng.Int64N(int64(25*24*time.Hour))))); err != nil {
			t.Fatal(err)
		}
	}

	res := testkit.Run(ctx, syncdBin, w, "reconcile", "--form", form)
	if res.Code != 0 {
		t.Fatalf("reconcile: exit %d\n%s\n%s", res.Code, res.Stdout, tail(res.Stderr))
	}
	if !strings.Contains(res.Stdout, "30 new versions, 10 tombstones") {
		t.Errorf("reconcile summary: %s", res.Stdout)
	}

	got := duck.LatestView(t, w.Out, table, lookback)
	testkit.CheckLatestView(t, got, testkit.ServiceVersions(t, sim, form, lookback))
	for _, id := range imported {
		if _, ok := got[id]; !ok {
			t.Errorf("late import %s is not in the latest view", id)
		}
	}
	if after := rowsBefore(t, duck, w.Out, table, lookback); !equalCounts(before, after) {
		t.Errorf("rows outside the lookback changed: %d distinct before, %d after", len(before), len(after))
	}
	if n := duck.DuplicateVersions(t, w.Out, table); n != 0 {
		t.Errorf("%d versions are in the output more than once", n)
	}

	files := testkit.ParquetFiles(t, w.Out)
	res = testkit.Run(ctx, syncdBin, w, "reconcile", "--form", form)
	if res.Code != 0 || !strings.Contains(res.Stdout, "0 new versions, 0 tombstones") {
		t.Errorf("second reconcile: exit %d, %s", res.Code, res.Stdout)
	}
	if n := len(testkit.ParquetFiles(t, w.Out)); n != len(files) {
		t.Errorf("a reconcile with nothing changed wrote %d files", n-len(files))
	}
	show := testkit.Run(ctx, syncdBin, w, "state", "show", form)
	if !strings.Contains(show.Stdout, "reconcile: last") || !strings.Contains(show.Stdout, "30 new versions, 10 tombstones written") {
		t.Errorf("state show does not report the reconciles: %s", show.Stdout)
	}
	// The index covers the whole history: a reconcile from the start finds
	// the changes outside the lookback too (5 edits and 5 imports, 5
	// deletions), with no refresh.
	res = testkit.Run(ctx, syncdBin, w, "reconcile", "--form", form, "--from", start.Format(time.RFC3339))
	if res.Code != 0 || !strings.Contains(res.Stdout, "10 new versions, 5 tombstones") {
		t.Errorf("reconcile from the start: exit %d, %s %s", res.Code, res.Stdout, tail(res.Stderr))
	}
	testkit.CheckLatestView(t, duck.LatestView(t, w.Out, table, start), testkit.ServiceVersions(t, sim, form, start))
	if n := duck.DuplicateVersions(t, w.Out, table); n != 0 {
		t.Errorf("%d versions are in the output more than once", n)
	}
}

// TestReconcileFromElevenMonthsAgo is the acceptance of the version index
// that covers the whole history: a year of submissions is synced, then
// submissions of ten months ago are edited and deleted and others imported
// with times of ten months ago; `syncd reconcile --from <eleven months
// ago>` makes the latest view equal the service, with every version stored
// once, and leaves the rows before it as they were.
func TestReconcileFromElevenMonthsAgo(t *testing.T) {
	now := time.Now().UTC()
	start, end := now.AddDate(-1, 0, 0), now.Add(-time.Hour)
	sim := testkit.StartSim(t, formsim.Config{Seed: 73, Forms: 1, Submissions: 3000, Start: start, End: end})
	form := sim.FormIDs()[0]
	table := defaultTable(form)
	w := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{Sync: "  safety_lag: 0s\n  max_rows_per_batch: 400\n  lookback: 30d\n  reconcile_every: 24h\n"})
	ctx := context.Background()
	if res := testkit.Run(ctx, syncdBin, w, "once"); res.Code != 0 {
		t.Fatalf("once: exit %d %s", res.Code, tail(res.Stderr))
	}
	from, tenMonths := now.AddDate(0, -11, 0), now.AddDate(0, -10, 0)
	duck := testkit.OpenDuck(t)
	before := rowsBefore(t, duck, w.Out, table, from)

	rng := rand.New(rand.NewPCG(73, 1))
	ids := sim.ExpectedIDsBetween(form, tenMonths.AddDate(0, 0, -10), tenMonths.AddDate(0, 0, 10))
	if len(ids) < 30 {
		t.Fatalf("only %d submissions ten months ago", len(ids))
	}
	rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	time.Sleep(5 * time.Millisecond) // edits get a lastUpdatedAt after the sync's
	for _, id := range ids[:12] {
		if err := sim.Edit(form, id); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range ids[12:18] {
		if err := sim.Delete(form, id); err != nil {
			t.Fatal(err)
		}
	}
	var imported []string
	for i := 0; i < 7; i++ {
		got, err := sim.Insert(form, tenMonths.Add(time.Duration(rng.Int64N(int64(10*24*time.Hour)))))
		if err != nil {
			t.Fatal(err)
		}
		imported = append(imported, got...)
	}

	res := testkit.Run(ctx, syncdBin, w, "reconcile", "--form", form, "--from", from.Format(time.RFC3339))
	if res.Code != 0 {
		t.Fatalf("reconcile --from %s: exit %d\n%s\n%s", from.Format(time.RFC3339), res.Code, res.Stdout, tail(res.Stderr))
	}
	if want := fmt.Sprintf("%d new versions, 6 tombstones", 12+len(imported)); !strings.Contains(res.Stdout, want) {
		t.Errorf("reconcile summary: %s, want %q", res.Stdout, want)
	}
	got := duck.LatestView(t, w.Out, table, from)
	testkit.CheckLatestView(t, got, testkit.ServiceVersions(t, sim, form, from))
	for _, id := range imported {
		if _, ok := got[id]; !ok {
			t.Errorf("back-dated import %s is not in the latest view", id)
		}
	}
	if n := duck.DuplicateVersions(t, w.Out, table); n != 0 {
		t.Errorf("%d versions are in the output more than once", n)
	}
	if after := rowsBefore(t, duck, w.Out, table, from); !equalCounts(before, after) {
		t.Errorf("rows before --from changed: %d distinct before, %d after", len(before), len(after))
	}
	// Nothing changed since: a second reconcile writes nothing.
	res = testkit.Run(ctx, syncdBin, w, "reconcile", "--form", form, "--from", from.Format(time.RFC3339))
	if res.Code != 0 || !strings.Contains(res.Stdout, "0 new versions, 0 tombstones") {
		t.Errorf("second reconcile: exit %d, %s", res.Code, res.Stdout)
	}
	if n := duck.DuplicateVersions(t, w.Out, table); n != 0 {
		t.Errorf("after the second reconcile %d versions are in the output more than once", n)
	}
}

func equalCounts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, n := range a {
		if b[k] != n {
			return false
		}
	}
	return true
}
