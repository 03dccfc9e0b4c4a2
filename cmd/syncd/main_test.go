package main

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/gcpolicy"
	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/status"
	"github.com/syncd-dev/syncd/internal/testkit"
	"github.com/syncd-dev/syncd/internal/textfmt"
)

// execute runs the command line in process and returns its exit code.
func execute(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	root, _ := newRoot(&out, &errb)
	root.SetArgs(args)
	err := root.ExecuteContext(t.Context())
	code = exitCode(err, &errb)
	return code, out.String(), errb.String()
}

// TestEveryCommandHasExamples: each runnable command's --help shows 1 to 3
// examples, each a syncd command line (or what to do with its output).
func TestEveryCommandHasExamples(t *testing.T) {
	root, _ := newRoot(&bytes.Buffer{}, &bytes.Buffer{})
	var walk func(c *cobra.Command)
	seen := 0
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if !c.Runnable() {
			return
		}
		seen++
		lines := strings.Split(strings.TrimRight(c.Example, "\n"), "\n")
		if c.Example == "" || len(lines) > 3 {
			t.Errorf("%q: %d examples, want 1 to 3:\n%s", c.CommandPath(), len(lines), c.Example)
			return
		}
		for _, l := range lines {
			if !strings.HasPrefix(l, "  syncd ") && !strings.HasPrefix(l, "  curl ") {
				t.Errorf("%q: example %q is not a command line indented two spaces", c.CommandPath(), l)
			}
		}
	}
	walk(root)
	if seen < 12 {
		t.Errorf("walked %d runnable commands, want every one (at least 12)", seen)
	}
}

func TestBareSyncdIsAUsageError(t *testing.T) {
	code, stdout, stderr := execute(t)
	if code != exitUsage || stdout != "" || !strings.Contains(stderr, "Available Commands:") || !strings.Contains(stderr, "no command given") {
		t.Errorf("bare syncd: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// TestConfigCommand: every key, the environment expanded, the API key
// never shown.
func TestConfigCommand(t *testing.T) {
	t.Setenv("FORMS_API_KEY", testkit.APIKey)
	t.Setenv("SYNCD_TEST_OUT", "/srv/lake")
	path := filepath.Join(t.TempDir(), "syncd.yaml")
	if err := os.WriteFile(path, []byte("source:\n  api_key: ${FORMS_API_KEY}\nsink:\n  parquet:\n    path: ${SYNCD_TEST_OUT}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"yaml", "json"} {
		code, stdout, stderr := execute(t, "config", "--config", path, "-o", format)
		if code != 0 {
			t.Fatalf("config -o %s: exit %d %s", format, code, stderr)
		}
		if strings.Contains(stdout+stderr, testkit.APIKey) {
			t.Errorf("config -o %s shows the API key", format)
		}
		for _, want := range []string{"***", "/srv/lake", "shutdown_grace", "lease_ttl", "unready_after", "table_prefix"} {
			if !strings.Contains(stdout, want) {
				t.Errorf("config -o %s lacks %q:\n%s", format, want, stdout)
			}
		}
		if format == "json" {
			var m struct {
				Source map[string]any `json:"source"`
				Sync   map[string]any `json:"sync"`
				Forms  []any          `json:"forms"`
			}
			if err := json.Unmarshal([]byte(stdout), &m); err != nil || m.Source["api_key"] != "***" || m.Sync["safety_lag"] != "2m" || m.Forms == nil {
				t.Errorf("config -o json: %v %v", err, m)
			}
		}
	}
	if code, _, stderr := execute(t, "config", "--config", path, "-o", "xml"); code != exitUsage || !strings.Contains(stderr, "-o xml") {
		t.Errorf("config -o xml: exit %d %s", code, stderr)
	}
}

func TestPlural(t *testing.T) {
	tests := []struct {
		n    int64
		noun string
		want string
	}{
		{0, "form", "0 forms"}, {1, "form", "1 form"}, {2, "form", "2 forms"},
		{1, "batch", "1 batch"}, {3, "batch", "3 batches"}, {1, "request", "1 request"}, {1, "row", "1 row"}, {12, "row", "12 rows"},
	}
	for _, tt := range tests {
		if got := textfmt.Plural(tt.n, tt.noun); got != tt.want {
			t.Errorf("textfmt.Plural(%d, %q) = %q, want %q", tt.n, tt.noun, got, tt.want)
		}
	}
}

// TestCountsUsePlural: no message of cmd/syncd prints a count with a
// fixed plural ("%d forms"), which reads "1 forms".
func TestCountsUsePlural(t *testing.T) {
	fixed := regexp.MustCompile(`%d (form|row|batch|request|window|column|file|submission)`)
	files, _ := filepath.Glob("*.go")
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil && fixed.MatchString(s) {
					t.Errorf("%s: %q prints a count with a fixed plural: use textfmt.Plural()", fset.Position(lit.Pos()), s)
				}
			}
			return true
		})
	}
}

// TestDefaultTable: the table of a form the config does not name is
// form_ + the id folded by schema.SanitizeName, whose rule prefixes a
// name starting with a digit with n_ (README, "Output layout").
func TestDefaultTable(t *testing.T) {
	tests := []struct{ id, want string }{
		{"vLp2aX", "form_vlp2ax"},
		{"abc123", "form_abc123"},
		{"8fKq2m", "form_n_8fkq2m"},
		{"123", "form_n_123"},
		{"my-form.v2", "form_my_form_v2"},
		{"__x", "form_x"},
	}
	for _, tt := range tests {
		if got := poller.DefaultTable(tt.id); got != tt.want {
			t.Errorf("DefaultTable(%q) = %q, want %q", tt.id, got, tt.want)
		}
	}
}

// TestDaemonURL: a wildcard listen address is asked on loopback.
func TestDaemonURL(t *testing.T) {
	tests := []struct{ addr, want string }{
		{"127.0.0.1:9464", "http://127.0.0.1:9464/status"},
		{":9464", "http://127.0.0.1:9464/status"},
		{"0.0.0.0:9464", "http://127.0.0.1:9464/status"},
		{"[::]:9464", "http://127.0.0.1:9464/status"},
		{"[::1]:9464", "http://[::1]:9464/status"},
	}
	for _, tt := range tests {
		if got, err := status.DaemonURL(tt.addr, "/status"); err != nil || got != tt.want {
			t.Errorf("status.DaemonURL(%q) = %q, %v; want %q", tt.addr, got, err, tt.want)
		}
	}
	if _, err := status.DaemonURL("9464", "/status"); err == nil {
		t.Error("daemonURL accepted an address without a port")
	}
}

// TestSmallHeapsCollectLess: without GOGC set by hand, a process whose live
// heap is far below gcpolicy.HeapFloor runs with a GOGC well above the 50 that large
// passes get, and never below 50.
func TestSmallHeapsCollectLess(t *testing.T) {
	if v, ok := os.LookupEnv("GOGC"); ok { // what syncd does without it
		os.Unsetenv("GOGC")
		t.Cleanup(func() { os.Setenv("GOGC", v) })
	}
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })
	tuner := gcpolicy.SetMemoryLimit(zap.NewNop())
	if tuner == nil {
		t.Fatal("no GC policy without GOGC")
	}
	defer tuner.Stop()
	runtime.GC() // the policy runs after each collection
	deadline := time.Now().Add(5 * time.Second)
	for tuner.Percent() <= 100 && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if p := tuner.Percent(); p <= 100 {
		t.Fatalf("GOGC with a live heap of a few MB is %d, want above 100 (heap floor %d MiB)", p, gcpolicy.HeapFloor>>20)
	}
	// That the runtime's GOGC is the policy's is gcpolicy's test: other
	// tests here start policies of their own (one per CLI run).
}

func TestGOGCSetByHandWins(t *testing.T) {
	t.Setenv("GOGC", "80")
	if tuner := gcpolicy.SetMemoryLimit(zap.NewNop()); tuner != nil {
		tuner.Stop()
		t.Fatal("a GC policy despite GOGC set by hand")
	}
}

func TestGCThreshold(t *testing.T) {
	tests := []struct {
		softLimit int64
		want      uint64
	}{
		{0, gcpolicy.HeapFloor},             // none
		{math.MaxInt64, gcpolicy.HeapFloor}, // the runtime's "no limit"
		{200 << 20, gcpolicy.HeapFloor},     // a small pod: never below the floor
		{921 << 20, 921 << 20 / 6},          // a 1 GiB pod's 90%: 153.5 MiB
		{8 << 30, 8 << 30 / 6},              // a large one
	}
	for _, tc := range tests {
		if got := gcpolicy.Threshold(tc.softLimit); got != tc.want {
			t.Errorf("gcThreshold(%d) = %d, want %d", tc.softLimit, got, tc.want)
		}
	}
}

// TestStoppedCommandExitsAsStopped: a command that fails after a signal
// arrived was stopped by it, even before any pass began (checking the form
// ids through a long Retry-After): it exits 130 or 143, as a stopped pass
// does, not 1. Other codes stand.
func TestStoppedCommandExitsAsStopped(t *testing.T) {
	tests := []struct {
		signal    os.Signal // nil: none came
		code      int
		wantFinal int
	}{
		{nil, exitFailed, exitFailed},
		{nil, exitOK, exitOK},
		{syscall.SIGTERM, exitFailed, 143},
		{syscall.SIGINT, exitFailed, 130},
		{syscall.SIGTERM, exitOK, exitOK},       // it finished before the signal mattered
		{syscall.SIGTERM, exitUsage, exitUsage}, // an operator's mistake stays one
		{syscall.SIGTERM, 143, 143},
	}
	for _, tt := range tests {
		_, g := newRoot(io.Discard, io.Discard)
		if tt.signal != nil {
			g.Stop(func() {}, tt.signal)
		}
		if got := g.finalCode(tt.code); got != tt.wantFinal {
			t.Errorf("signal %v, code %d: exit %d, want %d", tt.signal, tt.code, got, tt.wantFinal)
		}
	}
}

func TestAgeTextInDays(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{23737*time.Hour + 21*time.Minute, "989d 1h"}, {42 * time.Second, "42s"}, {3*time.Hour + 5*time.Minute + 10*time.Second, "3h5m"}, {30 * time.Hour, "30h"},
	} {
		if got := textfmt.Age(tc.d); got != tc.want {
			t.Errorf("textfmt.Age(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}
