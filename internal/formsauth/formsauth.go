// Package formsauth signs a Forms API account (a Fillout workspace) in
// with an OAuth app, instead of an API key.
//
// The flow is the authorization-code flow of Fillout's OAuth apps:
// NewAuthRequest builds the URL of the authorization page (client_id,
// redirect_uri and a random state); the loopback receiver of package oauth
// (oauth.Listen, oauth.ParseRedirect) takes the redirect back; Exchange
// trades the code for an access token at the token endpoint, whose answer
// also carries the base_url of the workspace's deployment. The access
// token is then used as the Bearer key of the Forms API at that base_url.
// Fillout's tokens do not expire and have no refresh token; a workspace may
// invalidate one, after which the API answers 401 and the account signs in
// again.
//
// Secrets (the client secret, codes, tokens) never appear in an error or a
// printed value: Token and Config redact them.
package formsauth

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/syncd-dev/syncd/internal/httpapi"
)

// Fillout's endpoints: the defaults of the forms_oauth section.
const (
	FilloutAuthorizeURL = "https://build.fillout.com/authorize/oauth"
	FilloutTokenURL     = "https://server.fillout.com/public/oauth/accessToken"
)

// maxAnswer bounds a token endpoint's answer: a token and a URL.
const maxAnswer = 1 << 20

// Config is one OAuth app of the Forms API.
type Config struct {
	AuthorizeURL string
	TokenURL     string
	ClientID     string
	ClientSecret string `json:"-"`
	// RedirectURI must be registered with the app; for `auth login` a
	// loopback address.
	RedirectURI string
	HTTPClient  *http.Client  // optional
	Timeout     time.Duration // of the exchange; default 30s
}

// String keeps the client secret out of anything that prints a Config.
func (c Config) String() string {
	return fmt.Sprintf("formsauth.Config{AuthorizeURL: %q, TokenURL: %q, ClientID: %q, ClientSecret: [REDACTED], RedirectURI: %q}",
		c.AuthorizeURL, c.TokenURL, c.ClientID, c.RedirectURI)
}

// Format makes every fmt verb print String.
func (c Config) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, c.String()) }

// Token is an account's sign-in: the access token, used as the Forms API's
// Bearer key, and the base URL it belongs to.
type Token struct {
	AccessToken string    `json:"access_token"`
	BaseURL     string    `json:"base_url"`
	ObtainedAt  time.Time `json:"obtained_at"`
}

// String redacts the access token.
func (t Token) String() string {
	return fmt.Sprintf("formsauth.Token{AccessToken: [REDACTED], BaseURL: %q, ObtainedAt: %s}", t.BaseURL, t.ObtainedAt.Format(time.RFC3339))
}

// Format makes every fmt verb print String.
func (t Token) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, t.String()) }

// App is an OAuth app of the Forms API.
type App struct {
	cfg Config
	hc  *http.Client
}

// New checks cfg and returns its App.
func New(cfg Config) (*App, error) {
	for _, u := range []struct{ name, v string }{{"authorize URL", cfg.AuthorizeURL}, {"token URL", cfg.TokenURL}, {"redirect URI", cfg.RedirectURI}} {
		if p, err := url.Parse(u.v); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return nil, fmt.Errorf("formsauth: the %s %q is not an http(s) URL", u.name, u.v)
		}
	}
	if cfg.ClientID == "" || cfg.ClientSecret == "" {
		return nil, errors.New("formsauth: the app's client id and client secret are required")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	return &App{cfg: cfg, hc: hc}, nil
}

// RedirectURI is where the authorization page sends the browser back.
func (a *App) RedirectURI() string { return a.cfg.RedirectURI }

// AuthRequest is one authorization: the URL to open and the state its
// redirect must carry back.
type AuthRequest struct {
	URL   string
	State string `json:"-"`
}

// NewAuthRequest builds the authorization URL with a fresh random state.
func (a *App) NewAuthRequest() (*AuthRequest, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("formsauth: make the state of the authorization: %w", err)
	}
	state := base64.RawURLEncoding.EncodeToString(b)
	u, err := url.Parse(a.cfg.AuthorizeURL)
	if err != nil {
		return nil, fmt.Errorf("formsauth: the authorize URL: %w", err)
	}
	q := u.Query()
	q.Set("client_id", a.cfg.ClientID)
	q.Set("redirect_uri", a.cfg.RedirectURI)
	q.Set("state", state)
	u.RawQuery = q.Encode()
	return &AuthRequest{URL: u.String(), State: state}, nil
}

// ExchangeError is the token endpoint refusing a code (used, expired,
// of another app or redirect URI) or failing.
type ExchangeError struct {
	Status int
	// Message is the endpoint's own, when it gave one (never a secret of
	// ours: the endpoint does not echo them).
	Message string
}

func (e *ExchangeError) Error() string {
	msg := fmt.Sprintf("the Forms API's token endpoint refused the code (HTTP %d)", e.Status)
	if e.Message != "" {
		msg += ": " + e.Message
	}
	return msg + ": sign in again (a code works once, and only for the app and redirect URI it was issued to)"
}

// Exchange trades an authorization code for the account's token.
func (a *App) Exchange(ctx context.Context, code string) (Token, error) {
	body, err := json.Marshal(map[string]string{
		"code": code, "client_id": a.cfg.ClientID, "client_secret": a.cfg.ClientSecret, "redirect_uri": a.cfg.RedirectURI,
	})
	if err != nil {
		return Token{}, fmt.Errorf("formsauth: encode the code exchange: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, a.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.cfg.TokenURL, bytes.NewReader(body))
	if err != nil {
		return Token{}, fmt.Errorf("formsauth: build the code exchange: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := a.hc.Do(req)
	if err != nil {
		// A *url.Error names the token URL, which holds no secret.
		return Token{}, fmt.Errorf("formsauth: exchange the code at the token endpoint: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return Token{}, fmt.Errorf("formsauth: read the token endpoint's answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Message string `json:"message"`
			Error   string `json:"error"`
		}
		_ = json.Unmarshal(raw, &e) // a body that is not JSON leaves no message
		// An endpoint (or a proxy) may echo the request: the secret and the
		// code never reach the message.
		msg := httpapi.Scrub(firstNonEmpty(e.Message, e.Error), a.cfg.ClientSecret, code)
		return Token{}, &ExchangeError{Status: resp.StatusCode, Message: msg}
	}
	var tok Token
	if err := json.Unmarshal(raw, &tok); err != nil {
		return Token{}, fmt.Errorf("formsauth: the token endpoint's answer is not a token (%v)", err)
	}
	if tok.AccessToken == "" {
		return Token{}, errors.New("formsauth: the token endpoint's answer has no access_token")
	}
	if u, err := url.Parse(tok.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Token{}, fmt.Errorf("formsauth: the token endpoint's answer has no usable base_url (%q)", tok.BaseURL)
	}
	tok.BaseURL = strings.TrimRight(tok.BaseURL, "/")
	tok.ObtainedAt = time.Now().UTC()
	return tok, nil
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
