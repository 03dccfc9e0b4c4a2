package scheduling

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/oauth"
)

// fixedTokens hands out one access token.
type fixedTokens struct{ tok string }

func (f fixedTokens) Token(context.Context) (oauth.Token, error) {
	return oauth.Token{AccessToken: f.tok, Expiry: time.Now().Add(time.Hour)}, nil
}
func (fixedTokens) Invalidate(string) {}

// TestAccessTokenNeverInErrors: a server (or a proxy in front of it) that
// echoes the request's Authorization header in its error message must not
// put the OAuth access token into syncd's error, which reaches logs, the
// pass summary and /readyz.
func TestAccessTokenNeverInErrors(t *testing.T) {
	const token = "at_REVIEW_SECRET_ACCESS_TOKEN_9f8e7d"
	for _, status := range []int{http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusInternalServerError} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(status)
				fmt.Fprintf(w, `{"message":"request rejected; headers were Authorization: %s"}`, r.Header.Get("Authorization"))
			}))
			defer srv.Close()
			c, err := New(Config{BaseURL: srv.URL, Tokens: fixedTokens{token}, RateLimit: 1000, MaxAttempts: 1, MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Me(context.Background())
			if err == nil {
				t.Fatal("no error")
			}
			if strings.Contains(err.Error(), token) || strings.Contains(fmt.Sprintf("%+v", err), token) {
				t.Errorf("the OAuth access token is in the error: %v", err)
			}
		})
	}
}
