package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/testkit"
)

// formsOAuthSecret is the OAuth app's client secret of the test: it must
// never show in syncd's output.
const formsOAuthSecret = "fo_app_secret_5b1e9c"

// TestFormsOAuthAccounts: two accounts sign in to the Forms API with the
// one OAuth app (`syncd auth login --account NAME --source forms`), each
// workspace consenting in its own browser session; their configured
// base_url is wrong or absent, and each syncs from the base URL its token
// came with, on a deployment of its own. `once` syncs both exactly.
// Invalidating one token fails that account alone, with the line naming
// its login command; the other still syncs.
func TestFormsOAuthAccounts(t *testing.T) {
	start, end := history(200)
	cfgs := []formsim.Config{
		{APIKey: "sk_oauth_one_7d2a", Seed: 71, Forms: 2, Submissions: 90, Start: start, End: end, RateLimit: formsim.ServiceRateLimit},
		{APIKey: "sk_oauth_two_c41f", Seed: 71, Forms: 2, Submissions: 120, Start: start, End: end, RateLimit: formsim.ServiceRateLimit},
	}
	m, err := formsim.NewMulti(cfgs...)
	if err != nil {
		t.Fatal(err)
	}
	// One service, two deployments (two addresses): the token's base_url
	// says which is the workspace's.
	deploy := []*httptest.Server{httptest.NewServer(m), httptest.NewServer(m)}
	t.Cleanup(func() { deploy[0].Close(); deploy[1].Close(); m.Close() })
	accounts := make([]*formsAccount, len(cfgs))
	bases := map[string]string{}
	for i, c := range cfgs {
		accounts[i] = &formsAccount{name: []string{"o-one", "o-two"}[i], key: c.APIKey, baseURL: deploy[i].URL + formsim.BasePath,
			multi: m, forms: m.Workspace(c.APIKey).FormIDs()}
		bases[c.APIKey] = accounts[i].baseURL
	}
	redirect := "http://" + testkit.FreeAddr(t) + "/callback"
	if err := m.EnableOAuth(formsim.OAuthApp{ClientID: "syncd-app", ClientSecret: formsOAuthSecret, RedirectURIs: []string{redirect},
		BaseURL: func(key string) string { return bases[key] }}); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	w := &testkit.Workdir{Dir: dir, Config: filepath.Join(dir, "syncd.yaml"), Out: filepath.Join(dir, "out"), State: filepath.Join(dir, "state", "syncd.db")}
	// source.base_url (o-one's default) and o-two's base_url lead nowhere:
	// only the tokens' base URLs reach the workspaces.
	raw := fmt.Sprintf(`source:
  base_url: http://127.0.0.1:1/v1/api
  max_attempts: 2
  timeout: 10s
forms_oauth:
  authorize_url: %[1]s%[2]s
  token_url: %[1]s%[3]s
  client_id: syncd-app
  client_secret: ${FORMS_APP_SECRET}
  redirect_uri: %[4]s
sync:
  safety_lag: 0s
  max_rows_per_batch: 50
  concurrency: 2
sink:
  parquet: {path: %[5]s}
state:
  path: %[6]s
log:
  format: json
accounts:
  - name: o-one
    forms_oauth: true
  - name: o-two
    base_url: http://127.0.0.1:9/v1/api
    forms_oauth: true
`, deploy[0].URL, formsim.PathOAuthAuthorize, formsim.PathOAuthToken, redirect, w.Out, w.State)
	if err := os.WriteFile(w.Config, []byte(raw), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"FORMS_APP_SECRET=" + formsOAuthSecret}
	ctx := context.Background()
	run := func(args ...string) testkit.Result { return testkit.RunEnv(ctx, syncdBin, w, env, args...) }
	noSecret := func(what string, res testkit.Result) {
		t.Helper()
		if strings.Contains(res.Stdout+res.Stderr, formsOAuthSecret) || strings.Contains(res.Stdout+res.Stderr, "fo_oauth_") {
			t.Errorf("%s prints a secret:\n%s\n%s", what, res.Stdout, tail(res.Stderr))
		}
	}

	// Before any sign-in, each account fails alone, naming its login.
	res := run("once")
	noSecret("once before the sign-ins", res)
	if res.Code != 1 {
		t.Fatalf("once before the sign-ins exited %d, want 1\n%s\n%s", res.Code, res.Stdout, tail(res.Stderr))
	}
	for _, a := range accounts {
		if want := "account " + a.name + " has not signed in to the Forms API: run `syncd auth login --account " + a.name + " --source forms`"; !strings.Contains(res.Stdout, want) {
			t.Errorf("once does not say %q:\n%s", want, res.Stdout)
		}
	}

	for _, a := range accounts {
		res := formsLoginAs(t, w, env, deploy[0].URL, a)
		noSecret("auth login", res)
		if want := "account " + a.name + ": signed in to the Forms API at " + a.baseURL; res.Code != 0 || !strings.Contains(res.Stdout, want) {
			t.Fatalf("auth login --account %s --source forms: exit %d, want %q\n%s\n%s", a.name, res.Code, want, res.Stdout, tail(res.Stderr))
		}
	}
	if st := m.OAuthStats(); st.Exchanges != 2 || st.Refused != 0 {
		t.Errorf("the token endpoint: %+v, want two exchanges", st)
	}
	res = run("auth", "status", "--source", "forms")
	noSecret("auth status", res)
	for _, a := range accounts {
		if want := "account " + a.name + ": signed in to the Forms API at " + a.baseURL; res.Code != 0 || !strings.Contains(res.Stdout, want) {
			t.Errorf("auth status --source forms: exit %d, want %q\n%s\n%s", res.Code, want, res.Stdout, tail(res.Stderr))
		}
	}

	// A command that only reads the API uses the stored sign-in too.
	res = run("forms", "--account", "o-two")
	noSecret("forms", res)
	if res.Code != 0 || !strings.Contains(res.Stdout, accounts[1].forms[0]) {
		t.Errorf("forms --account o-two: exit %d\n%s\n%s", res.Code, res.Stdout, tail(res.Stderr))
	}
	// A new process has no memory of the last one's pacing: a second
	// apart, the simulator's window measures the pass alone.
	time.Sleep(time.Second)

	res = run("once")
	noSecret("once", res)
	if res.Code != 0 {
		t.Fatalf("once after the sign-ins exited %d\n%s\n%s", res.Code, res.Stdout, tail(res.Stderr))
	}
	duck := testkit.OpenDuck(t)
	for _, a := range accounts {
		checkAccountOutput(t, duck, w.Out, a, true)
	}

	// The first workspace invalidates its token: that account alone fails.
	if n := m.InvalidateTokens(accounts[0].key); n != 1 {
		t.Fatalf("invalidated %d tokens of %s, want 1", n, accounts[0].name)
	}
	res = run("once")
	noSecret("once after the invalidation", res)
	if res.Code != 1 {
		t.Fatalf("once after the invalidation exited %d, want 1\n%s\n%s", res.Code, res.Stdout, tail(res.Stderr))
	}
	for _, want := range []string{
		"account o-one: the Forms API at " + accounts[0].baseURL + " no longer accepts its OAuth sign-in",
		"run `syncd auth login --account o-one --source forms`",
	} {
		if !strings.Contains(res.Stdout, want) {
			t.Errorf("the pass does not say %q:\n%s", want, res.Stdout)
		}
	}
	t.Logf("the pass after the invalidation:\n%s", res.Stdout)
	failing := 0
	for _, line := range strings.Split(res.Stdout, "\n") {
		if strings.HasPrefix(line, "FAIL") {
			failing++
			if !strings.Contains(line, "o-one") {
				t.Errorf("an account other than o-one failed: %s", line)
			}
		}
	}
	if failing != 1 {
		t.Errorf("%d lines FAIL, want one:\n%s", failing, res.Stdout)
	}
	checkAccountOutput(t, duck, w.Out, accounts[1], true)
	checkAccountOutput(t, duck, w.Out, accounts[0], false)
	res = run("auth", "status", "--source", "forms", "--account", "o-one")
	if res.Code != 1 || !strings.Contains(res.Stdout, "refuses the token") {
		t.Errorf("auth status of the invalidated sign-in: exit %d\n%s", res.Code, res.Stdout)
	}

	// Beside a running daemon, which holds the state: auth status asks it,
	// and auth login hands it the new sign-in, which its passes then use.
	daemonAddr := testkit.FreeAddr(t)
	if err := os.WriteFile(w.Config, []byte(raw+"server:\n  addr: "+daemonAddr+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	daemon, daemonErr := startDaemon(t, w, env)
	res = run("auth", "status", "--source", "forms", "--account", "o-one")
	noSecret("auth status beside the daemon", res)
	if res.Code != 1 || !strings.Contains(res.Stdout, "refuses the token") || !strings.Contains(res.Stderr, "the running syncd") {
		t.Errorf("auth status of the invalidated sign-in beside the daemon: exit %d\n%s\n%s", res.Code, res.Stdout, tail(res.Stderr))
	}
	res = formsLoginAs(t, w, env, deploy[0].URL, accounts[0])
	noSecret("auth login beside the daemon", res)
	if res.Code != 0 || !strings.Contains(res.Stdout, "stored by the running syncd") {
		t.Fatalf("auth login --source forms beside the daemon: exit %d\n%s\n%s", res.Code, res.Stdout, tail(res.Stderr))
	}
	res = run("auth", "status", "--source", "forms")
	if res.Code != 0 || !strings.Contains(res.Stdout, "account o-one: signed in to the Forms API at "+accounts[0].baseURL) {
		t.Errorf("auth status beside the daemon after the new sign-in: exit %d\n%s\n%s", res.Code, res.Stdout, tail(res.Stderr))
	}
	stopDaemon(t, daemon, daemonErr)
	if res := run("once"); res.Code != 0 {
		t.Fatalf("once with the sign-in the daemon stored: exit %d\n%s\n%s", res.Code, res.Stdout, tail(res.Stderr))
	}
	checkAccountOutput(t, duck, w.Out, accounts[0], true)
	for _, a := range accounts {
		st, _ := m.Stats(a.key)
		if st.RateLimited > 0 || st.MaxPerSecond > formsim.ServiceRateLimit+2 {
			t.Errorf("account %s: %d requests answered 429, up to %d admitted in one second", a.name, st.RateLimited, st.MaxPerSecond)
		}
	}
}

// formsLoginAs runs `syncd auth login --account NAME --source forms` with
// a browser of its own signed in to a's workspace at the simulator
// (service), which follows the authorization URL back to syncd.
func formsLoginAs(t *testing.T, w *testkit.Workdir, env []string, service string, a *formsAccount) testkit.Result {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	browser := &http.Client{Jar: jar}
	resp, err := browser.Get(service + formsim.PathFormsLogin + "?key=" + a.key)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cmd, rd, stderr, url := startLoginOf(t, w, env, "--account", a.name, "--source", "forms")
	resp, err = browser.Get(url)
	if err != nil {
		cmd.Process.Kill()
		t.Fatalf("follow the authorization URL: %v", err)
	}
	resp.Body.Close()
	rest, _ := readAll(rd)
	err = cmd.Wait()
	res := testkit.Result{Stdout: url + "\n" + rest, Stderr: stderr.String()}
	if err != nil {
		res.Code = cmd.ProcessState.ExitCode()
	}
	return res
}
