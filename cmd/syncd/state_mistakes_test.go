package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/app"
	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/state"
	"github.com/syncd-dev/syncd/internal/testkit"
)

// mistakeEnv is one installation against the Forms API simulator: an
// account with one form, its config, output and state.
type mistakeEnv struct {
	t    *testing.T
	sim  *testkit.Sim
	w    *testkit.Workdir
	form string
}

func newMistakeEnv(t *testing.T, sections testkit.Config) *mistakeEnv {
	t.Helper()
	t.Setenv("FORMS_API_KEY", testkit.APIKey)
	end := time.Now().UTC().Truncate(time.Hour).Add(-2 * time.Hour)
	sim := testkit.StartSim(t, formsim.Config{Seed: 31, Forms: 1, Submissions: 40, Start: end.AddDate(0, 0, -3), End: end})
	return &mistakeEnv{t: t, sim: sim, w: testkit.NewWorkdir(t, sim.BaseURL, sections), form: sim.FormIDs()[0]}
}

// run runs the command line in process against the env's config.
func (e *mistakeEnv) run(args ...string) (code int, stdout, stderr string) {
	e.t.Helper()
	return execute(e.t, append(args, "--config", e.w.Config)...)
}

// runFor is run, stopped (as by SIGTERM) after d if it has not ended.
func (e *mistakeEnv) runFor(d time.Duration, args ...string) (code int, stdout, stderr string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.t.Context(), d)
	defer cancel()
	var out, errb bytes.Buffer
	root, _ := newRoot(&out, &errb)
	root.SetArgs(append(args, "--config", e.w.Config))
	err := root.ExecuteContext(ctx)
	return exitCode(err, &errb), out.String(), errb.String()
}

// sync runs one pass, so that the state holds the form.
func (e *mistakeEnv) sync() {
	e.t.Helper()
	if code, _, stderr := e.run("once"); code != 0 {
		e.t.Fatalf("once: exit %d %s", code, stderr)
	}
}

// fileSnap is what a folder holds: each file's identity and content.
type fileSnap map[string]struct {
	fi  os.FileInfo
	raw []byte
}

func snapDir(t *testing.T, dir string) fileSnap {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	s := fileSnap{}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		var raw []byte
		if !fi.IsDir() {
			if raw, err = os.ReadFile(p); err != nil {
				t.Fatal(err)
			}
		}
		s[e.Name()] = struct {
			fi  os.FileInfo
			raw []byte
		}{fi, raw}
	}
	return s
}

// unchanged fails the test unless dir holds the same files as before: the
// same names, each the same file (not one renamed over it) with the same
// bytes.
func unchanged(t *testing.T, what, dir string, before fileSnap) {
	t.Helper()
	after := snapDir(t, dir)
	for name, b := range before {
		a, ok := after[name]
		switch {
		case !ok:
			t.Errorf("%s: %s is gone", what, name)
		case !os.SameFile(a.fi, b.fi):
			t.Errorf("%s: %s is another file now (renamed over)", what, name)
		case !bytes.Equal(a.raw, b.raw):
			t.Errorf("%s: %s changed", what, name)
		}
	}
	for name := range after {
		if _, ok := before[name]; !ok {
			t.Errorf("%s: %s was written", what, name)
		}
	}
}

// TestStateBackupRefusesTheStateItself: a DEST that is the state file, by
// any name, would be renamed over the file a running daemon holds open, so
// its later commits go to an unlinked file. It is exit 2, nothing written.
// `state restore` of the state itself is refused likewise.
func TestStateBackupRefusesTheStateItself(t *testing.T) {
	e := newMistakeEnv(t, testkit.Config{})
	e.sync()
	stateDir := filepath.Dir(e.w.State)
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(cwd, e.w.State)
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(e.w.Dir, "link.db")
	if err := os.Link(e.w.State, link); err != nil {
		t.Fatal(err)
	}
	// Held open as `syncd run` holds it: a backup beside it is allowed.
	held, err := state.OpenBolt(t.Context(), state.BoltOptions{Path: e.w.State})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	for _, dest := range []string{
		e.w.State,
		filepath.Join(stateDir, "..", "state", ".", filepath.Base(e.w.State)),
		rel,
		link, // another name of the same file
	} {
		before := snapDir(t, stateDir)
		code, stdout, stderr := e.run("state", "backup", dest)
		if code != exitUsage || stdout != "" || !strings.Contains(stderr, "is the state ") || !strings.Contains(stderr, "nothing was written") {
			t.Errorf("state backup %s: exit %d, stdout %q, stderr %q; want exit 2 naming the mistake", dest, code, stdout, stderr)
		}
		unchanged(t, "state backup "+dest, stateDir, before)
	}
	held.Close()

	before := snapDir(t, stateDir)
	code, stdout, stderr := e.run("state", "restore", e.w.State)
	if code != exitUsage || stdout != "" || !strings.Contains(stderr, "is the state ") {
		t.Errorf("state restore of the state itself: exit %d, stdout %q, stderr %q; want exit 2", code, stdout, stderr)
	}
	unchanged(t, "state restore "+e.w.State, stateDir, before)

	// A backup elsewhere is still taken.
	dest := filepath.Join(e.w.Dir, "backups", "syncd.db")
	if code, _, stderr := e.run("state", "backup", dest); code != 0 {
		t.Fatalf("state backup %s: exit %d %s", dest, code, stderr)
	}
	if _, err := os.Stat(dest); err != nil {
		t.Error(err)
	}
}

// TestStateBackupRefusesBadIntervals: a negative --every backed up in a
// tight loop, and --keep pruned at each turn; an interval under a minute
// is a mistake too. Each is exit 2 naming the flag, nothing written.
func TestStateBackupRefusesBadIntervals(t *testing.T) {
	e := newMistakeEnv(t, testkit.Config{})
	e.sync()
	dir := filepath.Join(e.w.Dir, "backups") + string(filepath.Separator)
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"--every", "-1s"}, "--every -1s"},
		{[]string{"--every", "-1s", "--keep", "2"}, "--every -1s"},
		{[]string{"--every", "10s"}, "--every 10s"},
		{[]string{"--keep", "-1"}, "--keep -1"},
	} {
		args := append([]string{"state", "backup", dir}, tc.args...)
		code, stdout, stderr := e.runFor(3*time.Second, args...)
		if code != exitUsage || stdout != "" || !strings.Contains(stderr, tc.flag) {
			t.Errorf("%s: exit %d, stdout %d bytes, stderr %q; want exit 2 naming %s", strings.Join(args, " "), code, len(stdout), stderr, tc.flag)
		}
		if entries, _ := os.ReadDir(dir); len(entries) > 0 {
			t.Errorf("%s: wrote %d backups, want none", strings.Join(args, " "), len(entries))
		}
	}
}

// TestJSONListsAreNeverNull: `state adopt -o json` with nothing to adopt
// and `state show -o json` of an empty state print [] (README, "Machine-
// readable output").
func TestJSONListsAreNeverNull(t *testing.T) {
	e := newMistakeEnv(t, testkit.Config{})
	// The account's key moves under accounts:, with a tag no form carries:
	// the account has no form to adopt.
	raw, err := os.ReadFile(e.w.Config)
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(string(raw), "  api_key: ${FORMS_API_KEY}\n", "", 1) +
		"accounts:\n  - name: default\n    api_key: ${FORMS_API_KEY}\n    tags: [no-form-has-this-tag]\n"
	if err := os.WriteFile(e.w.Config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := e.run("state", "adopt", "-o", "json")
	var list []any
	if code != 0 || json.Unmarshal([]byte(stdout), &list) != nil || list == nil {
		t.Errorf("state adopt -o json with nothing to adopt: exit %d, stdout %q, stderr %s; want []", code, stdout, stderr)
	}
	code, stdout, stderr = e.run("state", "show", "-o", "json")
	var v struct {
		Forms []any `json:"forms"`
	}
	if code != 0 || json.Unmarshal([]byte(stdout), &v) != nil || v.Forms == nil {
		t.Errorf("state show -o json of an empty state: exit %d, stdout %q, stderr %s; want forms []", code, stdout, stderr)
	}
}

// TestStateResetRefusesAFromWithNothingAfter: nothing is committed past
// now - sync.safety_lag, so a --from there would reset nothing and read as
// done. It is exit 2 naming --from, the state unchanged.
func TestStateResetRefusesAFromWithNothingAfter(t *testing.T) {
	e := newMistakeEnv(t, testkit.Config{Sync: "  safety_lag: 1h\n"})
	e.sync()
	before := testkit.Covered(t, e.w.State, e.form)
	for _, from := range []string{"2099-01-01", time.Now().Add(-30 * time.Minute).UTC().Format(time.RFC3339)} {
		code, stdout, stderr := e.run("state", "reset", e.form, "--from", from, "--yes")
		if code != exitUsage || stdout != "" || !strings.Contains(stderr, "--from") || !strings.Contains(stderr, "safety_lag") {
			t.Errorf("state reset --from %s: exit %d, stdout %q, stderr %q; want exit 2 naming --from", from, code, stdout, stderr)
		}
		if after := testkit.Covered(t, e.w.State, e.form); !slices.Equal(after, before) {
			t.Errorf("state reset --from %s changed the committed windows: %v, were %v", from, after, before)
		}
	}
	// A --from inside the committed history is what reset is for; with
	// batches in the output from then on, only with --keep-output.
	from := before.End().Add(-24 * time.Hour).Format(time.RFC3339)
	if code, _, stderr := e.run("state", "reset", e.form, "--from", from, "--yes"); code != exitUsage || !strings.Contains(stderr, "--keep-output") {
		t.Errorf("state reset --from %s over batches in the output: exit %d %s; want 2 naming --keep-output", from, code, stderr)
	}
	if code, stdout, stderr := e.run("state", "reset", e.form, "--from", from, "--yes", "--keep-output"); code != 0 || !strings.Contains(stdout, "reset") {
		t.Errorf("state reset --from %s: exit %d %s %s", from, code, stdout, stderr)
	}
}

// TestStateCommandsRefuseAnUnknownAccount: `--account bogus` is exit 2 for
// state show, backup and restore as for every other command, before
// anything is written.
func TestStateCommandsRefuseAnUnknownAccount(t *testing.T) {
	e := newMistakeEnv(t, testkit.Config{})
	e.sync()
	stateDir := filepath.Dir(e.w.State)
	backups := filepath.Join(e.w.Dir, "backups")
	if code, _, stderr := e.run("state", "backup", filepath.Join(backups, "good.db")); code != 0 {
		t.Fatalf("state backup: exit %d %s", code, stderr)
	}
	for _, args := range [][]string{
		{"state", "show"},
		{"state", "show", "-o", "json"},
		{"state", "backup", filepath.Join(backups, "new.db")},
		{"state", "restore", filepath.Join(backups, "good.db")},
	} {
		beforeState, beforeBackups := snapDir(t, stateDir), snapDir(t, backups)
		args = append(args, "--account", "bogus")
		code, stdout, stderr := e.run(args...)
		if code != exitUsage || stdout != "" || !strings.Contains(stderr, "bogus") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 2 naming the account", strings.Join(args, " "), code, stdout, stderr)
		}
		unchanged(t, strings.Join(args, " "), stateDir, beforeState)
		unchanged(t, strings.Join(args, " "), backups, beforeBackups)
	}
}

// TestSchemaOfAnEmptyID: an empty form id is a bad value, exit 2.
func TestSchemaOfAnEmptyID(t *testing.T) {
	e := newMistakeEnv(t, testkit.Config{})
	code, stdout, stderr := e.run("schema", "")
	if code != exitUsage || stdout != "" || !strings.Contains(stderr, "empty") {
		t.Errorf("schema '': exit %d, stdout %q, stderr %q; want exit 2 saying the id is empty", code, stdout, stderr)
	}
}

// TestStateBackupRefusesTheStateLockFile: a DEST that is the state's lock
// file (<state>.lock) would be renamed over the file whose lock a running
// syncd holds: the next syncd would lock the new file and write the state
// beside it. It is exit 2, nothing written, as for the state itself;
// `state restore` of the lock file is refused likewise.
func TestStateBackupRefusesTheStateLockFile(t *testing.T) {
	e := newMistakeEnv(t, testkit.Config{})
	e.sync()
	stateDir := filepath.Dir(e.w.State)
	lock := e.w.State + ".lock"
	if _, err := os.Stat(lock); err != nil {
		t.Fatalf("the state keeps no lock file: %v", err)
	}
	// Held open as `syncd run` holds it.
	held, err := state.OpenBolt(t.Context(), state.BoltOptions{Path: e.w.State})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	for _, dest := range []string{
		lock,
		filepath.Join(stateDir, "..", "state", ".", filepath.Base(lock)),
		"file://" + filepath.ToSlash(lock),
	} {
		before := snapDir(t, stateDir)
		code, stdout, stderr := e.run("state", "backup", dest)
		if code != exitUsage || stdout != "" || !strings.Contains(stderr, "is the lock file of the state ") || !strings.Contains(stderr, "nothing was written") {
			t.Errorf("state backup %s: exit %d, stdout %q, stderr %q; want exit 2 naming the lock file", dest, code, stdout, stderr)
		}
		unchanged(t, "state backup "+dest, stateDir, before)
	}
	held.Close()

	before := snapDir(t, stateDir)
	code, stdout, stderr := e.run("state", "restore", lock)
	if code != exitUsage || stdout != "" || !strings.Contains(stderr, "is the lock file of the state ") {
		t.Errorf("state restore of the lock file: exit %d, stdout %q, stderr %q; want exit 2", code, stdout, stderr)
	}
	unchanged(t, "state restore "+lock, stateDir, before)
}

// TestStateBackupKeepNeverPrunesTheState: --keep prunes only the backups
// it writes: never the state, nor its lock file, when the state lives in
// the backup folder under a name like a backup's, nor a file of the
// operator's that merely starts like one.
func TestStateBackupKeepNeverPrunesTheState(t *testing.T) {
	backups := filepath.Join(t.TempDir(), "backups")
	// "syncd-state-0.db" sorts before every backup: the oldest, by name.
	live := filepath.Join(backups, state.BackupPrefix+"0.db")
	e := newMistakeEnv(t, testkit.Config{State: "  path: " + live + "\n"})
	e.sync()
	old := filepath.Join(backups, state.BackupPrefix+"20000101T000000Z.db")
	if code, _, stderr := e.run("state", "backup", old); code != 0 {
		t.Fatalf("state backup %s: exit %d %s", old, code, stderr)
	}
	notes := filepath.Join(backups, state.BackupPrefix+"notes.txt")
	if err := os.WriteFile(notes, []byte("kept by hand\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	keep := map[string]os.FileInfo{}
	for _, p := range []string{live, live + ".lock", notes} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		keep[p] = fi
	}

	code, stdout, stderr := e.run("state", "backup", backups+string(filepath.Separator), "--keep", "1")
	if code != 0 {
		t.Fatalf("state backup --keep 1: exit %d %s %s", code, stdout, stderr)
	}
	for p, before := range keep {
		if after, err := os.Stat(p); err != nil || !os.SameFile(before, after) {
			t.Errorf("state backup --keep 1 removed or replaced %s (%v):\n%s", p, err, stdout)
		}
	}
	if _, err := os.Stat(old); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("state backup --keep 1 kept the older backup %s (%v):\n%s", old, err, stdout)
	}
	entries, err := os.ReadDir(backups)
	if err != nil {
		t.Fatal(err)
	}
	var written []string
	for _, en := range entries {
		if p := filepath.Join(backups, en.Name()); keep[p] == nil {
			written = append(written, en.Name())
		}
	}
	if len(written) != 1 || !strings.HasPrefix(written[0], state.BackupPrefix+"2") {
		t.Errorf("state backup --keep 1 left the backups %v, want the new one alone:\n%s", written, stdout)
	}
	e.sync() // the state is whole, and still the one syncd uses
}

// TestStateResetRefusesAnEmptyFrom: an empty --from (an unset variable in a
// script) is never "forget everything": exit 2, the state unchanged.
func TestStateResetRefusesAnEmptyFrom(t *testing.T) {
	e := newMistakeEnv(t, testkit.Config{})
	e.sync()
	before := testkit.Covered(t, e.w.State, e.form)
	for _, args := range [][]string{
		{"state", "reset", e.form, "--from", "", "--yes"},
		{"state", "reset", e.form, "--from=  ", "--yes"},
	} {
		code, stdout, stderr := e.run(args...)
		if code != exitUsage || stdout != "" || !strings.Contains(stderr, "--from is empty") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 2 saying --from is empty", strings.Join(args, " "), code, stdout, stderr)
		}
		if after := testkit.Covered(t, e.w.State, e.form); !slices.Equal(after, before) {
			t.Errorf("%s changed the committed windows: %v, were %v", strings.Join(args, " "), after, before)
		}
	}
}

// TestStatePart: what of the configured state a backup's DEST or a
// restore's FILE names, by path or URL: the state, its lock file, or
// (for a state in a bucket) its lease, index or accounts' states.
func TestStatePart(t *testing.T) {
	dir := t.TempDir()
	file := &config.Config{}
	file.State.Path = filepath.Join(dir, "state", "syncd.db")
	bucket := &config.Config{}
	bucket.State.URL = "gs://lake/syncd/state.json"
	for _, tc := range []struct {
		cfg    *config.Config
		target string
		want   string
	}{
		{file, file.State.Path, "the state"},
		{file, filepath.Join(dir, "state", "..", "state", "syncd.db"), "the state"},
		{file, "file://" + filepath.ToSlash(file.State.Path), "the state"},
		{file, file.State.Path + ".lock", "the lock file of the state"},
		{file, "file://" + filepath.ToSlash(file.State.Path) + ".lock", "the lock file of the state"},
		{file, filepath.Join(dir, "state", "syncd-state-20240101T000000Z.db"), ""},
		{file, file.State.Path + ".lock.bak", ""},
		{file, "gs://lake/" + filepath.ToSlash(file.State.Path) + ".lock", ""},
		{bucket, "gs://lake/syncd/state.json", "the state"},
		{bucket, "gs://lake/syncd/./state.json", "the state"},
		{bucket, "gs://lake/syncd/state.json.lease", "the lease of the state"},
		{bucket, "gs://lake/syncd/state.json.index/acme", "the index of the state"},
		{bucket, "gs://lake/syncd/state.json.accounts/acme", "an account's state beside the state"},
		{bucket, "gs://lake/syncd/state.json.accounts/acme.lease", "an account's state beside the state"},
		{bucket, "gs://lake/syncd/state.json.bak", ""},
		{bucket, "gs://other/syncd/state.json.lease", ""},
		{bucket, "s3://lake/syncd/state.json.lease", ""},
		{bucket, "/syncd/state.json.lease", ""},
	} {
		if got := app.StateLocation(tc.cfg).Part(tc.target); got != tc.want {
			t.Errorf("StateLocation(%s).Part(%s) = %q, want %q", app.StateWhere(tc.cfg), tc.target, got, tc.want)
		}
	}
}
