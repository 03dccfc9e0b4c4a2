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
	"github.com/syncd-dev/syncd/internal/schedsim"
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

// serviceVersions lists a workspace's form: submission id ->
// lastUpdatedAt (µs). It asks the workspace behind its own loopback
// server, past the deployment's limiter and revocations, so that checking
// never counts against the key.
func (a *formsAccount) serviceVersions(t *testing.T, form string) map[string]int64 {
	t.Helper()
	ts := httptest.NewServer(a.multi.Workspace(a.key))
	defer ts.Close()
	client, err := forms.New(forms.Config{BaseURL: ts.URL + formsim.BasePath, APIKey: a.key, RateLimit: 1000})
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

// manyAccounts is an installation serving the forms accounts (and, when
// set, scheduling users) from one config.
type manyAccounts struct {
	forms []*formsAccount
	sched *schedsim.Server
	users []string // the scheduling users; account s-<user> signs in as <user>
	w     *testkit.Workdir
	env   []string
}

// startUsers serves n scheduling users behind one OAuth client, their
// access tokens living expiry, and returns the scheduling section and the
// accounts entries of their accounts.
func (m *manyAccounts) startUsers(t *testing.T, n int, expiry time.Duration) (section, accounts string) {
	t.Helper()
	users := make([]schedsim.User, n)
	for i := range users {
		name := fmt.Sprintf("user%02d", i)
		users[i] = schedsim.User{ID: int64(500 + i), Username: name, Email: name + "@example.com", Name: "User " + name, TimeZone: "UTC"}
		m.users = append(m.users, name)
	}
	m.sched = schedsim.New(schedsim.Config{Seed: 23, Bookings: 15, TokenExpiry: expiry, Users: users, ChurnRate: 0.05, RateLimit: 5})
	ts := httptest.NewServer(m.sched)
	t.Cleanup(ts.Close)
	var secret string
	for _, c := range m.sched.Clients() {
		if c.ID == "sim-client" {
			secret = c.Secrets[0]
		}
	}
	m.env = append(m.env, "SCHED_SECRET="+secret)
	section = fmt.Sprintf("scheduling:\n  base_url: %s\n  authorize_url: %s%s\n  client_id: sim-client\n  client_secret: ${SCHED_SECRET}\n  redirect_uri: http://%s/callback\n  rate_limit: 4\n  max_attempts: 8\n",
		ts.URL, ts.URL, schedsim.PathAuthorize, testkit.FreeAddr(t))
	var b strings.Builder
	for _, u := range m.users {
		fmt.Fprintf(&b, "  - name: s-%s\n    scheduling: true\n", u)
	}
	return section, b.String()
}

// signIn signs every scheduling user in, each to their own account, with
// `syncd auth login --account`.
func (m *manyAccounts) signIn(t *testing.T) {
	t.Helper()
	for _, u := range m.users {
		m.signInUser(t, u)
	}
}

// signInUser signs user u in with auth login --account s-u.
func (m *manyAccounts) signInUser(t *testing.T, u string) {
	t.Helper()
	if err := m.sched.SetConsentingUser(u); err != nil {
		t.Fatal(err)
	}
	if res := loginAs(t, m.w, m.env, "--account", "s-"+u); res.Code != 0 || !strings.Contains(res.Stdout, "account s-"+u+": signed in as "+u+"@example.com") {
		t.Fatalf("auth login --account s-%s: exit %d\n%s\n%s", u, res.Code, res.Stdout, tail(res.Stderr))
	}
}

func (m *manyAccounts) run(ctx context.Context, kill time.Duration, args ...string) testkit.Result {
	if kill > 0 {
		return testkit.RunEnvKilledAfter(ctx, syncdBin, m.w, m.env, kill, args...)
	}
	return testkit.RunEnv(ctx, syncdBin, m.w, m.env, args...)
}

// checkRates: no key went over the service's limit, by the simulators'
// own clocks: none was answered 429 by the simulator's limiter (the
// service's 5 requests/s with a second's burst). The most requests of a
// key in any sliding second may exceed 5 by two: one at the window's edge
// (requests paced 200 ms apart arrive with jitter), and the first request
// of a syncd started right after one was killed (a new process has no
// memory of the dead one's pacing).
func (m *manyAccounts) checkRates(t *testing.T) {
	t.Helper()
	for _, a := range m.forms {
		st, _ := a.multi.Stats(a.key)
		if st.RateLimited > 0 || st.MaxPerSecond > formsim.ServiceRateLimit+2 {
			t.Errorf("account %s: the simulator answered %d requests 429 and admitted up to %d in one second (limit %d)", a.name, st.RateLimited, st.MaxPerSecond, formsim.ServiceRateLimit)
		}
	}
}

// writeAccountsConfig writes the installation's config: the forms
// accounts, then extra top-level sections (the scheduling users).
func writeAccountsConfig(t *testing.T, m *manyAccounts, extraAccounts, extra string) {
	t.Helper()
	dir := t.TempDir()
	m.w = &testkit.Workdir{Dir: dir, Config: filepath.Join(dir, "syncd.yaml"), Out: filepath.Join(dir, "out"), State: filepath.Join(dir, "state", "syncd.db")}
	accounts, env := accountsSection(t, dir, m.forms)
	m.env = append(m.env, env...)
	raw := fmt.Sprintf(`source:
  base_url: %s
  rate_limit: 5
  max_attempts: 8
  timeout: 10s
sync:
  safety_lag: 0s
  max_rows_per_batch: 60
  concurrency: 2
  max_batches: 8
sink:
  parquet: {path: %s}
state:
  path: %s
log:
  level: info
  format: json
%s%s%s`, m.forms[0].baseURL, m.w.Out, m.w.State, extra, accounts, extraAccounts)
	if err := os.WriteFile(m.w.Config, []byte(raw), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestManyAccountsOneProcess: 20 Forms API accounts on two deployments in
// one syncd, killed with SIGKILL at random instants; one key is revoked
// midway. The revoked account fails with a sentence naming it and the fix,
// the others complete; each account's output is exact and its own, and no
// key ever went over the service's limit.
func TestManyAccountsOneProcess(t *testing.T) {
	seed := testkit.Seed(t, "SYNCD_ACCOUNTS_SEED")
	rng := rand.New(rand.NewPCG(seed, 22))
	m := &manyAccounts{forms: startWorkspaces(t, rng, 10)}
	section, users := m.startUsers(t, 10, 3*time.Second)
	writeAccountsConfig(t, m, users, section)
	m.signIn(t)
	ctx := context.Background()
	revoked, revokedUser := m.forms[7], m.users[3]
	kills := 0
	for try := 0; kills < 12; try++ {
		if try > 60 {
			t.Fatalf("only %d kills landed in %d runs (seed %d)", kills, try, seed)
		}
		if kills == 6 && revoked.multi.Revoke(revoked.key) {
			// The user revokes the app: the refresh token is refused once the
			// access token (3 s) runs out.
			if err := m.sched.RevokeUserRefreshTokens(revokedUser); err != nil {
				t.Fatal(err)
			}
			t.Logf("revoked the key of account %s and the sign-in of s-%s", revoked.name, revokedUser)
		}
		res := m.run(ctx, time.Duration(100+rng.IntN(2500))*time.Millisecond, "once")
		if res.Killed {
			kills++
			continue
		}
		if res.Code != 0 && res.Code != 1 {
			t.Fatalf("once exited %d (seed %d): %s\n%s", res.Code, seed, res.Stdout, tail(res.Stderr))
		}
	}
	if !revoked.multi.Revoke(revoked.key) {
		t.Logf("the key of %s was revoked before", revoked.name)
	}
	// A kill right after the token endpoint answered, before the rotated
	// pair reached the state, spends that user's refresh token (it works
	// once): the pass says to sign in again, and the user does, as in
	// TestBookingsSurviveKillsDuringTokenRotation. The revoked user stays
	// out.
	relogins := 0
	settle := m.run(ctx, 0, "once")
	for _, u := range m.users {
		if u == revokedUser || !strings.Contains(settle.Stdout, "account s-"+u+": the scheduling API no longer accepts its sign-in") {
			continue
		}
		relogins++
		m.signInUser(t, u)
	}
	// The bookings stand still for the last pass, which the test compares
	// with the service.
	m.sched.SetChurnRate(0)
	m.sched.ExpireAccessTokens()
	time.Sleep(5 * time.Millisecond)
	res := m.run(ctx, 0, "once")
	if res.Code != 1 {
		t.Fatalf("the last pass exited %d, want 1 (two accounts failing) (seed %d)\n%s\n%s", res.Code, seed, res.Stdout, tail(res.Stderr))
	}
	for _, want := range []string{
		"account " + revoked.name + ": the Forms API at " + revoked.baseURL + " rejected its key",
		"account s-" + revokedUser + ": the scheduling API no longer accepts its sign-in",
		"run `syncd auth login --account s-" + revokedUser + "`",
	} {
		if !strings.Contains(res.Stdout, want) {
			t.Errorf("the pass does not say %q:\n%s", want, res.Stdout)
		}
	}
	failing := 0
	for _, line := range strings.Split(res.Stdout, "\n") {
		if !strings.HasPrefix(line, "FAIL") {
			continue
		}
		failing++
		if !strings.Contains(line, revoked.name) && !strings.Contains(line, "s-"+revokedUser) {
			t.Errorf("an account other than %s and s-%s failed: %s", revoked.name, revokedUser, line)
		}
	}
	if failing != 2 {
		t.Errorf("%d lines FAIL, want one per failing account:\n%s", failing, res.Stdout)
	}
	m.checkRates(t)
	duck := testkit.OpenDuck(t)
	for _, a := range m.forms {
		checkAccountOutput(t, duck, m.w.Out, a, a != revoked)
	}
	for _, u := range m.users {
		admin, err := m.sched.ForUser(u)
		if err != nil {
			t.Fatal(err)
		}
		if st := admin.Stats(); st.Throttled > 0 {
			t.Errorf("user %s: %d calls answered 429 (most in one second: %d)", u, st.Throttled, st.MaxPerSecond)
		}
		if u == revokedUser {
			continue // what it synced before the revocation is checked for duplicates below
		}
		checkBookingsIn(t, duck, filepath.Join(m.w.Out, "account=s-"+u), admin.Journal())
	}
	var dups int
	// On a loaded machine every run before the revocation may have been
	// killed before the revoked user's first commit: no file, nothing twice.
	if revokedOut := filepath.Join(m.w.Out, "account=s-"+revokedUser); testkit.HasFiles(revokedOut, "bookings") {
		if err := duck.DB.QueryRow("SELECT count(*) FROM (SELECT uid, _version_time FROM " + testkit.Scan(revokedOut, "bookings") + " GROUP BY 1, 2 HAVING count(*) > 1)").Scan(&dups); err != nil {
			t.Fatal(err)
		}
	} else {
		t.Logf("s-%s synced no booking before the revocation", revokedUser)
	}
	if dups != 0 {
		t.Errorf("s-%s: %d booking versions twice", revokedUser, dups)
	}
	t.Logf("%d kills, %d users asked to sign in again after a kill (seed %d)", kills, relogins, seed)
}
