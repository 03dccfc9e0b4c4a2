package parquetsink

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/sink"
)

// umaskEnv asks a child process of TestFileModesFollowUmask to run under
// the umask it names (octal) and commit into the folder after it.
const umaskEnv = "SYNCD_TEST_UMASK"

// TestFileModesFollowUmask: committed files are 0666 and folders 0777 less
// the umask, as os.Create and os.MkdirAll give. The umask is the process's,
// so each case runs in a child process of this test binary.
func TestFileModesFollowUmask(t *testing.T) {
	if v := os.Getenv(umaskEnv); v != "" {
		commitUnderUmask(t, v)
		return
	}
	cases := []struct {
		umask        int
		file, folder fs.FileMode
	}{
		{0o022, 0o644, 0o755},
		{0o027, 0o640, 0o750},
		{0o077, 0o600, 0o700},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("umask %03o", c.umask), func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "out") // made by the sink
			cmd := exec.Command(os.Args[0], "-test.run=^TestFileModesFollowUmask$", "-test.count=1")
			cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%o:%s", umaskEnv, c.umask, root))
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("child under umask %03o: %v\n%s", c.umask, err, out)
			}
			for _, p := range []struct {
				path string
				mode fs.FileMode
			}{
				{root, c.folder},
				{filepath.Join(root, "answers"), c.folder},
				{filepath.Join(root, "answers", "submission_date=2024-05-01"), c.folder},
				{filepath.Join(root, "answers", "submission_date=2024-05-01", "b1.parquet"), c.file},
			} {
				fi, err := os.Stat(p.path)
				if err != nil {
					t.Fatal(err)
				}
				if got := fi.Mode().Perm(); got != p.mode {
					t.Errorf("%s: mode %04o, want %04o", p.path, got, p.mode)
				}
			}
		})
	}
}

// commitUnderUmask is the child: spec is "<umask in octal>:<root>".
func commitUnderUmask(t *testing.T, spec string) {
	mask, root, ok := strings.Cut(spec, ":")
	if !ok {
		t.Fatalf("%s=%q: want <umask>:<folder>", umaskEnv, spec)
	}
	m, err := strconv.ParseUint(mask, 8, 32)
	if err != nil {
		t.Fatal(err)
	}
	syscall.Umask(int(m)) // this process only runs this test
	s, err := New(Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rec := timedRecord(time.Date(2024, 5, 1, 2, 30, 0, 0, time.UTC))
	defer rec.Release()
	b := spanBatch("b1", time.Date(2024, 5, 1, 2, 0, 0, 0, time.UTC), time.Date(2024, 5, 1, 3, 0, 0, 0, time.UTC))
	b.Table = "answers"
	if err := sink.CommitRecord(context.Background(), s, b, rec); err != nil {
		t.Fatal(err)
	}
}
