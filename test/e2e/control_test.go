package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/schedsim"
	"github.com/syncd-dev/syncd/internal/testkit"
)

// startDaemon starts `syncd run` of w with env and waits for its control
// file; it is stopped (SIGTERM) at the test's end unless stopDaemon ran.
func startDaemon(t *testing.T, w *testkit.Workdir, env []string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(syncdBin, "run", "--config", w.Config)
	cmd.Env = append(append(os.Environ(), "FORMS_API_KEY="+testkit.APIKey), env...)
	cmd.Dir = w.Dir
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &bytes.Buffer{}, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
	if !eventually(20*time.Second, func() bool { _, err := os.Stat(w.State + ".control"); return err == nil }) {
		t.Fatalf("syncd run wrote no control file %s.control\n%s", w.State, tail(stderr.String()))
	}
	return cmd, &stderr
}

// stopDaemon sends SIGTERM and wants a clean exit.
func stopDaemon(t *testing.T, cmd *exec.Cmd, stderr *bytes.Buffer) {
	t.Helper()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("syncd run did not exit 0 on SIGTERM: %v\n%s", err, tail(stderr.String()))
	}
}

// controlFile is the daemon's control file: its address and token.
func controlFile(t *testing.T, w *testkit.Workdir) (addr, token string) {
	t.Helper()
	p := w.State + ".control"
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("control file %s has mode %v, want 0600 (the token lets its reader write through the daemon)", p, fi.Mode().Perm())
	}
	var ci struct{ Addr, Token string }
	if err := json.Unmarshal(mustRead(t, p), &ci); err != nil || ci.Addr == "" || ci.Token == "" {
		t.Fatalf("control file %s: %v %+v", p, err, ci)
	}
	if !strings.HasPrefix(ci.Addr, "127.0.0.1:") {
		t.Errorf("control endpoint %s is not on loopback", ci.Addr)
	}
	return ci.Addr, ci.Token
}

func parquetCount(t *testing.T, w *testkit.Workdir) int {
	t.Helper()
	if _, err := os.Stat(w.Out); os.IsNotExist(err) {
		return 0
	}
	return len(testkit.ParquetFiles(t, w.Out))
}

// backfillBeside is a form whose config starts at mid (the daemon's passes
// sync [mid, now)), history from start before it to backfill, and a daemon
// configuration on a yearly schedule: its first pass only.
type backfillBeside struct {
	sim        *testkit.Sim
	form, addr string
	start, mid time.Time
	w          *testkit.Workdir
}

func newBackfillBeside(t *testing.T, seed int64, submissions int) *backfillBeside {
	t.Helper()
	start, end := history(6)
	b := &backfillBeside{sim: testkit.StartSim(t, formsim.Config{Seed: seed, Forms: 1, Submissions: submissions, Start: start, End: end}),
		start: start, mid: start.AddDate(0, 0, 3), addr: testkit.FreeAddr(t)}
	b.form = b.sim.FormIDs()[0]
	b.w = testkit.NewWorkdir(t, b.sim.BaseURL, testkit.Config{
		Forms: fmt.Sprintf("forms:\n  - id: %s\n    start_date: %s\n", b.form, b.mid.Format(time.RFC3339)),
		Sync:  "  safety_lag: 0s\n  schedule: \"0 0 1 1 *\"\n  jitter: 0s\n  max_rows_per_batch: 100\n",
		Extra: "server:\n  addr: " + b.addr + "\n",
	})
	return b
}

// startDaemon starts the daemon and waits for its first pass to succeed.
func (b *backfillBeside) startDaemon(t *testing.T) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	daemon, stderr := startDaemon(t, b.w, nil)
	success := `syncd_last_success_timestamp_seconds{account="default",source="forms",stream="` + b.form + `"}`
	if !eventually(30*time.Second, func() bool { return scrape(t, b.addr, success) > 0 }) {
		t.Fatalf("the daemon's first pass never succeeded\n%s", tail(stderr.String()))
	}
	return daemon, stderr
}

// TestBackfillBesideDaemon: with `syncd run` holding the state (a yearly
// schedule: its first pass only), `syncd backfill` has the daemon load the
// range before the form's start_date, through its engine: exit 0, the
// standalone command's -o json, and every submission exactly once. A
// control request without the token, or with a wrong one, is refused and
// writes nothing; an unknown form exits 2 and writes nothing; `state
// restore` is refused with the line that says what to do, and changes
// nothing.
func TestBackfillBesideDaemon(t *testing.T) {
	b := newBackfillBeside(t, 83, 900)
	sim, form, start, mid, w := b.sim, b.form, b.start, b.mid, b.w
	ctx := context.Background()
	backup := filepath.Join(t.TempDir(), "before.db")
	// A backup before the daemon: what a restore beside it would put back.
	if res := testkit.Run(ctx, syncdBin, w, "once"); res.Code != 0 {
		t.Fatalf("once: exit %d\n%s", res.Code, tail(res.Stderr))
	}
	if res := testkit.Run(ctx, syncdBin, w, "state", "backup", backup); res.Code != 0 {
		t.Fatalf("state backup: exit %d\n%s", res.Code, tail(res.Stderr))
	}
	daemon, stderr := b.startDaemon(t)
	ctlAddr, token := controlFile(t, w)

	files := parquetCount(t, w)
	pages := sim.Stats().PagesServed
	body := fmt.Sprintf(`{"form":%q,"from":%q,"to":%q}`, form, start.Format(time.RFC3339), mid.Format(time.RFC3339))
	for _, auth := range []string{"", "Bearer wrong-token", "Bearer " + token + "x", token} {
		req, _ := http.NewRequest(http.MethodPost, "http://"+ctlAddr+"/v1/backfill", strings.NewReader(body))
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("a control request with Authorization %q: %s, want 401", strings.ReplaceAll(auth, token, "<token>"), resp.Status)
		}
	}
	for _, p := range []string{"/v1/signin", "/v1/ping"} {
		if resp, err := http.Post("http://"+ctlAddr+p, "application/json", strings.NewReader(`{}`)); err != nil || resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("POST %s without the token: %v %v, want 401", p, err, resp)
		} else {
			resp.Body.Close()
		}
	}
	if n := parquetCount(t, w); n != files || sim.Stats().PagesServed != pages {
		t.Fatalf("refused control requests wrote %d files and fetched %d pages", n-files, sim.Stats().PagesServed-pages)
	}

	bad := testkit.Run(ctx, syncdBin, w, "backfill", "--form", "nosuchform", "--from", start.Format(time.RFC3339))
	if bad.Code != 2 || parquetCount(t, w) != files {
		t.Errorf("backfill of an unknown form beside the daemon: exit %d, %d new files; want 2 and none\n%s", bad.Code, parquetCount(t, w)-files, tail(bad.Stderr))
	}

	res := testkit.Run(ctx, syncdBin, w, "backfill", "--form", form, "--from", start.Format(time.RFC3339), "--to", mid.Format(time.RFC3339), "-o", "json")
	if res.Code != 0 {
		t.Fatalf("backfill beside the daemon: exit %d\n%s\n%s", res.Code, res.Stdout, tail(res.Stderr))
	}
	if !strings.Contains(res.Stderr, "the backfill runs in it") {
		t.Errorf("backfill beside the daemon did not say the daemon runs it:\n%s", tail(res.Stderr))
	}
	var summary []map[string]any
	if err := json.Unmarshal([]byte(res.Stdout), &summary); err != nil || len(summary) != 1 {
		t.Fatalf("backfill -o json beside the daemon: %v\n%s", err, res.Stdout)
	}
	for _, k := range []string{"account", "source", "form_id", "table", "status", "rows", "batches", "requests", "duration_seconds", "covered_start", "covered_end", "clamped_to", "error"} {
		if _, ok := summary[0][k]; !ok {
			t.Errorf("backfill -o json beside the daemon lacks %q: %s", k, res.Stdout)
		}
	}
	if summary[0]["status"] != "ok" || summary[0]["rows"].(float64) == 0 {
		t.Errorf("backfill beside the daemon: %s", res.Stdout)
	}
	// Again: the range is committed, nothing is fetched twice.
	again := testkit.Run(ctx, syncdBin, w, "backfill", "--form", form, "--from", start.Format(time.RFC3339), "--to", mid.Format(time.RFC3339), "-o", "json")
	if again.Code != 0 || !strings.Contains(again.Stdout, `"rows": 0`) {
		t.Errorf("second backfill of the range beside the daemon: exit %d\n%s\n%s", again.Code, again.Stdout, tail(again.Stderr))
	}

	restore := testkit.Run(ctx, syncdBin, w, "state", "restore", backup)
	if restore.Code != 3 || !strings.Contains(restore.Stderr, "state restore is refused: the state "+w.State+" is in use by a running syncd") || !strings.Contains(restore.Stderr, "then start it again") {
		t.Errorf("state restore beside the daemon: exit %d, want 3 with the line saying what to do\n%s", restore.Code, tail(restore.Stderr))
	}
	if aside, _ := filepath.Glob(w.State + ".replaced-*"); len(aside) > 0 {
		t.Errorf("the refused restore replaced the state: %v", aside)
	}

	stopDaemon(t, daemon, stderr)
	if _, err := os.Stat(w.State + ".control"); !os.IsNotExist(err) {
		t.Errorf("the control file is still there after the daemon stopped: %v", err)
	}
	got := testkit.OpenDuck(t).IDCounts(t, w.Out, defaultTable(form))
	testkit.CheckExactlyOnce(t, got, sim.ExpectedIDs(form))
}

// TestLoginBesideDaemon: a sign-in whose refresh token the server revoked
// fails the daemon's passes; `syncd auth login` beside the daemon completes
// (the daemon stores the tokens through its open store), and the daemon's
// next passes sync the bookings with them. auth status beside it reads the
// state through it; auth logout has it forget the sign-in.
func TestLoginBesideDaemon(t *testing.T) {
	addr := testkit.FreeAddr(t)
	e := signedIn(t, schedOptions{
		sim:   schedsim.Config{Bookings: 30, TokenExpiry: time.Second},
		sync:  "  safety_lag: 0s\n  schedule: \"@every 1s\"\n  jitter: 0s\n",
		extra: "server:\n  addr: " + addr + "\n",
	})
	daemon, stderr := startDaemon(t, e.w, e.env)
	success := `syncd_last_success_timestamp_seconds{account="default",source="scheduling"`
	if !eventually(20*time.Second, func() bool { return scrape(t, addr, success) > 0 }) {
		t.Fatalf("the daemon never synced the bookings\n%s", tail(stderr.String()))
	}
	e.sched.RevokeRefreshTokens()
	time.Sleep(2 * time.Second) // past the access token's life: the daemon needs the revoked refresh token
	res := loginAs(t, e.w, e.env)
	if res.Code != 0 || !strings.Contains(res.Stdout, "stored by the running syncd") {
		t.Fatalf("auth login beside the daemon: exit %d\n%s\n%s", res.Code, res.Stdout, tail(res.Stderr))
	}
	signedInAt := float64(time.Now().Unix())
	for range 3 {
		e.sched.Create()
	}
	if !eventually(20*time.Second, func() bool { return scrape(t, addr, success) > signedInAt+1 }) {
		t.Fatalf("the daemon did not sync the bookings with the new sign-in\n%s", tail(stderr.String()))
	}
	st := e.run(context.Background(), "auth", "status")
	if st.Code != 0 || !strings.Contains(st.Stdout, e.sched.User().Email) || !strings.Contains(st.Stdout, "a running syncd holds it") {
		t.Errorf("auth status beside the daemon: exit %d\n%s\n%s", st.Code, st.Stdout, tail(st.Stderr))
	}
	// Sign out beside the daemon, and in again.
	out := e.run(context.Background(), "auth", "logout", "--yes")
	if out.Code != 0 || !strings.Contains(out.Stdout, "by the running syncd") {
		t.Fatalf("auth logout beside the daemon: exit %d\n%s\n%s", out.Code, out.Stdout, tail(out.Stderr))
	}
	if st := e.run(context.Background(), "auth", "status"); st.Code != 1 || !strings.Contains(st.Stdout, "not signed in") {
		t.Errorf("auth status beside the daemon after the logout: exit %d\n%s\n%s", st.Code, st.Stdout, tail(st.Stderr))
	}
	if res := loginAs(t, e.w, e.env); res.Code != 0 || !strings.Contains(res.Stdout, "stored by the running syncd") {
		t.Fatalf("auth login beside the daemon after the logout: exit %d\n%s\n%s", res.Code, res.Stdout, tail(res.Stderr))
	}
	stopDaemon(t, daemon, stderr)
	for _, o := range []string{res.Stdout, res.Stderr, stderr.String()} {
		if strings.Contains(o, "sim_rt_") || strings.Contains(o, "sim_at_") {
			t.Fatal("a token appears in the output")
		}
	}
	e.settle(t)
	e.checkBookings(t)
}

// TestInterruptedBackfillBesideDaemon: SIGINT to a backfill the daemon runs
// cancels the daemon's backfill (exit 130) and nothing else: the daemon
// stays up, and a rerun completes the range, every submission once.
func TestInterruptedBackfillBesideDaemon(t *testing.T) {
	b := newBackfillBeside(t, 89, 3000)
	sim, form, start, mid, addr, w := b.sim, b.form, b.start, b.mid, b.addr, b.w
	daemon, stderr := b.startDaemon(t)
	sim.SetFaults(formsim.Faults{Latency: 40 * time.Millisecond})
	pages := sim.Stats().PagesServed
	cmd := exec.Command(syncdBin, "backfill", "--config", w.Config, "--form", form, "--from", start.Format(time.RFC3339), "--to", mid.Format(time.RFC3339), "--concurrency", "2")
	cmd.Env = append(os.Environ(), "FORMS_API_KEY="+testkit.APIKey)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if !eventually(30*time.Second, func() bool { return sim.Stats().PagesServed > pages+3 }) {
		cmd.Process.Kill()
		t.Fatalf("the backfill beside the daemon never got going\n%s", tail(errOut.String()))
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 130 || !strings.Contains(out.String(), "INTERRUPTED") {
		t.Fatalf("SIGINT to the backfill beside the daemon: exit %d, want 130 saying INTERRUPTED\n%s\n%s", code, out.String(), tail(errOut.String()))
	}
	// The daemon's backfill ends with the request: the pages stop coming.
	time.Sleep(500 * time.Millisecond)
	stopped := sim.Stats().PagesServed
	time.Sleep(time.Second)
	if n := sim.Stats().PagesServed - stopped; n > 0 {
		t.Errorf("the daemon fetched %d more pages after the command was interrupted", n)
	}
	if status(addr, "/healthz") != http.StatusOK {
		t.Fatalf("the daemon is down after the interrupted backfill\n%s", tail(stderr.String()))
	}
	sim.SetFaults(formsim.Faults{})
	res := testkit.Run(context.Background(), syncdBin, w, "backfill", "--form", form, "--from", start.Format(time.RFC3339), "--to", mid.Format(time.RFC3339))
	if res.Code != 0 {
		t.Fatalf("backfill again beside the daemon: exit %d\n%s\n%s", res.Code, res.Stdout, tail(res.Stderr))
	}
	stopDaemon(t, daemon, stderr)
	testkit.CheckExactlyOnce(t, testkit.OpenDuck(t).IDCounts(t, w.Out, defaultTable(form)), sim.ExpectedIDs(form))
}

// TestDaemonStoppedDuringBackfill: SIGTERM to the daemon while it runs a
// backfill on request: its batches in flight commit, the command reports
// the stop and exits 1 (the range is not done), the daemon exits 0, and a
// backfill after it completes the range, every submission once.
func TestDaemonStoppedDuringBackfill(t *testing.T) {
	b := newBackfillBeside(t, 97, 3000)
	daemon, stderr := b.startDaemon(t)
	b.sim.SetFaults(formsim.Faults{Latency: 40 * time.Millisecond})
	pages := b.sim.Stats().PagesServed
	cmd := exec.Command(syncdBin, "backfill", "--config", b.w.Config, "--form", b.form, "--from", b.start.Format(time.RFC3339), "--to", b.mid.Format(time.RFC3339), "--concurrency", "2")
	cmd.Env = append(os.Environ(), "FORMS_API_KEY="+testkit.APIKey)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	if !eventually(30*time.Second, func() bool { return b.sim.Stats().PagesServed > pages+3 }) {
		t.Fatalf("the backfill beside the daemon never got going\n%s", tail(errOut.String()))
	}
	stopDaemon(t, daemon, stderr)
	_ = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(out.String(), "STOP "+b.form) {
		t.Fatalf("backfill whose daemon was stopped: exit %d, want 1 with a STOP line\n%s\n%s", code, out.String(), tail(errOut.String()))
	}
	b.sim.SetFaults(formsim.Faults{})
	res := testkit.Run(context.Background(), syncdBin, b.w, "backfill", "--form", b.form, "--from", b.start.Format(time.RFC3339), "--to", b.mid.Format(time.RFC3339))
	if res.Code != 0 || strings.Contains(res.Stderr, "runs in it") {
		t.Fatalf("backfill after the daemon stopped: exit %d\n%s\n%s", res.Code, res.Stdout, tail(res.Stderr))
	}
	testkit.CheckExactlyOnce(t, testkit.OpenDuck(t).IDCounts(t, b.w.Out, defaultTable(b.form)), b.sim.ExpectedIDs(b.form))
}
