package e2e

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/bqfake"
	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/testkit"
)

// stateShowJSON is the documented shape of `syncd state show -o json`.
type stateShowJSON struct {
	State  string `json:"state"`
	Source string `json:"source"`
	Forms  []struct {
		FormID      string     `json:"form_id"`
		Rows        int64      `json:"rows"`
		Batches     int64      `json:"batches"`
		LastSuccess *time.Time `json:"last_success"`
		Committed   []struct {
			Start time.Time `json:"start"`
			End   time.Time `json:"end"`
		} `json:"committed"`
		OpenBatches []json.RawMessage `json:"open_batches"`
		Damaged     string            `json:"damaged"`
	} `json:"forms"`
}

// TestInspectBesideRunningDaemon: while `syncd run` holds the state file,
// state show (table and JSON), validate and schema answer within seconds
// through the daemon's /status, without stopping it.
func TestInspectBesideRunningDaemon(t *testing.T) {
	start, end := history(3)
	sim := testkit.StartSim(t, formsim.Config{Seed: 61, Forms: 2, Submissions: 300, Start: start, End: end})
	addr := testkit.FreeAddr(t)
	w := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{
		Sync:  "  safety_lag: 0s\n  schedule: \"@every 2s\"\n  jitter: 0s\n",
		Extra: "server:\n  addr: " + addr + "\n",
	})
	cmd, _, stderr, err := testkit.Start(syncdBin, w, "run")
	if err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	forms := sim.FormIDs()
	for _, f := range forms {
		if !eventually(30*time.Second, func() bool {
			return scrape(t, addr, `syncd_rows_written_total{account="default",source="forms",stream="`+f+`"}`) > 0
		}) {
			t.Fatalf("form %s never synced: %s", f, tail(stderr.String()))
		}
	}
	ctx := context.Background()
	run := func(args ...string) testkit.Result {
		t.Helper()
		began := time.Now()
		res := testkit.Run(ctx, syncdBin, w, args...)
		if d := time.Since(began); d > 10*time.Second {
			t.Errorf("%v took %v beside the daemon", args, d)
		}
		return res
	}

	res := run("state", "show", "-o", "json")
	if res.Code != 0 {
		t.Fatalf("state show -o json beside the daemon: exit %d: %s", res.Code, res.Stderr)
	}
	var v stateShowJSON
	if err := json.Unmarshal([]byte(res.Stdout), &v); err != nil {
		t.Fatalf("state show -o json is not JSON: %v\n%s", err, res.Stdout)
	}
	if v.Source != "daemon" || v.State != w.State {
		t.Errorf("source %q state %q, want daemon and %s", v.Source, v.State, w.State)
	}
	got := map[string]bool{}
	for _, f := range v.Forms {
		got[f.FormID] = true
		if f.Rows <= 0 || f.Batches <= 0 || len(f.Committed) == 0 || f.LastSuccess == nil || f.Damaged != "" {
			t.Errorf("form %s: %+v, want rows, batches, committed windows and a last success", f.FormID, f)
		}
		if f.OpenBatches == nil {
			t.Errorf("form %s: open_batches is null, want a list", f.FormID)
		}
	}
	for _, f := range forms {
		if !got[f] {
			t.Errorf("form %s missing from state show -o json: %s", f, res.Stdout)
		}
	}

	res = run("state", "show", forms[1])
	if res.Code != 0 || !strings.Contains(res.Stdout, "form "+forms[1]+": ") || !strings.Contains(res.Stdout, "committed [") ||
		strings.Contains(res.Stdout, "form "+forms[0]) || !strings.Contains(res.Stdout, "running syncd") {
		t.Errorf("state show %s beside the daemon: exit %d\nstdout %s\nstderr %s", forms[1], res.Code, res.Stdout, res.Stderr)
	}
	res = run("state", "show", forms[1]+"x")
	if res.Code != 2 || !strings.Contains(res.Stderr, "closest: "+forms[1]) {
		t.Errorf("state show of an unknown form beside the daemon: exit %d, stderr %s", res.Code, res.Stderr)
	}

	res = run("validate")
	if !strings.Contains(res.Stdout, "ok   state "+w.State) {
		t.Errorf("validate beside the daemon: exit %d\nstdout %s\nstderr %s", res.Code, res.Stdout, res.Stderr)
	}
	res = run("schema", forms[0], "-o", "json")
	var sch struct {
		Pinned  bool              `json:"pinned"`
		Columns []json.RawMessage `json:"columns"`
	}
	if res.Code != 0 || json.Unmarshal([]byte(res.Stdout), &sch) != nil || !sch.Pinned || len(sch.Columns) == 0 || strings.Contains(res.Stderr, "warning") {
		t.Errorf("schema beside the daemon: exit %d pinned %v\nstdout %.300s\nstderr %s", res.Code, sch.Pinned, res.Stdout, res.Stderr)
	}

	res = run("forms", "-o", "json")
	var fl struct {
		Forms []struct {
			FormID string   `json:"form_id"`
			Name   string   `json:"name"`
			Tags   []string `json:"tags"`
			Table  string   `json:"table"`
		} `json:"forms"`
	}
	if res.Code != 0 || json.Unmarshal([]byte(res.Stdout), &fl) != nil || len(fl.Forms) != len(forms) {
		t.Errorf("forms -o json: exit %d\n%s\n%s", res.Code, res.Stdout, res.Stderr)
	}
	for _, f := range fl.Forms {
		if f.Name == "" || f.Tags == nil || f.Table != poller.DefaultTable(f.FormID) {
			t.Errorf("forms -o json: %+v", f)
		}
	}
	if status(addr, "/status") != 200 {
		t.Errorf("GET /status: %d", status(addr, "/status"))
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("syncd run did not exit 0 on SIGTERM: %v", err)
	}
	// Stopped: the same view, read from the file itself.
	res = run("state", "show", "-o", "json")
	var direct stateShowJSON
	if res.Code != 0 || json.Unmarshal([]byte(res.Stdout), &direct) != nil || direct.Source != "store" || len(direct.Forms) != len(forms) {
		t.Errorf("state show -o json after the stop: exit %d %s %s", res.Code, res.Stdout, res.Stderr)
	}
}

// TestValidateAnswersWhenTheAPIDoesNot: an API that accepts connections
// and never answers is reported within 30 s, naming the base URL.
func TestValidateAnswersWhenTheAPIDoesNot(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never answered
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	base := "http://" + ln.Addr().String() + "/v1/api"
	w := testkit.NewWorkdir(t, base, testkit.Config{})
	// The test config allows 10 s per attempt and 8 attempts: minutes,
	// without validate's own limits.
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res := testkit.Run(ctx, syncdBin, w, "validate")
	took := time.Since(began)
	if res.Code == 0 {
		t.Errorf("validate against a silent API exited 0: %s", res.Stdout)
	}
	if took > 30*time.Second {
		t.Errorf("validate took %v, want an answer within 30s", took)
	}
	if !strings.Contains(res.Stdout, "FAIL api: no answer from "+base+" within") {
		t.Errorf("validate does not say the API never answered:\n%s\n%s", res.Stdout, tail(res.Stderr))
	}
	// The other checks still ran.
	if !strings.Contains(res.Stdout, "ok   sink parquet") || !strings.Contains(res.Stdout, "ok   state") {
		t.Errorf("validate stopped at the API:\n%s", res.Stdout)
	}
}

// TestValidateUnwritableOutput: an output that cannot be written fails
// validate, naming it.
func TestValidateUnwritableOutput(t *testing.T) {
	start, end := history(1)
	sim := testkit.StartSim(t, formsim.Config{Seed: 62, Forms: 1, Submissions: 10, Start: start, End: end})
	cases := []struct {
		name string
		out  func(t *testing.T, dir string) string
	}{
		{"read-only folder", func(t *testing.T, dir string) string {
			out := filepath.Join(dir, "ro")
			if err := os.Mkdir(out, 0o555); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Chmod(out, 0o755) })
			if f, err := os.CreateTemp(out, "probe"); err == nil {
				f.Close()
				os.Remove(f.Name())
				t.Skip("running with permission to write into a read-only folder (root): the next case covers an unwritable path")
			}
			return out
		}},
		{"path under a file", func(t *testing.T, dir string) string {
			file := filepath.Join(dir, "file")
			if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(file, "out")
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := tc.out(t, t.TempDir())
			w := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{Sink: "sink:\n  type: parquet\n  parquet:\n    path: " + out + "\n"})
			res := testkit.Run(context.Background(), syncdBin, w, "validate")
			if res.Code != 1 || !strings.Contains(res.Stdout, "FAIL sink: output folder "+out) {
				t.Errorf("validate with output %s: exit %d\n%s\n%s", out, res.Code, res.Stdout, tail(res.Stderr))
			}
			entries, _ := os.ReadDir(out)
			for _, e := range entries {
				t.Errorf("validate left %s in the output folder", e.Name())
			}
		})
	}
	// A writable folder passes, and no probe is left behind.
	w := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{})
	res := testkit.Run(context.Background(), syncdBin, w, "validate")
	if res.Code != 0 || !strings.Contains(res.Stdout, "ok   sink parquet "+w.Out) {
		t.Errorf("validate with a writable output: exit %d\n%s\n%s", res.Code, res.Stdout, tail(res.Stderr))
	}
	if entries, _ := os.ReadDir(w.Out); len(entries) != 0 {
		t.Errorf("validate left %d entries in the output folder", len(entries))
	}
}

// TestValidateBigQueryPermissions: validate runs a dry-run query job
// against the dataset: a missing job permission fails it, a missing
// dataset is a warning (syncd creates it), and nothing is loaded.
func TestValidateBigQueryPermissions(t *testing.T) {
	start, end := history(1)
	sim := testkit.StartSim(t, formsim.Config{Seed: 63, Forms: 1, Submissions: 10, Start: start, End: end})
	f := bqfake.New(t)
	const project = "validate-project"
	ctx := context.Background()
	w := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{Sink: bqSink(f, project, "forms")})

	res := testkit.Run(ctx, syncdBin, w, "validate")
	if res.Code != 0 || !strings.Contains(res.Stdout, "WARN sink: dataset "+project+".forms does not exist yet") {
		t.Errorf("validate before the dataset exists: exit %d\n%s\n%s", res.Code, res.Stdout, tail(res.Stderr))
	}
	if res := testkit.Run(ctx, syncdBin, w, "once"); res.Code != 0 {
		t.Fatalf("once: exit %d %s", res.Code, tail(res.Stderr))
	}
	jobs := f.JobCount(project)
	res = testkit.Run(ctx, syncdBin, w, "validate")
	if res.Code != 0 || !strings.Contains(res.Stdout, "ok   sink bigquery "+project+".forms (a dry-run query job was accepted)") {
		t.Errorf("validate with every permission: exit %d\n%s\n%s", res.Code, res.Stdout, tail(res.Stderr))
	}
	f.Deny("bigquery.jobs.create")
	res = testkit.Run(ctx, syncdBin, w, "validate")
	if res.Code != 1 || !strings.Contains(res.Stdout, "FAIL sink: bigquery "+project+".forms: permission denied") || !strings.Contains(res.Stdout, "roles/bigquery.jobUser") {
		t.Errorf("validate without bigquery.jobs.create: exit %d\n%s\n%s", res.Code, res.Stdout, tail(res.Stderr))
	}
	f.Allow("bigquery.jobs.create")
	f.Deny("bigquery.tables.list")
	res = testkit.Run(ctx, syncdBin, w, "validate")
	if res.Code != 1 || !strings.Contains(res.Stdout, "FAIL sink: bigquery") {
		t.Errorf("validate without access to the dataset: exit %d\n%s\n%s", res.Code, res.Stdout, tail(res.Stderr))
	}
	if n := f.JobCount(project); n != jobs {
		t.Errorf("validate created %d jobs", n-jobs)
	}
}
