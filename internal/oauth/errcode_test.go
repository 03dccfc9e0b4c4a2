package oauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestTokenErrorCodeNeverHoldsTheRefreshToken: a token endpoint (or a proxy)
// whose "error" field echoes the refresh token sent must not put it in
// syncd's error: the package promises that tokens never appear in an error.
func TestTokenErrorCodeNeverHoldsTheRefreshToken(t *testing.T) {
	const rt = "rt_REVIEW_SECRET_REFRESH_TOKEN_5c4b3a"
	const secret = "cs_REVIEW_CLIENT_SECRET_77aa"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"error":"refresh token %s was revoked (client_secret %s)"}`, r.PostForm.Get("refresh_token"), r.PostForm.Get("client_secret"))
	}))
	defer srv.Close()
	c, err := NewClient(Config{AuthURL: srv.URL + "/authorize", TokenURL: srv.URL + "/v2/auth/oauth2/token", ClientID: "cid",
		ClientSecret: secret, RedirectURI: "http://127.0.0.1:1/callback", Scopes: []string{"BOOKING_READ"},
		MaxAttempts: 1, MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Refresh(context.Background(), Token{AccessToken: "at", RefreshToken: rt})
	if err == nil {
		t.Fatal("a refused refresh succeeded")
	}
	var te *TokenEndpointError
	errors.As(err, &te)
	if msg := err.Error(); strings.Contains(msg, rt) || strings.Contains(msg, secret) {
		t.Errorf("the error holds the refresh token (%t) or the client secret (%t): %s", strings.Contains(msg, rt), strings.Contains(msg, secret), msg)
	}
}
