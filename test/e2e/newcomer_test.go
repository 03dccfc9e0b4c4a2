package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/testkit"
)

// newcomerView is the part of `state show -o json` these tests read.
type newcomerView struct {
	Forms []struct {
		FormID        string     `json:"form_id"`
		Rows          int64      `json:"rows"`
		LastError     string     `json:"last_error"`
		LastSuccess   *time.Time `json:"last_success"`
		NotConfigured bool       `json:"not_configured"`
		FreshTo       *time.Time `json:"fresh_to"`
	} `json:"forms"`
}

func showState(t *testing.T, w *testkit.Workdir, args ...string) newcomerView {
	t.Helper()
	res := testkit.Run(context.Background(), syncdBin, w, append([]string{"state", "show", "-o", "json"}, args...)...)
	if res.Code != 0 {
		t.Fatalf("state show -o json: exit %d: %s %s", res.Code, res.Stdout, res.Stderr)
	}
	var v newcomerView
	if err := json.Unmarshal([]byte(res.Stdout), &v); err != nil {
		t.Fatalf("state show -o json: %v: %s", err, res.Stdout)
	}
	return v
}

// TestPhantomStreamOfATypo: a form id mistyped in forms[] and then fixed
// neither fails `syncd accounts` nor stays for ever: accounts and state
// show mark it as no longer configured, and `state forget` removes its
// record (refusing a stream still configured).
func TestPhantomStreamOfATypo(t *testing.T) {
	start, end := history(2)
	sim := testkit.StartSim(t, formsim.Config{Seed: 41, Forms: 2, Submissions: 80, Start: start, End: end})
	form := sim.FormIDs()[0]
	typo := form[:len(form)-1] + "Q"
	ctx := context.Background()
	w := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{Forms: "forms:\n  - id: " + form + "\n  - id: " + typo + "\n"})
	if res := testkit.Run(ctx, syncdBin, w, "once"); res.Code != 1 {
		t.Fatalf("once with a mistyped id: exit %d, want 1: %s", res.Code, res.Stdout)
	}
	// While the typo is configured, it is a failing stream.
	if res := testkit.Run(ctx, syncdBin, w, "accounts"); res.Code != 1 {
		t.Errorf("accounts while the typo is configured: exit %d, want 1: %s", res.Code, res.Stdout)
	}
	res := testkit.Run(ctx, syncdBin, w, "state", "forget", typo, "--yes")
	if res.Code != 2 || !strings.Contains(res.Stderr, "still") {
		t.Errorf("state forget of a configured stream: exit %d, want 2: %s %s", res.Code, res.Stdout, res.Stderr)
	}

	// The operator fixes the config.
	fixed := withForms(t, w, "forms:\n  - id: "+form+"\n")
	if res := testkit.Run(ctx, syncdBin, fixed, "once"); res.Code != 0 {
		t.Fatalf("once after the fix: exit %d: %s", res.Code, res.Stdout)
	}
	res = testkit.Run(ctx, syncdBin, fixed, "accounts")
	if res.Code != 0 {
		t.Errorf("accounts after the fix: exit %d, want 0 (the typo is no stream of the config): %s %s", res.Code, res.Stdout, res.Stderr)
	}
	if strings.Contains(res.Stdout, "does not exist") || !strings.Contains(res.Stdout, typo) || !strings.Contains(res.Stdout, "state forget") {
		t.Errorf("accounts after the fix shows the typo's error, or does not say how to forget it: %s", res.Stdout)
	}
	v := showState(t, fixed)
	seen := false
	for _, f := range v.Forms {
		if f.FormID == typo {
			seen = true
			if !f.NotConfigured {
				t.Errorf("state show does not mark %s as no longer configured: %+v", typo, f)
			}
		} else if f.NotConfigured {
			t.Errorf("state show marks the configured form %s as not configured", f.FormID)
		}
	}
	if !seen {
		t.Errorf("state show lost the stream %s before it was forgotten", typo)
	}
	if res := testkit.Run(ctx, syncdBin, fixed, "state", "show"); !strings.Contains(res.Stdout, "no longer") {
		t.Errorf("state show's table does not say %s is no longer configured: %s", typo, res.Stdout)
	}

	// Forgetting a configured form is refused; forgetting the typo works
	// and leaves the configured form alone.
	if res := testkit.Run(ctx, syncdBin, fixed, "state", "forget", form, "--yes"); res.Code != 2 {
		t.Errorf("state forget of a configured form: exit %d, want 2", res.Code)
	}
	if res := testkit.Run(ctx, syncdBin, fixed, "state", "forget", typo); res.Code != 2 || !strings.Contains(res.Stderr, "--yes") {
		t.Errorf("state forget without --yes and no terminal: exit %d, want 2 asking for --yes: %s", res.Code, res.Stderr)
	}
	res = testkit.Run(ctx, syncdBin, fixed, "state", "forget", typo, "--yes")
	if res.Code != 0 || !strings.Contains(res.Stdout, typo) {
		t.Fatalf("state forget: exit %d: %s %s", res.Code, res.Stdout, res.Stderr)
	}
	v = showState(t, fixed)
	if len(v.Forms) != 1 || v.Forms[0].FormID != form || v.Forms[0].Rows == 0 {
		t.Errorf("after state forget, state show lists %+v, want only %s with its rows", v.Forms, form)
	}
	if res := testkit.Run(ctx, syncdBin, fixed, "accounts", "-o", "json"); res.Code != 0 || !strings.Contains(res.Stdout, `"forms": 1`) {
		t.Errorf("accounts after forget: exit %d: %s", res.Code, res.Stdout)
	}
}

// withForms is w with its config's forms: section replaced by forms.
func withForms(t *testing.T, w *testkit.Workdir, forms string) *testkit.Workdir {
	t.Helper()
	raw, err := os.ReadFile(w.Config)
	if err != nil {
		t.Fatal(err)
	}
	s := string(raw)
	i, j := strings.Index(s, "forms:"), strings.Index(s, "sync:")
	next := *w
	next.Config = filepath.Join(w.Dir, "fixed.yaml")
	if err := os.WriteFile(next.Config, []byte(s[:i]+forms+s[j:]), 0o600); err != nil {
		t.Fatal(err)
	}
	return &next
}

// TestInterruptIsNoOutage: a backfill stopped by SIGINT, even one whose
// requests the end of the grace cancelled, leaves no "context canceled"
// last error, and `syncd accounts` does not fail for it.
func TestInterruptIsNoOutage(t *testing.T) {
	start, end := history(8)
	sim := testkit.StartSim(t, formsim.Config{Seed: 42, Forms: 1, Submissions: 3000, Start: start, End: end})
	sim.SetFaults(formsim.Faults{Latency: 30 * time.Millisecond})
	form := sim.FormIDs()[0]
	w := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{RateLimit: 4, Sync: "  safety_lag: 0s\n  max_rows_per_batch: 1500\n  shutdown_grace: 200ms\n"})
	cmd, stdout, stderr, err := testkit.Start(syncdBin, w, "backfill", "--form", form, "--from", start.Format(time.RFC3339), "--to", end.Format(time.RFC3339), "--concurrency", "1")
	if err != nil {
		t.Fatal(err)
	}
	if !eventually(30*time.Second, func() bool { return sim.Stats().PagesServed > 3 }) {
		cmd.Process.Kill()
		t.Fatal("syncd never got going")
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 130 {
		t.Fatalf("exit %d, want 130\nstdout %s\nstderr %s", code, stdout, tail(stderr.String()))
	}
	for _, f := range showState(t, w).Forms {
		if f.LastError != "" {
			t.Errorf("an interrupted pass recorded the last error %q", f.LastError)
		}
	}
	res := testkit.Run(context.Background(), syncdBin, w, "accounts")
	if res.Code != 0 || strings.Contains(res.Stdout, "context canceled") {
		t.Errorf("accounts after an interrupt: exit %d, want 0: %s %s", res.Code, res.Stdout, res.Stderr)
	}
}

// TestStateShowBesideOnceNamesIt: `state show` while a `syncd once` holds
// the state names that process, not a daemon at server.addr.
func TestStateShowBesideOnceNamesIt(t *testing.T) {
	start, end := history(8)
	sim := testkit.StartSim(t, formsim.Config{Seed: 43, Forms: 1, Submissions: 3000, Start: start, End: end})
	sim.SetFaults(formsim.Faults{Latency: 50 * time.Millisecond})
	w := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{Sync: "  safety_lag: 0s\n  max_rows_per_batch: 300\n"})
	cmd, _, _, err := testkit.Start(syncdBin, w, "once")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	if !eventually(30*time.Second, func() bool { return sim.Stats().PagesServed > 2 }) {
		t.Fatal("syncd once never got going")
	}
	res := testkit.Run(context.Background(), syncdBin, w, "state", "show")
	if res.Code != 3 || !strings.Contains(res.Stderr, fmt.Sprintf("pid %d", cmd.Process.Pid)) || strings.Contains(res.Stderr, "server.addr") {
		t.Errorf("state show beside once: exit %d, want 3 naming pid %d and no daemon: %s", res.Code, cmd.Process.Pid, res.Stderr)
	}
}

// TestProgressBarOnInterrupt: on a terminal, a backfill stopped by SIGINT
// leaves its bar where it stood (never drawn at 100%), and a log line
// never shares the bar's line.
func TestProgressBarOnInterrupt(t *testing.T) {
	start, end := history(8)
	sim := testkit.StartSim(t, formsim.Config{Seed: 44, Forms: 1, Submissions: 3000, Start: start, End: end})
	sim.SetFaults(formsim.Faults{Latency: 30 * time.Millisecond})
	form := sim.FormIDs()[0]
	w := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{LogLevel: "debug", Sync: "  safety_lag: 0s\n  max_rows_per_batch: 300\n  shutdown_grace: 5s\n"})
	master, slave := openPTY(t)
	cmd := exec.Command(syncdBin, "backfill", "--form", form, "--from", start.Format(time.RFC3339), "--to", end.Format(time.RFC3339),
		"--concurrency", "1", "--log-format", "console", "--config", w.Config)
	cmd.Env = append(os.Environ(), "FORMS_API_KEY="+testkit.APIKey)
	var stdout strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, slave
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	term := newSyncBuffer()
	copied := make(chan struct{})
	go func() { _, _ = io.Copy(term, master); close(copied) }()
	if !eventually(30*time.Second, func() bool { return strings.Contains(term.String(), "%") && sim.Stats().PagesServed > 6 }) {
		_ = cmd.Process.Kill()
		t.Fatalf("no progress bar drawn: %q", term.String())
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	master.Close()
	<-copied
	out := term.String()
	if code := cmd.ProcessState.ExitCode(); code != 130 {
		t.Fatalf("exit %d, want 130: %s %q", code, stdout.String(), out)
	}
	if strings.Contains(out, "100%") {
		t.Errorf("an interrupted backfill drew its bar at 100%%: %q", out)
	}
	logLines := 0
	for _, line := range strings.Split(out, "\n") {
		// What a terminal shows of a line is what follows its last \r.
		for _, seg := range strings.Split(line, "\r") {
			isLog := strings.Contains(seg, "DEBUG") || strings.Contains(seg, "INFO") || strings.Contains(seg, "WARN")
			if !isLog {
				continue
			}
			logLines++
			if strings.Contains(seg, "backfill "+form) && strings.Index(seg, "backfill "+form) < strings.Index(seg, "\x1b[") {
				t.Errorf("a log line was written over the progress bar: %q", seg)
			}
		}
	}
	if logLines == 0 {
		t.Fatalf("no log line written while the bar was drawn: nothing checked: %q", out)
	}
}

// openPTY opens a pseudo-terminal: what the process writes to slave, the
// test reads from master.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return m, s
}

// TestResetFromNeverWritesTwice: `state reset --from` over batches the
// output holds (month partitions) is refused, naming the way out, and the
// backfill after it writes every submission once; --keep-output is the
// operator's explicit choice of duplicates.
func TestResetFromNeverWritesTwice(t *testing.T) {
	start, end := history(90)
	sim := testkit.StartSim(t, formsim.Config{Seed: 45, Forms: 1, Submissions: 3000, Start: start, End: end})
	form := sim.FormIDs()[0]
	out := filepath.Join(t.TempDir(), "out")
	w := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{
		Sync: "  safety_lag: 0s\n  max_rows_per_batch: 500\n",
		Sink: "sink:\n  type: parquet\n  parquet:\n    path: " + out + "\n    partition: month\n"})
	w.Out = out
	ctx := context.Background()
	if res := testkit.Run(ctx, syncdBin, w, "once"); res.Code != 0 {
		t.Fatalf("once: exit %d: %s", res.Code, res.Stdout)
	}
	before := testkit.Covered(t, w.State, form)
	from := start.AddDate(0, 0, 45).Format("2006-01-02")
	res := testkit.Run(ctx, syncdBin, w, "state", "reset", form, "--from", from, "--yes")
	if res.Code != 2 || !strings.Contains(res.Stderr, "second time") || !strings.Contains(res.Stderr, "--keep-output") {
		t.Errorf("state reset --from %s over batches in the output: exit %d, want 2 saying why: %s %s", from, res.Code, res.Stdout, res.Stderr)
	}
	if after := testkit.Covered(t, w.State, form); after.End() != before.End() || len(after) != len(before) {
		t.Errorf("a refused reset changed the committed windows: %v, were %v", after, before)
	}
	if res := testkit.Run(ctx, syncdBin, w, "backfill", "--form", form, "--from", start.Format(time.RFC3339)); res.Code != 0 {
		t.Fatalf("backfill: exit %d: %s %s", res.Code, res.Stdout, tail(res.Stderr))
	}
	got := testkit.OpenDuck(t).IDCounts(t, w.Out, defaultTable(form))
	testkit.CheckExactlyOnce(t, got, testkit.ExpectedIn(sim, form, testkit.Covered(t, w.State, form)))

	if res := testkit.Run(ctx, syncdBin, w, "state", "reset", form, "--from", from, "--yes", "--keep-output"); res.Code != 0 {
		t.Errorf("state reset --from --keep-output: exit %d: %s", res.Code, res.Stderr)
	}
}

// TestNoConfigIsSaid: without --config, SYNCD_CONFIG or ./syncd.yaml, a
// pass is refused (exit 2, nothing created) and a reading command says it
// uses the built-in defaults; a ./syncd.yaml is used, and said so.
func TestNoConfigIsSaid(t *testing.T) {
	start, end := history(2)
	sim := testkit.StartSim(t, formsim.Config{Seed: 46, Forms: 1, Submissions: 50, Start: start, End: end})
	w := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{})
	dir := t.TempDir()
	run := func(args ...string) (int, string, string) {
		cmd := exec.Command(syncdBin, args...)
		cmd.Dir = dir
		for _, e := range os.Environ() {
			if !strings.HasPrefix(e, "SYNCD_CONFIG=") {
				cmd.Env = append(cmd.Env, e)
			}
		}
		cmd.Env = append(cmd.Env, "FORMS_API_KEY="+testkit.APIKey)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		_ = cmd.Run()
		return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
	}
	for _, args := range [][]string{{"once"}, {"backfill", "--from", "2024-01-01"}, {"state", "reset", "x", "--yes"}} {
		started := time.Now()
		code, _, stderr := run(args...)
		if code != 2 || !strings.Contains(stderr, "no configuration file") || !strings.Contains(stderr, "--config") {
			t.Errorf("%v without a config: exit %d, want 2 saying so: %s", args, code, stderr)
		}
		if d := time.Since(started); d > 5*time.Second {
			t.Errorf("%v without a config took %v to be refused", args, d)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("refused commands created %v", entries)
	}
	if code, _, stderr := run("config"); code != 0 || !strings.Contains(stderr, "built-in defaults") {
		t.Errorf("config without a config file: exit %d, want 0 saying it shows the built-in defaults: %s", code, stderr)
	}
	raw, err := os.ReadFile(w.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "syncd.yaml"), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, stdout, stderr := run("once"); code != 0 || !strings.Contains(stderr, "using ./syncd.yaml") {
		t.Errorf("once beside a ./syncd.yaml: exit %d: %s %s", code, stdout, tail(stderr))
	}
}

// TestArgumentsNewcomersTry: the form as an argument or as --form alike,
// "did you mean" for a mistyped command or flag, backfill --dry-run over
// every form, validate -o json and its closest form id, and state show
// --account.
func TestArgumentsNewcomersTry(t *testing.T) {
	start, end := history(3)
	sim := testkit.StartSim(t, formsim.Config{Seed: 47, Forms: 2, Submissions: 60, Start: start, End: end})
	form, other := sim.FormIDs()[0], sim.FormIDs()[1]
	typo := form[:len(form)-1] + "Q"
	ctx := context.Background()
	w := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{})
	if res := testkit.Run(ctx, syncdBin, w, "once"); res.Code != 0 {
		t.Fatalf("once: exit %d: %s %s", res.Code, res.Stdout, res.Stderr)
	}
	from := start.Format(time.RFC3339)
	cases := []struct {
		name   string
		args   []string
		code   int
		stdout string // what stdout must hold
		stderr string // what stderr must hold
	}{
		{"once FORM", []string{"once", form}, 0, "ok   " + form, ""},
		{"mistyped command", []string{"onec"}, 2, "", "did you mean once?"},
		{"mistyped subcommand", []string{"state", "shwo"}, 2, "", "did you mean show?"},
		{"mistyped flag", []string{"once", "--dryrun"}, 2, "", "did you mean --dry-run?"},
		{"mistyped global flag", []string{"once", "--conifg", "x.yaml"}, 2, "", "did you mean --config?"},
		{"backfill FORM", []string{"backfill", form, "--from", from}, 0, form, ""},
		{"reconcile FORM", []string{"reconcile", form}, 0, form, ""},
		{"state show --form", []string{"state", "show", "--form", form}, 0, "form " + form, ""},
		{"schema --form", []string{"schema", "--form", form}, 0, "form " + form, ""},
		{"state reset --form typo", []string{"state", "reset", "--form", typo, "--yes"}, 2, "", "closest: " + form},
		{"two forms", []string{"backfill", other, "--form", form, "--from", from}, 2, "", "two forms"},
		{"backfill --dry-run of every form", []string{"backfill", "--dry-run", "--from", from}, 0, other, ""},
		{"refresh FORM", []string{"refresh", other, "--yes"}, 0, other, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := testkit.Run(ctx, syncdBin, w, tc.args...)
			if res.Code != tc.code || !strings.Contains(res.Stdout, tc.stdout) || !strings.Contains(res.Stderr, tc.stderr) {
				t.Errorf("%v: exit %d, want %d with %q on stdout and %q on stderr:\nstdout %s\nstderr %s", tc.args, res.Code, tc.code, tc.stdout, tc.stderr, res.Stdout, tail(res.Stderr))
			}
		})
	}
	if v := showState(t, w, "--form", form); len(v.Forms) != 1 || v.Forms[0].FormID != form {
		t.Errorf("state show --form %s -o json lists %+v", form, v.Forms)
	}

	// validate: -o json, and the closest id of a mistyped form.
	typoed := withForms(t, w, "forms:\n  - id: "+form+"\n  - id: "+typo+"\n")
	res := testkit.Run(ctx, syncdBin, typoed, "validate")
	if res.Code != 1 || !strings.Contains(res.Stdout, "FAIL form "+typo) || !strings.Contains(res.Stdout, "closest: "+form) {
		t.Errorf("validate with a mistyped form: exit %d, want 1 naming %s: %s", res.Code, form, res.Stdout)
	}
	res = testkit.Run(ctx, syncdBin, typoed, "validate", "-o", "json")
	var checks []struct {
		Status, Check, Message string
	}
	if err := json.Unmarshal([]byte(res.Stdout), &checks); err != nil || res.Code != 1 {
		t.Fatalf("validate -o json: exit %d, %v: %s %s", res.Code, err, res.Stdout, res.Stderr)
	}
	failed := 0
	for _, c := range checks {
		if c.Status == "fail" {
			failed++
			if c.Check != "form "+typo || !strings.Contains(c.Message, form) {
				t.Errorf("validate -o json: unexpected failure %+v", c)
			}
		}
	}
	if failed != 1 || len(checks) < 5 {
		t.Errorf("validate -o json: %d failed of %+v, want the one form", failed, checks)
	}

	// state show --account keeps that account's streams.
	dir := t.TempDir()
	multi := &testkit.Workdir{Dir: dir, Config: filepath.Join(dir, "syncd.yaml"), Out: filepath.Join(dir, "out"), State: filepath.Join(dir, "state", "syncd.db")}
	cfg := fmt.Sprintf("source:\n  base_url: %s\n  rate_limit: 200\nsync:\n  safety_lag: 0s\naccounts:\n  - name: acme\n    api_key: ${FORMS_API_KEY}\n  - name: globex\n    api_key: ${FORMS_API_KEY}\n"+
		"sink:\n  type: parquet\n  parquet:\n    path: %s\nstate:\n  path: %s\nlog:\n  format: json\n", sim.BaseURL, multi.Out, multi.State)
	if err := os.WriteFile(multi.Config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if res := testkit.Run(ctx, syncdBin, multi, "once"); res.Code != 0 {
		t.Fatalf("once of two accounts: exit %d: %s %s", res.Code, res.Stdout, tail(res.Stderr))
	}
	v := showState(t, multi, "--account", "acme")
	if len(v.Forms) != 2 {
		t.Errorf("state show --account acme lists %d streams, want its 2", len(v.Forms))
	}
	for _, f := range v.Forms {
		if !strings.HasPrefix(f.FormID, "acme/") {
			t.Errorf("state show --account acme lists %s", f.FormID)
		}
	}
}

// TestFreshToAfterAPartialBackfill: a backfill of a later range alone
// leaves fresh_to null (the history from the form's start is not in the
// output), and state show says it is not complete; once sets it.
func TestFreshToAfterAPartialBackfill(t *testing.T) {
	start, end := history(6)
	sim := testkit.StartSim(t, formsim.Config{Seed: 48, Forms: 1, Submissions: 120, Start: start, End: end})
	form := sim.FormIDs()[0]
	w := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{})
	ctx := context.Background()
	mid := start.AddDate(0, 0, 3).Format(time.RFC3339)
	if res := testkit.Run(ctx, syncdBin, w, "backfill", "--form", form, "--from", mid); res.Code != 0 {
		t.Fatalf("backfill: exit %d: %s %s", res.Code, res.Stdout, tail(res.Stderr))
	}
	if v := showState(t, w); len(v.Forms) != 1 || v.Forms[0].FreshTo != nil {
		t.Errorf("after a backfill from %s alone, fresh_to is %v, want null: the history before it was never synced", mid, v.Forms[0].FreshTo)
	}
	if res := testkit.Run(ctx, syncdBin, w, "state", "show"); !strings.Contains(res.Stdout, "not complete") || strings.Contains(res.Stdout, "fresh to") {
		t.Errorf("state show after a partial backfill: %s", res.Stdout)
	}
	if res := testkit.Run(ctx, syncdBin, w, "once"); res.Code != 0 {
		t.Fatalf("once: exit %d: %s", res.Code, res.Stdout)
	}
	if v := showState(t, w); len(v.Forms) != 1 || v.Forms[0].FreshTo == nil {
		t.Errorf("after once, fresh_to is null")
	}
}
