package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/source/scheduling"

	"github.com/syncd-dev/syncd/internal/oauth"
	"github.com/syncd-dev/syncd/internal/schedsim"
	"github.com/syncd-dev/syncd/internal/state"
	"github.com/syncd-dev/syncd/internal/testkit"
)

// firstLine is a writer that hands over its first line (the authorization
// URL `auth login` prints alone on stdout) and keeps the rest.
type firstLine struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	line chan string
	sent bool
}

func newFirstLine() *firstLine { return &firstLine{line: make(chan string, 1)} }

func (f *firstLine) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.buf.Write(p)
	if s := f.buf.String(); !f.sent && strings.Contains(s, "\n") {
		f.sent = true
		f.line <- strings.TrimSpace(s[:strings.IndexByte(s, '\n')])
	}
	return len(p), nil
}

func (f *firstLine) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.buf.String()
}

// schedLoginWorkdir is an installation of the default account signing in
// to a scheduling simulator on loopback. tokenBase is where the token
// endpoint is (the simulator, or an address nothing listens on).
func schedLoginWorkdir(t *testing.T, sim *schedsim.Server, simURL, tokenBase, secret string) *testkit.Workdir {
	t.Helper()
	forms, _ := mistakeSim(t)
	t.Setenv("SCHED_SECRET", secret)
	section := fmt.Sprintf("scheduling:\n  base_url: %s\n  authorize_url: %s%s\n  client_id: sim-client\n  client_secret: ${SCHED_SECRET}\n"+
		"  redirect_uri: http://%s/callback\n  max_attempts: 1\n  timeout: 5s\n",
		tokenBase, simURL, schedsim.PathAuthorize, testkit.FreeAddr(t))
	return testkit.NewWorkdir(t, forms.BaseURL, testkit.Config{Extra: section})
}

// TestAuthLoginBrowserPageTellsTheOutcome: the page the browser lands on
// after the authorization page says "signed in" only once the state was
// checked, the code exchanged and the tokens saved; any failure gets a
// failure page naming it, and the page never shows a secret or markup from
// the redirect. It used to say "signed in" as soon as the redirect came.
func TestAuthLoginBrowserPageTellsTheOutcome(t *testing.T) {
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	tests := []struct {
		name       string
		wrongKey   bool                          // client_secret not the client's
		tokenDown  bool                          // nothing listens at the token endpoint
		deny       string                        // the authorization page answers error=deny
		tamper     func(q url.Values) url.Values // the redirect the browser follows, changed
		wantStatus int
		wantPage   []string // phrases of the page
		wantExit   int
	}{
		{name: "success", wantStatus: http.StatusOK, wantPage: []string{"signed in"}, wantExit: 0},
		{name: "wrong client secret", wrongKey: true, wantStatus: http.StatusBadGateway,
			wantPage: []string{"not signed in", "exchange the authorization code", "invalid_client"}, wantExit: exitFailed},
		{name: "token endpoint down", tokenDown: true, wantStatus: http.StatusBadGateway,
			wantPage: []string{"not signed in", "exchange the authorization code"}, wantExit: exitFailed},
		{name: "access denied", deny: "access_denied", wantStatus: http.StatusBadRequest,
			wantPage: []string{"not signed in", "access_denied"}, wantExit: exitFailed},
		{name: "state of another login", tamper: func(q url.Values) url.Values { q.Set("state", "an-old-tab"); return q },
			wantStatus: http.StatusBadRequest, wantPage: []string{"not signed in", "does not belong"}, wantExit: exitFailed},
		{name: "markup in the redirect", tamper: func(q url.Values) url.Values {
			q.Del("code")
			q.Set("error", "<script>alert(1)</script>")
			q.Set("error_description", "<img src=x onerror=alert(2)>")
			return q
		}, wantStatus: http.StatusBadRequest, wantPage: []string{"not signed in"}, wantExit: exitFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sim := schedsim.New(schedsim.Config{Seed: 5})
			ts := httptest.NewServer(sim)
			t.Cleanup(ts.Close)
			var client schedsim.Client
			for _, c := range sim.Clients() {
				if c.ID == "sim-client" {
					client = c
				}
			}
			secret, tokenBase := client.Secrets[0], ts.URL
			if tt.wrongKey {
				secret = "sim_secret_not_the_clients"
			}
			if tt.tokenDown {
				tokenBase = "http://" + testkit.FreeAddr(t)
			}
			if tt.deny != "" {
				sim.DenyAuthorizations(tt.deny)
			}
			w := schedLoginWorkdir(t, sim, ts.URL, tokenBase, secret)

			stdout, stderr := newFirstLine(), &bytes.Buffer{}
			root, _ := newRoot(stdout, stderr)
			root.SetArgs([]string{"auth", "login", "--config", w.Config})
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			exit := make(chan int, 1)
			go func() { exit <- exitCode(root.ExecuteContext(ctx), stderr) }()
			var authURL string
			select {
			case authURL = <-stdout.line:
			case code := <-exit:
				t.Fatalf("auth login exited %d before printing the URL: %s", code, stderr.String())
			}

			// The browser: the authorization page redirects to the loopback
			// listener, whose answer is the page under test.
			resp, err := noRedirect.Get(authURL)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			back, err := url.Parse(resp.Header.Get("Location"))
			if err != nil || back.Host == "" {
				t.Fatalf("the authorization page answered %d without a redirect", resp.StatusCode)
			}
			code := back.Query().Get("code")
			if tt.tamper != nil {
				back.RawQuery = tt.tamper(back.Query()).Encode()
			}
			resp, err = http.Get(back.String())
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			page := string(body)

			// When the page arrives, the tokens of a success are already
			// in the state (and those of a failure are not).
			stored := storedSchedulingToken(t, w)

			var got int
			select {
			case got = <-exit:
			case <-time.After(30 * time.Second):
				t.Fatal("auth login did not end after the redirect")
			}
			t.Logf("page %d %q; exit %d; stderr %q", resp.StatusCode, page, got, stderr.String())
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("page status %d, want %d", resp.StatusCode, tt.wantStatus)
			}
			for _, p := range tt.wantPage {
				if !strings.Contains(page, p) {
					t.Errorf("page %q does not say %q", page, p)
				}
			}
			if tt.wantExit != 0 && strings.Contains(page, "syncd is signed in") {
				t.Errorf("the browser was told the sign-in worked, but it failed (exit %d)", got)
			}
			if got != tt.wantExit {
				t.Errorf("exit %d, want %d", got, tt.wantExit)
			}
			if (stored != nil) != (tt.wantExit == 0) {
				t.Errorf("tokens stored when the page arrived: %t; want %t", stored != nil, tt.wantExit == 0)
			}
			if strings.Contains(page, "<script") || strings.Contains(page, "<img") || strings.Contains(page, "alert(") {
				t.Errorf("the page shows markup or text of the redirect: %q", page)
			}
			secrets := append(append([]string{code}, client.Secrets...), secret)
			if stored != nil {
				secrets = append(secrets, stored.AccessToken, stored.RefreshToken)
			}
			for _, s := range secrets {
				if s != "" && strings.Contains(page+stdout.String()+stderr.String(), s) {
					t.Errorf("a secret is shown on the page or printed")
				}
			}
		})
	}
}

// storedSchedulingToken is the default account's token in w's state, or
// nil.
func storedSchedulingToken(t *testing.T, w *testkit.Workdir) *oauth.Token {
	t.Helper()
	st, err := state.OpenBolt(context.Background(), state.BoltOptions{Path: w.State, ReadOnly: true})
	if err != nil {
		t.Logf("the state cannot be read when the page arrives: %v", err)
		return nil
	}
	defer st.Close()
	tok, err := (scheduling.StateTokens{Store: st}).Load(context.Background())
	if err != nil {
		return nil
	}
	return &tok
}
