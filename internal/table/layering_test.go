package table

import (
	"os/exec"
	"strings"
	"testing"
)

// TestCoreImportsNoSource: the engine, the neutral table, sinks, state,
// metrics, the daemon and the /status contract know streams, never a
// source: none of them imports, even through another package, a source's
// package (internal/source/..., the forms client, the forms mapper, or the
// app that wires the sources). A third source then touches none of them.
func TestCoreImportsNoSource(t *testing.T) {
	core := []string{"./internal/poller", "./internal/table", "./internal/logkey", "./internal/sink/...", "./internal/state/...",
		"./internal/metrics", "./internal/daemon", "./internal/status", "./internal/spool"}
	source := func(pkg string) bool {
		const mod = "github.com/syncd-dev/syncd/internal/"
		rest, ok := strings.CutPrefix(pkg, mod)
		return ok && (strings.HasPrefix(rest, "source/") || rest == "app" || rest == "formsim" || rest == "schedsim")
	}
	// One listing per core package, so a failure names the importer.
	for _, pkg := range core {
		out, err := listIn("../..", pkg)
		if err != nil {
			t.Fatalf("go list %s: %v", pkg, err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			fields := strings.Fields(line)
			for _, dep := range fields[1:] {
				if source(dep) {
					t.Errorf("core package %s imports %s", fields[0], dep)
				}
			}
		}
	}
}

// listIn lists pkg and its dependencies, from the module's top folder dir.
func listIn(dir, pkg string) ([]byte, error) {
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`, pkg)
	cmd.Dir = dir
	return cmd.Output()
}
