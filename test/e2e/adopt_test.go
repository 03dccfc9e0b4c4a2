package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/testkit"
)

// TestOneOutputTwoStates: the ways a state that is not the one that wrote
// the output meets it, through the real binary. One config run from two
// working directories shares one state (its relative paths are the config
// folder's); two configs on one output, and a lost state file, are refused
// with exit 2 before a row is written; `state adopt` then takes the output
// over, and the next passes write every submission exactly once, new ones
// and edits included.
func TestOneOutputTwoStates(t *testing.T) {
	now := time.Now().UTC()
	start, end := now.AddDate(0, 0, -90), now.Add(-time.Hour)
	sim := testkit.StartSim(t, formsim.Config{Seed: 81, Forms: 2, Submissions: 1200, Start: start, End: end})
	out := t.TempDir()
	sections := testkit.Config{
		Sync:  "  safety_lag: 0s\n  max_rows_per_batch: 300\n  lookback: 30d\n  reconcile_every: 1000h\n",
		Sink:  fmt.Sprintf("sink:\n  type: parquet\n  parquet:\n    path: %s\n    partition: month\n", out),
		State: "  path: ./state/syncd.db\n", // relative: the config's folder
	}
	a := testkit.NewWorkdir(t, sim.BaseURL, sections)
	b := testkit.NewWorkdir(t, sim.BaseURL, sections) // a second install, same output
	ctx := context.Background()
	duck := testkit.OpenDuck(t)
	exact := func(when string) {
		t.Helper()
		for _, form := range sim.FormIDs() {
			table := defaultTable(form)
			testkit.CheckExactlyOnce(t, latestIDs(duck.LatestView(t, out, table, start.Add(-24*time.Hour))), sim.ExpectedIDs(form))
			if n := duck.DuplicateVersions(t, out, table); n != 0 {
				t.Errorf("%s: form %s: %d versions are in the output more than once", when, form, n)
			}
		}
		if t.Failed() {
			t.Fatalf("%s: the output is not exact", when)
		}
	}

	if res := testkit.Run(ctx, syncdBin, a, "once"); res.Code != 0 {
		t.Fatalf("once: exit %d %s", res.Code, tail(res.Stderr))
	}
	// The same config from another working directory: the same state.
	elsewhere := testkit.RunIn(ctx, syncdBin, a, t.TempDir(), "once")
	if elsewhere.Code != 0 {
		t.Fatalf("once from another folder: exit %d %s", elsewhere.Code, tail(elsewhere.Stderr))
	}
	if _, err := os.Stat(filepath.Join(a.Dir, "state", "syncd.db")); err != nil {
		t.Fatalf("the relative state.path is not in the config's folder: %v", err)
	}
	exact("one config, two working directories")
	files := testkit.ParquetFiles(t, out)

	// A second install on the same output: refused, nothing written.
	res := testkit.Run(ctx, syncdBin, b, "once")
	if res.Code != 2 || !strings.Contains(res.Stdout+res.Stderr, "syncd state adopt") || !strings.Contains(res.Stdout+res.Stderr, "never recorded") {
		t.Fatalf("a second state on one output: exit %d, want 2 naming `syncd state adopt`:\n%s\n%s", res.Code, res.Stdout, tail(res.Stderr))
	}
	if n := len(testkit.ParquetFiles(t, out)); n != len(files) {
		t.Fatalf("the refused pass wrote %d files", n-len(files))
	}

	// The first install loses its state file.
	for _, p := range []string{"syncd.db", "syncd.db.lock"} {
		if err := os.Remove(filepath.Join(a.Dir, "state", p)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	if res := testkit.Run(ctx, syncdBin, a, "once"); res.Code != 2 {
		t.Fatalf("a lost state: exit %d, want 2:\n%s", res.Code, tail(res.Stderr))
	}
	res = testkit.Run(ctx, syncdBin, a, "state", "adopt", "-o", "json")
	if res.Code != 0 || !strings.Contains(res.Stdout, `"batches"`) {
		t.Fatalf("state adopt: exit %d\n%s\n%s", res.Code, res.Stdout, tail(res.Stderr))
	}
	// Adopting twice changes nothing.
	if res := testkit.Run(ctx, syncdBin, a, "state", "adopt"); res.Code != 0 || !strings.Contains(res.Stdout, "ADOPTED") {
		t.Fatalf("second state adopt: exit %d\n%s\n%s", res.Code, res.Stdout, tail(res.Stderr))
	}

	// New submissions, and edits within the lookback, after the adoption.
	form := sim.FormIDs()[0]
	inside := sim.ExpectedIDsBetween(form, now.AddDate(0, 0, -20), end)
	time.Sleep(5 * time.Millisecond)
	for _, id := range inside[:5] {
		if err := sim.Edit(form, id); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := sim.Insert(form, time.Now()); err != nil { // after what is committed: a new submission
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	// The adopted index has never been reconciled, so the pass reconciles
	// too: it finds exactly the five edits (the index came from the output).
	if res := testkit.Run(ctx, syncdBin, a, "once"); res.Code != 0 || !strings.Contains(res.Stdout, "5 new versions, 0 tombstones") {
		t.Fatalf("once after adopt: exit %d\n%s\n%s", res.Code, res.Stdout, tail(res.Stderr))
	}
	if res := testkit.Run(ctx, syncdBin, a, "reconcile", "--form", form); res.Code != 0 || !strings.Contains(res.Stdout, "0 new versions, 0 tombstones") {
		t.Fatalf("second reconcile after adopt: exit %d\n%s\n%s", res.Code, res.Stdout, tail(res.Stderr))
	}
	exact("after adopt, new submissions and edits")
	got := duck.LatestView(t, out, defaultTable(form), now.AddDate(0, 0, -30))
	testkit.CheckLatestView(t, got, testkit.ServiceVersions(t, sim, form, now.AddDate(0, 0, -30)))

	// The second install adopts too, and then syncs beside nothing new.
	if res := testkit.Run(ctx, syncdBin, b, "state", "adopt"); res.Code != 0 {
		t.Fatalf("state adopt (second install): exit %d %s", res.Code, tail(res.Stderr))
	}
	if res := testkit.Run(ctx, syncdBin, b, "once"); res.Code != 0 {
		t.Fatalf("once (second install) after adopt: exit %d %s", res.Code, tail(res.Stderr))
	}
	exact("second install after adopt")
}

// latestIDs is the ids of a latest view, each once.
func latestIDs(view map[string]int64) map[string]int {
	out := make(map[string]int, len(view))
	for id := range view {
		out[id] = 1
	}
	return out
}
