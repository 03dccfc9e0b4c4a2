package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/oauth"
	"github.com/syncd-dev/syncd/internal/schedsim"
	"github.com/syncd-dev/syncd/internal/source/scheduling"
	"github.com/syncd-dev/syncd/internal/state"
)

// secretWrites is a real state store whose writes of sign-ins fail after
// the first ok of them (a state file gone read-only, a full disk).
type secretWrites struct {
	state.Store
	mu     sync.Mutex
	ok     int
	writes int
}

func (s *secretWrites) PutSecret(ctx context.Context, name string, v []byte) error {
	s.mu.Lock()
	s.writes++
	fail := s.writes > s.ok
	s.mu.Unlock()
	if fail {
		return errors.New("write the state file: no space left on device")
	}
	return s.Store.PutSecret(ctx, name, v)
}

// schedulingSignIn is a config of the default account signing in to a
// scheduling simulator on loopback, and a token of a fresh sign-in there.
func schedulingSignIn(t *testing.T, sim *schedsim.Server) (*config.Config, oauth.Token) {
	t.Helper()
	ts := httptest.NewServer(sim)
	t.Cleanup(ts.Close)
	secret := sim.Clients()[0].Secrets[0]
	dir := t.TempDir()
	raw := fmt.Sprintf(`source: {base_url: "http://127.0.0.1:1/v1/api", api_key: "${KEY}"}
scheduling:
  base_url: %s
  authorize_url: %s%s
  client_id: sim-client
  client_secret: "${SCHED_SECRET}"
  redirect_uri: http://127.0.0.1:8976/callback
  max_attempts: 1
sink: {parquet: {path: %q}}
state: {path: %q}
`, ts.URL, ts.URL, schedsim.PathAuthorize, filepath.Join(dir, "out"), filepath.Join(dir, "state.db"))
	path := filepath.Join(dir, "syncd.yaml")
	if err := os.WriteFile(path, []byte(raw), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, func(k string) (string, bool) {
		switch k {
		case "KEY":
			return "key", true
		case "SCHED_SECRET":
			return secret, true
		}
		return "", false
	})
	if err != nil {
		t.Fatal(err)
	}
	oc, err := scheduling.NewOAuthClient(cfg, zap.NewNop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ar, err := oc.NewAuthRequest()
	if err != nil {
		t.Fatal(err)
	}
	// The simulator approves at once; its redirect carries the code.
	browser := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := browser.Get(ar.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	back, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	code, err := oauth.ParseRedirect(back.String(), ar.State)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := oc.Exchange(context.Background(), code, ar.Verifier)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, tok
}

// TestCheckSignInNeverLosesTheSignIn: `syncd auth status` (CheckSignIn)
// checks the sign-in at the token endpoint by refreshing it, which rotates
// the refresh token: it must not refresh when the state cannot be written
// (the rotated token could not be saved: a sign-in lost), and when the
// save fails after the rotation all the same, the error says so, names the
// state and the fix. It used to refresh first and drop the rotated token
// when the save failed, with "save the rotated refresh token: ...".
func TestCheckSignInNeverLosesTheSignIn(t *testing.T) {
	tests := []struct {
		name         string
		expired      bool // the stored access token is past its expiry
		revoked      bool // the refresh token was revoked at the server
		okWrites     int  // writes of the sign-in that succeed
		wantErr      []string
		wantRefresh  bool // the server rotated the pair
		wantSignedIn bool // the stored sign-in works afterwards
	}{
		{name: "valid, state writable", okWrites: 99, wantRefresh: true, wantSignedIn: true},
		{name: "expired, state writable", expired: true, okWrites: 99, wantRefresh: true, wantSignedIn: true},
		{name: "valid, state not writable", okWrites: 0, wantSignedIn: true,
			wantErr: []string{"state.db", "cannot be written", "did not refresh", "no space left", "unchanged"}},
		{name: "expired, state not writable", expired: true, okWrites: 0, wantSignedIn: true,
			wantErr: []string{"state.db", "cannot be written", "did not refresh", "no space left", "unchanged"}},
		{name: "the rotated token's save fails", okWrites: 1, wantRefresh: true,
			wantErr: []string{"state.db", "rotated", "could not be saved", "no space left", "syncd auth login"}},
		{name: "revoked at the server", revoked: true, okWrites: 99,
			wantErr: []string{"no longer accepts", "syncd auth login"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sim := schedsim.New(schedsim.Config{Seed: 9})
			cfg, tok := schedulingSignIn(t, sim)
			if tt.expired {
				tok.IssuedAt, tok.Expiry = tok.IssuedAt.Add(-time.Hour), tok.Expiry.Add(-time.Hour)
			}
			if tt.revoked {
				sim.RevokeRefreshTokens()
			}
			ctx := context.Background()
			bolt, err := OpenStore(ctx, cfg, false)
			if err != nil {
				t.Fatal(err)
			}
			defer bolt.Close()
			if err := (scheduling.StateTokens{Store: bolt}).Save(ctx, tok); err != nil {
				t.Fatal(err)
			}
			store := &secretWrites{Store: bolt, ok: tt.okWrites}
			before := sim.Stats().Refreshes

			got, err := scheduling.CheckSignIn(ctx, cfg, "", store, zap.NewNop())
			t.Logf("err: %v", err)

			for _, w := range tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("error %v does not say %q", err, w)
				}
			}
			if len(tt.wantErr) == 0 && err != nil {
				t.Errorf("CheckSignIn: %v", err)
			}
			if refreshed := sim.Stats().Refreshes > before; refreshed != tt.wantRefresh {
				t.Errorf("refreshed: %t, want %t", refreshed, tt.wantRefresh)
			}
			if err == nil && got.AccessToken == "" {
				t.Errorf("the checked sign-in has no token: %v", got)
			}
			stored, lerr := (scheduling.StateTokens{Store: bolt}).Load(ctx)
			if lerr != nil {
				t.Fatal(lerr)
			}
			oc, _ := scheduling.NewOAuthClient(cfg, zap.NewNop(), nil)
			_, rerr := oc.Refresh(ctx, stored)
			if works := rerr == nil; works != tt.wantSignedIn {
				t.Errorf("the stored sign-in works afterwards: %t (%v), want %t", works, rerr, tt.wantSignedIn)
			}
			if err != nil {
				for _, s := range []string{tok.AccessToken, tok.RefreshToken, stored.AccessToken, stored.RefreshToken, sim.Clients()[0].Secrets[0]} {
					if s != "" && strings.Contains(err.Error(), s) {
						t.Errorf("the error shows a secret")
					}
				}
			}
		})
	}
}
