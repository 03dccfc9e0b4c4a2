package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/syncd-dev/syncd/internal/bqfake"
	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/testkit"
)

// TestBigQueryAccountsOwnTables: on BigQuery, the default account's
// tables keep their names and another account's are prefixed with its
// name: two workspaces with the same form ids (one seed) never share a
// table, and each table holds exactly its account's submissions.
func TestBigQueryAccountsOwnTables(t *testing.T) {
	start, end := history(10)
	cfgs := []formsim.Config{
		{APIKey: "sk_bq_default_000000001", Seed: 91, Forms: 1, Submissions: 70, Start: start, End: end},
		{APIKey: "sk_bq_acme_eu_000000002", Seed: 91, Forms: 1, Submissions: 110, Start: start, End: end},
	}
	sim := testkit.StartMultiSim(t, cfgs...)
	f := bqfake.New(t)
	const project, dataset = "e2e", "forms"
	dir := t.TempDir()
	w := &testkit.Workdir{Dir: dir, Config: filepath.Join(dir, "syncd.yaml"), State: filepath.Join(dir, "state", "syncd.db")}
	raw := fmt.Sprintf("source: {base_url: %s}\nsync: {safety_lag: 0s, max_rows_per_batch: 50}\n%sstate: {path: %s}\naccounts:\n  - {name: default, api_key: %s}\n  - {name: acme-eu, api_key: %s}\n",
		sim.BaseURL, bqSink(f, project, dataset), w.State, cfgs[0].APIKey, cfgs[1].APIKey)
	if err := os.WriteFile(w.Config, []byte(raw), 0o600); err != nil {
		t.Fatal(err)
	}
	if res := testkit.Run(t.Context(), syncdBin, w, "once"); res.Code != 0 {
		t.Fatalf("once: exit %d\n%s\n%s", res.Code, res.Stdout, tail(res.Stderr))
	}
	form := sim.Workspace(cfgs[0].APIKey).FormIDs()[0]
	if other := sim.Workspace(cfgs[1].APIKey).FormIDs()[0]; other != form {
		t.Fatalf("the two workspaces should share form ids: %s, %s", form, other)
	}
	for _, tc := range []struct {
		table string
		key   string
	}{
		{poller.DefaultTable(form), cfgs[0].APIKey},
		{"acme_eu__" + poller.DefaultTable(form), cfgs[1].APIKey},
	} {
		want := sim.Workspace(tc.key).ExpectedIDs(form)
		got := map[string]int{}
		for _, r := range f.Rows(project, dataset, tc.table) {
			got[fmt.Sprint(r["submission_id"])]++
		}
		testkit.CheckExactlyOnce(t, got, want)
	}
}
