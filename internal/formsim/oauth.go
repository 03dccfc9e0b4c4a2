package formsim

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"
)

// The OAuth endpoints of Multi, at the paths of the real service's (whose
// authorize page is on build.fillout.com and token endpoint on
// server.fillout.com; the sim serves both on its one host).
const (
	PathOAuthAuthorize = "/authorize/oauth"
	PathOAuthToken     = "/public/oauth/accessToken"
	// PathFormsLogin signs the browser in to a workspace: GET
	// /sim/forms-login?key=<the workspace's API key> sets the session
	// cookie, and the authorize page then asks that workspace for consent.
	PathFormsLogin = "/sim/forms-login"

	sessionCookie = "formsim_session"
	codeLifetime  = 10 * time.Minute
)

// OAuthApp is the one third-party app Multi's OAuth endpoints know.
type OAuthApp struct {
	ClientID     string
	ClientSecret string
	// RedirectURIs are the app's registered redirect URIs: the authorize
	// page refuses any other, and a code is exchanged only with the one it
	// was issued for.
	RedirectURIs []string
	// BaseURL is the base_url the token endpoint answers for the workspace
	// of key (so a test can give workspaces different deployments); nil:
	// the address the token request reached, plus BasePath.
	BaseURL func(key string) string
}

// OAuthStats count what the OAuth endpoints did.
type OAuthStats struct {
	Authorizations int // codes issued with a workspace's consent
	Exchanges      int // codes traded for tokens
	Refused        int // token requests refused (client, code, redirect URI)
}

// oauthState is Multi's OAuth app, its codes and its tokens.
type oauthState struct {
	mu      sync.Mutex
	app     OAuthApp
	consent *keyState // whom the authorize page asks when no session names one
	codes   map[string]*grant
	tokens  map[string]*grant
	stats   OAuthStats
}

// grant is a code or an access token: whose workspace, and its state.
type grant struct {
	ks          *keyState
	redirectURI string    // of a code
	expires     time.Time // of a code
	used        bool      // a code exchanged once
	invalidated bool      // a token the workspace invalidated
}

// EnableOAuth serves the OAuth endpoints for app, as the service does for
// its third-party apps. An access token it issues authorizes its workspace
// as the workspace's key does: the same rate limit, the same counters.
func (m *Multi) EnableOAuth(app OAuthApp) error {
	if app.ClientID == "" || app.ClientSecret == "" || len(app.RedirectURIs) == 0 {
		return errors.New("formsim: an OAuth app needs a client id, a client secret and a redirect URI")
	}
	m.oauthMu.Lock()
	defer m.oauthMu.Unlock()
	m.oauth = &oauthState{app: app, codes: map[string]*grant{}, tokens: map[string]*grant{}}
	return nil
}

// oauthOf is the OAuth state, nil until EnableOAuth.
func (m *Multi) oauthOf() *oauthState {
	m.oauthMu.Lock()
	defer m.oauthMu.Unlock()
	return m.oauth
}

// SetConsentingWorkspace makes the workspace of key the one that consents
// on the authorize page when the browser has no session (PathFormsLogin).
func (m *Multi) SetConsentingWorkspace(key string) error {
	o := m.oauthOf()
	if o == nil {
		return errors.New("formsim: OAuth is not enabled")
	}
	ks := m.lookup(key)
	if ks == nil {
		return errors.New("formsim: no workspace has that key")
	}
	o.mu.Lock()
	o.consent = ks
	o.mu.Unlock()
	return nil
}

// Invalidate makes an access token answer 401 from now on, as the service
// does for a token its workspace revoked. It reports whether the token is
// known.
func (m *Multi) Invalidate(token string) bool {
	o := m.oauthOf()
	if o == nil {
		return false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	g, ok := o.tokens[token]
	if ok {
		g.invalidated = true
	}
	return ok
}

// InvalidateTokens invalidates every access token of the workspace of key
// (a test does not see the tokens its syncd stored), and returns how many.
func (m *Multi) InvalidateTokens(key string) int {
	o, ks := m.oauthOf(), m.lookup(key)
	if o == nil || ks == nil {
		return 0
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, g := range o.tokens {
		if g.ks == ks && !g.invalidated {
			g.invalidated = true
			n++
		}
	}
	return n
}

// OAuthStats returns the counters of the OAuth endpoints.
func (m *Multi) OAuthStats() OAuthStats {
	o := m.oauthOf()
	if o == nil {
		return OAuthStats{}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.stats
}

// serveOAuth answers the OAuth paths; false when r is for another path or
// OAuth is not enabled.
func (m *Multi) serveOAuth(w http.ResponseWriter, r *http.Request) bool {
	o := m.oauthOf()
	if o == nil {
		return false
	}
	switch r.URL.Path {
	case PathFormsLogin:
		m.handleFormsLogin(w, r)
	case PathOAuthAuthorize:
		m.handleAuthorize(o, w, r)
	case PathOAuthToken:
		m.handleToken(o, w, r)
	default:
		return false
	}
	return true
}

// handleFormsLogin signs the browser in to the workspace of ?key=.
func (m *Multi) handleFormsLogin(w http.ResponseWriter, r *http.Request) {
	i := m.index(r.URL.Query().Get("key"))
	if i < 0 {
		page(w, http.StatusUnauthorized, "No workspace has that key.")
		return
	}
	// The session names the workspace by its position: the key itself
	// never travels in a cookie.
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: strconv.Itoa(i), Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode})
	page(w, http.StatusOK, "Signed in to the workspace.")
}

// index is the position of the workspace of key, or -1.
func (m *Multi) index(key string) int {
	ks := m.lookup(key)
	return slices.Index(m.keys, ks)
}

// handleAuthorize is the consent page: the app and its redirect URI are
// checked (a wrong one is never redirected to), then the consenting
// workspace grants a single-use code, sent back with the state.
func (m *Multi) handleAuthorize(o *oauthState, w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		page(w, http.StatusMethodNotAllowed, "Use GET.")
		return
	}
	q := r.URL.Query()
	o.mu.Lock()
	defer o.mu.Unlock()
	if q.Get("client_id") != o.app.ClientID {
		page(w, http.StatusBadRequest, "Unknown client_id.")
		return
	}
	redirect := q.Get("redirect_uri")
	if !slices.Contains(o.app.RedirectURIs, redirect) {
		page(w, http.StatusBadRequest, "redirect_uri is not registered for this app.")
		return
	}
	ks := o.consent
	if c, err := r.Cookie(sessionCookie); err == nil {
		if i, err := strconv.Atoi(c.Value); err == nil && i >= 0 && i < len(m.keys) {
			ks = m.keys[i]
		}
	}
	u, err := url.Parse(redirect)
	if err != nil {
		page(w, http.StatusBadRequest, "redirect_uri is not a URL.")
		return
	}
	back := u.Query()
	if st := q.Get("state"); st != "" {
		back.Set("state", st)
	}
	if ks == nil {
		back.Set("error", "access_denied")
	} else {
		code := randomToken("code_")
		o.codes[code] = &grant{ks: ks, redirectURI: redirect, expires: time.Now().Add(codeLifetime)}
		o.stats.Authorizations++
		back.Set("code", code)
	}
	u.RawQuery = back.Encode()
	http.Redirect(w, r, u.String(), http.StatusFound)
}

// handleToken trades a code for an access token and its base_url. The
// request is JSON (as Fillout documents it) or a form.
func (m *Multi) handleToken(o *oauthState, w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		writeMsg(w, msg(http.StatusMethodNotAllowed, "Use POST"), "")
		return
	}
	var in struct {
		Code         string `json:"code"`
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
		RedirectURI  string `json:"redirect_uri"`
	}
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct == "application/json" {
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&in); err != nil {
			writeMsg(w, msg(http.StatusBadRequest, "Invalid JSON body"), "")
			return
		}
	} else {
		if err := r.ParseForm(); err != nil {
			writeMsg(w, msg(http.StatusBadRequest, "Invalid form body"), "")
			return
		}
		in.Code, in.ClientID, in.ClientSecret, in.RedirectURI = r.PostForm.Get("code"), r.PostForm.Get("client_id"), r.PostForm.Get("client_secret"), r.PostForm.Get("redirect_uri")
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if in.ClientID != o.app.ClientID || subtle.ConstantTimeCompare([]byte(in.ClientSecret), []byte(o.app.ClientSecret)) != 1 {
		o.stats.Refused++
		writeMsg(w, msg(http.StatusUnauthorized, "Invalid client credentials"), "")
		return
	}
	g, ok := o.codes[in.Code]
	switch {
	case !ok || g.used || time.Now().After(g.expires):
		o.stats.Refused++
		writeMsg(w, msg(http.StatusBadRequest, "Invalid or expired authorization code"), "")
		return
	case in.RedirectURI != g.redirectURI:
		o.stats.Refused++
		writeMsg(w, msg(http.StatusBadRequest, "redirect_uri does not match the authorization"), "")
		return
	}
	g.used = true
	token := randomToken("fo_oauth_")
	o.tokens[token] = &grant{ks: g.ks}
	o.stats.Exchanges++
	base := "http://" + r.Host + BasePath
	if o.app.BaseURL != nil {
		base = o.app.BaseURL(string(g.ks.key))
	}
	body, err := json.Marshal(map[string]string{"access_token": token, "base_url": base})
	if err != nil {
		writeMsg(w, msg(http.StatusInternalServerError, "encode the token"), "")
		return
	}
	writeMsg(w, response{status: http.StatusOK, body: body}, "")
}

// tokenWorkspace is the workspace an access token authorizes, and
// whether the token was invalidated; nil for an unknown token.
func (m *Multi) tokenWorkspace(token string) (*keyState, bool) {
	o := m.oauthOf()
	if o == nil {
		return nil, false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	g, ok := o.tokens[token]
	if !ok {
		return nil, false
	}
	return g.ks, g.invalidated
}

// refuseInvalidated counts a request with an invalidated token, as one
// with a revoked key.
func (ks *keyState) refuseInvalidated() {
	ks.mu.Lock()
	ks.stats.Requests++
	ks.stats.Revoked++
	ks.mu.Unlock()
}

func randomToken(prefix string) string {
	b := make([]byte, 20)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("formsim: random token: %v", err)) // crypto/rand does not fail on supported platforms
	}
	return prefix + hex.EncodeToString(b)
}

// page answers a browser with a short HTML page.
func page(w http.ResponseWriter, status int, text string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	fmt.Fprintf(w, "<!doctype html><title>formsim</title><p>%s</p>", html.EscapeString(text))
}
