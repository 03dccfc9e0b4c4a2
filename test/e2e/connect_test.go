package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/connect"
	"github.com/syncd-dev/syncd/internal/schedsim"
	"github.com/syncd-dev/syncd/internal/testkit"
)

// browser is a person's browser: its own cookies, following redirects.
type browser struct{ *http.Client }

func newBrowser(t *testing.T) browser {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return browser{&http.Client{Jar: jar, Timeout: 20 * time.Second}}
}

// get fetches u, following redirects, and returns the last status and page.
func (b browser) get(t *testing.T, u string) (int, string) {
	t.Helper()
	resp, err := b.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestConnectPageTwoUsers: `syncd run` serves the connect page; two users
// each open their account's link in their own browser (a real HTTP client
// following the redirects through the scheduling API's consent), and the
// daemon syncs each one's bookings into its own account. A forged state, a
// replayed callback and a wrong link are refused and store nothing.
func TestConnectPageTwoUsers(t *testing.T) {
	users := []schedsim.User{
		{ID: 71, Username: "alice", Email: "alice@example.com", Name: "Alice", TimeZone: "UTC"},
		{ID: 72, Username: "bob", Email: "bob@example.com", Name: "Bob", TimeZone: "UTC"},
	}
	sched := schedsim.New(schedsim.Config{Seed: 31, Bookings: 12, Users: users})
	sts := httptest.NewServer(sched)
	t.Cleanup(sts.Close)
	var secret string
	for _, c := range sched.Clients() {
		if c.ID == "sim-client" {
			secret = c.Secrets[0]
		}
	}
	const connectSecret = "connect-secret-of-the-test-0123456789"
	addr := testkit.FreeAddr(t)
	dir := t.TempDir()
	w := &testkit.Workdir{Dir: dir, Config: filepath.Join(dir, "syncd.yaml"), Out: filepath.Join(dir, "out"), State: filepath.Join(dir, "state", "syncd.db")}
	cfg := fmt.Sprintf(`sync:
  safety_lag: 0s
  schedule: "@every 1s"
  jitter: 0s
sink: {parquet: {path: %s}}
state: {path: %s}
scheduling:
  base_url: %s
  authorize_url: %s%s
  client_id: sim-client
  client_secret: ${SCHED_SECRET}
server:
  addr: %s
  public_url: http://%s
  connect_secret: ${CONNECT_SECRET}
log: {level: info, format: json}
accounts:
  - {name: s-alice, scheduling: true}
  - {name: s-bob, scheduling: true}
`, w.Out, w.State, sts.URL, sts.URL, schedsim.PathAuthorize, addr, addr)
	if err := os.WriteFile(w.Config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"SCHED_SECRET=" + secret, "CONNECT_SECRET=" + connectSecret}

	res := testkit.RunEnv(t.Context(), syncdBin, w, env, "accounts", "link", "s-alice", "s-bob", "-o", "json")
	if res.Code != 0 {
		t.Fatalf("accounts link: exit %d\n%s", res.Code, res.Stderr)
	}
	var links []struct{ Account, URL string }
	if err := json.Unmarshal([]byte(res.Stdout), &links); err != nil || len(links) != 2 {
		t.Fatalf("accounts link -o json: %v\n%s", err, res.Stdout)
	}

	cmd := exec.Command(syncdBin, "run", "--config", w.Config)
	cmd.Env = append(os.Environ(), env...)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	if !eventually(15*time.Second, func() bool {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	}) {
		t.Fatalf("syncd run never served: %s", tail(stderr.String()))
	}

	// Wrong links are refused before anything reaches the scheduling API.
	stranger := newBrowser(t)
	for _, bad := range []struct {
		url  string
		code int
	}{
		{strings.Replace(links[0].URL, "token=", "token=x", 1), http.StatusForbidden},
		{"http://" + addr + connect.PathConnect + "?account=s-bob&" + strings.SplitN(links[0].URL, "&", 2)[1], http.StatusForbidden}, // alice's token for bob
		{"http://" + addr + connect.PathCallback + "?code=forged&state=forged", http.StatusBadRequest},
	} {
		if code, page := stranger.get(t, bad.url); code != bad.code {
			t.Errorf("GET %s: %d %q, want %d", bad.url, code, page, bad.code)
		}
	}

	// Alice connects in her browser, through the consent page.
	alice := newBrowser(t)
	alice.get(t, sts.URL+schedsim.PathLogin+"?user=alice")
	if code, page := alice.get(t, links[0].URL); code != http.StatusOK || !strings.Contains(page, "account s-alice is connected") {
		t.Fatalf("alice's connect: %d %q\n%s", code, page, tail(stderr.String()))
	}

	// Bob connects too; his browser stops at the redirect back to syncd,
	// so that the test can replay it.
	bob := newBrowser(t)
	bob.get(t, sts.URL+schedsim.PathLogin+"?user=bob")
	var callback string
	bob.CheckRedirect = func(req *http.Request, _ []*http.Request) error {
		if req.URL.Path == connect.PathCallback {
			callback = req.URL.String()
			return http.ErrUseLastResponse
		}
		return nil
	}
	bob.get(t, links[1].URL)
	if callback == "" {
		t.Fatalf("bob's browser was never sent back to syncd")
	}
	bob.CheckRedirect = nil
	// A forged state with bob's real code is refused, and leaves his
	// sign-in to finish.
	u, _ := url.Parse(callback)
	q := u.Query()
	q.Set("state", "forged")
	u.RawQuery = q.Encode()
	if code, page := bob.get(t, u.String()); code != http.StatusBadRequest {
		t.Errorf("a forged state: %d %q, want 400", code, page)
	}
	if code, page := bob.get(t, callback); code != http.StatusOK || !strings.Contains(page, "account s-bob is connected") {
		t.Fatalf("bob's connect: %d %q\n%s", code, page, tail(stderr.String()))
	}
	if code, page := bob.get(t, callback); code != http.StatusBadRequest {
		t.Errorf("the replayed callback: %d %q, want 400", code, page)
	}
	if got := sched.Stats(); got.CodeExchanges != 2 {
		t.Errorf("the token endpoint exchanged %d codes, want 2 (the replay and the forgery never reach it)", got.CodeExchanges)
	}

	// Each account's bookings are its user's, synced by the daemon's passes.
	duck := testkit.OpenDuck(t)
	for _, u := range users {
		admin, err := sched.ForUser(u.Username)
		if err != nil {
			t.Fatal(err)
		}
		root := filepath.Join(w.Out, "account=s-"+u.Username)
		want := len(admin.Journal())
		if !eventually(30*time.Second, func() bool {
			if !testkit.HasFiles(root, "bookings") {
				return false
			}
			var n int
			_ = duck.DB.QueryRow("SELECT count(DISTINCT uid) FROM " + testkit.Scan(root, "bookings")).Scan(&n)
			return n >= want
		}) {
			t.Fatalf("the bookings of s-%s never reached the output: %s", u.Username, tail(stderr.String()))
		}
	}
	acc := testkit.RunEnv(t.Context(), syncdBin, w, env, "accounts", "-o", "json")
	var view []struct {
		Account string `json:"account"`
		SignIn  *struct {
			SignedIn bool   `json:"signed_in"`
			User     string `json:"user"`
		} `json:"sign_in"`
	}
	if err := json.Unmarshal([]byte(acc.Stdout), &view); err != nil || len(view) != 2 {
		t.Fatalf("accounts -o json: %v\n%s\n%s", err, acc.Stdout, acc.Stderr)
	}
	for i, a := range view {
		if a.SignIn == nil || !a.SignIn.SignedIn || a.SignIn.User != users[i].Email {
			t.Errorf("account %s: sign-in %+v, want %s", a.Account, a.SignIn, users[i].Email)
		}
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Wait()
	for _, u := range users {
		admin, _ := sched.ForUser(u.Username)
		checkBookingsIn(t, duck, filepath.Join(w.Out, "account=s-"+u.Username), admin.Journal())
	}
	if strings.Contains(stderr.String(), connectSecret) || strings.Contains(stderr.String(), secret) {
		t.Errorf("a secret is in the daemon's log")
	}
}
