package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/poller"
	forms "github.com/syncd-dev/syncd/internal/source/forms/api"
	"github.com/syncd-dev/syncd/internal/testkit"
)

// formsAccount is one Forms API workspace of the many-accounts tests.
type formsAccount struct {
	name, key, baseURL string
	multi              *formsim.Multi
	forms              []string
}

// startWorkspaces serves n workspaces on each of two base URLs (a US and
// an EU deployment), each with the service's 5 requests/s per key. Two
// workspaces, one per deployment, share a seed (the same form ids), so a
// row that lands in the wrong account's table cannot pass for its own.
func startWorkspaces(t *testing.T, rng *rand.Rand, n int) []*formsAccount {
	t.Helper()
	start, end := history(400)
	var out []*formsAccount
	for d, region := range []string{"us", "eu"} {
		cfgs := make([]formsim.Config, n)
		for i := range cfgs {
			seed := int64(1000 + d*n + i)
			if i == 0 {
				seed = 1000 // both deployments' first workspace
			}
			cfgs[i] = formsim.Config{
				APIKey: fmt.Sprintf("sk_%s_%02d_%016x", region, i, rng.Uint64()), Seed: seed,
				Forms: 1 + rng.IntN(3), Submissions: 30 + rng.IntN(150), Start: start, End: end,
				RateLimit: formsim.ServiceRateLimit,
			}
		}
		m, err := formsim.NewMulti(cfgs...)
		if err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewServer(m)
		t.Cleanup(func() { ts.Close(); m.Close() })
		for i, c := range cfgs {
			out = append(out, &formsAccount{name: fmt.Sprintf("f-%s%02d", region, i), key: c.APIKey, baseURL: ts.URL + formsim.BasePath,
				multi: m, forms: m.Workspace(c.APIKey).FormIDs()})
		}
	}
	return out
}

// accountsSection is the accounts list of the forms accounts: keys from
// the environment for half of them, from mounted files for the others.
func accountsSection(t *testing.T, dir string, list []*formsAccount) (yaml string, env []string) {
	t.Helper()
	var b strings.Builder
	b.WriteString("accounts:\n")
	for i, a := range list {
		fmt.Fprintf(&b, "  - name: %s\n    base_url: %s\n", a.name, a.baseURL)
		if i%2 == 0 {
			v := "KEY_" + strings.ToUpper(strings.NewReplacer("-", "_").Replace(a.name))
			env = append(env, v+"="+a.key)
			fmt.Fprintf(&b, "    api_key: ${%s}\n", v)
			continue
		}
		path := filepath.Join(dir, "keys", a.name)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(a.key+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "    api_key_file: %s\n", path)
	}
	return b.String(), env
}

// serviceVersions lists a workspace's form through its own key: submission
// id -> lastUpdatedAt (µs).
func (a *formsAccount) serviceVersions(t *testing.T, form string) map[string]int64 {
	t.Helper()
	client, err := forms.New(forms.Config{BaseURL: a.baseURL, APIKey: a.key, RateLimit: formsim.ServiceRateLimit})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{}
	for offset := 0; ; offset += forms.MaxListLimit {
		page, err := client.ListSubmissions(context.Background(), form, forms.ListParams{Limit: forms.MaxListLimit, Offset: offset, Sort: forms.SortAsc})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range page.Responses {
			if s.LastUpdatedAt != nil {
				want[s.SubmissionID] = s.LastUpdatedAt.UnixMicro()
			}
		}
		if len(page.Responses) < forms.MaxListLimit {
			return want
		}
	}
}

// checkAccountOutput: the account's folder holds exactly its forms'
// tables, and each table every version once with the latest view equal to
// the service (exact), or, for an account that stopped, a subset of it
// with nothing twice.
func checkAccountOutput(t *testing.T, duck *testkit.Duck, out string, a *formsAccount, exact bool) {
	t.Helper()
	root := filepath.Join(out, "account="+a.name)
	entries, err := os.ReadDir(root)
	if err != nil && exact {
		t.Errorf("account %s: no output folder: %v", a.name, err)
		return
	}
	var tables, want []string
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") && !strings.HasPrefix(e.Name(), "_") {
			tables = append(tables, e.Name())
		}
	}
	for _, f := range a.forms {
		want = append(want, poller.DefaultTable(f))
	}
	slices.Sort(tables)
	slices.Sort(want)
	if exact && !slices.Equal(tables, want) {
		t.Errorf("account %s holds tables %v, want exactly its forms' %v", a.name, tables, want)
	}
	for _, f := range a.forms {
		table := poller.DefaultTable(f)
		if !testkit.HasFiles(root, table) {
			if exact {
				t.Errorf("account %s: form %s has no output", a.name, f)
			}
			continue
		}
		if n := duck.DuplicateVersions(t, root, table); n != 0 {
			t.Errorf("account %s, form %s: %d versions are in the output more than once", a.name, f, n)
		}
		got := duck.LatestView(t, root, table, time.Time{})
		svc := a.serviceVersions(t, f)
		if exact {
			testkit.CheckLatestView(t, got, svc)
			continue
		}
		for id, us := range got {
			if v, ok := svc[id]; !ok || v != us {
				t.Errorf("account %s, form %s: the output holds %s at %d, which the service never listed (%d)", a.name, f, id, us, v)
			}
		}
	}
}
