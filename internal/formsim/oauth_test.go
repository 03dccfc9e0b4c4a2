package formsim

import (
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

const (
	testClientID     = "app-1"
	testClientSecret = "app-secret"
	testRedirect     = "http://127.0.0.1:1/callback"
)

// startOAuth serves a Multi of workspaces keyed a and b with the OAuth app
// of the tests; base URLs are given per workspace.
func startOAuth(t *testing.T) (*Multi, *httptest.Server) {
	t.Helper()
	m, _ := startMulti(t, 0, 0, "key-a", "key-b")
	if err := m.EnableOAuth(OAuthApp{ClientID: testClientID, ClientSecret: testClientSecret, RedirectURIs: []string{testRedirect},
		BaseURL: func(key string) string { return "http://deploy-" + key + ".example/v1/api" }}); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(m)
	t.Cleanup(ts.Close)
	return m, ts
}

// noFollow is a browser that stops at the redirect to the app, keeping
// its cookies.
func noFollow(t *testing.T) *http.Client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// authorize asks the consent page and returns the redirect's query.
func authorize(t *testing.T, c *http.Client, ts *httptest.Server, clientID, redirect, state string) (int, url.Values) {
	t.Helper()
	q := url.Values{"client_id": {clientID}, "redirect_uri": {redirect}, "state": {state}}
	resp, err := c.Get(ts.URL + PathOAuthAuthorize + "?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		return resp.StatusCode, nil
	}
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	if got := loc.Scheme + "://" + loc.Host + loc.Path; got != testRedirect {
		t.Errorf("redirected to %s, want %s", got, testRedirect)
	}
	return resp.StatusCode, loc.Query()
}

// exchange posts a code to the token endpoint.
func exchange(t *testing.T, ts *httptest.Server, secret, code, redirect string) (int, map[string]string) {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"code": code, "client_id": testClientID, "client_secret": secret, "redirect_uri": redirect})
	resp, err := http.Post(ts.URL+PathOAuthToken, "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]string
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// listForms calls GET /forms with a Bearer key or token.
func listForms(t *testing.T, ts *httptest.Server, bearer string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, ts.URL+BasePath+"/forms", nil)
	req.Header.Set("Authorization", "Bearer "+bearer)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestOAuthCodeFlow(t *testing.T) {
	m, ts := startOAuth(t)
	browser := noFollow(t)
	if resp, err := browser.Get(ts.URL + PathFormsLogin + "?key=key-b"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("sim login: %v %v", resp, err)
	}
	status, q := authorize(t, browser, ts, testClientID, testRedirect, "st-1")
	if status != http.StatusFound || q.Get("state") != "st-1" || q.Get("code") == "" {
		t.Fatalf("authorize: %d %v", status, q)
	}
	code := q.Get("code")
	if s, _ := exchange(t, ts, "wrong", code, testRedirect); s != http.StatusUnauthorized {
		t.Errorf("a wrong client secret: %d", s)
	}
	if s, _ := exchange(t, ts, testClientSecret, code, "http://127.0.0.1:2/other"); s != http.StatusBadRequest {
		t.Errorf("another redirect URI: %d", s)
	}
	s, tok := exchange(t, ts, testClientSecret, code, testRedirect)
	if s != http.StatusOK || !strings.HasPrefix(tok["access_token"], "fo_oauth_") || tok["base_url"] != "http://deploy-key-b.example/v1/api" {
		t.Fatalf("exchange: %d %v", s, tok)
	}
	if s, _ := exchange(t, ts, testClientSecret, code, testRedirect); s != http.StatusBadRequest {
		t.Errorf("a replayed code: %d, want 400", s)
	}
	// The token is workspace b's: its forms, its counters.
	before, _ := m.Stats("key-b")
	if s := listForms(t, ts, tok["access_token"]); s != http.StatusOK {
		t.Fatalf("GET /forms with the token: %d", s)
	}
	after, _ := m.Stats("key-b")
	if after.Admitted != before.Admitted+1 {
		t.Errorf("workspace b admitted %d then %d: the token's request is not counted as b's", before.Admitted, after.Admitted)
	}
	if a, _ := m.Stats("key-a"); a.Requests != 0 {
		t.Errorf("workspace a saw %d requests", a.Requests)
	}
	if !m.Invalidate(tok["access_token"]) || m.Invalidate("fo_oauth_unknown") {
		t.Error("Invalidate: wrong answer")
	}
	if s := listForms(t, ts, tok["access_token"]); s != http.StatusUnauthorized {
		t.Errorf("an invalidated token: %d, want 401", s)
	}
	if s := listForms(t, ts, "key-b"); s != http.StatusOK {
		t.Errorf("the workspace's key after its token was invalidated: %d", s)
	}
	if st := m.OAuthStats(); st.Authorizations != 1 || st.Exchanges != 1 || st.Refused != 3 {
		t.Errorf("oauth stats = %+v", st)
	}
}

func TestOAuthConsentAndRefusals(t *testing.T) {
	m, ts := startOAuth(t)
	browser := noFollow(t)
	// No session and no consenting workspace: access denied, with the state.
	if status, q := authorize(t, browser, ts, testClientID, testRedirect, "s"); status != http.StatusFound || q.Get("error") != "access_denied" || q.Get("state") != "s" {
		t.Errorf("no consent: %d %v", status, q)
	}
	if status, _ := authorize(t, browser, ts, "other-app", testRedirect, "s"); status != http.StatusBadRequest {
		t.Errorf("an unknown client: %d", status)
	}
	if status, _ := authorize(t, browser, ts, testClientID, "http://evil.example/cb", "s"); status != http.StatusBadRequest {
		t.Errorf("an unregistered redirect URI: %d", status)
	}
	if err := m.SetConsentingWorkspace("key-a"); err != nil {
		t.Fatal(err)
	}
	_, q := authorize(t, browser, ts, testClientID, testRedirect, "s")
	_, tok := exchange(t, ts, testClientSecret, q.Get("code"), testRedirect)
	if tok["base_url"] != "http://deploy-key-a.example/v1/api" {
		t.Errorf("the consenting workspace's token: %v", tok)
	}
	if n := m.InvalidateTokens("key-a"); n != 1 {
		t.Errorf("InvalidateTokens = %d", n)
	}
	if s := listForms(t, ts, tok["access_token"]); s != http.StatusUnauthorized {
		t.Errorf("after InvalidateTokens: %d", s)
	}
	if st, _ := m.Stats("key-a"); st.Revoked != 1 {
		t.Errorf("the invalidated token's request is not counted: %+v", st)
	}
	if resp, err := http.Get(ts.URL + PathFormsLogin + "?key=nope"); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("sim login with an unknown key: %v %v", resp, err)
	}
}

// TestOAuthTokenSharesTheLimit: requests with a workspace's key and with
// its token go through one limiter.
func TestOAuthTokenSharesTheLimit(t *testing.T) {
	m, _ := startMulti(t, 1, 1, "key-a")
	if err := m.EnableOAuth(OAuthApp{ClientID: testClientID, ClientSecret: testClientSecret, RedirectURIs: []string{testRedirect}}); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(m)
	defer ts.Close()
	if err := m.SetConsentingWorkspace("key-a"); err != nil {
		t.Fatal(err)
	}
	_, q := authorize(t, noFollow(t), ts, testClientID, testRedirect, "s")
	_, tok := exchange(t, ts, testClientSecret, q.Get("code"), testRedirect)
	if want := ts.URL + BasePath; tok["base_url"] != want {
		t.Errorf("default base_url = %q, want %q", tok["base_url"], want)
	}
	if s := listForms(t, ts, "key-a"); s != http.StatusOK {
		t.Fatalf("key: %d", s)
	}
	if s := listForms(t, ts, tok["access_token"]); s != http.StatusTooManyRequests {
		t.Errorf("the token right after the key, at 1 request/s: %d, want 429", s)
	}
}
