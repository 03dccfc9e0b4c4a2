package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/formsauth"
	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/poller"
	formsource "github.com/syncd-dev/syncd/internal/source/forms"
	"github.com/syncd-dev/syncd/internal/testkit"
)

// TestFormsOAuthPass: an account with forms_oauth fails its pass alone
// until it signs in, then syncs at the base URL of its stored sign-in (its
// configured one leads nowhere), and fails naming the login command once
// the token is refused.
func TestFormsOAuthPass(t *testing.T) {
	sim := testkit.StartSim(t, formsim.Config{Seed: 8, Forms: 2, Submissions: 5})
	dir := t.TempDir()
	raw := fmt.Sprintf(`source: {base_url: %q}
forms_oauth: {client_id: app, client_secret: s}
sync: {safety_lag: 0s}
sink: {parquet: {path: out}}
state: {path: state/syncd.db}
accounts:
  - {name: o, forms_oauth: true, base_url: "http://127.0.0.1:1/v1/api"}
  - {name: k, api_key: "${KEY}"}
`, sim.BaseURL)
	path := filepath.Join(dir, "syncd.yaml")
	if err := os.WriteFile(path, []byte(raw), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, func(k string) (string, bool) { return testkit.APIKey, k == "KEY" })
	if err != nil {
		t.Fatal(err)
	}
	if names := secretNames(cfg); !slices.Contains(names, formsource.TokenSecret("o")) {
		t.Errorf("a restore does not keep the forms sign-in: %v", names)
	}
	ctx := context.Background()
	a, err := Open(ctx, cfg, zap.NewNop(), Options{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	o := a.Account("o")
	pass := func() []poller.Result { return o.Pass(ctx, o.Jobs, true) }

	res := pass()
	var se *formsource.SignInError
	if len(res) != 1 || !errors.As(res[0].Err, &se) || !errors.Is(res[0].Err, formsource.ErrNoSignIn) ||
		!strings.Contains(res[0].Err.Error(), "run `syncd auth login --account o --source forms`") {
		t.Fatalf("a pass before the sign-in: %+v", res)
	}
	if k := a.Account("k"); len(k.Pass(ctx, k.Jobs, true)) != 2 {
		t.Errorf("the account with a key does not sync its two forms")
	}

	tokens := formsource.Tokens{Store: a.Store, Namespace: "o"}
	if err := tokens.Save(ctx, formsauth.Token{AccessToken: testkit.APIKey, BaseURL: sim.BaseURL, ObtainedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	res = pass()
	if len(res) != 2 {
		t.Fatalf("a pass after the sign-in: %+v", res)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Errorf("form %s: %v", r.Stream, r.Err)
		}
	}

	if err := tokens.Save(ctx, formsauth.Token{AccessToken: "fo_oauth_invalidated", BaseURL: sim.BaseURL}); err != nil {
		t.Fatal(err)
	}
	res = pass()
	if len(res) != 1 || !errors.As(res[0].Err, &se) || !strings.Contains(res[0].Err.Error(), "no longer accepts its OAuth sign-in") ||
		strings.Contains(res[0].Err.Error(), "fo_oauth_invalidated") {
		t.Errorf("a pass with a refused token: %+v", res)
	}

	if err := tokens.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := tokens.Load(ctx); !errors.Is(err, formsource.ErrNoSignIn) {
		t.Errorf("after Delete: %v", err)
	}
	if _, err := formsource.APIKey(o.Cfg); err == nil {
		t.Error("APIKey of a forms_oauth account: no error")
	}
}
