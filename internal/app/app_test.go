package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/testkit"
)

// accountsConfig is a configuration of accounts on sim, in dir.
func accountsConfig(t *testing.T, dir, baseURL, sync, accounts string) *config.Config {
	t.Helper()
	raw := fmt.Sprintf("source: {base_url: %q}\nsync:\n  safety_lag: 0s\n%ssink: {parquet: {path: out}}\nstate: {path: state/syncd.db}\naccounts:\n%s", baseURL, sync, accounts)
	path := filepath.Join(dir, "syncd.yaml")
	if err := os.WriteFile(path, []byte(raw), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, func(k string) (string, bool) { return testkit.APIKey, k == "KEY" })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestJobsSelectByIDTagAndExclusion(t *testing.T) {
	sim := testkit.StartSim(t, formsim.Config{Seed: 5, Forms: 6, Submissions: 5})
	ids := sim.FormIDs() // tags of form i: feedback+customers, events, hr+recruiting, support, none, product
	dir := t.TempDir()
	cfg := accountsConfig(t, dir, sim.BaseURL, "", fmt.Sprintf(`  - {name: all, api_key: "${KEY}", exclude: [%s]}
  - {name: tagged, api_key: "${KEY}", tags: [events, support]}
  - {name: listed, api_key: "${KEY}", forms: [{id: %s}, {id: %s, table: t2}], exclude: [%s]}
`, ids[0], ids[1], ids[2], ids[1]))
	a, err := Open(context.Background(), cfg, zap.NewNop(), Options{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for _, tc := range []struct {
		account string
		want    []string
	}{
		{"all", ids[1:]},
		{"tagged", []string{ids[1], ids[3]}},
		{"listed", []string{ids[2]}},
	} {
		jobs, err := a.Account(tc.account).Jobs(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, j := range jobs {
			got = append(got, j.Stream)
		}
		if strings.Join(sorted(got), ",") != strings.Join(sorted(tc.want), ",") {
			t.Errorf("account %s: jobs %v, want %v", tc.account, got, tc.want)
		}
	}
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// TestReloadAccounts: a reload keeps an unchanged account as it is, opens
// a changed or new one, drops a removed one, and refuses a change of the
// settings outside the accounts whole.
func TestReloadAccounts(t *testing.T) {
	sim := testkit.StartSim(t, formsim.Config{Seed: 6, Forms: 2, Submissions: 5})
	dir := t.TempDir()
	cfg := accountsConfig(t, dir, sim.BaseURL, "", `  - {name: a, api_key: "${KEY}"}
  - {name: b, api_key: "${KEY}"}
`)
	a, err := Open(context.Background(), cfg, zap.NewNop(), Options{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	before := a.Account("a")
	next := accountsConfig(t, dir, sim.BaseURL, "", `  - {name: a, api_key: "${KEY}"}
  - {name: c, api_key: "${KEY}", tags: [events]}
`)
	if err := a.Reload(context.Background(), next); err != nil {
		t.Fatal(err)
	}
	if a.Account("a") != before {
		t.Errorf("the unchanged account was opened again")
	}
	if a.Account("b") != nil || a.Account("c") == nil {
		t.Errorf("accounts after the reload: b %v, c %v; want b gone and c open", a.Account("b"), a.Account("c"))
	}
	if got := len(a.Current().AccountList()); got != 2 {
		t.Errorf("the current configuration has %d accounts, want 2", got)
	}
	global := accountsConfig(t, dir, sim.BaseURL, "  schedule: \"@every 1h\"\n", `  - {name: a, api_key: "${KEY}"}
`)
	err = a.Reload(context.Background(), global)
	if err == nil || !strings.Contains(err.Error(), "sync.schedule") || !strings.Contains(err.Error(), "restart") {
		t.Errorf("a change of sync.schedule reloaded: %v", err)
	}
	if a.Account("c") == nil {
		t.Errorf("a refused reload changed the accounts")
	}
}
