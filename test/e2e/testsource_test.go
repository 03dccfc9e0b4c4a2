package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/source/memsource"
	"github.com/syncd-dev/syncd/internal/testkit"
)

// TestTestSourceThroughTheCommands: a source that exists only in tests
// (internal/source/memsource: one fixed-schema stream in memory) is wired
// through the app's one list of sources by the testsource build tag, and
// nothing else: `once`, `run`, `backfill` and `state show` sync and show
// its stream beside the forms, the dry run plans it (all of it before the
// first pass, nothing after), `reconcile` reads it again by its key, and
// `validate` still works in a binary that carries it. The files it needs beyond its
// own package: internal/app/sources_testsource.go (its line in the list),
// internal/app/sources_notestsource.go (the list's empty half without the
// tag) and this test: 3.
func TestTestSourceThroughTheCommands(t *testing.T) {
	bin := buildWithTestSource(t)
	start, end := history(2)
	sim := testkit.StartSim(t, formsim.Config{Seed: 5, Forms: 1, Submissions: 40, Start: start, End: end})
	addr := testkit.FreeAddr(t)
	w := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{
		Sync:  "  safety_lag: 0s\n  start_date: 2023-12-31\n  schedule: \"@every 1s\"\n  jitter: 0s\n",
		Extra: "server:\n  addr: " + addr + "\n",
	})
	ctx := context.Background()
	want := map[string]int{}
	for i := range memsource.Records {
		want[memsource.ID(i)] = 1
	}
	check := func(step string) {
		t.Helper()
		if got := memIDs(t, w.Out); !equalCounts(got, want) {
			t.Fatalf("after %s the test source's table holds %v, want each of its %d records once", step, got, memsource.Records)
		}
	}
	run := func(args ...string) testkit.Result {
		t.Helper()
		res := testkit.Run(ctx, bin, w, args...)
		if res.Code != 0 {
			t.Fatalf("syncd %s exited %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), res.Code, res.Stdout, tail(res.Stderr))
		}
		return res
	}

	if res := run("validate"); !strings.Contains(res.Stdout, "ok   "+memsource.Name+"\n") {
		t.Errorf("validate did not probe the test source:\n%s", res.Stdout)
	}
	run("once", "--dry-run")
	if got := memPlanned(t, run("once", "--dry-run", "-o", "json")); got != memsource.Records {
		t.Errorf("the dry run plans %d rows of the test source's stream, want its %d records", got, memsource.Records)
	}
	run("once")
	check("once")
	run("once") // a second pass writes nothing again
	check("a second once")
	if got := memPlanned(t, run("once", "--dry-run", "-o", "json")); got != 0 {
		t.Errorf("after the pass the dry run still plans %d rows of the test source's stream", got)
	}
	if res := run("state", "show"); !strings.Contains(res.Stdout, memsource.StreamKey) {
		t.Errorf("state show does not show the test source's stream %s:\n%s", memsource.StreamKey, res.Stdout)
	}
	// A backfill of a range already committed writes nothing again.
	run("backfill", "--from", "2024-01-01", "--to", "2024-01-03")
	check("backfill")
	run("reconcile", "--form", sim.FormIDs()[0])
	// Its stream reconciles too: named by its key, it is read again and
	// found unchanged.
	if res := run("reconcile", "--form", memsource.StreamKey); !strings.Contains(res.Stdout, "ok   "+memsource.StreamKey+" -> "+memsource.Table) ||
		!strings.Contains(res.Stdout, "; reconciled ") || !strings.Contains(res.Stdout, ": 0 new versions, 0 tombstones") {
		t.Errorf("reconcile of the test source's stream did not reconcile it:\n%s", res.Stdout)
	}
	check("reconcile")

	// `run` syncs it too: from a fresh output and state.
	if err := os.RemoveAll(w.Out); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Dir(w.State)); err != nil {
		t.Fatal(err)
	}
	cmd, _, stderr, err := testkit.Start(bin, w, "run")
	if err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	if !eventually(30*time.Second, func() bool { return equalCounts(memIDs(t, w.Out), want) }) {
		t.Fatalf("syncd run never synced the test source\n%s", tail(stderr.String()))
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("syncd run did not exit 0 on SIGTERM: %v\n%s", err, tail(stderr.String()))
	}
	check("run")
}

// memPlanned is the rows a dry run's JSON plans for the test source's
// stream; the test fails when the plan does not name the stream.
func memPlanned(t *testing.T, res testkit.Result) int {
	t.Helper()
	var plan struct {
		Streams []struct {
			ID    string `json:"form_id"`
			Table string `json:"table"`
			Rows  int    `json:"rows"`
			Error string `json:"error"`
		} `json:"streams"`
	}
	if err := json.Unmarshal([]byte(res.Stdout), &plan); err != nil {
		t.Fatalf("once --dry-run -o json is not JSON: %v\n%s", err, res.Stdout)
	}
	for _, s := range plan.Streams {
		if s.ID == memsource.StreamKey && s.Table == memsource.Table && s.Error == "" {
			return s.Rows
		}
	}
	t.Fatalf("the dry run does not plan the test source's stream %s:\n%s", memsource.StreamKey, res.Stdout)
	return 0
}

// buildWithTestSource builds cmd/syncd with the testsource tag.
func buildWithTestSource(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "syncd")
	// With the tag every make target builds with (Makefile): -tags here
	// replaces GOFLAGS' -tags, and without it the build compiles Cloud
	// Storage's gRPC transport again.
	cmd := exec.Command("go", "build", "-tags", "testsource,disable_grpc_modules", "-o", bin, "./cmd/syncd")
	cmd.Dir = testkit.RepoRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build -tags testsource ./cmd/syncd: %v\n%s", err, out)
	}
	return bin
}

// memIDs counts the rows of each id in the test source's table.
func memIDs(t *testing.T, out string) map[string]int {
	t.Helper()
	got := map[string]int{}
	if !testkit.HasFiles(out, memsource.Table) {
		return got
	}
	rows, err := testkit.OpenDuck(t).DB.Query("SELECT id, count(*) FROM " + testkit.Scan(out, memsource.Table) + " GROUP BY 1")
	if err != nil {
		t.Fatalf("read table %s: %v", memsource.Table, err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		got[id] = n
	}
	return got
}
