package e2e

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/state"
	"github.com/syncd-dev/syncd/internal/testkit"
)

// TestBackfillNeverCommitsTheFuture: a --to past now is cut at now -
// safety lag, so submissions made afterwards are still synced by once.
func TestBackfillNeverCommitsTheFuture(t *testing.T) {
	start, end := history(5)
	sim := testkit.StartSim(t, formsim.Config{Seed: 21, Forms: 1, Submissions: 300, Start: start, End: end})
	form := sim.FormIDs()[0]
	w := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{Sync: "  safety_lag: 2s\n"})
	ctx := context.Background()
	res := testkit.Run(ctx, syncdBin, w, "backfill", "--form", form, "--from", "2020-01-01", "--to", "2099-01-01")
	if res.Code != 0 {
		t.Fatalf("backfill exited %d: %s %s", res.Code, res.Stdout, tail(res.Stderr))
	}
	if !strings.Contains(res.Stderr, "--to 2099-01-01T00:00:00Z is past now - sync.safety_lag") {
		t.Errorf("no line says the range was cut: %s", tail(res.Stderr))
	}
	covered := testkit.Covered(t, w.State, form)
	if last := covered.End(); last.After(time.Now().Add(-2 * time.Second)) {
		t.Fatalf("backfill committed up to %s, past now - safety lag", last)
	}
	// Submissions made after the backfill: once syncs them when their time
	// is past the lag.
	ids, err := sim.Insert(form, time.Now(), time.Now().Add(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond)
	if res := testkit.Run(ctx, syncdBin, w, "once"); res.Code != 0 {
		t.Fatalf("once exited %d: %s", res.Code, tail(res.Stderr))
	}
	got := testkit.OpenDuck(t).IDCounts(t, w.Out, poller.DefaultTable(form))
	for _, id := range ids {
		if got[id] != 1 {
			t.Errorf("submission %s made after the backfill is in the output %d times, want 1", id, got[id])
		}
	}
	testkit.CheckExactlyOnce(t, got, testkit.ExpectedIn(sim, form, testkit.Covered(t, w.State, form)))

	// A --from past the horizon has nothing to do: exit 2, nothing written.
	future := time.Now().Add(time.Hour).Format(time.RFC3339)
	res = testkit.Run(ctx, syncdBin, w, "backfill", "--form", form, "--from", future, "--to", "2099-01-01")
	if res.Code != 2 || !strings.Contains(res.Stderr, "nothing to backfill") {
		t.Errorf("backfill of the future: exit %d, stderr %s", res.Code, res.Stderr)
	}
}

// TestStateCommittedPastNowIsReported: a state an older syncd damaged (its
// windows reach past now) is reported by once, validate and state show,
// and `state reset --from` lets the next pass fetch what was skipped.
func TestStateCommittedPastNowIsReported(t *testing.T) {
	start, end := history(4)
	sim := testkit.StartSim(t, formsim.Config{Seed: 22, Forms: 1, Submissions: 200, Start: start, End: end})
	form := sim.FormIDs()[0]
	w := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{})
	ctx := context.Background()
	if res := testkit.Run(ctx, syncdBin, w, "once"); res.Code != 0 {
		t.Fatalf("once exited %d: %s", res.Code, tail(res.Stderr))
	}
	// What an older backfill with --to 2099-01-01 left behind.
	last := testkit.Covered(t, w.State, form).End()
	st, err := state.OpenBolt(ctx, state.BoltOptions{Path: w.State})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Commit(ctx, form, state.Commit{Window: state.Interval{Start: last, End: time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)}}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	missed, err := sim.Insert(form, time.Now())
	if err != nil {
		t.Fatal(err)
	}

	res := testkit.Run(ctx, syncdBin, w, "once")
	if res.Code != 1 || !strings.Contains(res.Stdout, "in the future") || !strings.Contains(res.Stdout, "syncd state reset "+form+" --from") {
		t.Errorf("once on a damaged state: exit %d, stdout %s", res.Code, res.Stdout)
	}
	res = testkit.Run(ctx, syncdBin, w, "validate")
	if res.Code != 1 || !strings.Contains(res.Stdout, "FAIL state") || !strings.Contains(res.Stdout, "in the future") {
		t.Errorf("validate on a damaged state: exit %d, stdout %s", res.Code, res.Stdout)
	}
	res = testkit.Run(ctx, syncdBin, w, "state", "show", form)
	if res.Code != 0 || !strings.Contains(res.Stdout, "DAMAGED") {
		t.Errorf("state show on a damaged state: exit %d, stdout %s", res.Code, res.Stdout)
	}
	res = testkit.Run(ctx, syncdBin, w, "state", "reset", form, "--from", last.Format(time.RFC3339Nano), "--yes")
	if res.Code != 0 {
		t.Fatalf("state reset --from: exit %d %s %s", res.Code, res.Stdout, res.Stderr)
	}
	if res := testkit.Run(ctx, syncdBin, w, "once"); res.Code != 0 {
		t.Fatalf("once after the repair exited %d: %s %s", res.Code, res.Stdout, tail(res.Stderr))
	}
	got := testkit.OpenDuck(t).IDCounts(t, w.Out, poller.DefaultTable(form))
	if got[missed[0]] != 1 {
		t.Errorf("the submission the damage skipped is in the output %d times, want 1", got[missed[0]])
	}
	testkit.CheckExactlyOnce(t, got, testkit.ExpectedIn(sim, form, testkit.Covered(t, w.State, form)))
}

// TestInterruptedPassIsNotASuccess: SIGINT and SIGTERM during once and
// backfill exit 130 and 143, say "interrupted" in the summary, and keep
// what was committed; a rerun finishes exactly once.
func TestInterruptedPassIsNotASuccess(t *testing.T) {
	cases := []struct {
		name string
		sig  syscall.Signal
		code int
		args func(form string, start, end time.Time) []string
	}{
		{"backfill SIGINT", syscall.SIGINT, 130, func(form string, start, end time.Time) []string {
			return []string{"backfill", "--form", form, "--from", start.Format(time.RFC3339), "--to", end.Format(time.RFC3339), "--concurrency", "1"}
		}},
		{"once SIGTERM", syscall.SIGTERM, 143, func(string, time.Time, time.Time) []string { return []string{"once"} }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start, end := history(8)
			sim := testkit.StartSim(t, formsim.Config{Seed: 23, Forms: 1, Submissions: 3000, Start: start, End: end})
			sim.SetFaults(formsim.Faults{Latency: 30 * time.Millisecond})
			form := sim.FormIDs()[0]
			w := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{Sync: "  safety_lag: 0s\n  max_rows_per_batch: 300\n  shutdown_grace: 5s\n"})
			summary := filepath.Join(w.Dir, "summary.json")
			cmd, stdout, stderr, err := testkit.Start(syncdBin, w, append(tc.args(form, start, end), "--summary", summary)...)
			if err != nil {
				t.Fatal(err)
			}
			if !eventually(30*time.Second, func() bool { return sim.Stats().PagesServed > 8 }) {
				cmd.Process.Kill()
				t.Fatal("syncd never got going")
			}
			if err := cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			err = cmd.Wait()
			if cmd.ProcessState.ExitCode() != tc.code {
				t.Fatalf("exit %d (%v) after %v, want %d\nstdout %s\nstderr %s", cmd.ProcessState.ExitCode(), err, tc.sig, tc.code, stdout, tail(stderr.String()))
			}
			if !strings.Contains(stdout.String(), "INTERRUPTED") || strings.Contains(stdout.String(), "ok   ") {
				t.Errorf("the summary line does not say the pass was interrupted: %s", stdout)
			}
			raw, err := os.ReadFile(summary)
			if err != nil {
				t.Fatal(err)
			}
			var entries []struct {
				Status string `json:"status"`
				Rows   int64  `json:"rows"`
			}
			if err := json.Unmarshal(raw, &entries); err != nil || len(entries) != 1 || entries[0].Status != "interrupted" {
				t.Errorf("summary %s (%v), want one form with status interrupted", raw, err)
			}
			covered := testkit.Covered(t, w.State, form)
			got := testkit.OpenDuck(t).IDCounts(t, w.Out, poller.DefaultTable(form))
			testkit.CheckExactlyOnce(t, got, testkit.ExpectedIn(sim, form, covered))
			if len(entries) == 1 && int(entries[0].Rows) > len(got) {
				t.Errorf("summary says %d rows committed, the output holds %d", entries[0].Rows, len(got))
			}
			sim.SetFaults(formsim.Faults{})
			if res := testkit.Run(context.Background(), syncdBin, w, tc.args(form, start, end)...); res.Code != 0 {
				t.Fatalf("rerun exited %d: %s", res.Code, tail(res.Stderr))
			}
			covered = testkit.Covered(t, w.State, form)
			got = testkit.OpenDuck(t).IDCounts(t, w.Out, poller.DefaultTable(form))
			testkit.CheckExactlyOnce(t, got, testkit.ExpectedIn(sim, form, covered))
			if !covered.Covers(stateInterval(start, end)) {
				t.Errorf("after the rerun the range is not covered: %v", covered)
			}
		})
	}
}

// TestTyposAreErrorsThatWriteNothing: unknown ids exit 2 with the closest
// ids and leave no trace in the state; bad numbers name their flag.
func TestTyposAreErrorsThatWriteNothing(t *testing.T) {
	start, end := history(2)
	sim := testkit.StartSim(t, formsim.Config{Seed: 24, Forms: 2, Submissions: 60, Start: start, End: end})
	form := sim.FormIDs()[0]
	typo := form[:len(form)-1] + "Q"
	ctx := context.Background()
	w := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{})

	res := testkit.Run(ctx, syncdBin, w, "backfill", "--form", typo, "--from", start.Format(time.RFC3339))
	if res.Code != 2 || !strings.Contains(res.Stderr, typo) || !strings.Contains(res.Stderr, "closest: "+form) {
		t.Errorf("backfill --form typo: exit %d, stderr %s", res.Code, res.Stderr)
	}
	if _, err := os.Stat(w.State); err == nil {
		if list := stateForms(t, w.State); len(list) != 0 {
			t.Errorf("a refused backfill left state for %v", list)
		}
	}
	res = testkit.Run(ctx, syncdBin, w, "backfill", "--form", form, "--from", start.Format(time.RFC3339), "--concurrency", "-3")
	if res.Code != 2 || !strings.Contains(res.Stderr, "--concurrency") {
		t.Errorf("--concurrency -3: exit %d, stderr %s", res.Code, res.Stderr)
	}

	if res := testkit.Run(ctx, syncdBin, w, "once"); res.Code != 0 {
		t.Fatalf("once exited %d: %s", res.Code, tail(res.Stderr))
	}
	before, _ := os.ReadFile(w.State)
	for _, args := range [][]string{{"state", "reset", typo, "--yes"}, {"state", "show", typo}, {"refresh", "--form", typo, "--yes"}} {
		res := testkit.Run(ctx, syncdBin, w, args...)
		if res.Code != 2 || !strings.Contains(res.Stderr, typo) || !strings.Contains(res.Stderr, "closest: "+form) {
			t.Errorf("%v: exit %d, stderr %s", args, res.Code, res.Stderr)
		}
	}
	if after, _ := os.ReadFile(w.State); string(before) != string(after) {
		t.Error("refused commands changed the state file")
	}

	// A stale or mistyped id in forms[] fails that form alone, naming the
	// closest ids; the other forms sync.
	cfgTypo := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{Forms: "forms:\n  - id: " + form + "\n  - id: " + typo + "\n"})
	res = testkit.Run(ctx, syncdBin, cfgTypo, "once")
	if res.Code != 1 || !strings.Contains(res.Stdout, "FAIL "+typo+": form "+typo+" does not exist in the account (closest: "+form) ||
		!strings.Contains(res.Stdout, "ok   "+form) {
		t.Errorf("once with an unknown configured form: exit %d, stdout %s", res.Code, res.Stdout)
	}
	testkit.CheckExactlyOnce(t, testkit.OpenDuck(t).IDCounts(t, cfgTypo.Out, poller.DefaultTable(form)), sim.ExpectedIDs(form))
	if testkit.HasFiles(cfgTypo.Out, poller.DefaultTable(typo)) {
		t.Errorf("the unknown form %s has output", typo)
	}
}

func stateForms(t *testing.T, path string) []string {
	t.Helper()
	st, err := state.OpenBolt(context.Background(), state.BoltOptions{Path: path, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	list, err := st.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, fs := range list {
		ids = append(ids, fs.Key)
	}
	return ids
}

// TestResetAndRefresh: reset says the rows come again before it acts;
// refresh replaces the table, and a refresh killed at random instants
// leaves, after the next completed pass, every submission exactly once.
func TestResetAndRefresh(t *testing.T) {
	seed := testkit.Seed(t, "SYNCD_CRASH_SEED")
	rng := rand.New(rand.NewPCG(seed, 16))
	start, end := history(6)
	sim := testkit.StartSim(t, formsim.Config{Seed: 25, Forms: 1, Submissions: 1500, Start: start, End: end})
	form := sim.FormIDs()[0]
	w := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{Sync: "  safety_lag: 0s\n  max_rows_per_batch: 200\n", LogLevel: "warn"})
	ctx := context.Background()
	if res := testkit.Run(ctx, syncdBin, w, "once"); res.Code != 0 {
		t.Fatalf("once exited %d: %s", res.Code, tail(res.Stderr))
	}

	res := testkit.Run(ctx, syncdBin, w, "state", "reset", form, "--yes")
	if res.Code != 0 || !strings.Contains(res.Stderr, "second time") || !strings.Contains(res.Stderr, "syncd refresh --form "+form) {
		t.Errorf("reset does not say the rows come again: exit %d, stderr %s", res.Code, res.Stderr)
	}
	if res := testkit.Run(ctx, syncdBin, w, "once"); res.Code != 0 {
		t.Fatalf("once after reset exited %d: %s", res.Code, tail(res.Stderr))
	}
	got := testkit.OpenDuck(t).IDCounts(t, w.Out, poller.DefaultTable(form))
	for id, n := range got {
		if n != 2 {
			t.Fatalf("after reset and once, submission %s is there %d times: a re-sync writes every row again, exactly once more", id, n)
		}
	}

	// An uninterrupted refresh bounds the kill instants.
	began := time.Now()
	if res := testkit.Run(ctx, syncdBin, w, "refresh", "--form", form, "--yes"); res.Code != 0 {
		t.Fatalf("refresh exited %d: %s %s", res.Code, res.Stdout, tail(res.Stderr))
	}
	full := time.Since(began)
	got = testkit.OpenDuck(t).IDCounts(t, w.Out, poller.DefaultTable(form))
	testkit.CheckExactlyOnce(t, got, sim.ExpectedIDs(form))

	kills := 0
	for round := 0; round < 12; round++ {
		delay := time.Duration(rng.Int64N(int64(full))) + time.Millisecond
		res := testkit.RunKilledAfter(ctx, syncdBin, w, delay, "refresh", "--form", form, "--yes")
		if res.Killed {
			kills++
		} else if res.Code != 0 {
			t.Fatalf("refresh exited %d: %s", res.Code, tail(res.Stderr))
		}
		// Every few kills, let a pass complete and check the table.
		if round%3 == 2 {
			if res := testkit.Run(ctx, syncdBin, w, "once"); res.Code != 0 {
				t.Fatalf("once after a killed refresh exited %d: %s", res.Code, tail(res.Stderr))
			}
			got := testkit.OpenDuck(t).IDCounts(t, w.Out, poller.DefaultTable(form))
			testkit.CheckExactlyOnce(t, got, sim.ExpectedIDs(form))
			if t.Failed() {
				t.Fatalf("round %d: output not exact after %d kills", round, kills)
			}
		}
	}
	if kills < 4 {
		t.Errorf("only %d of 12 refreshes were killed: the test proves little", kills)
	}
	t.Logf("%d refreshes killed, output exact after every completed pass", kills)
}
