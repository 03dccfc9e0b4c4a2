package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/formsauth"
	formsource "github.com/syncd-dev/syncd/internal/source/forms"
	"github.com/syncd-dev/syncd/internal/testkit"
	"github.com/syncd-dev/syncd/internal/testkit/lakes"
)

// formsOAuthConfig is a config of the default account and accounts o
// (forms_oauth) and k (an API key), with its state at stateLine.
func formsOAuthConfig(t *testing.T, stateLine string) *config.Config {
	t.Helper()
	dir := t.TempDir()
	raw := fmt.Sprintf(`source: {base_url: "http://127.0.0.1:1/v1/api"}
forms_oauth: {client_id: app, client_secret: s}
sink: {parquet: {path: %q}}
state: %s
accounts:
  - {name: o, forms_oauth: true}
  - {name: k, api_key: "${KEY}"}
`, filepath.Join(dir, "out"), stateLine)
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

// namespaceOf is the namespace of cfg's account name.
func namespaceOf(t *testing.T, cfg *config.Config, name string) string {
	t.Helper()
	for _, a := range cfg.AccountList() {
		if a.Name == name {
			return a.Namespace()
		}
	}
	t.Fatalf("no account %s", name)
	return ""
}

// On a state kept in a bucket and split by account, the process that
// claimed an account stores, reads and forgets its Forms API sign-in, as
// `syncd auth login --source forms` and `auth logout` do: the sign-in
// lives in the account's own part of the state.
func TestFormsSignInOnBucketState(t *testing.T) {
	lake := lakes.Start(t, "gs")
	cfg := formsOAuthConfig(t, fmt.Sprintf("{url: %q}", lake.URL("team/syncd-state")))
	ctx := context.Background()
	ns := namespaceOf(t, cfg, "o")
	store, err := OpenStoreOf(ctx, cfg, ns)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	tokens := formsource.Tokens{Store: store, Namespace: ns}
	want := formsauth.Token{AccessToken: "at-1", BaseURL: "http://forms.example/v1/api", ObtainedAt: time.Now().UTC().Truncate(time.Second)}
	if err := tokens.Save(ctx, want); err != nil {
		t.Fatalf("store the sign-in of account o: %v", err)
	}
	got, err := tokens.Load(ctx)
	if err != nil || got.AccessToken != want.AccessToken || got.BaseURL != want.BaseURL {
		t.Fatalf("read the sign-in back: %v (same token %t, base URL %q)", err, got.AccessToken == want.AccessToken, got.BaseURL)
	}
	if err := tokens.Delete(ctx); err != nil {
		t.Fatalf("forget the sign-in: %v", err)
	}
	if _, err := tokens.Load(ctx); !errors.Is(err, formsource.ErrNoSignIn) {
		t.Fatalf("after the logout, Load = %v, want formsource.ErrNoSignIn", err)
	}
}

// A local state written by an earlier release holds the sign-in under
// forms/oauth/NAME: it is still read, and a new login or a logout leaves
// no copy under the old name.
func TestFormsSignInUnderItsEarlierName(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		logout bool
	}{{name: "new login"}, {name: "logout", logout: true}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := formsOAuthConfig(t, fmt.Sprintf("{path: %q}", filepath.Join(t.TempDir(), "syncd.db")))
			store, err := OpenStore(ctx, cfg, false)
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			ns := namespaceOf(t, cfg, "o")
			old := fmt.Sprintf(`{"access_token":"at-old","base_url":"http://forms.example/v1/api","obtained_at":%q}`, time.Now().UTC().Format(time.RFC3339))
			if err := store.PutSecret(ctx, formsource.LegacyTokenSecret(ns), []byte(old)); err != nil {
				t.Fatal(err)
			}
			tokens := formsource.Tokens{Store: store, Namespace: ns}
			got, err := tokens.Load(ctx)
			if err != nil || got.AccessToken != "at-old" {
				t.Fatalf("the sign-in under its earlier name: %v (read %t)", err, got.AccessToken == "at-old")
			}
			if tc.logout {
				err = tokens.Delete(ctx)
			} else {
				err = tokens.Save(ctx, formsauth.Token{AccessToken: "at-new", BaseURL: got.BaseURL, ObtainedAt: time.Now()})
			}
			if err != nil {
				t.Fatal(err)
			}
			if raw, err := store.GetSecret(ctx, formsource.LegacyTokenSecret(ns)); err != nil || raw != nil {
				t.Fatalf("the earlier name still holds a sign-in (%t): %v", raw != nil, err)
			}
			got, err = tokens.Load(ctx)
			switch {
			case tc.logout && !errors.Is(err, formsource.ErrNoSignIn):
				t.Errorf("after the logout, Load = %v, want formsource.ErrNoSignIn", err)
			case !tc.logout && (err != nil || got.AccessToken != "at-new"):
				t.Errorf("after the new login, Load = %v (the new token %t)", err, got.AccessToken == "at-new")
			}
		})
	}
}
