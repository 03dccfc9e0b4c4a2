package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/state"
	"github.com/syncd-dev/syncd/internal/status"
	"github.com/syncd-dev/syncd/internal/testkit"
)

// The operator's mistakes of README "Exit codes": a bad value, an unknown
// or excluded id, a range with nothing in it exits 2 and writes nothing.
// These run the command in process against the Forms API simulator.

// mistakeSim is a simulator of three small forms over the last days, and
// the history's start.
func mistakeSim(t *testing.T) (*testkit.Sim, time.Time) {
	t.Helper()
	t.Setenv("FORMS_API_KEY", testkit.APIKey)
	end := time.Now().UTC().Truncate(time.Hour).Add(-time.Hour)
	start := end.AddDate(0, 0, -3)
	return testkit.StartSim(t, formsim.Config{Seed: 41, Forms: 3, Submissions: 40, Start: start, End: end}), start
}

// run runs syncd in process with the workdir's config.
func run(t *testing.T, w *testkit.Workdir, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return execute(t, append(args, "--config", w.Config)...)
}

// snapshot is everything a command may have written: every form's state
// (as JSON, times included) and the output's files.
func snapshot(t *testing.T, w *testkit.Workdir) string {
	t.Helper()
	var b strings.Builder
	if _, err := os.Stat(w.State); err == nil {
		st, err := state.OpenBolt(context.Background(), state.BoltOptions{Path: w.State, ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		list, err := st.List(context.Background())
		st.Close()
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(list)
		b.Write(raw)
	}
	_ = filepath.WalkDir(w.Out, func(p string, d os.DirEntry, err error) error {
		if err == nil {
			fmt.Fprintln(&b, p)
		}
		return nil
	})
	return b.String()
}

// refused checks that a command exited 2 with a message holding want, and
// wrote nothing.
func refused(t *testing.T, w *testkit.Workdir, want string, args ...string) {
	t.Helper()
	before := snapshot(t, w)
	code, stdout, stderr := run(t, w, args...)
	if code != exitUsage || !strings.Contains(stderr, want) {
		t.Errorf("%v: exit %d, stderr %q; want exit 2 saying %q", args, code, stderr, want)
	}
	if strings.Contains(stdout, "ok   ") || strings.Contains(stdout, `"status"`) {
		t.Errorf("%v printed a result: %s", args, stdout)
	}
	if after := snapshot(t, w); after != before {
		t.Errorf("%v exited %d but wrote:\nbefore %s\nafter  %s", args, code, before, after)
	}
}

// TestSharedTableIsAConfigError: a form whose table is another's default
// is refused by every command, naming the key (defect: a refresh of one
// removed the other's rows).
func TestSharedTableIsAConfigError(t *testing.T) {
	sim, _ := mistakeSim(t)
	ids := sim.FormIDs()
	w := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{Forms: fmt.Sprintf("forms:\n  - {id: %s, table: form_%s}\n  - {id: %s}\n", ids[0], strings.ToLower(ids[1]), ids[1])})
	refused(t, w, "forms[0].table", "once")
	refused(t, w, ids[1], "refresh", "--form", ids[0], "--yes")
}

// TestEmptyFormOrFromIsRefused: an empty --form (an unset variable in a
// script) is never "every form", an empty --from never "from the
// beginning".
func TestEmptyFormOrFromIsRefused(t *testing.T) {
	sim, start := mistakeSim(t)
	form := sim.FormIDs()[0]
	w := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{})
	from := start.Format(time.RFC3339)
	refused(t, w, "--form is empty", "backfill", "--form", "", "--from", from)
	refused(t, w, "--form is empty", "backfill", "--form", "", "--from", from, "--dry-run")
	refused(t, w, "--from is empty", "backfill", "--form", form, "--from", "")
	refused(t, w, "--from is empty", "backfill", "--from", "")
	refused(t, w, "--form is empty", "once", "--form", "")
	refused(t, w, "--form is empty", "refresh", "--form", "", "--yes")
	refused(t, w, "--form is empty", "reconcile", "--form", "")
	refused(t, w, "--from is empty", "reconcile", "--form", form, "--from", "")
}

// oneFormCommands are the command lines that work on the one form id
// (--form), from is backfill's --from.
func oneFormCommands(id, from string) [][]string {
	return [][]string{
		{"once", "--form", id},
		{"once", "--form", id, "--dry-run"},
		{"backfill", "--form", id, "--from", from},
		{"backfill", "--form", id, "--from", from, "--dry-run"},
		{"refresh", "--form", id, "--yes"},
		{"reconcile", "--form", id},
	}
}

// TestUnlistedOrExcludedFormIsRefused: every command on one form refuses,
// as once does, an id the config does not list, and one the account
// excludes (an excluded form is never synced).
func TestUnlistedOrExcludedFormIsRefused(t *testing.T) {
	sim, start := mistakeSim(t)
	ids := sim.FormIDs()
	from := start.Format(time.RFC3339)
	commands := func(id string) [][]string { return oneFormCommands(id, from) }
	listed := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{Forms: "forms:\n  - id: " + ids[0] + "\n"})
	for _, args := range commands(ids[1]) {
		refused(t, listed, "--form "+ids[1]+" is not one of the forms this config lists", args...)
	}

	excluding := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{})
	cfg := fmt.Sprintf("source: {base_url: %s, rate_limit: 200, max_attempts: 8, timeout: 10s}\n"+
		"accounts:\n  - {name: acme, api_key: \"${FORMS_API_KEY}\", exclude: [%s]}\n"+
		"sync: {safety_lag: 0s}\nsink: {type: parquet, parquet: {path: %s}}\nstate: {path: %s}\nlog: {level: info, format: json}\n",
		sim.BaseURL, ids[1], excluding.Out, excluding.State)
	if err := os.WriteFile(excluding.Config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range commands(ids[1]) {
		refused(t, excluding, "--form "+ids[1]+" is excluded by account acme", args...)
	}
	if code, _, stderr := run(t, excluding, "once", "--form", ids[0]); code != 0 {
		t.Fatalf("once --form of a form not excluded: exit %d %s", code, stderr)
	}
}

// TestReconcileMistakesWriteNothing: a --from at or after now -
// safety_lag, and one before the version index, exit 2 and write nothing
// (no error recorded, no reconcile recorded); the message gives a command
// that works.
func TestReconcileMistakesWriteNothing(t *testing.T) {
	sim, start := mistakeSim(t)
	form := sim.FormIDs()[0]
	w := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{})
	// The index of a form an older syncd synced: it starts a day in.
	indexed := start.AddDate(0, 0, 1)
	if err := os.MkdirAll(filepath.Dir(w.State), 0o755); err != nil {
		t.Fatal(err)
	}
	st, err := state.OpenBolt(context.Background(), state.BoltOptions{Path: w.State})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Commit(context.Background(), form, state.Commit{IndexFrom: indexed}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if code, _, stderr := run(t, w, "once"); code != 0 {
		t.Fatalf("once: exit %d %s", code, stderr)
	}

	refused(t, w, "nothing to reconcile", "reconcile", "--form", form, "--from", time.Now().Add(time.Hour).Format(time.RFC3339))
	refused(t, w, "nothing to reconcile", "reconcile", "--form", form, "--from", "2099-01-01")

	adopt := "`syncd state adopt " + form + "`"
	refused(t, w, adopt, "reconcile", "--form", form, "--from", start.Format(time.RFC3339))
	// The command the message gives works: it indexes the earlier rows,
	// and the reconcile it was refused for then runs.
	if code, _, stderr := run(t, w, "state", "adopt", form); code != 0 {
		t.Fatalf("%s, as the message says: exit %d %s", adopt, code, stderr)
	}
	if code, _, stderr := run(t, w, "reconcile", "--form", form, "--from", start.Format(time.RFC3339)); code != 0 {
		t.Errorf("reconcile from the start after %s: exit %d %s", adopt, code, stderr)
	}
}

// TestRefreshJSONIsJSONOnly: under -o json stdout is one JSON document;
// progress lines go to stderr.
func TestRefreshJSONIsJSONOnly(t *testing.T) {
	sim, _ := mistakeSim(t)
	form := sim.FormIDs()[0]
	w := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{})
	if code, _, stderr := run(t, w, "once"); code != 0 {
		t.Fatalf("once: exit %d %s", code, stderr)
	}
	code, stdout, stderr := run(t, w, "refresh", "--form", form, "--yes", "-o", "json")
	var entries []status.StreamResult
	if err := json.Unmarshal([]byte(stdout), &entries); code != 0 || err != nil || len(entries) != 1 || entries[0].Status != "ok" {
		t.Fatalf("refresh -o json: exit %d, stdout is not the JSON summary alone (%v):\n%s", code, err, stdout)
	}
	if !strings.Contains(stderr, "old output is removed") {
		t.Errorf("refresh -o json: the progress line is gone from stderr too: %s", stderr)
	}
	if code, stdout, _ := run(t, w, "refresh", "--form", form, "--yes"); code != 0 || !strings.Contains(stdout, "old output is removed") {
		t.Errorf("refresh: exit %d, the table output lacks the progress line: %s", code, stdout)
	}
}

// TestBackfillDryRunRefusesWhatTheRunRefuses: a range past now - safety_lag
// has nothing to backfill, dry run or not.
func TestBackfillDryRunRefusesWhatTheRunRefuses(t *testing.T) {
	sim, _ := mistakeSim(t)
	form := sim.FormIDs()[0]
	w := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{})
	for _, dry := range [][]string{nil, {"--dry-run"}, {"--dry-run", "-o", "json"}} {
		args := append([]string{"backfill", "--form", form, "--from", "2099-01-01", "--to", "2099-02-01"}, dry...)
		refused(t, w, "nothing to backfill", args...)
	}
}

// TestEmptyToIsRefused: an empty --to (an unset variable in a script) is
// never "up to now - sync.safety_lag", as an empty --from is never "from
// the beginning": exit 2, before a state or an output is created. A --to
// left out keeps that default.
func TestEmptyToIsRefused(t *testing.T) {
	sim, start := mistakeSim(t)
	form := sim.FormIDs()[0]
	w := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{})
	from := start.Format(time.RFC3339)
	for _, to := range []string{"", "  "} {
		for _, args := range [][]string{
			{"backfill", "--form", form, "--from", from, "--to", to},
			{"backfill", "--form", form, "--from", from, "--to", to, "-o", "json"},
			{"backfill", "--form", form, "--from", from, "--to", to, "--dry-run"},
			{"backfill", "--from", from, "--to", to},
			{"backfill", "--from", from, "--to=" + to},
		} {
			refused(t, w, "--to is empty", args...)
		}
	}
	for _, p := range []string{w.State, w.Out} {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("backfill --to '' created %s (%v)", p, err)
		}
	}
	// Left out, --to is now - sync.safety_lag.
	if code, _, stderr := run(t, w, "backfill", "--form", form, "--from", from); code != 0 {
		t.Errorf("backfill without --to: exit %d %s", code, stderr)
	}
}

// TestFormNotSelectedByTagsIsRefused: an account that selects its forms by
// tag (accounts[].tags) never syncs a form without one of them, so every
// command on one form refuses its id, as it refuses an excluded one: exit
// 2 naming the form, its tags and the account's, nothing written.
func TestFormNotSelectedByTagsIsRefused(t *testing.T) {
	sim, start := mistakeSim(t)
	ids := sim.FormIDs()
	from := start.Format(time.RFC3339)
	w := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{})
	// The forms' tags, as the account lists them.
	code, stdout, stderr := run(t, w, "forms", "-o", "json")
	var list struct{ Forms []formJSON }
	if err := json.Unmarshal([]byte(stdout), &list); code != 0 || err != nil {
		t.Fatalf("forms -o json: exit %d (%v) %s", code, err, stderr)
	}
	tags := map[string][]string{}
	for _, f := range list.Forms {
		tags[f.ID] = f.Tags
	}
	tag := ""
	for _, tg := range tags[ids[1]] {
		if !slices.Contains(tags[ids[0]], tg) {
			tag = tg
		}
	}
	if tag == "" {
		t.Fatalf("the simulator's forms %s (%v) and %s (%v) share their tags", ids[0], tags[ids[0]], ids[1], tags[ids[1]])
	}
	cfg := fmt.Sprintf("source: {base_url: %s, rate_limit: 200, max_attempts: 8, timeout: 10s}\n"+
		"accounts:\n  - {name: acme, api_key: \"${FORMS_API_KEY}\", tags: [%s]}\n"+
		"sync: {safety_lag: 0s}\nsink: {type: parquet, parquet: {path: %s}}\nstate: {path: %s}\nlog: {level: info, format: json}\n",
		sim.BaseURL, tag, w.Out, w.State)
	if err := os.WriteFile(w.Config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("--form %s is not selected by account acme: it carries none of the tags the account selects forms by (accounts[].tags: %s; the form's: ", ids[0], tag)
	for _, args := range oneFormCommands(ids[0], from) {
		refused(t, w, want, args...)
	}
	for _, p := range []string{w.State, w.Out} {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("a command on form %s, which the config does not select, created %s (%v)", ids[0], p, err)
		}
	}
	if code, _, stderr := run(t, w, "once", "--form", ids[1]); code != 0 {
		t.Fatalf("once --form of a form carrying tag %s: exit %d %s", tag, code, stderr)
	}
	// An id the account does not have is still named as such.
	refused(t, w, "form nosuchform does not exist in this account", "once", "--form", "nosuchform")
}

// TestUnknownFormIDNamesTheClosest: a mistyped form id on the command line
// exits 2 naming the closest ids (README "Exit codes"), whichever command
// it is given to. `syncd schema` named none, and pointed at forms[]
// ("check the form id in forms[]"), though the id came from the command
// line and this config lists no forms.
func TestUnknownFormIDNamesTheClosest(t *testing.T) {
	sim, start := mistakeSim(t)
	id := sim.FormIDs()[0]
	typo := id[:len(id)-1] + "x"
	if typo == id {
		typo = id[:len(id)-1] + "y"
	}
	w := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{})
	want := "form " + typo + " does not exist in this account (closest: " + id
	for _, args := range append(oneFormCommands(typo, start.Format(time.RFC3339)),
		[]string{"schema", typo}, []string{"schema", typo, "-o", "json"}) {
		refused(t, w, want, args...)
	}
	// adopt opens the state and the output to write them; a refused adopt
	// must not have created either.
	refused(t, w, want, "state", "adopt", typo)
	for _, p := range []string{w.State, w.Out} {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("state adopt %s (an unknown id) created %s (%v)", typo, p, err)
		}
	}
	if _, _, stderr := run(t, w, "schema", typo); strings.Contains(stderr, "forms[]") {
		t.Errorf("schema %s: %q points at forms[], but the id came from the command line and the config lists no forms", typo, strings.TrimSpace(stderr))
	}
	if code, stdout, stderr := run(t, w, "schema", id); code != 0 || !strings.Contains(stdout, "form "+id) {
		t.Errorf("schema %s (a form of the account): exit %d\n%s%s", id, code, stdout, stderr)
	}
}

// TestUnusableSpoolDirIsRefused: a sync.spool_dir that does not exist, is
// not a folder or cannot be written is an operator's mistake. validate
// reports it as a failed check; every command that syncs exits 2 with the
// same message before it opens the state or writes a file (it used to
// sync, and fail every batch that spooled with exit 1). syncd never
// creates the folder; once it exists and is writable, the same commands
// sync.
func TestUnusableSpoolDirIsRefused(t *testing.T) {
	sim, start := mistakeSim(t)
	form := sim.FormIDs()[0]
	from := start.Format(time.RFC3339)
	base := t.TempDir()
	file := filepath.Join(base, "a-file")
	if err := os.WriteFile(file, []byte("not a folder\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	readOnly := filepath.Join(base, "read-only")
	if err := os.Mkdir(readOnly, 0o500); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ name, dir, want string }{
		{"missing", filepath.Join(base, "missing"), "does not exist: create it"},
		{"a file", file, "is not a folder"},
		{"read-only", readOnly, "cannot be written"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "read-only" && os.Geteuid() == 0 {
				t.Skip("root writes a read-only folder")
			}
			// chunk_rows 4: every batch of the forms spools.
			w := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{Sync: fmt.Sprintf("  safety_lag: 0s\n  chunk_rows: 4\n  spool_dir: %q\n", tc.dir)})
			want := "sync.spool_dir " + tc.dir + " " + tc.want
			for _, args := range [][]string{
				{"once"},
				{"once", "--form", form},
				{"backfill", "--from", from},
				{"backfill", "--form", form, "--from", from},
				{"refresh", "--form", form, "--yes"},
				{"reconcile", "--form", form},
			} {
				refused(t, w, want, args...)
			}
			// run is refused at its start too (before the fix it synced on
			// until stopped).
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			var out, errb bytes.Buffer
			root, _ := newRoot(&out, &errb)
			root.SetArgs([]string{"run", "--config", w.Config})
			if code := exitCode(root.ExecuteContext(ctx), &errb); code != exitUsage || !strings.Contains(errb.String(), want) {
				t.Errorf("run: exit %d, stderr %q; want exit 2 saying %q", code, errb.String(), want)
			}
			for _, p := range []string{w.State, w.Out} {
				if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("a command refused for sync.spool_dir %s created %s (%v)", tc.dir, p, err)
				}
			}
			// validate (which makes the output folder, as a first pass would)
			// reports the same as a failed check, beside the others.
			code, stdout, _ := run(t, w, "validate")
			if code != exitFailed || !strings.Contains(stdout, "FAIL spool: "+want) || !strings.Contains(stdout, "ok   sink") {
				t.Errorf("validate: exit %d, stdout %q; want exit 1 and a failed spool check saying %q", code, stdout, want)
			}
			if tc.name != "missing" {
				return
			}
			if _, err := os.Stat(tc.dir); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("sync.spool_dir %s was created (%v): syncd never creates it", tc.dir, err)
			}
			// Created by the operator, as the message says: it works.
			if err := os.Mkdir(tc.dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if code, stdout, _ := run(t, w, "validate"); code != exitOK || !strings.Contains(stdout, "ok   spool "+tc.dir) {
				t.Errorf("validate with sync.spool_dir created: exit %d\n%s", code, stdout)
			}
			if code, stdout, stderr := run(t, w, "once"); code != exitOK {
				t.Errorf("once with sync.spool_dir created: exit %d\n%s%s", code, stdout, stderr)
			}
			if left, _ := os.ReadDir(tc.dir); len(left) != 0 {
				t.Errorf("sync.spool_dir holds %d entries after the pass and validate: they remove their scratch folders", len(left))
			}
		})
	}
}

// TestValidateWarnsOfAPausedForm: a form an account both lists and
// excludes is not synced (exclude wins: a way to pause a listed form), so
// validate names it as a warning, without failing (internal/app tests
// that the form is not synced).
func TestValidateWarnsOfAPausedForm(t *testing.T) {
	sim, _ := mistakeSim(t)
	ids := sim.FormIDs()
	w := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{})
	cfg := fmt.Sprintf("source: {base_url: %s, rate_limit: 200, max_attempts: 8, timeout: 10s}\n"+
		"accounts:\n  - {name: acme, api_key: \"${FORMS_API_KEY}\", forms: [{id: %s}, {id: %s}], exclude: [%s]}\n"+
		"sync: {safety_lag: 0s}\nsink: {type: parquet, parquet: {path: %s}}\nstate: {path: %s}\nlog: {level: info, format: json}\n",
		sim.BaseURL, ids[0], ids[1], ids[1], w.Out, w.State)
	if err := os.WriteFile(w.Config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("WARN config: accounts[0] (acme): form %s is in forms[1] and in exclude, so it is not synced", ids[1])
	code, stdout, stderr := run(t, w, "validate")
	if code != exitOK || !strings.Contains(stdout, want) {
		t.Errorf("validate: exit %d, stdout %q, stderr %q; want exit 0 and %q", code, stdout, stderr, want)
	}
	if strings.Contains(stdout, "form "+ids[0]+" is in") {
		t.Errorf("validate warns of form %s, which is listed and not excluded:\n%s", ids[0], stdout)
	}
}
