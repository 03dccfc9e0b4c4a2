package connect

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/syncd-dev/syncd/internal/oauth"
	"github.com/syncd-dev/syncd/internal/schedsim"
)

// TestConnectBehindAPathPrefix: server.public_url is "where people's
// browsers reach this syncd"; behind a reverse proxy that serves syncd under
// a path (https://host/syncd, the proxy stripping /syncd), the link
// (public_url/connect) and the callback (public_url/connect/callback) are
// under /syncd, and the browser-binding cookie is set with Path=/syncd/connect
// so that the browser sends it to the callback and the sign-in completes.
// The cookie used to be set with Path=/connect, and every such sign-in was
// refused as "started in another browser".
func TestConnectBehindAPathPrefix(t *testing.T) {
	sim := schedsim.New(schedsim.Config{Seed: 1})
	simSrv := httptest.NewServer(sim)
	defer simSrv.Close()
	mux := http.NewServeMux()
	front := httptest.NewServer(http.StripPrefix("/syncd", mux)) // the reverse proxy
	defer front.Close()
	publicURL := front.URL + "/syncd"

	var client schedsim.Client
	for _, c := range sim.Clients() {
		if c.ID == "sim-client" {
			client = c
		}
	}
	oc, err := oauth.NewClient(oauth.Config{
		AuthURL: simSrv.URL + schedsim.PathAuthorize, TokenURL: simSrv.URL + schedsim.PathToken,
		ClientID: client.ID, ClientSecret: client.Secrets[0], RedirectURI: publicURL + PathCallback,
		Scopes: []string{schedsim.ScopeBookingRead, schedsim.ScopeProfileRead}, MaxAttempts: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	secret := []byte("0123456789abcdef-operator-secret")
	saved := 0
	h, err := New(Options{
		Secret: secret,
		Known:  func(a string) bool { return a == "acme" },
		OAuth:  func(string) (*oauth.Client, error) { return oc, nil },
		Save:   func(context.Context, string, oauth.Token) error { saved++; return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	h.Register(mux)

	hs := &harness{t: t}
	b := hs.browser()
	link := publicURL + PathConnect + "?" + url.Values{"account": {"acme"}, "token": {Token(secret, "acme")}}.Encode()
	got := hs.get(b, link)
	if got.status != http.StatusOK || saved != 1 {
		t.Errorf("sign-in through the connect link at %s: HTTP %d %q, %d tokens saved; want the account connected", publicURL, got.status, got.body, saved)
	}
}
