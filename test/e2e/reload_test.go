package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/testkit"
)

// syncBuffer is a strings.Builder safe to read while a process writes it.
type syncBuffer struct {
	mu chan struct{}
	b  strings.Builder
}

func newSyncBuffer() *syncBuffer { return &syncBuffer{mu: make(chan struct{}, 1)} }

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu <- struct{}{}
	defer func() { <-s.mu }()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu <- struct{}{}
	defer func() { <-s.mu }()
	return s.b.String()
}

// TestRunReloadsAccounts: `syncd run` adds an account on SIGHUP, removes
// one when its mounted config file changes, and refuses a reload that
// changes a setting outside the accounts; a removed account's output and
// state stay, and it is no longer synced.
func TestRunReloadsAccounts(t *testing.T) {
	start, end := history(30)
	cfgs := []formsim.Config{
		{APIKey: "sk_reload_a_0000000001", Seed: 81, Forms: 1, Submissions: 40, Start: start, End: end, RateLimit: formsim.ServiceRateLimit},
		{APIKey: "sk_reload_b_0000000002", Seed: 82, Forms: 1, Submissions: 50, Start: start, End: end, RateLimit: formsim.ServiceRateLimit},
	}
	sim := testkit.StartMultiSim(t, cfgs...)
	dir := t.TempDir()
	w := &testkit.Workdir{Dir: dir, Config: filepath.Join(dir, "syncd.yaml"), Out: filepath.Join(dir, "out"), State: filepath.Join(dir, "state", "syncd.db")}
	addr := testkit.FreeAddr(t)
	write := func(schedule string, names ...string) {
		t.Helper()
		var acc strings.Builder
		for _, n := range names {
			fmt.Fprintf(&acc, "  - {name: %s, api_key: '${KEY_%s}'}\n", n, strings.ToUpper(n))
		}
		raw := fmt.Sprintf("source: {base_url: %s}\nsync: {safety_lag: 0s, schedule: %q, jitter: 0s}\nsink: {parquet: {path: %s}}\nstate: {path: %s}\nserver: {addr: %s}\nlog: {level: info, format: json}\naccounts:\n%s",
			sim.BaseURL, schedule, w.Out, w.State, addr, acc.String())
		// Written aside and renamed, as a ConfigMap update swaps the file.
		tmp := w.Config + ".tmp"
		if err := os.WriteFile(tmp, []byte(raw), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, w.Config); err != nil {
			t.Fatal(err)
		}
	}
	write("@every 1s", "a")
	cmd := exec.Command(syncdBin, "run", "--config", w.Config)
	cmd.Env = append(os.Environ(), "KEY_A="+cfgs[0].APIKey, "KEY_B="+cfgs[1].APIKey)
	cmd.Dir = dir
	stderr := newSyncBuffer()
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()

	duck := testkit.OpenDuck(t)
	formOf := func(i int) string { return sim.Workspace(cfgs[i].APIKey).FormIDs()[0] }
	rows := func(account string, i int) int {
		root := filepath.Join(w.Out, "account="+account)
		if !testkit.HasFiles(root, poller.DefaultTable(formOf(i))) {
			return 0
		}
		n := 0
		for _, c := range duck.IDCounts(t, root, poller.DefaultTable(formOf(i))) {
			n += c
		}
		return n
	}
	synced := func(account string, i int) func() bool {
		return func() bool { return rows(account, i) == len(sim.Workspace(cfgs[i].APIKey).ExpectedIDs(formOf(i))) }
	}
	if !eventually(30*time.Second, synced("a", 0)) {
		t.Fatalf("account a never synced: %s", tail(stderr.String()))
	}

	// SIGHUP adds b.
	write("@every 1s", "a", "b")
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if !eventually(30*time.Second, synced("b", 1)) {
		t.Fatalf("account b, added by SIGHUP, never synced: %s", tail(stderr.String()))
	}

	// A change outside the accounts is refused whole: b stays.
	write("@every 2s", "b")
	_ = cmd.Process.Signal(syscall.SIGHUP)
	if !eventually(15*time.Second, func() bool { return strings.Contains(stderr.String(), "takes a restart") }) {
		t.Fatalf("a reload changing sync.schedule was not refused: %s", tail(stderr.String()))
	}

	// The file changes (no signal): a is removed. New submissions of a are
	// not synced any more, b's are, and a's output stays.
	write("@every 1s", "b")
	if !eventually(30*time.Second, func() bool {
		return strings.Contains(grepOut(stderr.String(), "entry removed"), `"id":"a/`)
	}) {
		t.Fatalf("the changed file was not reloaded: %s", grepOut(stderr.String(), "reload", "entry"))
	}
	before := rows("a", 0)
	for i := range cfgs {
		if _, err := sim.Workspace(cfgs[i].APIKey).Insert(formOf(i), time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if !eventually(30*time.Second, synced("b", 1)) {
		t.Fatalf("account b stopped syncing after a was removed: %s", tail(stderr.String()))
	}
	time.Sleep(2 * time.Second) // two more passes of b's schedule
	if got := rows("a", 0); got != before || before == 0 {
		t.Errorf("the removed account's output holds %d rows, had %d: it must stay, and no longer grow", got, before)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Wait()
	res := testkit.RunEnv(t.Context(), syncdBin, w, []string{"KEY_B=" + cfgs[1].APIKey}, "state", "show", "-o", "json")
	if !strings.Contains(res.Stdout, `"a/`+formOf(0)+`"`) {
		t.Errorf("the removed account's state is gone:\n%s\n%s", res.Stdout, res.Stderr)
	}
}

// grepOut keeps the lines of s that contain one of words.
func grepOut(s string, words ...string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		for _, w := range words {
			if strings.Contains(l, w) {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}
