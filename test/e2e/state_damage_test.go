package e2e

import (
	"context"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/testkit"
)

// TestStateByteFlips damages a real state file (made by `syncd once`
// against the simulator) one byte at a time, at many offsets spread over
// every page, and runs `syncd once` on each copy beside a copy of the
// output. Every run must either succeed with the output exactly once (the
// damage hit bytes nothing reads, or a header page bbolt has a spare of) or
// fail with the damage error that names the remedy, and then have written
// nothing: no run may re-sync a form silently (duplicates) or skip one.
func TestStateByteFlips(t *testing.T) {
	seed := testkit.Seed(t, "SYNCD_FLIP_SEED")
	rng := rand.New(rand.NewPCG(seed, 17))
	start, end := history(4)
	sim := testkit.StartSim(t, formsim.Config{Seed: 23, Forms: 3, Submissions: 300, Start: start, End: end})
	w := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{Sync: "  safety_lag: 0s\n  max_rows_per_batch: 60\n", LogLevel: "warn"})
	ctx := context.Background()
	if res := testkit.Run(ctx, syncdBin, w, "once"); res.Code != 0 {
		t.Fatalf("once exited %d: %s", res.Code, tail(res.Stderr))
	}
	pristine, err := os.ReadFile(w.State)
	if err != nil {
		t.Fatal(err)
	}
	outCopy := t.TempDir()
	copyTree(t, w.Out, outCopy)
	want := map[string][]string{}
	for _, id := range sim.FormIDs() {
		want[id] = testkit.ExpectedIn(sim, id, testkit.Covered(t, w.State, id))
	}
	files := treeFiles(t, outCopy)
	const page = 4096
	pages := len(pristine) / page
	// Offsets: each page's header (id, flags, count, overflow) and a few
	// random bytes of its body; the two header pages get more.
	var offsets []int
	for p := range pages {
		for _, o := range []int{0, 10, 12} {
			offsets = append(offsets, p*page+o)
		}
		n := 1
		if p < 2 {
			n = 10 // magic, version, page size, root, freelist, txid, checksum
		}
		for range n {
			offsets = append(offsets, p*page+16+rng.IntN(page-16))
		}
	}
	t.Logf("state file of %d bytes (%d pages): %d flips", len(pristine), pages, len(offsets))
	duck := testkit.OpenDuck(t)
	succeeded, refused := 0, 0
	shown := map[int]bool{} // one example of each exit code in the log
	for _, off := range offsets {
		damaged := slices.Clone(pristine)
		damaged[off] ^= byte(1 + rng.IntN(255))
		if err := os.WriteFile(w.State, damaged, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.RemoveAll(w.Out); err != nil {
			t.Fatal(err)
		}
		copyTree(t, outCopy, w.Out)
		res := testkit.Run(ctx, syncdBin, w, "once")
		if res.Code == 0 {
			succeeded++
			for _, id := range sim.FormIDs() {
				got := duck.IDCounts(t, w.Out, poller.DefaultTable(id))
				testkit.CheckExactlyOnce(t, got, want[id])
			}
		} else {
			refused++
			if !shown[res.Code] {
				shown[res.Code] = true
				t.Logf("offset %d: exit %d: %s", off, res.Code, lastLine(res.Stderr))
			}
			if !strings.Contains(res.Stderr, "restore it from a backup") && !strings.Contains(res.Stdout, "restore it from a backup") {
				t.Errorf("offset %d: once exited %d without the damage error:\nstdout: %s\nstderr: %s", off, res.Code, res.Stdout, tail(res.Stderr))
			}
			if after := treeFiles(t, w.Out); !slices.Equal(after, files) {
				t.Errorf("offset %d: a run refused for damage changed the output: %d files before, %d after", off, len(files), len(after))
			}
		}
		if t.Failed() {
			t.Fatalf("offset %d (page %d, byte %d) broke the guarantee; rerun with SYNCD_FLIP_SEED=%d", off, off/page, off%page, seed)
		}
	}
	t.Logf("%d flips: %d runs succeeded with exact output, %d refused with the damage error", len(offsets), succeeded, refused)
	if refused == 0 {
		t.Error("no flip was detected: the test damaged nothing that is read")
	}
}

// treeFiles lists the files under dir with their sizes.
func treeFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, rel+":"+strconv.FormatInt(info.Size(), 10))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// copyTree copies the files under src into dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, raw, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// TestStateBackupRestore: `state backup` copies the state while the daemon
// runs and keeps the newest N; `state restore` is refused while the daemon
// holds the state, and after it stopped brings a damaged state back, from
// which `once` finishes with the output exactly once.
func TestStateBackupRestore(t *testing.T) {
	start, end := history(4)
	sim := testkit.StartSim(t, formsim.Config{Seed: 29, Forms: 2, Submissions: 300, Start: start, End: end})
	addr := testkit.FreeAddr(t)
	w := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{
		Sync:  "  safety_lag: 0s\n  max_rows_per_batch: 80\n  schedule: \"@every 1h\"\n  jitter: 0s\n",
		Extra: "server:\n  addr: " + addr + "\n",
	})
	ctx := context.Background()
	if res := testkit.Run(ctx, syncdBin, w, "once"); res.Code != 0 {
		t.Fatalf("once exited %d: %s", res.Code, tail(res.Stderr))
	}
	cmd, _, stderr, err := testkit.Start(syncdBin, w, "run")
	if err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	if !eventually(20*time.Second, func() bool { return status(addr, "/healthz") == 200 }) {
		t.Fatalf("daemon never served /healthz: %s", tail(stderr.String()))
	}
	backups := filepath.Join(t.TempDir(), "backups") + "/"
	for i := 0; i < 3; i++ {
		if i > 0 {
			time.Sleep(1100 * time.Millisecond) // backups are named by the second
		}
		res := testkit.Run(ctx, syncdBin, w, "state", "backup", backups, "--keep", "2")
		if res.Code != 0 || !strings.Contains(res.Stdout, "backed up state") {
			t.Fatalf("backup %d beside the daemon exited %d: %s%s", i, res.Code, res.Stdout, tail(res.Stderr))
		}
	}
	entries, err := os.ReadDir(backups)
	if err != nil || len(entries) != 2 {
		t.Fatalf("--keep 2 left %d backups (%v)", len(entries), err)
	}
	newest := filepath.Join(backups, entries[1].Name())
	if res := testkit.Run(ctx, syncdBin, w, "state", "restore", newest); res.Code != 3 || !strings.Contains(res.Stderr, "in use") {
		t.Fatalf("restore beside the daemon exited %d: %s%s", res.Code, res.Stdout, tail(res.Stderr))
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("daemon did not stop cleanly: %v: %s", err, tail(stderr.String()))
	}
	// The disk damages the state file.
	if err := os.WriteFile(w.State, []byte(strings.Repeat("bad sector ", 2000)), 0o600); err != nil {
		t.Fatal(err)
	}
	if res := testkit.Run(ctx, syncdBin, w, "once"); res.Code != 3 || !strings.Contains(res.Stderr, "restore it from a backup") {
		t.Fatalf("once on the damaged state exited %d: %s", res.Code, tail(res.Stderr))
	}
	if res := testkit.Run(ctx, syncdBin, w, "state", "restore", newest); res.Code != 0 || !strings.Contains(res.Stdout, "restored state file") {
		t.Fatalf("restore exited %d: %s%s", res.Code, res.Stdout, tail(res.Stderr))
	}
	if res := testkit.Run(ctx, syncdBin, w, "once"); res.Code != 0 {
		t.Fatalf("once after the restore exited %d: %s", res.Code, tail(res.Stderr))
	}
	checkOutput(t, sim, w, end)
}
