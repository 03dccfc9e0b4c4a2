package parquetsink

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestProbeLeavesADaemonsTemporaryFiles: a sink opened to be probed
// (validate, beside a running daemon) keeps the temporary files in the
// folder, which a daemon may be writing, and its probe leaves nothing
// behind; a sink opened to write removes them as a crashed writer's.
func TestProbeLeavesADaemonsTemporaryFiles(t *testing.T) {
	root := t.TempDir()
	tmp := filepath.Join(root, "t", "submission_date=2024-05-01", ".b1"+tmpMarker+"123")
	if err := os.MkdirAll(filepath.Dir(tmp), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tmp, []byte("being written"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := New(Options{Root: root, KeepTemp: true})
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Probe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p.Checked, "probe file") {
		t.Errorf("probe says %q, want what it checked", p.Checked)
	}
	if _, err := os.Stat(tmp); err != nil {
		t.Fatalf("the probing sink removed a daemon's temporary file: %v", err)
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".syncd-probe-") {
			t.Errorf("the probe left %s", e.Name())
		}
	}
	if _, err := New(Options{Root: root}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Errorf("a writing sink kept a stale temporary file: %v", err)
	}
}
