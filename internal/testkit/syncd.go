package testkit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/state"
)

// APIKey is the recognisable key every suite uses, so that a test can prove
// it never leaks into output.
const APIKey = "sk_test_SYNCD_SECRET_5f3a9c"

// RepoRoot is the repository's top folder, found from this source file.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// MainWithSyncd is a suite's TestMain: it builds cmd/syncd once into a
// temporary folder, sets *bin to its path, runs the tests and exits with
// their code.
func MainWithSyncd(m *testing.M, bin *string) {
	dir, err := os.MkdirTemp("", "syncd-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if *bin, err = BuildSyncd(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// BuildSyncd compiles cmd/syncd into dir and returns the binary's path.
func BuildSyncd(dir string) (string, error) {
	bin := filepath.Join(dir, "syncd")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/syncd")
	cmd.Dir = RepoRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/syncd: %v\n%s", err, out)
	}
	return bin, nil
}

// Sim is a simulator served over HTTP on loopback.
type Sim struct {
	*formsim.Server
	BaseURL string
}

// StartSim starts a simulator for the test; it stops at cleanup.
func StartSim(t testing.TB, cfg formsim.Config) *Sim {
	t.Helper()
	return StartSimWrapped(t, cfg, nil)
}

// StartSimWrapped serves the simulator behind wrap, which can answer some
// requests itself (a key that stops working, an outage).
func StartSimWrapped(t testing.TB, cfg formsim.Config, wrap func(http.Handler) http.Handler) *Sim {
	t.Helper()
	if cfg.APIKey == "" {
		cfg.APIKey = APIKey
	}
	srv, err := formsim.New(cfg)
	if err != nil {
		t.Fatalf("start simulator: %v", err)
	}
	var h http.Handler = srv
	if wrap != nil {
		h = wrap(srv)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(func() { ts.Close(); srv.Close() })
	return &Sim{Server: srv, BaseURL: ts.URL + formsim.BasePath}
}

// Workdir is one syncd installation: its config, output and state.
type Workdir struct {
	Dir, Config, Out, State string
}

// NewWorkdir writes a config pointing at baseURL; extra is YAML appended
// under the top level (it may add forms: or override sync: keys by writing
// whole sections; see Config below).
func NewWorkdir(t testing.TB, baseURL string, sections Config) *Workdir {
	t.Helper()
	dir := t.TempDir()
	w := &Workdir{Dir: dir, Config: filepath.Join(dir, "syncd.yaml"), Out: filepath.Join(dir, "out"), State: filepath.Join(dir, "state", "syncd.db")}
	if sections.Sync == "" {
		sections.Sync = "  safety_lag: 0s\n"
	}
	if sections.Forms == "" {
		sections.Forms = "forms: []\n"
	}
	if sections.RateLimit == 0 {
		sections.RateLimit = 200
	}
	if sections.Sink == "" {
		sections.Sink = fmt.Sprintf("sink:\n  type: parquet\n  parquet:\n    path: %s\n", w.Out)
		if sections.Partition != "" {
			sections.Sink += "    partition: " + sections.Partition + "\n"
		}
	}
	if sections.State == "" {
		sections.State = fmt.Sprintf("  path: %s\n", w.State)
	}
	yaml := fmt.Sprintf(`source:
  base_url: %s
  api_key: ${FORMS_API_KEY}
  rate_limit: %g
  max_attempts: 8
  timeout: 10s
%ssync:
%s%sstate:
%slog:
  level: %s
  format: json
%s`, baseURL, sections.RateLimit, sections.Forms, sections.Sync, sections.Sink, sections.State, orDefault(sections.LogLevel, "info"), sections.Extra)
	if err := os.WriteFile(w.Config, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return w
}

// Config are the parts of a test's configuration that vary.
type Config struct {
	Forms     string  // a whole "forms:" section; default every form
	Sync      string  // lines under "sync:", indented two spaces
	Sink      string  // a whole "sink:" section; default Parquet files under Out
	Partition string  // sink.parquet.partition of the default sink section; "" leaves the default (auto)
	State     string  // lines under "state:", indented two spaces; default path: State
	RateLimit float64 // source.rate_limit
	LogLevel  string
	Extra     string // whole top-level sections appended at the end, e.g. "server:\n  addr: ...\n"
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// Result is one syncd process's outcome.
type Result struct {
	Code           int
	Stdout, Stderr string
	Killed         bool
}

// Run runs the syncd binary to completion with the test's key in its
// environment.
func Run(ctx context.Context, bin string, w *Workdir, args ...string) Result {
	return RunKilledAfter(ctx, bin, w, 0, args...)
}

// RunEnv runs syncd with extra environment entries, which win over the
// test key.
func RunEnv(ctx context.Context, bin string, w *Workdir, env []string, args ...string) Result {
	return run(ctx, bin, w, 0, env, args)
}

// RunEnvKilledAfter is RunEnv that sends SIGKILL after d (0: never).
func RunEnvKilledAfter(ctx context.Context, bin string, w *Workdir, env []string, d time.Duration, args ...string) Result {
	return run(ctx, bin, w, d, env, args)
}

// Start starts syncd in the background; the caller waits or signals it.
func Start(bin string, w *Workdir, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer, error) {
	return StartEnv(bin, w, nil, args...)
}

// StartEnv is Start with extra environment entries, which win over the
// test key.
func StartEnv(bin string, w *Workdir, env []string, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer, error) {
	cmd := exec.Command(bin, append(args, "--config", w.Config)...)
	cmd.Env = append(append(os.Environ(), "FORMS_API_KEY="+APIKey), env...)
	cmd.Dir = w.Dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	return cmd, &stdout, &stderr, cmd.Start()
}

// FreeAddr returns a loopback address with a port free right now.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// RunKilledAfter runs syncd and sends it SIGKILL after d (0: never).
func RunKilledAfter(ctx context.Context, bin string, w *Workdir, d time.Duration, args ...string) Result {
	return run(ctx, bin, w, d, nil, args)
}

// RunIn runs syncd to completion from the working directory dir instead of
// the workdir's own folder.
func RunIn(ctx context.Context, bin string, w *Workdir, dir string, args ...string) Result {
	return runIn(ctx, bin, w, dir, 0, nil, args)
}

func run(ctx context.Context, bin string, w *Workdir, d time.Duration, env []string, args []string) Result {
	return runIn(ctx, bin, w, w.Dir, d, env, args)
}

func runIn(ctx context.Context, bin string, w *Workdir, dir string, d time.Duration, env []string, args []string) Result {
	cmd := exec.CommandContext(ctx, bin, append(args, "--config", w.Config)...)
	cmd.Env = append(append(os.Environ(), "FORMS_API_KEY="+APIKey), env...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		return Result{Code: -1, Stderr: err.Error()}
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	killed := false
	if d > 0 {
		select {
		case err = <-done:
		case <-time.After(d):
			_ = cmd.Process.Kill()
			killed = true
			err = <-done
		}
	} else {
		err = <-done
	}
	res := Result{Stdout: stdout.String(), Stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		res.Code = ee.ExitCode()
		if ee.ExitCode() == -1 {
			res.Killed = killed
		}
	default:
		res.Code = -1
	}
	if killed && res.Code != 0 {
		res.Killed = true
	}
	return res
}

// Covered returns the committed windows of a form from a state file that no
// process holds.
func Covered(t testing.TB, statePath, formID string) state.Intervals {
	t.Helper()
	ctx := context.Background()
	st, err := state.OpenBolt(ctx, state.BoltOptions{Path: statePath, ReadOnly: true})
	if err != nil {
		t.Fatalf("open state %s: %v", statePath, err)
	}
	defer st.Close()
	fs, err := st.Get(ctx, formID)
	if err != nil {
		t.Fatal(err)
	}
	if len(fs.Intents) > 0 {
		t.Errorf("form %s: %d intents still open after a finished run", formID, len(fs.Intents))
	}
	return fs.Committed
}

// ExpectedIn returns the simulator's current submission ids of a form inside
// the committed windows: exactly what the output must hold.
func ExpectedIn(sim *Sim, formID string, covered state.Intervals) []string {
	var ids []string
	for _, iv := range covered {
		ids = append(ids, sim.ExpectedIDsBetween(formID, iv.Start, iv.End)...)
	}
	return ids
}
