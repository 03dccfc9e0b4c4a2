package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/testkit"
)

type dryRunJSON struct {
	Command   string  `json:"command"`
	Rows      int64   `json:"rows"`
	Requests  int64   `json:"estimated_requests"`
	RateLimit float64 `json:"rate_limit"`
	Seconds   float64 `json:"estimated_seconds"`
	Forms     []struct {
		FormID   string `json:"form_id"`
		Table    string `json:"table"`
		Rows     int64  `json:"rows"`
		Requests int64  `json:"estimated_requests"`
		Windows  []struct {
			Start time.Time `json:"start"`
			End   time.Time `json:"end"`
			Rows  int       `json:"rows"`
		} `json:"windows"`
	} `json:"forms"`
}

func decodeDryRun(t *testing.T, res testkit.Result) dryRunJSON {
	t.Helper()
	var p dryRunJSON
	if res.Code != 0 {
		t.Fatalf("dry run exited %d: %s %s", res.Code, res.Stdout, tail(res.Stderr))
	}
	if err := json.Unmarshal([]byte(res.Stdout), &p); err != nil {
		t.Fatalf("dry run -o json is not JSON: %v\n%s", err, res.Stdout)
	}
	return p
}

// TestDryRunWritesNothingAndEstimates: once --dry-run creates no state and
// no output, and its request estimate is within 10% of what the real pass
// then asks; on an existing state it changes nothing either.
func TestDryRunWritesNothingAndEstimates(t *testing.T) {
	start, end := history(5)
	sim := testkit.StartSim(t, formsim.Config{Seed: 71, Forms: 3, Submissions: 4000, Start: start, End: end})
	w := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{Sync: "  safety_lag: 0s\n  max_rows_per_batch: 300\n", RateLimit: 50})
	ctx := context.Background()

	res := testkit.Run(ctx, syncdBin, w, "once", "--dry-run")
	if res.Code != 0 || !strings.Contains(res.Stdout, "DRY RUN") || !strings.Contains(res.Stdout, "  window [") || !strings.Contains(res.Stdout, "at source.rate_limit 50/s") {
		t.Errorf("once --dry-run: exit %d\n%s\n%s", res.Code, res.Stdout, tail(res.Stderr))
	}
	for _, p := range []string{w.State, w.Out, w.State + ".lock"} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("a dry run created %s", p)
		}
	}
	p := decodeDryRun(t, testkit.Run(ctx, syncdBin, w, "once", "--dry-run", "-o", "json"))
	if p.Command != "once" || len(p.Forms) != 3 || p.RateLimit != 50 || p.Seconds <= 0 {
		t.Errorf("plan: %+v", p)
	}
	var windows int
	for _, f := range p.Forms {
		windows += len(f.Windows)
		for _, win := range f.Windows {
			if win.Rows > 300 {
				t.Errorf("form %s: a window of %d rows, max_rows_per_batch is 300", f.FormID, win.Rows)
			}
		}
	}
	var want int64
	for _, f := range sim.FormIDs() {
		want += int64(len(sim.ExpectedIDs(f)))
	}
	if p.Rows != want || windows < 12 {
		t.Errorf("the plan fetches %d rows in %d windows, the simulator holds %d", p.Rows, windows, want)
	}

	before := sim.Stats().Requests
	if res := testkit.Run(ctx, syncdBin, w, "once"); res.Code != 0 {
		t.Fatalf("once exited %d: %s", res.Code, tail(res.Stderr))
	}
	made := sim.Stats().Requests - before
	if diff := math.Abs(float64(p.Requests - made)); diff > 0.1*float64(made) {
		t.Errorf("the dry run estimated %d requests, the pass made %d", p.Requests, made)
	} else {
		t.Logf("estimated %d requests, the pass made %d", p.Requests, made)
	}

	// On an existing state: nothing changes, and little is left to fetch.
	stateBefore, err := os.ReadFile(w.State)
	if err != nil {
		t.Fatal(err)
	}
	filesBefore := testkit.ParquetFiles(t, w.Out)
	p = decodeDryRun(t, testkit.Run(ctx, syncdBin, w, "once", "--dry-run", "-o", "json"))
	if p.Rows != 0 {
		t.Errorf("after a complete pass the dry run plans %d rows", p.Rows)
	}
	if after, _ := os.ReadFile(w.State); !bytes.Equal(after, stateBefore) {
		t.Error("the dry run changed the state file")
	}
	if after := testkit.ParquetFiles(t, w.Out); len(after) != len(filesBefore) {
		t.Errorf("the dry run changed the output: %d files, then %d", len(filesBefore), len(after))
	}

	// backfill --dry-run of a range already synced: nothing to fetch, nothing written.
	form := sim.FormIDs()[0]
	res = testkit.Run(ctx, syncdBin, w, "backfill", "--form", form, "--from", start.Format(time.RFC3339), "--dry-run")
	if res.Code != 0 || !strings.Contains(res.Stdout, "DRY RUN of syncd backfill") || !strings.Contains(res.Stdout, "nothing to fetch") {
		t.Errorf("backfill --dry-run: exit %d\n%s\n%s", res.Code, res.Stdout, tail(res.Stderr))
	}
	if after, _ := os.ReadFile(w.State); !bytes.Equal(after, stateBefore) {
		t.Error("backfill --dry-run changed the state file")
	}
}

// TestBackfillDryRunEstimates: backfill --dry-run plans the range, writes
// nothing, and estimates the requests of the real backfill within 10%.
func TestBackfillDryRunEstimates(t *testing.T) {
	start, end := history(6)
	sim := testkit.StartSim(t, formsim.Config{Seed: 72, Forms: 1, Submissions: 3000, Start: start, End: end})
	form := sim.FormIDs()[0]
	w := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{Sync: "  safety_lag: 0s\n  max_rows_per_batch: 400\n"})
	ctx := context.Background()
	from, to := start.Add(24*time.Hour), end.Add(-24*time.Hour)
	args := []string{"backfill", "--form", form, "--from", from.Format(time.RFC3339), "--to", to.Format(time.RFC3339)}
	p := decodeDryRun(t, testkit.Run(ctx, syncdBin, w, append(args, "--dry-run", "-o", "json")...))
	if len(p.Forms) != 1 || len(p.Forms[0].Windows) < 4 {
		t.Fatalf("plan: %+v", p)
	}
	wins := p.Forms[0].Windows
	if !wins[0].Start.Equal(from) && wins[0].Start.Before(from) || wins[len(wins)-1].End.After(to) {
		t.Errorf("the windows [%s, %s) leave the range [%s, %s)", wins[0].Start, wins[len(wins)-1].End, from, to)
	}
	if want := int64(len(sim.ExpectedIDsBetween(form, from, to))); p.Rows != want {
		t.Errorf("the plan fetches %d rows, the range holds %d", p.Rows, want)
	}
	for _, path := range []string{w.State, w.Out} {
		if _, err := os.Stat(path); err == nil {
			t.Errorf("backfill --dry-run created %s", path)
		}
	}
	before := sim.Stats().Requests
	if res := testkit.Run(ctx, syncdBin, w, args...); res.Code != 0 {
		t.Fatalf("backfill exited %d: %s", res.Code, tail(res.Stderr))
	}
	made := sim.Stats().Requests - before
	if diff := math.Abs(float64(p.Requests - made)); diff > 0.1*float64(made) {
		t.Errorf("the dry run estimated %d requests, the backfill made %d", p.Requests, made)
	}
}

// TestOnceFormSubset: --form syncs only the forms it names; an id that is
// not configured (or not in the account) exits 2 with the closest and
// writes nothing.
func TestOnceFormSubset(t *testing.T) {
	start, end := history(2)
	sim := testkit.StartSim(t, formsim.Config{Seed: 73, Forms: 3, Submissions: 150, Start: start, End: end})
	ids := sim.FormIDs()
	ctx := context.Background()
	typo := ids[1][:len(ids[1])-1] + "Q"

	w := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{})
	res := testkit.Run(ctx, syncdBin, w, "once", "--form", typo)
	if res.Code != 2 || !strings.Contains(res.Stderr, "closest: "+ids[1]) {
		t.Errorf("once --form typo (no forms configured): exit %d, stderr %s", res.Code, res.Stderr)
	}
	if _, err := os.Stat(w.State); err == nil {
		t.Errorf("a refused once created the state")
	}
	res = testkit.Run(ctx, syncdBin, w, "once", "--form", ids[2], "--form", ids[0], "-o", "json")
	var entries []struct {
		FormID string `json:"form_id"`
		Status string `json:"status"`
		Rows   int64  `json:"rows"`
	}
	if res.Code != 0 || json.Unmarshal([]byte(res.Stdout), &entries) != nil || len(entries) != 2 || entries[0].FormID != ids[2] || entries[1].FormID != ids[0] {
		t.Fatalf("once --form %s --form %s -o json: exit %d\n%s\n%s", ids[2], ids[0], res.Code, res.Stdout, tail(res.Stderr))
	}
	if got := stateForms(t, w.State); len(got) != 2 || strings.Contains(strings.Join(got, " "), ids[1]) {
		t.Errorf("the state holds %v, want %s and %s only", got, ids[0], ids[2])
	}

	configured := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{Forms: "forms:\n  - id: " + ids[0] + "\n  - id: " + ids[1] + "\n"})
	res = testkit.Run(ctx, syncdBin, configured, "once", "--form", ids[2])
	if res.Code != 2 || !strings.Contains(res.Stderr, "--form "+ids[2]+" is not one of the forms this config lists") {
		t.Errorf("once --form of an unconfigured form: exit %d, stderr %s", res.Code, res.Stderr)
	}
	res = testkit.Run(ctx, syncdBin, configured, "once", "--form", typo)
	if res.Code != 2 || !strings.Contains(res.Stderr, "closest: "+ids[1]) {
		t.Errorf("once --form typo of a configured form: exit %d, stderr %s", res.Code, res.Stderr)
	}
	if _, err := os.Stat(configured.State); err == nil {
		t.Errorf("a refused once created the state")
	}
	res = testkit.Run(ctx, syncdBin, configured, "once", "--form", ids[1])
	if res.Code != 0 || !strings.Contains(res.Stdout, "ok   "+ids[1]) || strings.Contains(res.Stdout, ids[0]) || !strings.Contains(res.Stdout, "1 form, 0 failed") {
		t.Errorf("once --form %s: exit %d\n%s", ids[1], res.Code, res.Stdout)
	}
}
