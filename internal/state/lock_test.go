package state

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The test binary doubles as a second syncd: with helperEnv set, TestMain
// runs one helper role instead of the tests.
const (
	helperEnv     = "SYNCD_STATE_TEST_HELPER"
	helperPathEnv = "SYNCD_STATE_TEST_PATH"
)

func TestMain(m *testing.M) {
	if role := os.Getenv(helperEnv); role != "" {
		os.Exit(runHelper(role, os.Getenv(helperPathEnv)))
	}
	os.Exit(m.Run())
}

// openResult is what the "open" helper reports.
type openResult struct {
	Opened    bool   `json:"opened"`
	Error     string `json:"error,omitempty"`
	Locked    bool   `json:"locked"`
	HolderPID int    `json:"holder_pid,omitempty"`
	ElapsedMS int64  `json:"elapsed_ms"`
}

func runHelper(role, path string) int {
	ctx := context.Background()
	switch role {
	case "hold":
		// Open, record an intent, say so, then hold the file until killed
		// (or until the test's end of stdin).
		st, err := OpenBolt(ctx, BoltOptions{Path: path})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		if err := st.RecordIntent(ctx, "form-a", Intent{BatchID: "held", Table: "t", Start: m(0), End: m(1)}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		fmt.Println("ready")
		io.Copy(io.Discard, os.Stdin)
		return 0
	case "open":
		// Give bbolt's own lock a long timeout, so that waiting on it
		// instead of failing at once shows in ElapsedMS.
		began := time.Now()
		st, err := OpenBolt(ctx, BoltOptions{Path: path, LockTimeout: 5 * time.Second})
		res := openResult{Opened: err == nil, ElapsedMS: time.Since(began).Milliseconds()}
		if err != nil {
			res.Error = err.Error()
			var le *LockedError
			if errors.As(err, &le) {
				res.Locked = true
				if le.Holder != nil {
					res.HolderPID = le.Holder.PID
				}
			}
		} else {
			st.Close()
		}
		json.NewEncoder(os.Stdout).Encode(res)
		return 0
	default:
		fmt.Fprintf(os.Stderr, "unknown helper role %q\n", role)
		return 2
	}
}

func helperCmd(t *testing.T, role, path string) *exec.Cmd {
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+role, helperPathEnv+"="+path)
	cmd.Stderr = os.Stderr
	return cmd
}

// startHolder starts a process that holds the state file at path.
func startHolder(t *testing.T, path string) *exec.Cmd {
	t.Helper()
	cmd := helperCmd(t, "hold", path)
	stdin, err := cmd.StdinPipe()
	must(t, err)
	stdout, err := cmd.StdoutPipe()
	must(t, err)
	must(t, cmd.Start())
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("holder did not get ready: %q, %v", line, err)
	}
	return cmd
}

// tryOpen runs OpenBolt in a separate process and reports how it went.
func tryOpen(t *testing.T, path string) openResult {
	t.Helper()
	out, err := helperCmd(t, "open", path).Output()
	if err != nil {
		t.Fatalf("open helper: %v", err)
	}
	var res openResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("open helper said %q: %v", out, err)
	}
	return res
}

func TestLockAcrossProcesses(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "state", "syncd.db")
	holder := startHolder(t, path)
	pid := holder.Process.Pid
	host, _ := os.Hostname()

	// A second syncd fails at once, naming the file, the holder and the fix.
	res := tryOpen(t, path)
	if res.Opened || !res.Locked || res.HolderPID != pid {
		t.Fatalf("second process: %+v; want it refused, naming pid %d", res, pid)
	}
	for _, want := range []string{path, fmt.Sprintf("pid %d", pid), "on host " + host, "stop it or point state.path elsewhere"} {
		if !strings.Contains(res.Error, want) {
			t.Errorf("message %q does not say %q", res.Error, want)
		}
	}
	if res.ElapsedMS > 1000 {
		t.Errorf("second process took %dms to fail: it waited instead of failing at once", res.ElapsedMS)
	}

	// So does a read-only open: bbolt would otherwise wait out its timeout.
	began := time.Now()
	_, err := OpenBolt(ctx, BoltOptions{Path: path, ReadOnly: true, LockTimeout: 5 * time.Second})
	var le *LockedError
	if !errors.As(err, &le) || !le.ReadOnly || le.Holder == nil || le.Holder.PID != pid || le.Holder.Host != host {
		t.Fatalf("read-only open beside the holder: %v; want a LockedError naming pid %d", err, pid)
	}
	if d := time.Since(began); d > time.Second {
		t.Errorf("read-only open took %v to fail", d)
	}

	// SIGKILL: the kernel drops the flock; the lock file still names the
	// dead holder, and that is no obstacle.
	must(t, holder.Process.Kill())
	holder.Wait()
	if b, err := os.ReadFile(path + ".lock"); err != nil || !strings.Contains(string(b), fmt.Sprintf(`"pid":%d`, pid)) {
		t.Fatalf("lock file after SIGKILL: %q, %v; want the dead holder still named", b, err)
	}
	st := openW(t, path, nil)
	fs, err := st.Get(ctx, "form-a")
	must(t, err)
	if in, ok := fs.Intents["held"]; !ok || !in.Start.Equal(m(0)) || !in.End.Equal(m(1)) {
		t.Errorf("the intent the killed holder recorded is gone: %+v", fs.Intents)
	}
	var h Holder
	b, err := os.ReadFile(path + ".lock")
	must(t, err)
	if err := json.Unmarshal(b, &h); err != nil || h.PID != os.Getpid() {
		t.Errorf("lock file names %q, want this process (pid %d)", b, os.Getpid())
	}

	// Now this process is the holder, and a new one is refused with our pid.
	if res := tryOpen(t, path); !res.Locked || res.HolderPID != os.Getpid() {
		t.Errorf("process beside this holder: %+v", res)
	}
	must(t, st.Close())
	if res := tryOpen(t, path); !res.Opened {
		t.Errorf("after a clean close, another process cannot open: %+v", res)
	}
}

func TestErrorMessages(t *testing.T) {
	h := &Holder{PID: 12345, Host: "X", Started: time.Date(2026, 11, 22, 18, 0, 0, 0, time.UTC)}
	tests := []struct {
		err  error
		want string
	}{
		{&LockedError{Path: "./state/syncd.db", Holder: h},
			"state file ./state/syncd.db is in use by another syncd (pid 12345, started 2026-11-22T18:00:00Z on host X): stop it or point state.path elsewhere"},
		{&LockedError{Path: "s.db"},
			"state file s.db is in use by another syncd (which one is unknown: its lock file names no process): stop it or point state.path elsewhere"},
		{&LockedError{Path: "s.db", Holder: h, ReadOnly: true},
			"state file s.db is in use by a running syncd (pid 12345, started 2026-11-22T18:00:00Z on host X), and it cannot be read while syncd writes it: stop that syncd first"},
		{&LockedError{Path: "s.db", Foreign: true},
			"state file s.db is open in another process (a read-only `syncd state show` or a bbolt tool): let it finish, or stop it"},
		{&NewerFormatError{Path: "s.db", Version: 3, Supported: 1},
			"state file s.db has format version 3, newer than the 1 this syncd reads: run the newer syncd that wrote it, or restore a backup written by this version"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("got  %s\nwant %s", got, tt.want)
		}
	}
	inner := errors.New("truncated")
	ce := &CorruptError{Path: "s.db", Err: inner}
	if !errors.Is(ce, inner) || !strings.HasPrefix(ce.Error(), "state file s.db is corrupt (truncated): restore it from a backup") {
		t.Errorf("CorruptError %q does not name the file, the cause and the remedy, or hides its cause", ce)
	}
}
