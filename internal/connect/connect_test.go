package connect

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/syncd-dev/syncd/internal/oauth"
	"github.com/syncd-dev/syncd/internal/schedsim"
)

// harness is syncd's connect page and the scheduling API simulator, both on
// loopback, and what the page saved and logged.
type harness struct {
	t      *testing.T
	sim    *schedsim.Server
	srv    *httptest.Server
	h      *Handler
	secret []byte
	logs   *observer.ObservedLogs

	mu      sync.Mutex
	now     time.Time
	saved   map[string][]oauth.Token
	secrets []string // every secret seen, checked against the logs at the end
}

// newHarness signs in with the simulator's client clientID; tune adjusts
// the options.
func newHarness(t *testing.T, clientID string, tune func(*Options)) *harness {
	t.Helper()
	sim := schedsim.New(schedsim.Config{Seed: 1})
	simSrv := httptest.NewServer(sim)
	t.Cleanup(simSrv.Close)
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	var client schedsim.Client
	for _, c := range sim.Clients() {
		if c.ID == clientID {
			client = c
		}
	}
	cfg := oauth.Config{
		AuthURL:     simSrv.URL + schedsim.PathAuthorize,
		TokenURL:    simSrv.URL + schedsim.PathToken,
		ClientID:    client.ID,
		RedirectURI: srv.URL + PathCallback,
		Scopes:      []string{schedsim.ScopeBookingRead, schedsim.ScopeProfileRead},
		Public:      client.Public,
		MaxAttempts: 1,
	}
	if len(client.Secrets) > 0 {
		cfg.ClientSecret = client.Secrets[0]
	}
	oc, err := oauth.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.DebugLevel)
	hs := &harness{
		t: t, sim: sim, srv: srv, logs: logs,
		secret: []byte("0123456789abcdef-operator-secret"),
		now:    time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC),
		saved:  map[string][]oauth.Token{},
	}
	opts := Options{
		Secret: hs.secret,
		Known:  func(a string) bool { return a == "acme" || a == "globex" },
		OAuth:  func(string) (*oauth.Client, error) { return oc, nil },
		Save: func(_ context.Context, account string, tok oauth.Token) error {
			hs.mu.Lock()
			defer hs.mu.Unlock()
			hs.saved[account] = append(hs.saved[account], tok)
			hs.secrets = append(hs.secrets, tok.AccessToken, tok.RefreshToken, tok.CodeVerifier)
			return nil
		},
		Now:    hs.clock,
		Logger: zap.New(core),
	}
	if tune != nil {
		tune(&opts)
	}
	hs.h, err = New(opts)
	if err != nil {
		t.Fatal(err)
	}
	hs.h.Register(mux)
	t.Cleanup(hs.checkLogs)
	return hs
}

func (hs *harness) clock() time.Time {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return hs.now
}

func (hs *harness) advance(d time.Duration) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	hs.now = hs.now.Add(d)
}

func (hs *harness) remember(s ...string) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	hs.secrets = append(hs.secrets, s...)
}

// savedTokens returns the tokens saved for account.
func (hs *harness) savedTokens(account string) []oauth.Token {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return append([]oauth.Token(nil), hs.saved[account]...)
}

func (hs *harness) savedCount() int {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	n := 0
	for _, ts := range hs.saved {
		n += len(ts)
	}
	return n
}

// checkLogs fails the test if a secret appears in a log line.
func (hs *harness) checkLogs() {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	for _, e := range hs.logs.All() {
		line := e.Message + " " + fmt.Sprint(e.ContextMap())
		for _, s := range hs.secrets {
			if s != "" && strings.Contains(line, s) {
				hs.t.Errorf("a secret is in the log line %q", line)
			}
		}
	}
}

// link is the connect link of account with token.
func (hs *harness) link(account, token string) string {
	hs.remember(token)
	return hs.srv.URL + PathConnect + "?" + url.Values{"account": {account}, "token": {token}}.Encode()
}

// goodLink is the link the operator hands out for account.
func (hs *harness) goodLink(account string) string {
	return hs.link(account, Token(hs.secret, account))
}

// browser is a user's browser: cookies, and redirects followed. The codes
// it carries to the callback are remembered as secrets.
func (hs *harness) browser() *http.Client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		hs.t.Fatal(err)
	}
	return &http.Client{Jar: jar, Timeout: 30 * time.Second, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		hs.remember(req.URL.Query().Get("code"))
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}}
}

// stopAtCallback makes b stop before following the redirect to the
// callback, so a test can change or replay it.
func stopAtCallback(b *http.Client) *http.Client {
	c := *b
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if req.URL.Path == PathCallback {
			return http.ErrUseLastResponse
		}
		return b.CheckRedirect(req, via)
	}
	return &c
}

type answer struct {
	status int
	body   string
}

// get opens u in b and reads the page it ends on.
func (hs *harness) get(b *http.Client, u string) answer {
	hs.t.Helper()
	res, err := b.Get(u)
	if err != nil {
		hs.t.Fatalf("GET: %v", err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		hs.t.Fatal(err)
	}
	hs.checkPage(string(body))
	return answer{res.StatusCode, string(body)}
}

// checkPage fails the test if a secret seen so far is on a page.
func (hs *harness) checkPage(body string) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	for _, s := range hs.secrets {
		if s != "" && strings.Contains(body, s) {
			hs.t.Errorf("a secret is on the page %q", body)
		}
	}
}

// startSignIn follows account's link in b up to the authorization page's
// redirect and returns the callback URL it points to.
func (hs *harness) startSignIn(b *http.Client, account string) *url.URL {
	hs.t.Helper()
	res, err := stopAtCallback(b).Get(hs.goodLink(account))
	if err != nil {
		hs.t.Fatal(err)
	}
	res.Body.Close()
	loc, err := res.Location()
	if err != nil || loc.Path != PathCallback {
		hs.t.Fatalf("the sign-in of %s did not come back to the callback: HTTP %d, Location %v", account, res.StatusCode, loc)
	}
	hs.remember(loc.Query().Get("code"))
	return loc
}

func want(t *testing.T, got answer, status int, text string) {
	t.Helper()
	if got.status != status || !strings.Contains(got.body, text) {
		t.Errorf("got HTTP %d %q, want HTTP %d with %q", got.status, got.body, status, text)
	}
}

func TestTwoAccountsConnect(t *testing.T) {
	for _, client := range []string{"sim-client", "sim-public"} {
		t.Run(client, func(t *testing.T) {
			hs := newHarness(t, client, nil)
			for _, account := range []string{"acme", "globex"} {
				want(t, hs.get(hs.browser(), hs.goodLink(account)), http.StatusOK, "account "+account+" is connected")
			}
			a, g := hs.savedTokens("acme"), hs.savedTokens("globex")
			if len(a) != 1 || len(g) != 1 {
				t.Fatalf("saved %d tokens for acme and %d for globex, want 1 each", len(a), len(g))
			}
			if a[0].AccessToken == g[0].AccessToken || a[0].RefreshToken == g[0].RefreshToken {
				t.Error("the two accounts got the same tokens")
			}
			for _, tok := range []oauth.Token{a[0], g[0]} {
				if tok.AccessToken == "" || tok.RefreshToken == "" || tok.ClientID != client {
					t.Errorf("saved %v, want a token pair of %s", tok, client)
				}
				if public := client == "sim-public"; public != (tok.CodeVerifier != "") {
					t.Errorf("public client %t, but the token's verifier is set: %t", public, tok.CodeVerifier != "")
				}
			}
			if n := hs.sim.Stats().CodeExchanges; n != 2 {
				t.Errorf("%d code exchanges, want 2", n)
			}
			if n := hs.h.Pending(); n != 0 {
				t.Errorf("%d sign-ins still pending, want 0", n)
			}
		})
	}
}

// One browser may connect two accounts at once (two tabs): the cookie
// binds both sign-ins to it.
func TestTwoAccountsOneBrowser(t *testing.T) {
	hs := newHarness(t, "sim-client", nil)
	b := hs.browser()
	acme := hs.startSignIn(b, "acme")
	globex := hs.startSignIn(b, "globex")
	want(t, hs.get(b, globex.String()), http.StatusOK, "account globex is connected")
	want(t, hs.get(b, acme.String()), http.StatusOK, "account acme is connected")
	if len(hs.savedTokens("acme")) != 1 || len(hs.savedTokens("globex")) != 1 {
		t.Errorf("saved %d and %d tokens, want 1 each", len(hs.savedTokens("acme")), len(hs.savedTokens("globex")))
	}
}

func TestCallbackRefused(t *testing.T) {
	withQuery := func(u *url.URL, key, value string) string {
		v := u.Query()
		if value == "" {
			v.Del(key)
		} else {
			v.Set(key, value)
		}
		c := *u
		c.RawQuery = v.Encode()
		return c.String()
	}
	for _, tc := range []struct {
		name string
		// do plays the callback cb of a sign-in started in b and returns
		// the last answer.
		do     func(hs *harness, b *http.Client, cb *url.URL) answer
		status int
		text   string
		// exchanges the simulator saw
		exchanges int
	}{
		{
			name: "wrong state",
			do: func(hs *harness, b *http.Client, cb *url.URL) answer {
				return hs.get(b, withQuery(cb, "state", "x"+cb.Query().Get("state")))
			},
			status: http.StatusBadRequest, text: "unknown, expired or already finished",
		},
		{
			name: "no state",
			do: func(hs *harness, b *http.Client, cb *url.URL) answer {
				return hs.get(b, withQuery(cb, "state", ""))
			},
			status: http.StatusBadRequest, text: "unknown, expired or already finished",
		},
		{
			name: "replayed",
			do: func(hs *harness, b *http.Client, cb *url.URL) answer {
				want(hs.t, hs.get(b, cb.String()), http.StatusOK, "account acme is connected")
				return hs.get(b, cb.String())
			},
			status: http.StatusBadRequest, text: "unknown, expired or already finished",
			exchanges: 1,
		},
		{
			name: "replayed after a refusal",
			do: func(hs *harness, b *http.Client, cb *url.URL) answer {
				want(hs.t, hs.get(b, withQuery(cb, "code", "sim_code_forged")), http.StatusBadRequest, "refused the authorization")
				return hs.get(b, cb.String())
			},
			status: http.StatusBadRequest, text: "unknown, expired or already finished",
		},
		{
			name: "code refused by the server",
			do: func(hs *harness, b *http.Client, cb *url.URL) answer {
				return hs.get(b, withQuery(cb, "code", "sim_code_forged"))
			},
			status: http.StatusBadRequest, text: "refused the authorization",
		},
		{
			name: "no code",
			do: func(hs *harness, b *http.Client, cb *url.URL) answer {
				return hs.get(b, withQuery(cb, "code", ""))
			},
			status: http.StatusBadRequest, text: "no authorization code",
		},
		{
			name: "another browser",
			do: func(hs *harness, _ *http.Client, cb *url.URL) answer {
				return hs.get(hs.browser(), cb.String())
			},
			status: http.StatusBadRequest, text: "started in another browser",
		},
		{
			name: "expired",
			do: func(hs *harness, b *http.Client, cb *url.URL) answer {
				hs.advance(DefaultTTL + time.Second)
				return hs.get(b, cb.String())
			},
			status: http.StatusBadRequest, text: "unknown, expired or already finished",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hs := newHarness(t, "sim-client", nil)
			b := hs.browser()
			cb := hs.startSignIn(b, "acme")
			want(t, tc.do(hs, b, cb), tc.status, tc.text)
			if n := hs.savedCount(); n != tc.exchanges {
				t.Errorf("%d tokens saved, want %d", n, tc.exchanges)
			}
			if n := hs.sim.Stats().CodeExchanges; n != tc.exchanges {
				t.Errorf("%d code exchanges, want %d", n, tc.exchanges)
			}
		})
	}
}

// A callback with a wrong state takes nothing away from the real one.
func TestWrongStateLeavesSignIn(t *testing.T) {
	hs := newHarness(t, "sim-client", nil)
	b := hs.browser()
	cb := hs.startSignIn(b, "acme")
	forged := *cb
	v := forged.Query()
	v.Set("state", "forged")
	forged.RawQuery = v.Encode()
	want(t, hs.get(b, forged.String()), http.StatusBadRequest, "unknown, expired or already finished")
	want(t, hs.get(b, cb.String()), http.StatusOK, "account acme is connected")
}

func TestLinkRefused(t *testing.T) {
	hs := newHarness(t, "sim-client", nil)
	for _, tc := range []struct {
		name    string
		account string
		token   string
		status  int
		text    string
	}{
		{"no account", "", "x", http.StatusBadRequest, "names no account"},
		{"no token", "acme", "", http.StatusForbidden, "not valid for account acme"},
		{"garbage token", "acme", "not-a-token", http.StatusForbidden, "not valid for account acme"},
		{"another account's token", "acme", Token(hs.secret, "globex"), http.StatusForbidden, "not valid for account acme"},
		{"another secret's token", "acme", Token([]byte("another-secret-of-16+"), "acme"), http.StatusForbidden, "not valid for account acme"},
		{"unknown account", "initech", Token(hs.secret, "initech"), http.StatusNotFound, "does not sign in"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want(t, hs.get(hs.browser(), hs.link(tc.account, tc.token)), tc.status, tc.text)
		})
	}
	if n := hs.sim.Stats().Authorizations; n != 0 {
		t.Errorf("%d authorizations at the scheduling API, want 0", n)
	}
	res, err := http.Post(hs.goodLink("acme"), "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: HTTP %d, want 405", res.StatusCode)
	}
}

func TestConsentRefused(t *testing.T) {
	for _, tc := range []struct {
		deny   string
		status int
		text   string
	}{
		{"access_denied", http.StatusForbidden, "consent was refused"},
		{"server_error", http.StatusBadRequest, "answered server_error"},
	} {
		t.Run(tc.deny, func(t *testing.T) {
			hs := newHarness(t, "sim-client", nil)
			hs.sim.DenyAuthorizations(tc.deny)
			b := hs.browser()
			want(t, hs.get(b, hs.goodLink("acme")), tc.status, tc.text)
			if n := hs.savedCount(); n != 0 {
				t.Errorf("%d tokens saved, want none", n)
			}
			if n := hs.h.Pending(); n != 0 {
				t.Errorf("%d sign-ins still pending, want 0", n)
			}
			hs.sim.DenyAuthorizations("")
			want(t, hs.get(b, hs.goodLink("acme")), http.StatusOK, "account acme is connected")
		})
	}
}

func TestSaveFails(t *testing.T) {
	hs := newHarness(t, "sim-client", func(o *Options) {
		o.Save = func(context.Context, string, oauth.Token) error { return errors.New("disk full") }
	})
	want(t, hs.get(hs.browser(), hs.goodLink("acme")), http.StatusInternalServerError, "could not store")
}

// Past MaxPending the oldest sign-in is dropped.
func TestPendingBound(t *testing.T) {
	hs := newHarness(t, "sim-client", func(o *Options) { o.MaxPending = 2 })
	b := hs.browser()
	first := hs.startSignIn(b, "acme")
	second := hs.startSignIn(b, "globex")
	third := hs.startSignIn(b, "acme")
	if n := hs.h.Pending(); n != 2 {
		t.Errorf("%d sign-ins pending, want 2", n)
	}
	want(t, hs.get(b, first.String()), http.StatusBadRequest, "unknown, expired or already finished")
	want(t, hs.get(b, second.String()), http.StatusOK, "account globex is connected")
	want(t, hs.get(b, third.String()), http.StatusOK, "account acme is connected")
}

func TestToken(t *testing.T) {
	s := []byte("0123456789abcdef")
	a := Token(s, "acme")
	if a != Token(s, "acme") {
		t.Error("Token is not deterministic")
	}
	if a == Token(s, "globex") || a == Token([]byte("0123456789abcdeF"), "acme") {
		t.Error("Token does not depend on the account and the secret")
	}
	if !validToken(s, "acme", a) || validToken(s, "acme", a[:len(a)-1]) || validToken(s, "globex", a) || validToken(s, "acme", "") {
		t.Error("validToken accepts the wrong tokens or refuses the right one")
	}
}

func TestNewChecksOptions(t *testing.T) {
	ok := Options{
		Secret: []byte("0123456789abcdef"),
		Known:  func(string) bool { return true },
		OAuth:  func(string) (*oauth.Client, error) { return nil, errors.New("none") },
		Save:   func(context.Context, string, oauth.Token) error { return nil },
	}
	if _, err := New(ok); err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]func(*Options){
		"short secret": func(o *Options) { o.Secret = []byte("short") },
		"no Known":     func(o *Options) { o.Known = nil },
		"no OAuth":     func(o *Options) { o.OAuth = nil },
		"no Save":      func(o *Options) { o.Save = nil },
		"negative TTL": func(o *Options) { o.TTL = -time.Second },
	} {
		o := ok
		f(&o)
		if _, err := New(o); err == nil {
			t.Errorf("%s: New accepted it", name)
		}
	}
}
