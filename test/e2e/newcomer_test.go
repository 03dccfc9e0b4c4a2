package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

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
