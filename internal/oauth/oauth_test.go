package oauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/testkit/clock"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/schedsim"
)

func TestAuthRequestURL(t *testing.T) {
	s := newSim(t, schedsim.Config{Seed: 1})
	tests := []struct {
		id        string
		wantScope string // "" means no scope parameter
		wantPKCE  bool
	}{
		{"sim-client", "BOOKING_READ PROFILE_READ", false},
		{"sim-public", "BOOKING_READ PROFILE_READ", true},
		{"sim-legacy", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			cfg := s.config(t, tt.id)
			cfg.RedirectURI = "http://127.0.0.1:8765/callback"
			c, err := NewClient(cfg)
			if err != nil {
				t.Fatal(err)
			}
			a, _ := c.NewAuthRequest()
			b, _ := c.NewAuthRequest()
			u, err := url.Parse(a.URL)
			if err != nil {
				t.Fatal(err)
			}
			q := u.Query()
			if u.Path != schedsim.PathAuthorize || q.Get("client_id") != tt.id || q.Get("redirect_uri") != cfg.RedirectURI ||
				q.Get("response_type") != "code" || q.Get("state") != a.State || len(a.State) < 32 || a.State == b.State {
				t.Errorf("url = %s (state %d chars, two requests same state: %t)", u.Redacted(), len(a.State), a.State == b.State)
			}
			if _, has := q["scope"]; has != (tt.wantScope != "") || q.Get("scope") != tt.wantScope {
				t.Errorf("scope = %q (present %t), want %q", q.Get("scope"), has, tt.wantScope)
			}
			if pk := q.Get("code_challenge") != "" && q.Get("code_challenge_method") == "S256" && a.Verifier != ""; pk != tt.wantPKCE {
				t.Errorf("PKCE = %t, want %t", pk, tt.wantPKCE)
			}
			noSecrets(t, []string{a.Verifier}, fmt.Sprint(a), fmt.Sprintf("%#v", a))
		})
	}
}

// The whole browser flow for each kind of client: redirect received on
// loopback, state checked, code exchanged, the token works on /v2/me.
func TestLoginFlow(t *testing.T) {
	s := newSim(t, schedsim.Config{Seed: 2})
	for _, id := range []string{"sim-client", "sim-public", "sim-legacy"} {
		t.Run(id, func(t *testing.T) {
			tok, c := login(t, s.config(t, id))
			if tok.AccessToken == "" || tok.RefreshToken == "" || tok.ClientID != id {
				t.Fatalf("token = %v", tok)
			}
			if d := time.Until(tok.Expiry); d < 29*time.Minute || d > 31*time.Minute {
				t.Errorf("expiry in %s, want ~30m (expires_in 1800)", d)
			}
			if tok.Legacy != (id == "sim-legacy") || (len(tok.Scopes) == 0) != tok.Legacy {
				t.Errorf("legacy = %t, scopes = %v", tok.Legacy, tok.Scopes)
			}
			if (tok.CodeVerifier != "") != (id == "sim-public") {
				t.Errorf("verifier kept = %t", tok.CodeVerifier != "")
			}
			ts := NewTokenSource(c, newMemStore(s.seq, &tok), SourceOptions{})
			if st := meRequest(t, s, ts); st != 200 {
				t.Errorf("/v2/me = %d", st)
			}
			noSecrets(t, s.secretsOf(t, tok), fmt.Sprint(tok), fmt.Sprintf("%+v %#v %s", tok, tok, tok.Summary().Describe(time.Now())))
		})
	}
}

func TestCodeIsSingleUse(t *testing.T) {
	s := newSim(t, schedsim.Config{Seed: 3})
	cfg := s.config(t, "sim-client")
	rcv, err := Listen(cfg.RedirectURI)
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.Close()
	cfg.RedirectURI = rcv.RedirectURI()
	c, _ := NewClient(cfg)
	ar, _ := c.NewAuthRequest()
	go func() {
		if resp, err := http.Get(ar.URL); err == nil {
			resp.Body.Close()
		}
	}()
	ctx := context.Background()
	code, err := rcv.Wait(ctx, ar.State)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exchange(ctx, code, ""); err != nil {
		t.Fatal(err)
	}
	_, err = c.Exchange(ctx, code, "")
	var te *TokenEndpointError
	if !errors.As(err, &te) || te.Code != "invalid_grant" || !strings.Contains(err.Error(), "syncd auth login") {
		t.Fatalf("second exchange: %v", err)
	}
	noSecrets(t, append(s.secretsOf(t), code), err.Error())
}

func TestParseRedirect(t *testing.T) {
	tests := []struct {
		pasted, state string
		code, errCode string
	}{
		{"http://127.0.0.1:8765/callback?code=abc&state=s1", "s1", "abc", ""},
		{"  http://127.0.0.1:8765/callback?state=s1&code=a%2Bb#frag \n", "s1", "a+b", ""},
		{"code=abc&state=s1", "s1", "abc", ""},
		{"http://127.0.0.1:8765/callback?code=abc&state=other", "s1", "", "state_mismatch"},
		{"http://127.0.0.1:8765/callback?code=abc", "s1", "", "state_mismatch"},
		{"http://127.0.0.1:8765/callback?state=s1", "s1", "", "no_code"},
		{"http://127.0.0.1:8765/callback?error=access_denied&error_description=no&state=s1", "s1", "", "access_denied"},
		{"", "s1", "", "no_code"},
		{"%zz", "s1", "", "no_code"},
	}
	for _, tt := range tests {
		code, err := ParseRedirect(tt.pasted, tt.state)
		var ae *AuthorizationError
		switch {
		case tt.errCode == "" && (err != nil || code != tt.code):
			t.Errorf("ParseRedirect(%q) = %q, %v; want %q", tt.pasted, code, err, tt.code)
		case tt.errCode != "" && (!errors.As(err, &ae) || ae.Code != tt.errCode || !strings.Contains(err.Error(), "syncd auth login")):
			t.Errorf("ParseRedirect(%q) err = %v, want %s", tt.pasted, err, tt.errCode)
		}
	}
}

// An error= redirect (the user said no) ends the wait with a clear error,
// and the browser gets a page saying so.
func TestReceiverErrorRedirect(t *testing.T) {
	s := newSim(t, schedsim.Config{Seed: 4})
	s.DenyAuthorizations("access_denied")
	cfg := s.config(t, "sim-client")
	rcv, err := Listen(cfg.RedirectURI)
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.Close()
	cfg.RedirectURI = rcv.RedirectURI()
	c, _ := NewClient(cfg)
	ar, _ := c.NewAuthRequest()
	status := make(chan int, 1)
	go func() {
		resp, err := http.Get(ar.URL)
		if err != nil {
			status <- 0
			return
		}
		resp.Body.Close()
		status <- resp.StatusCode
	}()
	_, err = rcv.Wait(context.Background(), ar.State)
	if !errors.Is(err, ErrAuthorization) || !strings.Contains(err.Error(), "access_denied") {
		t.Fatalf("err = %v", err)
	}
	if st := <-status; st != http.StatusBadRequest {
		t.Errorf("browser page status = %d, want 400", st)
	}
}

func TestListenRefusesNonLoopback(t *testing.T) {
	for _, u := range []string{"https://example.com/cb", "http://10.0.0.1:80/cb", "http://127.0.0.1/cb", "::"} {
		if r, err := Listen(u); err == nil {
			r.Close()
			t.Errorf("Listen(%q) accepted", u)
		}
	}
}

// Refresh tokens rotate: a refresh returns a new pair and the old refresh
// token is refused afterwards, which is a LoginRequiredError.
func TestRefreshRotates(t *testing.T) {
	s := newSim(t, schedsim.Config{Seed: 5})
	tok, c := login(t, s.config(t, "sim-client"))
	ctx := context.Background()
	next, err := c.Refresh(ctx, tok)
	if err != nil {
		t.Fatal(err)
	}
	if next.RefreshToken == tok.RefreshToken || next.AccessToken == tok.AccessToken {
		t.Fatal("refresh did not rotate the pair")
	}
	if fmt.Sprint(next.Scopes) != fmt.Sprint(tok.Scopes) {
		t.Errorf("scopes changed on refresh: %v → %v", tok.Scopes, next.Scopes)
	}
	_, err = c.Refresh(ctx, tok)
	var lr *LoginRequiredError
	if !errors.As(err, &lr) || !errors.Is(err, ErrLoginRequired) || !strings.Contains(err.Error(), "run `syncd auth login` again") {
		t.Fatalf("reusing the old refresh token: %v", err)
	}
	noSecrets(t, s.secretsOf(t, tok, next), err.Error())
}

// Many goroutines asking for a token when it is about to expire cause
// exactly one refresh, and all get the new token.
func TestTokenSourceOneRefreshAcrossGoroutines(t *testing.T) {
	s := newSim(t, schedsim.Config{Seed: 6})
	tok, c := login(t, s.config(t, "sim-client"))
	store := newMemStore(s.seq, &tok)
	clk := clock.New(time.Now())
	c.now = clk.Now
	ts := NewTokenSource(c, store, SourceOptions{Now: clk.Now})
	ctx := context.Background()
	first, err := ts.Token(ctx)
	if err != nil || first.AccessToken != tok.AccessToken {
		t.Fatalf("first token: %v (same as login's: %t)", err, first.AccessToken == tok.AccessToken)
	}
	before := s.Stats().Refreshes
	clk.Add(29 * time.Minute) // inside the 2-minute skew
	var wg sync.WaitGroup
	got := make([]string, 64)
	errs := make([]error, 64)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t, err := ts.Token(ctx)
			got[i], errs[i] = t.AccessToken, err
		}()
	}
	wg.Wait()
	for i := range got {
		if errs[i] != nil || got[i] != got[0] || got[0] == tok.AccessToken {
			t.Fatalf("goroutine %d: err %v, same token as the others %t, refreshed %t", i, errs[i], got[i] == got[0], got[0] != tok.AccessToken)
		}
	}
	if n := s.Stats().Refreshes - before; n != 1 {
		t.Errorf("%d refreshes, want exactly 1", n)
	}
	if store.saves != 1 {
		t.Errorf("%d saves, want 1", store.saves)
	}
}

// Crash safety: every access token the API sees was saved to the store
// before its first use; and when the save fails, the new token is not used
// and the next call saves it without another refresh.
func TestTokenSourceSavesBeforeUse(t *testing.T) {
	s := newSim(t, schedsim.Config{Seed: 7})
	tok, c := login(t, s.config(t, "sim-client"))
	store := newMemStore(s.seq, nil)
	if err := store.Save(context.Background(), tok); err != nil {
		t.Fatal(err)
	}
	clk := clock.New(time.Now())
	c.now = clk.Now
	ts := NewTokenSource(c, store, SourceOptions{Now: clk.Now})
	for range 3 {
		if st := meRequest(t, s, ts); st != 200 {
			t.Fatalf("/v2/me = %d", st)
		}
		clk.Add(29 * time.Minute)
	}
	store.setFailing(true)
	before := s.Stats().Refreshes
	_, err := ts.Token(context.Background())
	if err == nil || !strings.Contains(err.Error(), "save the rotated refresh token") {
		t.Fatalf("token with a failing store: %v", err)
	}
	if s.Stats().Refreshes != before+1 {
		t.Fatalf("refreshes = %d, want %d", s.Stats().Refreshes, before+1)
	}
	store.setFailing(false)
	if st := meRequest(t, s, ts); st != 200 {
		t.Fatalf("/v2/me after the store recovered = %d", st)
	}
	if s.Stats().Refreshes != before+1 {
		t.Errorf("the pending pair was not reused: %d refreshes, want %d", s.Stats().Refreshes, before+1)
	}
	s.mu.Lock()
	used := append([]string(nil), s.used...)
	s.mu.Unlock()
	if len(used) != 4 {
		t.Fatalf("%d API requests, want 4", len(used))
	}
	for i, at := range used {
		u, _ := s.firstUse(at)
		saved, ok := store.savedAt[at]
		if !ok || saved > u {
			t.Errorf("request %d used an access token saved %t, at %d, first used at %d", i, ok, saved, u)
		}
	}
}

// A logout, or a new login, while a refresh of the old sign-in is in
// flight (the server has rotated the pair, the save has not happened): the
// write waits for the refresh, and the refresh never saves its pair over
// what the write stored.
func TestReplaceWaitsForTheRefreshInFlight(t *testing.T) {
	for _, tc := range []struct {
		name   string
		logout bool
	}{
		{name: "logout", logout: true},
		{name: "new login"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim(t, schedsim.Config{Seed: 9})
			tok, c := login(t, s.config(t, "sim-client"))
			next, _ := login(t, s.config(t, "sim-client"))
			store := newMemStore(s.seq, &tok)
			clk := clock.New(time.Now())
			c.now = clk.Now
			ts := NewTokenSource(c, store, SourceOptions{Now: clk.Now})
			ctx := context.Background()
			clk.Add(29 * time.Minute) // inside the skew: the next Token refreshes

			saving, release := make(chan struct{}), make(chan struct{})
			var once sync.Once
			store.hold = func() { once.Do(func() { close(saving); <-release }) }
			refreshed := make(chan error, 1)
			go func() {
				_, err := ts.Token(ctx)
				refreshed <- err
			}()
			<-saving

			write := store.del
			if !tc.logout {
				next.Expiry = clk.Now().Add(30 * time.Minute) // signed in at the test clock's time
				write = func(ctx context.Context) error { return store.Save(ctx, next) }
			}
			replaced := make(chan error, 1)
			go func() { replaced <- ts.Replace(ctx, write) }()
			select {
			case err := <-replaced:
				t.Fatalf("Replace returned (%v) while a refresh was about to save", err)
			case <-time.After(50 * time.Millisecond):
			}
			close(release)
			if err := <-refreshed; err != nil {
				t.Fatalf("the refresh in flight: %v", err)
			}
			if err := <-replaced; err != nil {
				t.Fatalf("Replace: %v", err)
			}

			got, err := ts.Token(ctx)
			if tc.logout {
				var lr *LoginRequiredError
				if stored := store.stored(); stored != nil || !errors.As(err, &lr) {
					t.Fatalf("after the logout: a token is stored %t, Token's error %v (want a login required)", stored != nil, err)
				}
				return
			}
			if stored := store.stored(); stored == nil || stored.AccessToken != next.AccessToken {
				t.Fatalf("after the new login, the stored token is the new login's: %t", stored != nil && stored.AccessToken == next.AccessToken)
			}
			if err != nil || got.AccessToken != next.AccessToken {
				t.Fatalf("after the new login: Token %v, the new login's token %t", err, got.AccessToken == next.AccessToken)
			}
		})
	}
}

// A 401 on a token believed fresh (revoked, clock drift): Invalidate makes
// the next call refresh.
func TestTokenSourceInvalidate(t *testing.T) {
	s := newSim(t, schedsim.Config{Seed: 8})
	tok, c := login(t, s.config(t, "sim-client"))
	ts := NewTokenSource(c, newMemStore(s.seq, &tok), SourceOptions{})
	s.ExpireAccessTokens()
	if st := meRequest(t, s, ts); st != 401 {
		t.Fatalf("/v2/me with an expired token = %d, want 401", st)
	}
	ts.Invalidate(tok.AccessToken)
	if st := meRequest(t, s, ts); st != 200 {
		t.Fatalf("/v2/me after Invalidate = %d, want 200", st)
	}
}

// A refused refresh token stops the source with one sentence that says to
// log in again, and never shows a secret.
func TestInvalidGrantLoginRequired(t *testing.T) {
	s := newSim(t, schedsim.Config{Seed: 9})
	tok, c := login(t, s.config(t, "sim-client"))
	clk := clock.New(time.Now())
	ts := NewTokenSource(c, newMemStore(s.seq, &tok), SourceOptions{Now: clk.Now})
	s.RevokeRefreshTokens()
	clk.Add(time.Hour)
	_, err := ts.Token(context.Background())
	if !errors.Is(err, ErrLoginRequired) || !strings.HasSuffix(err.Error(), "run `syncd auth login` again") {
		t.Fatalf("err = %v", err)
	}
	noSecrets(t, s.secretsOf(t, tok), err.Error())

	empty := NewTokenSource(c, newMemStore(s.seq, nil), SourceOptions{})
	if _, err := empty.Token(context.Background()); !errors.Is(err, ErrLoginRequired) {
		t.Errorf("no stored token: %v", err)
	}
}

// Secret rotation: with client_secret_next set, an invalid_client answer
// with one secret is retried with the other; the log says which works and
// never shows either.
func TestSecretRotation(t *testing.T) {
	s := newSim(t, schedsim.Config{Seed: 10})
	sc := s.client(t, "sim-client")
	tests := []struct {
		name       string
		first      string
		next       string
		wantSecret string // which of the simulator's secrets worked: "sim-client/1" or "/2"
		wantLog    bool
		wantErr    bool
	}{
		{"first works", sc.Secrets[0], sc.Secrets[1], "sim-client/1", false, false},
		{"next works", "sim_secret_wrong", sc.Secrets[1], "sim-client/2", true, false},
		{"next only, old revoked", "sim_secret_revoked", sc.Secrets[0], "sim-client/1", true, false},
		{"both wrong", "sim_secret_a", "sim_secret_b", "", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log, logs := observedLogger()
			cfg := s.config(t, "sim-client")
			cfg.ClientSecret, cfg.ClientSecretNext, cfg.Logger = tt.first, tt.next, log
			rcv, err := Listen(cfg.RedirectURI)
			if err != nil {
				t.Fatal(err)
			}
			defer rcv.Close()
			cfg.RedirectURI = rcv.RedirectURI()
			c, err := NewClient(cfg)
			if err != nil {
				t.Fatal(err)
			}
			ar, _ := c.NewAuthRequest()
			go func() {
				if resp, err := http.Get(ar.URL); err == nil {
					resp.Body.Close()
				}
			}()
			code, err := rcv.Wait(context.Background(), ar.State)
			if err != nil {
				t.Fatal(err)
			}
			before := s.Stats().SecretUsed
			tok, err := c.Exchange(context.Background(), code, "")
			texts := []string{fmt.Sprint(cfg), fmt.Sprintf("%#v", cfg)}
			for _, e := range logs.All() {
				texts = append(texts, e.Message+fmt.Sprint(e.ContextMap()))
			}
			if err != nil {
				texts = append(texts, err.Error())
			}
			noSecrets(t, append(s.secretsOf(t, tok), tt.first, tt.next, code), texts...)
			if tt.wantErr {
				var te *TokenEndpointError
				if !errors.As(err, &te) || te.Code != "invalid_client" || !te.BothSecrets ||
					!strings.Contains(err.Error(), "client_secret_next") {
					t.Fatalf("err = %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if after := s.Stats().SecretUsed; after[tt.wantSecret] != before[tt.wantSecret]+1 {
				t.Errorf("secret used: %v → %v, want one more %s", before, after, tt.wantSecret)
			}
			info := logs.FilterMessageSnippet("accepted the other").All()
			if (len(info) == 1) != tt.wantLog {
				t.Fatalf("%d rotation log lines, want log %t", len(info), tt.wantLog)
			}
			if tt.wantLog {
				if m := info[0].ContextMap(); m["accepted"] != "scheduling.client_secret_next" || m["refused"] != "scheduling.client_secret" {
					t.Errorf("log = %v", m)
				}
				// The working secret is now tried first: a refresh needs no fallback.
				if _, err := c.Refresh(context.Background(), tok); err != nil {
					t.Fatal(err)
				}
				if n := logs.FilterMessageSnippet("accepted the other").Len(); n != 1 {
					t.Errorf("%d rotation lines after a refresh, want still 1", n)
				}
			}
		})
	}
}

func TestHasScope(t *testing.T) {
	tests := []struct {
		granted []string
		needed  string
		want    bool
	}{
		{[]string{"BOOKING_READ"}, "BOOKING_READ", true},
		{[]string{"PROFILE_READ"}, "BOOKING_READ", false},
		{[]string{"ORG_PROFILE_READ"}, "TEAM_PROFILE_READ", true},
		{[]string{"TEAM_PROFILE_READ"}, "ORG_PROFILE_READ", false},
		{[]string{"ORG_BOOKING_READ"}, "BOOKING_READ", false},
		{nil, "BOOKING_READ", false},
	}
	for _, tt := range tests {
		if got := HasScope(tt.granted, tt.needed); got != tt.want {
			t.Errorf("HasScope(%v, %s) = %t", tt.granted, tt.needed, got)
		}
	}
	if got := ParseScopes(" BOOKING_READ,PROFILE_READ  EVENT_TYPE_READ "); fmt.Sprint(got) != "[BOOKING_READ PROFILE_READ EVENT_TYPE_READ]" {
		t.Errorf("ParseScopes = %v", got)
	}
}

func TestScopeErrorFromServerMessage(t *testing.T) {
	msg := "insufficient_scope: token does not have the required scopes. Required: BOOKING_READ. Token has: PROFILE_READ, EVENT_TYPE_READ"
	e := NewScopeError("GET /v2/bookings", "BOOKING_READ", []string{"BOOKING_READ"}, msg)
	if e.Needed != "BOOKING_READ" || fmt.Sprint(e.Granted) != "[PROFILE_READ EVENT_TYPE_READ]" || !IsScopeRefusal(msg) {
		t.Errorf("e = %+v", e)
	}
	want := "GET /v2/bookings needs the scope BOOKING_READ, but the token has only PROFILE_READ, EVENT_TYPE_READ: enable BOOKING_READ on the OAuth client, add it to scheduling.scopes and run `syncd auth login` again"
	if e.Error() != want || !errors.Is(e, ErrScope) {
		t.Errorf("Error() = %q", e.Error())
	}
	if e := NewScopeError("GET /v2/me", "PROFILE_READ", nil, "forbidden"); !strings.Contains(e.Error(), "has only no scope") && !strings.Contains(e.Error(), "no scope") {
		t.Errorf("no scopes: %q", e.Error())
	}
}

func TestConfigValidation(t *testing.T) {
	good := Config{AuthURL: CalcomAuthURL, TokenURL: CalcomAPIURL + TokenPath, ClientID: "c", ClientSecret: "sek_SECRET", RedirectURI: "http://127.0.0.1:8765/cb", Scopes: []string{"BOOKING_READ"}}
	tests := []struct {
		mutate func(*Config)
		want   string
	}{
		{func(*Config) {}, ""},
		{func(c *Config) { c.ClientID = " " }, "client_id is required"},
		{func(c *Config) { c.ClientSecret = "" }, "client_secret is required"},
		{func(c *Config) { c.ClientSecret, c.Public = "", true }, ""},
		{func(c *Config) { c.Scopes = nil }, "scopes is empty"},
		{func(c *Config) { c.Scopes, c.Legacy = nil, true }, ""},
		{func(c *Config) { c.TokenURL = "ftp://x" }, "token_url must be"},
	}
	for _, tt := range tests {
		cfg := good
		tt.mutate(&cfg)
		_, err := NewClient(cfg)
		if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("err = %v, want %q", err, tt.want)
		}
		if err != nil {
			noSecrets(t, []string{"sek_SECRET"}, err.Error())
		}
	}
	log, logs := observedLogger()
	log.Info("cfg", zap.Any("cfg", good), zap.Any("tok", Token{AccessToken: "at_SECRET", RefreshToken: "rt_SECRET"}))
	var texts []string
	for _, e := range logs.All() {
		texts = append(texts, fmt.Sprint(e.ContextMap()))
	}
	texts = append(texts, fmt.Sprintf("%v %+v %#v %s", good, good, good, Token{AccessToken: "at_SECRET", RefreshToken: "rt_SECRET"}))
	noSecrets(t, []string{"sek_SECRET", "at_SECRET", "rt_SECRET"}, texts...)
}

func TestLegacySummary(t *testing.T) {
	d := Token{ClientID: "c", User: "ada@example.com", Legacy: true, Expiry: time.Now().Add(time.Hour)}.Summary().Describe(time.Now())
	for _, want := range []string{"legacy client", "scope parameter", "before changing any setting", "syncd auth login"} {
		if !strings.Contains(d, want) {
			t.Errorf("legacy status lacks %q:\n%s", want, d)
		}
	}
}
