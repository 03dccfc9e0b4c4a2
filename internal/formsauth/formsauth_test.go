package formsauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

func TestAuthRequest(t *testing.T) {
	a, err := New(Config{AuthorizeURL: "https://build.example/authorize/oauth?x=1", TokenURL: "https://server.example/t", ClientID: "app", ClientSecret: "s3cret", RedirectURI: "http://127.0.0.1:8977/callback"})
	if err != nil {
		t.Fatal(err)
	}
	r1, err := a.NewAuthRequest()
	if err != nil {
		t.Fatal(err)
	}
	r2, _ := a.NewAuthRequest()
	u, err := url.Parse(r1.URL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	if u.Host != "build.example" || q.Get("client_id") != "app" || q.Get("redirect_uri") != "http://127.0.0.1:8977/callback" || q.Get("state") != r1.State || q.Get("x") != "1" {
		t.Errorf("authorization URL = %s", r1.URL)
	}
	if r1.State == "" || r1.State == r2.State || strings.Contains(r1.URL, "s3cret") {
		t.Errorf("states %q %q, or the URL holds the secret: %s", r1.State, r2.State, r1.URL)
	}
}

func TestExchange(t *testing.T) {
	var got map[string]string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "method", http.StatusMethodNotAllowed)
			return
		}
		got = nil
		_ = json.NewDecoder(r.Body).Decode(&got)
		if got["code"] != "good" {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"message":"Invalid code"}`)
			return
		}
		fmt.Fprint(w, `{"access_token":"tok_abc","base_url":"https://eu-api.example/v1/api/"}`)
	}))
	defer ts.Close()
	a, err := New(Config{AuthorizeURL: ts.URL + "/a", TokenURL: ts.URL + "/t", ClientID: "app", ClientSecret: "s3cret", RedirectURI: "http://127.0.0.1:1/cb"})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := a.Exchange(context.Background(), "good")
	if err != nil {
		t.Fatal(err)
	}
	if tok.AccessToken != "tok_abc" || tok.BaseURL != "https://eu-api.example/v1/api" || tok.ObtainedAt.IsZero() {
		t.Errorf("token = %+v (%s)", tok, tok.BaseURL)
	}
	if got["client_id"] != "app" || got["client_secret"] != "s3cret" || got["redirect_uri"] != "http://127.0.0.1:1/cb" {
		t.Errorf("the exchange sent %v", got)
	}
	for _, s := range []string{fmt.Sprint(tok), fmt.Sprintf("%+v", tok), fmt.Sprintf("%#v", tok), fmt.Sprint(a.cfg)} {
		if strings.Contains(s, "tok_abc") || strings.Contains(s, "s3cret") {
			t.Errorf("a secret prints: %s", s)
		}
	}
	_, err = a.Exchange(context.Background(), "used")
	var ee *ExchangeError
	if !errors.As(err, &ee) || ee.Status != http.StatusBadRequest || !strings.Contains(err.Error(), "Invalid code") || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("a refused code: %v", err)
	}
}

func TestExchangeBadAnswer(t *testing.T) {
	for _, body := range []string{`{"base_url":"https://x.example"}`, `{"access_token":"t","base_url":"nope"}`, `not json`} {
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, body) }))
		a, _ := New(Config{AuthorizeURL: ts.URL, TokenURL: ts.URL, ClientID: "c", ClientSecret: "s", RedirectURI: "http://127.0.0.1:1/cb"})
		if _, err := a.Exchange(context.Background(), "c"); err == nil {
			t.Errorf("answer %s: no error", body)
		}
		ts.Close()
	}
}
