package e2e

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/forms"
	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/sink"
	"github.com/syncd-dev/syncd/internal/testkit"
)

// latestView runs the documented query of a form's table's current state
// (sink.LatestQuery: the latest version of each submission, tombstones
// dropped) in DuckDB. It
// returns submission id -> last_updated_at (µs) of the rows whose
// submission time is at or after from.
func latestView(t *testing.T, duck *testkit.Duck, out, table string, from time.Time) map[string]int64 {
	t.Helper()
	q := `SELECT submission_id, epoch_us(last_updated_at) FROM (` + sink.LatestQuery(testkit.Scan(out, table), "submission_id", "last_updated_at") + `)
	WHERE submission_time >= make_timestamp(?)`
	rows, err := duck.DB.Query(q, from.UnixMicro())
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string]int64{}
	for rows.Next() {
		var id string
		var us int64
		if err := rows.Scan(&id, &us); err != nil {
			t.Fatal(err)
		}
		got[id] = us
	}
	return got
}

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

	// The truth: what the service lists now, inside the lookback.
	client, err := forms.New(forms.Config{BaseURL: sim.BaseURL, APIKey: testkit.APIKey, RateLimit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	truth := map[string]int64{}
	after := lookback
	for offset := 0; ; offset += 150 {
		page, err := client.ListSubmissions(ctx, form, forms.ListParams{Limit: 150, Offset: offset, AfterDate: &after, Sort: forms.SortAsc})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range page.Responses {
			if !s.SubmissionTime.Before(lookback) {
				truth[s.SubmissionID] = s.LastUpdatedAt.UnixMicro()
			}
		}
		if len(page.Responses) < 150 {
			break
		}
	}
	got := latestView(t, duck, w.Out, table, lookback)
	for id, us := range truth {
		if g, ok := got[id]; !ok {
			t.Errorf("submission %s (last updated %d) is not in the latest view", id, us)
		} else if g != us {
			t.Errorf("submission %s: the latest view has version %d, the service %d", id, g, us)
		}
	}
	for id := range got {
		if _, ok := truth[id]; !ok {
			t.Errorf("the latest view holds %s, which the service no longer lists", id)
		}
	}
	for _, id := range imported {
		if _, ok := got[id]; !ok {
			t.Errorf("late import %s is not in the latest view", id)
		}
	}
	if after := rowsBefore(t, duck, w.Out, table, lookback); !equalCounts(before, after) {
		t.Errorf("rows outside the lookback changed: %d distinct before, %d after", len(before), len(after))
	}
	var dups int
	if err := duck.DB.QueryRow(`SELECT count(*) FROM (SELECT submission_id, last_updated_at, _deleted FROM ` + testkit.Scan(w.Out, table) + ` GROUP BY ALL HAVING count(*) > 1)`).Scan(&dups); err != nil {
		t.Fatal(err)
	}
	if dups != 0 {
		t.Errorf("%d versions are in the output more than once", dups)
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
	// Before the index: a clear error, exit 2.
	res = testkit.Run(ctx, syncdBin, w, "reconcile", "--form", form, "--from", start.Format(time.RFC3339))
	if res.Code != 2 || !strings.Contains(res.Stderr, "cannot reconcile from") {
		t.Errorf("reconcile before the index: exit %d, %s", res.Code, res.Stderr)
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
