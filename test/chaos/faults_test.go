package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/testkit"
)

// Sink and state faults, by the name the table shows.
const (
	faultDiskFull       = "disk_full"       // the output folder's file system has no space left
	faultReadOnly       = "read_only"       // the output folder's file system is read-only
	faultStateTruncated = "state_truncated" // the state file cut short
	faultStateCorrupted = "state_corrupted" // a page of the state file overwritten with garbage
)

// tmpfsSize bounds the output file system of a disk-full or read-only round.
const tmpfsSize = "64m"

type tmpfs struct{ dir string }

func mountCmd(args ...string) error {
	out, err := exec.Command("mount", args...).CombinedOutput()
	if err != nil {
		return errors.New(strings.TrimSpace(string(out)) + ": " + err.Error())
	}
	return nil
}

// canMount reports whether this process can mount a tmpfs (root in CI).
func canMount(t *testing.T) bool {
	if os.Geteuid() != 0 {
		return false
	}
	if _, err := exec.LookPath("mount"); err != nil {
		return false
	}
	dir := t.TempDir()
	if err := mountCmd("-t", "tmpfs", "-o", "size=1m", "tmpfs", dir); err != nil {
		t.Logf("mount a tmpfs: %v", err)
		return false
	}
	_ = syscall.Unmount(dir, syscall.MNT_DETACH)
	return true
}

// mountTmpfs mounts a small tmpfs at dir for the test; it is unmounted
// before the test's temporary folders are removed.
func mountTmpfs(t *testing.T, dir string) *tmpfs {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := mountCmd("-t", "tmpfs", "-o", "size="+tmpfsSize, "tmpfs", dir); err != nil {
		t.Fatalf("mount a tmpfs at %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return &tmpfs{dir: dir}
}

// fill writes a file until the file system is full and returns its path.
func (m *tmpfs) fill(t *testing.T) string {
	t.Helper()
	p := filepath.Join(m.dir, "filler")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for i := 0; i < 1<<12; i++ { // bounded: 4 GiB, far above tmpfsSize
		if _, err := f.Write(buf); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				break
			}
			t.Fatalf("fill %s: %v", p, err)
		}
	}
	// The last page-sized scraps too, so that nothing fits.
	for _, n := range []int{64 << 10, 4 << 10, 512, 1} {
		for i := 0; i < 1<<10; i++ {
			if _, err := f.Write(buf[:n]); err != nil {
				break
			}
		}
	}
	return p
}

func (m *tmpfs) remount(t *testing.T, mode string) {
	t.Helper()
	if err := mountCmd("-o", "remount,"+mode, m.dir); err != nil {
		t.Fatalf("remount %s %s: %v", m.dir, mode, err)
	}
}

// inject applies the round's fault between runs, runs syncd once
// uninterrupted against it, checks the refusal, and removes the fault.
func (r *roundRun) inject(tl *tally, w *testkit.Workdir, out *tmpfs, exec func(time.Duration) testkit.Result) {
	t := r.t
	tl.faults[r.fault]++
	var res testkit.Result
	var wantCode int
	var wantText []string
	switch r.fault {
	case faultDiskFull:
		filler := out.fill(t)
		res = exec(0)
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
		wantCode, wantText = 1, []string{"no space left on device", "free space"}
	case faultReadOnly:
		out.remount(t, "ro")
		res = exec(0)
		out.remount(t, "rw")
		wantCode, wantText = 1, []string{"read-only file system", "write access"}
	case faultStateTruncated, faultStateCorrupted:
		// The state file must exist first: killed runs may have died
		// before making it.
		for i := 0; i < 20; i++ {
			if _, err := os.Stat(w.State); err == nil {
				break
			}
			if full := r.full[r.mode]; full > 0 {
				exec(full/2 + time.Duration(r.rng.Int64N(int64(full/2)+1)))
			} else {
				exec(0)
			}
		}
		orig, err := os.ReadFile(w.State)
		if err != nil {
			t.Fatalf("round %d: no state file to damage: %v", r.round, err)
		}
		damaged, where, off := damage(r, orig)
		t.Logf("round %d: %s: %s of %d bytes", r.round, r.fault, where, len(orig))
		if err := os.WriteFile(w.State, damaged, 0o600); err != nil {
			t.Fatal(err)
		}
		res = exec(0)
		// A damaged page refuses the file (exit 3); a page whose damage
		// only hits one form's record stops that form (exit 1), saying so.
		formOnly := res.Code == 1 && strings.Contains(res.Stdout+res.Stderr, "is damaged")
		if res.Code == 3 || formOnly {
			r.restoreBackup(w, orig)
		}
		if res.Code == 0 && off >= 0 {
			// The run read no damaged page. A page it did not rewrite
			// still holds the garbage, and a later run may read it (a
			// reconcile reads version-index chunks a pass does not), which
			// would fail a later round for this round's fault. The round
			// judges this run, so such a page gets its bytes back, as a
			// restore from a backup would give them.
			if undone := undoLatentDamage(t, w.State, orig, damaged, off); undone {
				t.Logf("round %d: %s: the damaged page was not read and is left as it was: restored", r.round, r.fault)
			}
		}
		wantCode, wantText = 3, []string{w.State, "corrupt", "restore it from a backup"}
		if formOnly {
			wantCode, wantText = 1, []string{w.State, "is damaged", "restore it from a backup", "syncd state reset"}
		}
	default:
		t.Fatalf("unknown fault %q", r.fault)
	}
	text := res.Stdout + res.Stderr
	switch {
	case res.Code == wantCode && containsAll(text, wantText):
		tl.detected[r.fault]++
	case res.Code == 0:
		// Nothing to refuse: the damage missed every page in use, or the
		// sink had nothing left to write. The final check still decides.
		t.Logf("round %d: %s: syncd finished regardless (exit 0)", r.round, r.fault)
	default:
		t.Errorf("round %d: %s: exit %d, want %d with %q\nstdout: %s\nstderr: %s", r.round, r.fault, res.Code, wantCode, wantText, res.Stdout, tail(res.Stderr))
	}
}

// restoreBackup is the documented recovery from a damaged state: `syncd
// state restore` of a backup (the state before the damage), which adopts
// what the output holds. Copying the file back would not: the forms a
// form-only refusal let commit would lose their commits and write their
// rows again.
func (r *roundRun) restoreBackup(w *testkit.Workdir, backup []byte) {
	t := r.t
	path := filepath.Join(w.Dir, "backup.db")
	if err := os.WriteFile(path, backup, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res := testkit.Run(ctx, syncdBin, w, "state", "restore", path)
	r.logs = append(r.logs, fmt.Sprintf("=== state restore %s: code %d\n%s\n%s", path, res.Code, res.Stdout, res.Stderr))
	if res.Code != 0 {
		t.Fatalf("round %d: syncd state restore %s: exit %d\nstdout: %s\nstderr: %s", r.round, path, res.Code, res.Stdout, tail(res.Stderr))
	}
}

// statePage is a bbolt page, the unit damage overwrites.
const statePage = 4096

// damage returns a damaged copy of a state file: cut short at a random
// length (off -1), or the 4 KiB page (a bbolt page) in use at off
// overwritten with garbage.
func damage(r *roundRun, orig []byte) (damaged []byte, where string, off int) {
	if r.fault == faultStateTruncated {
		n := r.rng.IntN(len(orig))
		return bytes.Clone(orig[:n]), fmt.Sprintf("cut to %d bytes", n), -1
	}
	b := bytes.Clone(orig)
	const page = statePage
	// A page in use: free pages are mostly zeros, and garbage there harms
	// nothing (the run would pass, proving little).
	var used []int
	for off := 0; off < len(b); off += page {
		if bytes.ContainsFunc(b[off:min(off+page, len(b))], func(r rune) bool { return r != 0 }) {
			used = append(used, off)
		}
	}
	if len(used) > 0 {
		off = used[r.rng.IntN(len(used))]
	}
	for i := off; i < min(off+page, len(b)); i++ {
		b[i] = byte(r.rng.UintN(256))
	}
	return b, fmt.Sprintf("page %d (of %d in use) overwritten", off/page, len(used)), off
}

// undoLatentDamage puts orig's bytes back into the page at off of the
// state file at path when that page still holds damaged's garbage: bbolt
// writes pages anew rather than in place, so such a page was neither
// rewritten nor reused since the damage. It reports whether it did.
func undoLatentDamage(t *testing.T, path string, orig, damaged []byte, off int) bool {
	t.Helper()
	cur, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read the state file back: %v", err)
	}
	end := min(off+statePage, len(damaged), len(orig))
	if len(cur) < end || !bytes.Equal(cur[off:end], damaged[off:end]) {
		return false
	}
	copy(cur[off:end], orig[off:end])
	if err := os.WriteFile(path, cur, 0o600); err != nil {
		t.Fatalf("restore the damaged page: %v", err)
	}
	return true
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// checkTypes asserts the table's types are intact: the fixed columns have
// their documented types, and every column has one type in every file.
func checkTypes(t *testing.T, duck *testkit.Duck, root, table string) {
	t.Helper()
	if !testkit.HasFiles(root, table) {
		return
	}
	cols := duck.Columns(t, root, table)
	for name, want := range map[string]string{
		"form_id": "VARCHAR", "submission_id": "VARCHAR", "submission_time": "TIMESTAMP WITH TIME ZONE",
		"last_updated_at": "TIMESTAMP WITH TIME ZONE", "_batch_id": "VARCHAR", "_synced_at": "TIMESTAMP WITH TIME ZONE",
	} {
		if cols[name] != want {
			t.Errorf("table %s: column %s is %q, want %s", table, name, cols[name], want)
		}
	}
	// Per file: a column's type never changes (a changed question gets a
	// variant column instead).
	seen := map[string]string{}
	first := map[string]string{} // column -> the file that gave it its type
	var clashes [][4]string      // column, its type, another type, the file with that one
	files := testkit.Files(root, table)
	for _, f := range files {
		rows, err := duck.DB.Query("DESCRIBE SELECT * FROM read_parquet('" + strings.ReplaceAll(f, "'", "''") + "')")
		if err != nil {
			t.Fatalf("describe %s: %v", f, err)
		}
		n, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(n))
			ptrs := make([]any, len(n))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				rows.Close()
				t.Fatal(err)
			}
			name, typ := fmt.Sprint(vals[0]), fmt.Sprint(vals[1])
			if name == "submission_date" {
				continue // the Hive partition, not in the file
			}
			if prev, ok := seen[name]; ok && prev != typ {
				clashes = append(clashes, [4]string{name, prev, typ, f})
				continue
			}
			seen[name], first[name] = typ, f
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	// Named with what the footers of both files say (after the reads
	// above: the connection is one).
	for _, c := range clashes {
		name, prev, typ, f := c[0], c[1], c[2], c[3]
		t.Errorf("table %s: column %s is %s in one file and %s in %s\n  %s: %s\n  %s: %s", table, name, prev, typ, f,
			filepath.Base(first[name]), footer(duck, first[name]), filepath.Base(f), footer(duck, f))
	}
}

// footer is what a file's footer says of the batch that wrote it: batch
// id, window, attempt and schema fingerprint.
func footer(duck *testkit.Duck, file string) string {
	rows, err := duck.DB.Query("SELECT decode(key), decode(value) FROM parquet_kv_metadata('" + strings.ReplaceAll(file, "'", "''") + "') WHERE decode(key) LIKE 'syncd.%' AND decode(key) NOT IN ('syncd.schema', 'syncd.schema.zst') ORDER BY 1")
	if err != nil {
		return err.Error()
	}
	defer rows.Close()
	var parts []string
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return err.Error()
		}
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, " ")
}
