package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/testkit"
)

// format2Fixture is the state and output a single-account syncd of state
// format 2 wrote (commit 8814ce9, e34fdbd^); its README says how.
const format2Fixture = "testdata/format2-account"

// format2Sim is the simulator the fixture was synced from: the same seed,
// forms, counts and times give the same submissions, so the service still
// lists exactly what the fixture's output holds.
func format2Sim() formsim.Config {
	return formsim.Config{Seed: 22, Forms: 2, Submissions: 100,
		Start: time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC),
		End:   time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)}
}

// TestSingleAccountFormat2Upgrade is issue 22's promise to existing
// installations: the current syncd takes over a format-2 state and its
// output, written by the real old binary, with today's single-account
// config and then with an accounts list naming the account default,
// without writing a row twice or moving a file; a second account lands
// beside it and leaves it alone.
func TestSingleAccountFormat2Upgrade(t *testing.T) {
	sim := testkit.StartSim(t, format2Sim())
	forms := sim.FormIDs()
	w := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{Sync: "  safety_lag: 0s\n  max_rows_per_batch: 40\n"})
	copyDir(t, filepath.Join(format2Fixture, "output"), w.Out)
	copyDir(t, filepath.Join(format2Fixture, "state"), filepath.Dir(w.State))
	if v := stateFormat(t, w.State); v != "2" {
		t.Fatalf("the fixture's state is format %q, want 2", v)
	}
	duck := testkit.OpenDuck(t)
	for _, f := range forms {
		testkit.CheckExactlyOnce(t, duck.IDCounts(t, w.Out, poller.DefaultTable(f)), sim.ExpectedIDs(f))
	}
	if t.Failed() {
		t.Fatalf("the fixture's output is not what the simulator lists: regenerate it (%s/README.md)", format2Fixture)
	}
	ctx := context.Background()
	// once runs a pass and returns its summary.
	once := func(t *testing.T) []onceEntry {
		t.Helper()
		res := testkit.Run(ctx, syncdBin, w, "once", "-o", "json")
		if res.Code != 0 {
			t.Fatalf("syncd once exited %d\nstdout:\n%s\nstderr:\n%s", res.Code, res.Stdout, tail(res.Stderr))
		}
		var sum []onceEntry
		if err := json.Unmarshal([]byte(res.Stdout), &sum); err != nil {
			t.Fatalf("syncd once -o json: %v\n%s", err, res.Stdout)
		}
		return sum
	}
	// exact checks the default account's tables against the service: every
	// submission once, the latest view the service's, still in the
	// single-account layout.
	exact := func(t *testing.T) {
		t.Helper()
		for _, f := range forms {
			table := poller.DefaultTable(f)
			testkit.CheckExactlyOnce(t, duck.IDCounts(t, w.Out, table), sim.ExpectedIDs(f))
			if n := duck.DuplicateVersions(t, w.Out, table); n != 0 {
				t.Errorf("table %s holds %d versions more than once", table, n)
			}
			testkit.CheckLatestView(t, duck.LatestView(t, w.Out, table, format2Sim().Start), testkit.ServiceVersions(t, sim, f, format2Sim().Start))
		}
	}

	fixture := fileSums(t, w.Out)
	if !t.Run("single-account config", func(t *testing.T) {
		once(t)
		if v := stateFormat(t, w.State); v != "3" {
			t.Errorf("the state at %s is format %q after the pass, want 3 (migrated in place)", w.State, v)
		}
		// Read every committed row again against the migrated version
		// index: a version the migration lost would be written again.
		for _, f := range forms {
			from := format2Sim().Start.Format(time.RFC3339)
			if res := testkit.Run(ctx, syncdBin, w, "reconcile", "--form", f, "--from", from); res.Code != 0 {
				t.Fatalf("syncd reconcile --form %s exited %d\nstdout:\n%s\nstderr:\n%s", f, res.Code, res.Stdout, tail(res.Stderr))
			}
		}
		// Nothing arrived or changed since the fixture: no file is written.
		checkSameFiles(t, fixture, fileSums(t, w.Out))
		exact(t)
		checkStreamKeys(t, w, forms)
		checkNoAccountFolder(t, w.Out)
	}) {
		return
	}

	if !t.Run("accounts list naming default", func(t *testing.T) {
		// New submissions, later than the committed windows (the sleep), for
		// the pass to add to the same tables.
		time.Sleep(10 * time.Millisecond)
		now := time.Now()
		for _, f := range forms {
			if _, err := sim.Insert(f, now.Add(-2*time.Millisecond), now.Add(-time.Millisecond), now); err != nil {
				t.Fatal(err)
			}
		}
		before := fileSums(t, w.Out)
		writeAccounts(t, w, "  - name: default\n    api_key: ${FORMS_API_KEY}\n")
		once(t)
		after := fileSums(t, w.Out)
		for p, sum := range before {
			if after[p] != sum {
				t.Errorf("%s was changed or removed", p)
			}
		}
		if len(after) == len(before) {
			t.Error("the pass wrote no file for the new submissions")
		}
		exact(t)
		checkStreamKeys(t, w, forms)
		checkNoAccountFolder(t, w.Out)
	}) {
		return
	}

	t.Run("second account", func(t *testing.T) {
		before := fileSums(t, w.Out)
		// acme reads the same forms: the same form ids in two accounts must
		// stay apart in the state and in the output.
		writeAccounts(t, w, "  - name: default\n    api_key: ${FORMS_API_KEY}\n  - name: acme\n    api_key: ${FORMS_API_KEY}\n")
		var streams []string
		for _, e := range once(t) {
			streams = append(streams, e.Account+" "+e.Source+" "+e.FormID)
		}
		var wantStreams []string
		for _, f := range forms {
			wantStreams = append(wantStreams, "default forms "+f, "acme forms acme/"+f)
		}
		slices.Sort(streams)
		slices.Sort(wantStreams)
		if !slices.Equal(streams, wantStreams) {
			t.Errorf("the pass summed up (account source stream) %q, want %q", streams, wantStreams)
		}
		acme := filepath.Join(w.Out, "account=acme")
		after := fileSums(t, w.Out)
		for p := range after {
			if strings.HasPrefix(p, "account=acme/") {
				delete(after, p)
			}
		}
		checkSameFiles(t, before, after)
		exact(t)
		want := slices.Clone(forms)
		for _, f := range forms {
			want = append(want, "acme/"+f)
			testkit.CheckExactlyOnce(t, duck.IDCounts(t, acme, poller.DefaultTable(f)), sim.ExpectedIDs(f))
		}
		checkStreamKeys(t, w, want)
	})
}

// onceEntry is what a test reads of a stream's entry in `syncd once -o json`.
type onceEntry struct {
	Account string `json:"account"`
	Source  string `json:"source"`
	FormID  string `json:"form_id"`
}

// copyDir copies the fixture folder src to dst, which must not exist yet.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
}

// stateFormat reads the format version a bolt state file records.
func stateFormat(t *testing.T, path string) string {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v string
	err = db.View(func(tx *bolt.Tx) error {
		if meta := tx.Bucket([]byte("meta")); meta != nil {
			v = string(meta.Get([]byte("format_version")))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// fileSums maps every Parquet file under root (by its slash path relative
// to root) to the SHA-256 of its content.
func fileSums(t *testing.T, root string) map[string][32]byte {
	t.Helper()
	sums := map[string][32]byte{}
	for _, p := range testkit.ParquetFiles(t, root) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			t.Fatal(err)
		}
		sums[filepath.ToSlash(rel)] = sha256.Sum256(b)
	}
	return sums
}

// checkSameFiles reports the files added, removed or changed between two
// fileSums.
func checkSameFiles(t *testing.T, before, after map[string][32]byte) {
	t.Helper()
	for p, sum := range before {
		if s, ok := after[p]; !ok {
			t.Errorf("%s was removed", p)
		} else if s != sum {
			t.Errorf("%s was rewritten", p)
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			t.Errorf("%s was written", p)
		}
	}
}

// checkStreamKeys compares the stream keys `syncd state show -o json`
// lists with want.
func checkStreamKeys(t *testing.T, w *testkit.Workdir, want []string) {
	t.Helper()
	res := testkit.Run(context.Background(), syncdBin, w, "state", "show", "-o", "json")
	if res.Code != 0 {
		t.Fatalf("state show exited %d: %s", res.Code, tail(res.Stderr))
	}
	var v stateShowJSON
	if err := json.Unmarshal([]byte(res.Stdout), &v); err != nil {
		t.Fatalf("state show -o json is not JSON: %v\n%s", err, res.Stdout)
	}
	if v.State != w.State {
		t.Errorf("state show read %s, want %s", v.State, w.State)
	}
	var got []string
	for _, f := range v.Forms {
		got = append(got, f.FormID)
	}
	slices.Sort(got)
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(got, want) {
		t.Errorf("state keys %q, want %q", got, want)
	}
}

// checkNoAccountFolder fails if any account= folder appeared under out:
// the default account writes where a single-account syncd did.
func checkNoAccountFolder(t *testing.T, out string) {
	t.Helper()
	err := filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), "account=") {
			t.Errorf("%s appeared", p)
			return fs.SkipDir
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// writeAccounts turns the workdir's config into one with an accounts list:
// the key moves from source into the accounts.
func writeAccounts(t *testing.T, w *testkit.Workdir, accounts string) {
	t.Helper()
	b, err := os.ReadFile(w.Config)
	if err != nil {
		t.Fatal(err)
	}
	const key = "  api_key: ${FORMS_API_KEY}\n"
	if i := bytes.Index(b, []byte("\naccounts:\n")); i >= 0 {
		b = b[:i+1]
	} else if !bytes.Contains(b, []byte(key)) {
		t.Fatalf("the config has no source.api_key to move:\n%s", b)
	}
	b = bytes.Replace(b, []byte(key), nil, 1)
	b = append(b, "accounts:\n"+accounts...)
	if err := os.WriteFile(w.Config, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
