// Package oauth signs syncd in to the scheduling API (Cal.com API v2) on
// behalf of a user and keeps the tokens alive unattended.
//
// The pieces, in the order `syncd auth login` uses them: NewAuthRequest
// builds the authorization URL (random state, scopes joined by spaces, PKCE
// S256 for public clients, no scope for a legacy client); Listen receives the
// redirect on the loopback address of the redirect URI, or ParseRedirect
// reads a URL pasted on a headless machine; Client.Exchange trades the code
// for tokens. A TokenSource then hands out access tokens to the API client,
// refreshing them before they expire, one refresh at a time, and saving the
// rotated refresh token to the TokenStore before the new access token is
// used: the scheduling API rotates refresh tokens, so a token that was
// received but not saved is a session lost at the next crash.
//
// golang.org/x/oauth2 supplies the PKCE helpers and the URL builder; its
// TokenSource has no hook for "the token changed, persist it first", so the
// refresh path is this package's own (TokenSource.OAuth2 adapts it back).
//
// Secrets (client secrets, codes, verifiers, tokens) never appear in an
// error, a log line or a printed value: every type that holds one redacts it
// in String, Format and MarshalLogObject.
package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/syncd-dev/syncd/internal/logkey"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/oauth2"

	"github.com/syncd-dev/syncd/internal/httpapi"
)

// Cal.com's endpoints, for defaults and documentation.
const (
	CalcomAuthURL  = "https://app.cal.com/auth/oauth2/authorize"
	CalcomAPIURL   = "https://api.cal.com"
	TokenPath      = "/v2/auth/oauth2/token"
	DefaultSkew    = 2 * time.Minute
	DefaultExpires = 30 * time.Minute // access token lifetime when the answer omits expires_in
)

// Config describes one OAuth client of the scheduling API.
type Config struct {
	AuthURL  string // authorization page, e.g. CalcomAuthURL
	TokenURL string // token endpoint, e.g. CalcomAPIURL + TokenPath
	ClientID string
	// ClientSecret and ClientSecretNext are the client's active secrets
	// (two during a rotation). A public client has none and uses PKCE.
	ClientSecret     string `json:"-"`
	ClientSecretNext string `json:"-"`
	// RedirectURI must be one registered on the client; for `auth login` a
	// loopback address, e.g. http://127.0.0.1:8765/callback.
	RedirectURI string
	// Scopes to request, e.g. BOOKING_READ PROFILE_READ. A legacy client
	// with no scopes requests none and gets unscoped tokens; a legacy client
	// with scopes is migrating (LegacyMigrationStep).
	Scopes []string
	Public bool // PKCE S256, no client secret
	Legacy bool // created before scopes existed

	// HTTP settings of token endpoint calls; zero values take httpapi's
	// defaults.
	HTTPClient  *http.Client
	Timeout     time.Duration
	MaxAttempts int
	MinBackoff  time.Duration
	MaxBackoff  time.Duration
	Logger      *zap.Logger
	Observer    httpapi.Observer
}

// LegacyMigrationStep is the documented first step of moving a legacy client
// to explicit scopes.
const LegacyMigrationStep = "to move this legacy client to explicit scopes, first add the scopes it needs " +
	"(scheduling.scopes, e.g. BOOKING_READ PROFILE_READ) so that the authorization URL carries a scope parameter, " +
	"before changing any setting of the client, then run `syncd auth login` again: new tokens carry only the listed scopes"

// String keeps the secrets out of anything that prints a Config.
func (c Config) String() string {
	return fmt.Sprintf("oauth.Config{AuthURL: %q, TokenURL: %q, ClientID: %q, ClientSecret: %s, ClientSecretNext: %s, RedirectURI: %q, Scopes: %q, Public: %t, Legacy: %t}",
		c.AuthURL, c.TokenURL, c.ClientID, redactedIf(c.ClientSecret), redactedIf(c.ClientSecretNext), c.RedirectURI, c.Scopes, c.Public, c.Legacy)
}

// Format makes every fmt verb print String.
func (c Config) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, c.String()) }

// MarshalLogObject keeps the secrets out of zap.Any(cfg).
func (c Config) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddString("auth_url", c.AuthURL)
	enc.AddString("token_url", c.TokenURL)
	enc.AddString("client_id", c.ClientID)
	enc.AddString("client_secret", redactedIf(c.ClientSecret))
	enc.AddString("client_secret_next", redactedIf(c.ClientSecretNext))
	enc.AddString("redirect_uri", c.RedirectURI)
	enc.AddString("scopes", strings.Join(c.Scopes, " "))
	enc.AddBool("public", c.Public)
	enc.AddBool("legacy", c.Legacy)
	return nil
}

func redactedIf(s string) string {
	if s == "" {
		return `""`
	}
	return httpapi.Redacted
}

// Client talks to the authorization server of one OAuth client.
type Client struct {
	cfg    Config
	api    *httpapi.Client
	tokURL *url.URL
	log    *zap.Logger
	now    func() time.Time // stamps issued tokens; replaced by tests
	// secret is the index (0: ClientSecret, 1: ClientSecretNext) of the
	// secret tried first: the one that last worked.
	secret atomic.Int32
}

// NewClient checks cfg. Errors name the setting at fault.
func NewClient(cfg Config) (*Client, error) {
	for _, f := range []struct{ name, v string }{{"auth_url", cfg.AuthURL}, {"token_url", cfg.TokenURL}, {"redirect_uri", cfg.RedirectURI}} {
		u, err := url.Parse(f.v)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return nil, fmt.Errorf("oauth: scheduling.%s must be an http(s) URL, got %q", f.name, f.v)
		}
	}
	if strings.TrimSpace(cfg.ClientID) == "" {
		return nil, errors.New("oauth: scheduling.client_id is required: copy it from the OAuth client's developer settings")
	}
	if !cfg.Public && cfg.ClientSecret == "" {
		return nil, errors.New("oauth: scheduling.client_secret is required for a confidential client (or set scheduling.public for a PKCE client)")
	}
	if !cfg.Legacy && len(cfg.Scopes) == 0 {
		return nil, errors.New("oauth: scheduling.scopes is empty: list the scopes syncd needs (BOOKING_READ PROFILE_READ), or set scheduling.legacy for a client created before scopes existed")
	}
	tu, _ := url.Parse(cfg.TokenURL)
	logger := cfg.Logger
	if logger == nil {
		logger = zap.NewNop()
	}
	api, err := httpapi.New(httpapi.Config{
		Name:         "oauth token client",
		BaseURL:      tu.Scheme + "://" + tu.Host,
		RateLimit:    2,
		Burst:        2,
		MaxAttempts:  cfg.MaxAttempts,
		MinBackoff:   cfg.MinBackoff,
		MaxBackoff:   cfg.MaxBackoff,
		Timeout:      cfg.Timeout,
		MaxBodyBytes: 1 << 20,
		HTTPClient:   cfg.HTTPClient,
		Logger:       logger,
		Observer:     cfg.Observer,
		UserAgent:    "syncd-oauth",
		LogMessage:   "oauth token request",
	})
	if err != nil {
		return nil, err
	}
	return &Client{cfg: cfg, api: api, tokURL: tu, log: logger, now: time.Now}, nil
}

// Config returns the client's configuration.
func (c *Client) Config() Config { return c.cfg }

// String names the client without its secrets.
func (c *Client) String() string { return fmt.Sprintf("oauth.Client{ClientID: %q}", c.cfg.ClientID) }

// Format makes every fmt verb print String.
func (c *Client) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, c.String()) }

// scoped reports whether authorizations request scopes (always, except for a
// legacy client that has none configured).
func (c *Client) scoped() bool { return len(c.cfg.Scopes) > 0 }

// AuthRequest is one authorization attempt: the URL to open and what the
// redirect is checked and exchanged with.
type AuthRequest struct {
	URL      string
	State    string
	Verifier string // PKCE verifier (public clients); secret
}

// String keeps the verifier out of print.
func (a *AuthRequest) String() string {
	return fmt.Sprintf("oauth.AuthRequest{URL: %q, State: %q, Verifier: %s}", a.URL, a.State, redactedIf(a.Verifier))
}

// Format makes every fmt verb print String.
func (a *AuthRequest) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, a.String()) }

// NewAuthRequest builds the authorization URL with a fresh random state (and
// a PKCE verifier for a public client).
func (c *Client) NewAuthRequest() (*AuthRequest, error) {
	st := oauth2.GenerateVerifier() // 32 random bytes, base64url: a fine state too
	ar := &AuthRequest{State: st}
	oc := &oauth2.Config{
		ClientID:    c.cfg.ClientID,
		Endpoint:    oauth2.Endpoint{AuthURL: c.cfg.AuthURL, TokenURL: c.cfg.TokenURL},
		RedirectURL: c.cfg.RedirectURI,
	}
	if c.scoped() {
		oc.Scopes = c.cfg.Scopes // joined by spaces
	}
	var opts []oauth2.AuthCodeOption
	if c.cfg.Public {
		ar.Verifier = oauth2.GenerateVerifier()
		opts = append(opts, oauth2.S256ChallengeOption(ar.Verifier))
	}
	ar.URL = oc.AuthCodeURL(st, opts...)
	return ar, nil
}

// Exchange trades an authorization code for tokens. The token carries the
// scopes requested (the API's answer names none) and, for a public client,
// the verifier.
func (c *Client) Exchange(ctx context.Context, code, verifier string) (Token, error) {
	if code == "" {
		return Token{}, errors.New("oauth: exchange: the authorization code is empty")
	}
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {c.cfg.RedirectURI}}
	if verifier != "" {
		form.Set("code_verifier", verifier)
	}
	tr, err := c.tokenCall(ctx, "exchange", form, code, verifier)
	if err != nil {
		return Token{}, err
	}
	t := c.tokenFrom(tr)
	if c.cfg.Public {
		t.CodeVerifier = verifier
	}
	return t, nil
}

// Refresh trades old's refresh token for a new pair. The new token keeps
// old's user, scopes and verifier. A refused refresh token is a
// *LoginRequiredError.
func (c *Client) Refresh(ctx context.Context, old Token) (Token, error) {
	if old.RefreshToken == "" {
		return Token{}, &LoginRequiredError{ClientID: c.cfg.ClientID, Reason: "no refresh token is stored"}
	}
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {old.RefreshToken}}
	if c.cfg.Public && old.CodeVerifier != "" {
		form.Set("code_verifier", old.CodeVerifier)
	}
	tr, err := c.tokenCall(ctx, "refresh", form, old.RefreshToken, old.CodeVerifier)
	if err != nil {
		var te *TokenEndpointError
		if errors.As(err, &te) && te.Code == "invalid_grant" {
			return Token{}, &LoginRequiredError{ClientID: c.cfg.ClientID, Reason: te.Summary()}
		}
		return Token{}, err
	}
	t := c.tokenFrom(tr)
	t.User, t.UserID, t.CodeVerifier = old.User, old.UserID, old.CodeVerifier
	if tr.Scope() == "" {
		t.Scopes, t.Legacy = old.Scopes, old.Legacy // scopes stay those of the authorization
	}
	return t, nil
}

// tokenResponse is the token endpoint's answer, flat (RFC 6749) or inside
// the API's {status, data} envelope: both shapes are in Cal.com's history.
//
// Only the two tokens must have their type: the other fields are read
// leniently (a scope list, expires_in as a string), since an answer
// refused after the server rotated the refresh token loses the sign-in.
type tokenResponse struct {
	AccessToken  string          `json:"access_token"`
	RefreshToken string          `json:"refresh_token"`
	TokenType    json.RawMessage `json:"token_type"`
	ExpiresIn    json.RawMessage `json:"expires_in"`
	RawScope     json.RawMessage `json:"scope"`
	Data         *tokenResponse  `json:"data"`
	Status       json.RawMessage `json:"status"`
}

// Scope is the answer's scope: a space-separated string (RFC 6749), or a
// list of scopes; "" when absent or of another shape.
func (tr *tokenResponse) Scope() string {
	var list []string
	if json.Unmarshal(tr.RawScope, &list) == nil {
		return strings.Join(list, " ")
	}
	return httpapi.ScalarText(tr.RawScope)
}

// maxExpiresIn keeps a huge expires_in from overflowing a time.Duration
// (which would put the expiry in the past and refresh at every call).
const maxExpiresIn = int64(math.MaxInt64 / int64(time.Second))

func (c *Client) tokenFrom(tr *tokenResponse) Token {
	now := c.now()
	exp := DefaultExpires
	if n, err := strconv.ParseInt(httpapi.ScalarText(tr.ExpiresIn), 10, 64); err == nil && n > 0 {
		exp = time.Duration(min(n, maxExpiresIn)) * time.Second
	}
	t := Token{
		AccessToken: tr.AccessToken, RefreshToken: tr.RefreshToken, TokenType: httpapi.ScalarText(tr.TokenType),
		Expiry: now.Add(exp), IssuedAt: now, ClientID: c.cfg.ClientID,
	}
	switch scope := tr.Scope(); {
	case scope != "":
		t.Scopes = ParseScopes(scope)
	case c.scoped():
		t.Scopes = append([]string(nil), c.cfg.Scopes...)
	default:
		t.Legacy = true
	}
	return t
}

// secrets lists the configured client secrets in the order to try them.
func (c *Client) secrets() []int {
	if c.cfg.Public {
		return []int{-1}
	}
	if c.cfg.ClientSecretNext == "" {
		return []int{0}
	}
	first := int(c.secret.Load())
	return []int{first, 1 - first}
}

func (c *Client) secretValue(i int) string {
	if i == 1 {
		return c.cfg.ClientSecretNext
	}
	return c.cfg.ClientSecret
}

// secretName is the setting a secret comes from, for logs and errors.
func secretName(i int) string {
	if i == 1 {
		return "scheduling.client_secret_next"
	}
	return "scheduling.client_secret"
}

// tokenCall posts form to the token endpoint with each secret in turn until
// one is not refused with invalid_client, and says in the log which one
// works when it is not the one tried first. extra lists more secrets to
// scrub from messages (the code, the refresh token, the verifier).
func (c *Client) tokenCall(ctx context.Context, op string, form url.Values, extra ...string) (*tokenResponse, error) {
	order := c.secrets()
	var lastErr error
	for n, i := range order {
		f := url.Values{}
		for k, v := range form {
			f[k] = v
		}
		f.Set("client_id", c.cfg.ClientID)
		if i >= 0 {
			f.Set("client_secret", c.secretValue(i))
		}
		tr, err := c.post(ctx, op, f, extra...)
		var te *TokenEndpointError
		if err != nil && errors.As(err, &te) && te.Code == "invalid_client" && n+1 < len(order) {
			lastErr = err
			continue
		}
		if err != nil {
			if lastErr != nil && errors.As(err, &te) && te.Code == "invalid_client" {
				te.Description = "both client secrets were refused (" + secretName(order[0]) + " and " + secretName(order[1]) + ")"
				te.BothSecrets = true
			}
			return nil, err
		}
		if n > 0 {
			c.secret.Store(int32(i))
			c.log.Info("the scheduling API refused one client secret and accepted the other: finish the rotation by making the accepted one scheduling.client_secret and removing the refused one",
				zap.String(logkey.ClientID, c.cfg.ClientID),
				zap.String(logkey.Refused, secretName(order[0])),
				zap.String(logkey.Accepted, secretName(i)))
		}
		return tr, nil
	}
	return nil, lastErr
}

// post makes one token endpoint call (with httpapi's retries on 429, 5xx
// and network errors). Retrying a refresh whose answer was lost is no worse
// than not retrying: the server may have rotated the token either way.
func (c *Client) post(ctx context.Context, op string, form url.Values, extra ...string) (*tokenResponse, error) {
	scrub := append([]string{c.cfg.ClientSecret, c.cfg.ClientSecretNext}, extra...)
	path := c.tokURL.EscapedPath()
	r := &httpapi.Request{
		Method: http.MethodPost, Path: path, Route: "POST " + TokenPath,
		Body: []byte(form.Encode()), ContentType: "application/x-www-form-urlencoded",
	}
	var out *tokenResponse
	err := c.api.Do(ctx, r, func(_ *httpapi.Request, res *httpapi.Response, attempt int) httpapi.Verdict {
		switch {
		case res.Err != nil:
			return httpapi.Verdict{
				Err:   fmt.Errorf("oauth %s: token endpoint %s unreachable: %s", op, c.cfg.TokenURL, httpapi.Scrub(res.Err.Error(), scrub...)),
				Retry: !httpapi.PermanentNetError(res.Err),
			}
		case res.Status >= 200 && res.Status < 300:
			var tr tokenResponse
			if err := json.Unmarshal(res.Body, &tr); err != nil {
				return httpapi.Verdict{Err: fmt.Errorf("oauth %s: the token endpoint's answer is not JSON", op)}
			}
			if tr.AccessToken == "" && tr.Data != nil {
				tr = *tr.Data
			}
			if tr.AccessToken == "" || tr.RefreshToken == "" {
				return httpapi.Verdict{Err: fmt.Errorf("oauth %s: the token endpoint's answer has no access_token or refresh_token", op)}
			}
			out = &tr
			return httpapi.Verdict{}
		case httpapi.TransientStatus(res.Status):
			v := httpapi.Verdict{Err: tokenError(op, res, scrub), Retry: true}
			v.RetryAfter, v.HasRetryAfter = c.api.RetryAfter(res.Header)
			return v
		default:
			return httpapi.Verdict{Err: tokenError(op, res, scrub)}
		}
	})
	return out, err
}

// knownCodes are the RFC 6749 error codes, also looked for inside a message.
var knownCodes = []string{"invalid_grant", "invalid_client", "invalid_request", "unauthorized_client", "unsupported_grant_type", "invalid_scope", "server_error"}

// tokenError reads an error answer: {error, error_description} (RFC 6749)
// or the API's {status: "error", error: {code, message}}.
func tokenError(op string, res *httpapi.Response, scrub []string) *TokenEndpointError {
	te := &TokenEndpointError{Op: op, Status: res.Status}
	var flat struct {
		Error       json.RawMessage `json:"error"`
		Description string          `json:"error_description"`
		Message     json.RawMessage `json:"message"`
	}
	if json.Unmarshal(res.Body, &flat) == nil {
		// The error field is a code (invalid_grant), but a service or a
		// proxy may put any text there, such as the request it refused:
		// only a code's shape is taken, and what the request sent is
		// hidden even then. Other text reaches the description, scrubbed,
		// through the message below.
		if code := httpapi.Scrub(httpapi.ScalarText(flat.Error), scrub...); errorCode.MatchString(code) {
			te.Code = code
		}
		te.Description = httpapi.Scrub(flat.Description, scrub...)
	}
	msg := httpapi.ServerMessage(res.Body, scrub...)
	if te.Code == "" || !isKnown(te.Code) {
		for _, k := range knownCodes {
			if strings.Contains(msg, k) {
				te.Code = k
				break
			}
		}
	}
	if te.Code == "" && res.Status == http.StatusUnauthorized {
		te.Code = "invalid_client"
	}
	if te.Description == "" && msg != te.Code {
		te.Description = msg
	}
	return te
}

// errorCode is the shape of an OAuth error code (RFC 6749 5.2: invalid_grant).
var errorCode = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

func isKnown(code string) bool {
	for _, k := range knownCodes {
		if k == code {
			return true
		}
	}
	return false
}
