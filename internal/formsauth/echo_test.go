package formsauth

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestExchangeErrorHidesTheSecretAndCode: a token endpoint (or a proxy in
// front of it) that echoes the request in its error message must not put
// the app's client secret, or the authorization code, into the error that
// `syncd auth login --source forms` prints and logs.
func TestExchangeErrorHidesTheSecretAndCode(t *testing.T) {
	const secret = "cs_REVIEW_CLIENT_SECRET_4b2a"
	const code = "code_REVIEW_AUTH_CODE_77e1"
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var got map[string]string
		_ = json.NewDecoder(r.Body).Decode(&got)
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"message":"invalid_grant for code=%s client_secret=%s"}`, got["code"], got["client_secret"])
	}))
	defer ts.Close()
	a, err := New(Config{AuthorizeURL: ts.URL + "/a", TokenURL: ts.URL + "/t", ClientID: "app", ClientSecret: secret, RedirectURI: "http://127.0.0.1:1/cb"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Exchange(context.Background(), code)
	if err == nil {
		t.Fatal("no error")
	}
	for _, s := range []string{secret, code} {
		if strings.Contains(err.Error(), s) {
			t.Errorf("the error holds a secret (%s): %v", s, err)
		}
	}
}
