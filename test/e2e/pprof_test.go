package e2e

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/testkit"
)

// TestPprof: `run --pprof ADDR` serves Go profiles on ADDR and nowhere
// else (not on the metrics listener); a non-loopback ADDR is refused
// without --pprof-any-host.
func TestPprof(t *testing.T) {
	start, end := history(2)
	sim := testkit.StartSim(t, formsim.Config{Seed: 5, Forms: 1, Submissions: 50, Start: start, End: end})
	addr, paddr := testkit.FreeAddr(t), testkit.FreeAddr(t)
	w := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{
		Sync:  "  safety_lag: 0s\n  schedule: \"@every 1h\"\n  jitter: 0s\n",
		Extra: "server:\n  addr: " + addr + "\n",
	})
	ctx := context.Background()
	if res := testkit.Run(ctx, syncdBin, w, "once", "--pprof", "0.0.0.0:0"); res.Code != 2 || !strings.Contains(res.Stderr, "--pprof-any-host") {
		t.Fatalf("once --pprof 0.0.0.0:0 exited %d: %s", res.Code, tail(res.Stderr))
	}
	cmd, _, stderr, err := testkit.Start(syncdBin, w, "run", "--pprof", paddr)
	if err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	if !eventually(20*time.Second, func() bool { return status(paddr, "/debug/pprof/") == 200 }) {
		t.Fatalf("no profiles on %s: %s", paddr, tail(stderr.String()))
	}
	if code := status(paddr, "/debug/pprof/goroutine?debug=1"); code != 200 {
		t.Errorf("goroutine profile: %d", code)
	}
	if !eventually(20*time.Second, func() bool { return status(addr, "/healthz") == 200 }) {
		t.Fatalf("daemon never served /healthz: %s", tail(stderr.String()))
	}
	if code := status(addr, "/debug/pprof/"); code == 200 {
		t.Error("the metrics listener serves the profiles too")
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("daemon did not stop cleanly: %v: %s", err, tail(stderr.String()))
	}
}
